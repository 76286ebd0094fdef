"""The main job: replay a long coding-agent session through hermes-lcm and show what it did.

    python -m hermes_lcm.demo.main [--home DIR] [--json] [--context-length N] [--threshold R] [--every N]

Offline and key-free: the extractive summarizer, a fresh HERMES_HOME (a temp dir unless
``--home``), the fixture shipped in ``fixtures/coding_session.json``. It prints prompt size
against raw history per turn, what is stored, the summary DAG, and recovers details planted
early in the session through the agent's own tools (lcm_grep, then lcm_expand). Exit 0 only
if every detail comes back byte for byte, every message is stored exactly once and every
compacted prompt fits the threshold.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import uuid
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any

from ..base.records import SummaryNode
from ..engine import LcmEngine
from ..viewer import write_page
from .replay import (
    FIXTURE,
    ReplayResult,
    TurnStats,
    flatten,
    load_fixture,
    make_engine,
    recover,
    replay,
)


def _key(message: Mapping[str, Any]) -> str:
    """What must survive storage exactly: role, content, tool calls, tool call id."""
    return json.dumps(
        [
            message.get("role"),
            message.get("content") or "",
            message.get("tool_calls") or None,
            message.get("tool_call_id") or None,
        ],
        ensure_ascii=False,
        sort_keys=True,
    )


def storage_check(engine: LcmEngine, fixture: Mapping[str, Any]) -> dict[str, Any]:
    """Stored rows of this conversation, in seq order, against the fixture's own sequence."""
    core = engine.core
    assert core is not None and core.binding.conversation_id is not None
    conversation = core.binding.conversation_id
    stored = [_key(m.to_host()) for m in core.store.messages_after(conversation, 0)]
    expected = [_key(m) for m in flatten(fixture)]
    have, want = Counter(stored), Counter(expected)
    return {
        "conversation_id": conversation,
        "stored": core.store.message_count(conversation),
        "fixture": len(expected),
        "identical_sequence": stored == expected,
        "duplicates": sum((have - want).values()),
        "missing": sum((want - have).values()),
    }


def _ranges(ids: Sequence[int]) -> str:
    spans: list[list[int]] = []
    for i in sorted(ids):
        if spans and i == spans[-1][1] + 1:
            spans[-1][1] = i
        else:
            spans.append([i, i])
    return ", ".join(f"#{a}" if a == b else f"#{a}..#{b}" for a, b in spans)


def lineage(engine: LcmEngine, node: SummaryNode, max_lines: int = 12) -> list[str]:
    """A node's tree down to the raw store ids, depth first, cut to ``max_lines``."""
    dag = engine.core.dag if engine.core else None
    assert dag is not None
    lines: list[str] = []

    def walk(n: SummaryNode, prefix: str, last: bool, top: bool) -> None:
        branch = "" if top else ("└─ " if last else "├─ ")
        label = f"{n.node_id} d{n.depth} seq {n.first_seq}..{n.last_seq}"
        if n.depth == 0:
            ids = [m.id for m in dag.sources(n.id)]
            label += f" → store ids {_ranges(ids)} ({len(ids)} messages)"
        lines.append(prefix + branch + label)
        kids = dag.children(n.id) if n.depth > 0 else []
        for i, child in enumerate(kids):
            walk(
                child,
                prefix + ("" if top else ("   " if last else "│  ")),
                i == len(kids) - 1,
                False,
            )

    walk(node, "  ", True, True)
    if len(lines) > max_lines:
        lines = [
            *lines[: max_lines - 1],
            f"  … {len(lines) - max_lines + 1} more lines (lcm_expand node_id=...)",
        ]
    return lines


def dag_report(engine: LcmEngine) -> dict[str, Any]:
    core = engine.core
    assert core is not None and core.binding.conversation_id is not None
    conversation = core.binding.conversation_id
    context = core.dag.context(conversation)
    state = core.store.conversation(conversation)
    deepest = max(context, key=lambda n: (n.depth, -n.id), default=None)
    active = {n.id for n in context}
    # Top-level nodes that are not in the prompt any more: still stored and expandable, but the model
    # sees nothing of their span unless it searches.
    dropped = [
        n
        for n in core.dag.nodes(conversation, limit=100000)
        if n.id not in active and not core.dag.parents("summary", n.id)
    ]
    return {
        "by_depth": {str(d): n for d, n in sorted(core.dag.depth_counts(conversation).items())},
        "context": [f"{n.node_id} (d{n.depth})" for n in context],
        "context_covers": [context[0].first_seq, context[-1].last_seq] if context else None,
        "dropped_from_context": [
            f"{n.node_id} (d{n.depth}, seq {n.first_seq}..{n.last_seq})" for n in dropped
        ],
        "frontier_seq": state.frontier_seq,
        "last_seq": state.last_seq,
        "lineage_of": deepest.node_id if deepest else None,
        "lineage": lineage(engine, deepest) if deepest else [],
    }


def _window(line: str, detail: str, width: int = 110) -> str:
    if len(line) <= width:
        return line
    start = max(0, line.find(detail) - 20)
    return (
        ("…" if start else "")
        + line[start : start + width]
        + ("…" if start + width < len(line) else "")
    )


def run(args: argparse.Namespace) -> dict[str, Any]:
    home = args.home or tempfile.mkdtemp(prefix="hermes-lcm-demo-")
    fixture = load_fixture(args.fixture)
    engine = make_engine(home, context_length=args.context_length, threshold=args.threshold)
    samples: list[dict[str, Any]] = []
    total = len(fixture["turns"])

    def on_turn(stats: TurnStats) -> None:
        if stats.turn == 1 or stats.turn % args.every == 0 or stats.turn == total:
            core = engine.core
            depths = (
                core.dag.depth_counts(core.binding.conversation_id)
                if core and core.binding.conversation_id
                else {}
            )
            samples.append(
                {
                    **asdict(stats),
                    "summaries_by_depth": {str(d): n for d, n in sorted(depths.items())},
                }
            )

    result: ReplayResult = replay(
        engine,
        fixture,
        session_id=f"demo-{uuid.uuid4().hex[:8]}",
        overhead_tokens=args.overhead,
        on_turn=on_turn,
    )
    recoveries = [recover(engine, fixture, planted) for planted in fixture.get("planted", [])]
    storage = storage_check(engine, fixture)
    over = [
        (turn, tokens)
        for turn, tokens in result.compressed_prompts
        if tokens > engine.threshold_tokens
    ]
    engine_ms = sorted(t.engine_ms for t in result.turns)
    compress_ms = sorted(t.compress_ms for t in result.turns if t.compress_ms)
    page = (
        write_page(engine.core.store, None, engine.core.binding.conversation_id)
        if engine.core
        else None
    )
    ok = (
        all(r.exact for r in recoveries)
        and storage["duplicates"] == 0
        and storage["missing"] == 0
        and storage["identical_sequence"]
        and not over
        and not engine.errors
    )
    return {
        "ok": ok,
        "title": fixture.get("title"),
        "fixture": str(args.fixture or FIXTURE),
        "hermes_home": home,
        "database": str(engine.database_path()),
        "session_id": result.session_id,
        "model_window": engine.context_length,
        "threshold_tokens": engine.threshold_tokens,
        "threshold_ratio": args.threshold,
        "overhead_tokens": args.overhead,
        "summarizer": engine.core.summarizer_name if engine.core else None,
        "turns": total,
        "samples": samples,
        "storage": storage,
        "dag": dag_report(engine),
        "compactions": result.compactions,
        "largest_compacted_prompt": max((t for _, t in result.compressed_prompts), default=0),
        "compacted_prompts_over_threshold": over,
        "peak_prompt": max(t.peak_prompt_tokens for t in result.turns),
        "raw_history": result.turns[-1].raw_tokens,
        "recoveries": [{**asdict(r), "exact": r.exact} for r in recoveries],
        "timing": {
            "seconds": round(result.seconds, 3),
            "engine_ms_median": round(engine_ms[len(engine_ms) // 2], 3),
            "engine_ms_max": round(engine_ms[-1], 3),
            "compress_calls": result.compactions,
            "compress_ms_median": round(compress_ms[len(compress_ms) // 2], 3)
            if compress_ms
            else 0.0,
        },
        "engine_errors": list(engine.errors),
        "view": page["path"] if page else None,
    }


def render(report: Mapping[str, Any]) -> str:
    s, dag, t = report["storage"], report["dag"], report["timing"]
    out = [
        f"hermes-lcm demo: {report['title']}",
        f"  {report['turns']} turns, {s['fixture']} messages · HERMES_HOME {report['hermes_home']}",
        f"  window {report['model_window']:,} · threshold {report['threshold_ratio']} → "
        f"{report['threshold_tokens']:,} tokens · host overhead {report['overhead_tokens']:,} · summarizer "
        f"{report['summarizer']}",
        "",
        " turn   raw history   prompt sent   saved   compactions   summaries by depth",
    ]
    for row in report["samples"]:
        saved = 1 - row["prompt_tokens"] / row["raw_tokens"] if row["raw_tokens"] else 0
        depths = " ".join(f"d{d}={n}" for d, n in row["summaries_by_depth"].items()) or "-"
        out.append(
            f" {row['turn']:>4}   {row['raw_tokens']:>11,}   {row['prompt_tokens']:>11,}   {saved:>5.0%}   "
            f"{row['compactions']:>11}   {depths}"
        )
    mark = "✓" if not report["compacted_prompts_over_threshold"] else "✗"
    out += [
        "",
        "Store",
        f"  messages stored {s['stored']} / in fixture {s['fixture']} · same sequence: "
        f"{'yes' if s['identical_sequence'] else 'NO'} · duplicates {s['duplicates']} · missing {s['missing']}",
        f"  compactions {report['compactions']} · largest prompt after compaction "
        f"{report['largest_compacted_prompt']:,} ≤ {report['threshold_tokens']:,} {mark} · peak prompt sent "
        f"{report['peak_prompt']:,} vs raw history {report['raw_history']:,}",
        "",
        "DAG  " + " ".join(f"d{d}={n}" for d, n in dag["by_depth"].items()) + f" · active context: "
        f"{', '.join(dag['context']) or '-'} + raw tail after seq {dag['frontier_seq']} (of {dag['last_seq']})",
    ]
    if dag["context_covers"]:
        first, last = dag["context_covers"]
        out.append(
            f"  the prompt's summaries cover seq {first}..{last}"
            + (
                f"; {len(dag['dropped_from_context'])} older top-level nodes left the prompt (still stored, "
                f"searchable): {', '.join(d.split(',')[0] + ')' for d in dag['dropped_from_context'])}"
                if dag["dropped_from_context"]
                else ""
            )
        )
    if dag["lineage_of"]:
        out += [f"  lineage of {dag['lineage_of']} down to raw store ids:", *dag["lineage"]]
    out += ["", "Planted details, recovered with lcm_grep(question) → lcm_expand"]
    for r in report["recoveries"]:
        out.append(f"  {'✓' if r['exact'] else '✗'} turn {r['turn']:>3}: {r['question']}")
        if r["line"] is None:
            out.append(f"      not found in {r['hits']} hits")
        else:
            out.append(
                f"      hit {r['rank']}/{r['hits']} {r['via']} → {_window(r['line'], r['detail'])!r}"
                f" {'byte-identical' if r['exact'] else 'DIFFERS'}"
            )
    found = sum(r["exact"] for r in report["recoveries"])
    if report.get("view"):
        out += [
            "",
            f"See it: {report['view']} (open it in a browser; `lcm --db {report['database']} view` "
            "writes it again)",
        ]
    out += [
        "",
        f"Time {t['seconds']:.2f} s · engine overhead per turn median {t['engine_ms_median']:.2f} ms "
        f"(max {t['engine_ms_max']:.1f}) · compress median {t['compress_ms_median']:.1f} ms × "
        f"{t['compress_calls']}",
        f"{'OK' if report['ok'] else 'FAILED'}: {found}/{len(report['recoveries'])} details recovered exactly, "
        f"{s['duplicates']} duplicates, {len(report['compacted_prompts_over_threshold'])} prompts over threshold"
        + (f", engine errors: {report['engine_errors']}" if report["engine_errors"] else ""),
    ]
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m hermes_lcm.demo.main", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--home", help="HERMES_HOME to use (default: a fresh temp dir)")
    parser.add_argument("--json", action="store_true", help="machine-readable report")
    parser.add_argument(
        "--fixture", help="conversation to replay (default: the shipped coding session)"
    )
    parser.add_argument(
        "--context-length", type=int, default=64000, help="model window (default 64000)"
    )
    parser.add_argument(
        "--threshold", type=float, default=0.2, help="LCM_CONTEXT_THRESHOLD (default 0.2)"
    )
    parser.add_argument(
        "--overhead", type=int, default=3000, help="system prompt + tool schema tokens (3000)"
    )
    parser.add_argument("--every", type=int, default=15, help="print every N-th turn (default 15)")
    args = parser.parse_args(argv)
    report = run(args)
    print(json.dumps(report, ensure_ascii=False, indent=1) if args.json else render(report))
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())

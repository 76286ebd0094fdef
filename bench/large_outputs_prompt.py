"""Prompt size of a log-heavy coding session with large tool outputs externalized.

One command: ``.venv/bin/python bench/large_outputs_prompt.py [--turns 40] [--context 128000]``.

The session is fixtures/log_heavy_session.py: every turn a test run, build or lint whose output is
2,000 to 90,000 characters, then an answer. Each configuration is a fresh engine (offline
summarizer) driven turn by turn the way Hermes drives it, the host keeping the list compress
returns:

* ``every turn``: a compress after every turn (what the prompt is whenever the host compacts);
  externalization off vs on;
* ``host-driven``: the host's own rule, a compress only when should_compress says so; off, on, and
  on with active-replay stubbing (should_compress also asks when an answered output could be a stub).

Reported per turn: the tokens of the list the host sends with its next request. Afterwards every
externalized output is read back through lcm_expand (paged, as a model would) and compared byte for
byte with what the tool returned. Results: bench/results/large_outputs_prompt.json.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from common import core_of, make_engine, print_table, save_result, temp_dir

from hermes_lcm import store as store_module
from hermes_lcm.base.outputs import parse_stub
from hermes_lcm.base.tokens import count_messages
from hermes_lcm.engine import LcmEngine

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "fixtures"))
from log_heavy_session import session

OVERHEAD = 3000  # the host's system prompt and tool schemas
ON = {"LCM_LARGE_OUTPUT_EXTERNALIZATION_ENABLED": "true"}
CONFIGS: dict[str, tuple[dict[str, str], bool]] = {
    "every turn, off": ({}, True),
    "every turn, externalized": (ON, True),
    "host-driven, off": ({}, False),
    "host-driven, externalized": (ON, False),
    "host-driven, externalized + active replay": (
        {**ON, "LCM_LARGE_OUTPUT_ACTIVE_REPLAY_STUBBING_ENABLED": "true"},
        False,
    ),
    "host-driven, externalized + active replay at 2,000 tokens": (
        {
            **ON,
            "LCM_LARGE_OUTPUT_ACTIVE_REPLAY_STUBBING_ENABLED": "true",
            "LCM_LARGE_OUTPUT_ACTIVE_REPLAY_STUB_THRESHOLD_TOKENS": "2000",
        },
        False,
    ),
}
EARLY = 20  # turns before the budget (and so compaction) bounds every configuration alike


def drive(engine: LcmEngine, turns: list[list[dict[str, Any]]], every_turn: bool) -> list[int]:
    """The host's loop: its list grows by each turn; compress when due (or every turn)."""
    live: list[dict[str, Any]] = []
    sizes = []
    for turn in turns:
        live.extend(turn)
        engine.ingest_host(list(live))
        engine.observe_request(live, None)
        tokens = count_messages(live) + OVERHEAD
        if every_turn or engine.should_compress(tokens):
            live = engine.compress(list(live), current_tokens=tokens)
        sizes.append(count_messages(live) + OVERHEAD)
    return sizes


def recovered(engine: LcmEngine, turns: list[list[dict[str, Any]]]) -> tuple[int, int]:
    """(externalized outputs, of them read back byte for byte through lcm_expand)."""
    core = core_of(engine)
    assert core.binding.conversation_id is not None
    originals = {m["tool_call_id"]: m["content"] for t in turns for m in t if m["role"] == "tool"}
    found = same = 0
    for row in core.store.messages_after(core.binding.conversation_id, 0):
        info = parse_stub(row.content) if row.role == "tool" else None
        if info is None:
            continue
        found += 1
        text, offset = "", 0
        while offset is not None:
            page = json.loads(
                engine.handle_tool_call(
                    "lcm_expand", {"externalized_ref": info.ref, "content_offset": offset}
                )
            )
            text += page["content"]
            offset = page["next_content_offset"]
        same += text == originals[row.tool_call_id]
    return found, same


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=40)
    parser.add_argument("--context", type=int, default=128_000)
    args = parser.parse_args()
    turns = session(args.turns)
    big = sum(1 for t in turns for m in t if m["role"] == "tool" and len(m["content"]) >= 12_000)
    results: dict[str, Any] = {}
    for name, (env, every) in CONFIGS.items():
        home = temp_dir("large-outputs")
        engine = make_engine(home, context_length=args.context, extra_env=env)
        sizes = drive(engine, turns, every)
        found, same = recovered(engine, turns) if env else (0, 0)
        core = core_of(engine)
        assert core.binding.conversation_id is not None
        summaries = sum(core.dag.depth_counts(core.binding.conversation_id).values())
        early = sizes[:EARLY]
        results[name] = {
            "tokens_per_turn": sizes,
            "mean": round(sum(sizes) / len(sizes)),
            "max": max(sizes),
            "mean_first_turns": round(sum(early) / len(early)),
            "last": sizes[-1],
            "compactions": engine.compression_count,
            "summaries": summaries,
            "externalized": found,
            "recovered_byte_identical": same,
            "threshold_tokens": engine.threshold_tokens,
        }
        store_module.close_all()
        print(
            f"{name}: mean {results[name]['mean']:,} (first {EARLY} turns {results[name]['mean_first_turns']:,}) "
            f"max {max(sizes):,} tokens/turn, "
            f"{engine.compression_count} list changes, {summaries} summaries, {same}/{found} outputs recovered"
        )
    off, on = results["every turn, off"], results["every turn, externalized"]
    hoff, hon = (
        results["host-driven, off"],
        results["host-driven, externalized + active replay at 2,000 tokens"],
    )
    rows = [
        {
            "target": f"prompt tokens per turn, compress every turn (mean of the first {EARLY} turns)",
            "ours": f"{on['mean_first_turns']:,} externalized",
            "reference": f"{off['mean_first_turns']:,} off",
            "verdict": f"{1 - on['mean_first_turns'] / off['mean_first_turns']:.0%} smaller",
        },
        {
            "target": f"prompt tokens per turn, compress every turn (mean of all {args.turns} turns)",
            "ours": f"{on['mean']:,} externalized",
            "reference": f"{off['mean']:,} off",
            "verdict": f"{1 - on['mean'] / off['mean']:.0%} smaller",
        },
        {
            "target": "prompt tokens per turn, host-driven, active replay at 2,000 tokens (mean)",
            "ours": f"{hon['mean']:,}",
            "reference": f"{hoff['mean']:,} off",
            "verdict": f"{1 - hon['mean'] / hoff['mean']:.0%} smaller",
        },
        {
            "target": "summaries made over the session, compress every turn",
            "ours": f"{on['summaries']}",
            "reference": f"{off['summaries']} off",
        },
        {
            "target": "summaries made, host-driven, active replay at 2,000 tokens",
            "ours": f"{hon['summaries']}",
            "reference": f"{hoff['summaries']} off",
        },
        {
            "target": "externalized outputs recovered byte-identical",
            "ours": f"{on['recovered_byte_identical']}/{on['externalized']}",
            "reference": f"{big} outputs >= 12,000 chars",
            "verdict": "pass"
            if on["recovered_byte_identical"] == on["externalized"] == big
            else "FAIL",
        },
    ]
    print_table(rows)
    path = save_result(
        "large_outputs_prompt",
        rows,
        {
            "turns": args.turns,
            "context_length": args.context,
            "overhead_tokens": OVERHEAD,
            "configs": results,
        },
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()

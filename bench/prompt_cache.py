"""How much of each prompt the provider's prefix cache keeps, at compaction turns above all.

One command: ``.venv/bin/python bench/prompt_cache.py [--before PATH] [--turns 100]``.

The real host (hermes-agent, tests/integration/drive_host.py in a fresh interpreter) talks to the
tests' OpenAI-compatible stub on 127.0.0.1 with its prefix cache on: each answer reports
``prompt_tokens_details.cached_tokens`` as an automatic prefix cache would (the longest prefix
shared with any earlier request, tools first, in 128-token blocks from 1,024 tokens on). Two
setups: the host as a user has it (every toolset, memory and skill reviews on: system prompt and
tools alone are about 16k tokens) and the minimal one (only the engine's tools). Each turn is one
user message of about 300 tokens and a reply of about 250; summaries take 0.3 s and the driver
pauses up to 2 s between turns, so compaction happens between turns as it does for a user.

``--before PATH`` runs the same setups with the plugin at PATH too, in the same process: the
baseline (the docs' numbers use main with the summary block's stable nonce reverted, a block that
drew a fresh nonce at each rendering). Its plugin.yaml must name it otherwise than hermes-lcm
(say hermes-lcm-before): the host lets an installed plugin of the same name win over a plugin
directory, and each run checks that the engine it measured is the tree it was given.

A user request is the first main-model request of a turn; a compaction turn is one whose
compression count went up. The engine's own telemetry (what ``lcm_status`` shows as
``prompt_cache``) is reported beside the stub's counts as a cross-check.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from common import ROOT, print_table, save_result

sys.path.insert(0, str(ROOT))
from hermes_lcm.base.tokens import count_tokens
from tests.integration.harness import make_home, run_host
from tests.integration.stub_llm import PrefixCache, Recorded, Reply, StubLLM, directive_policy

WORDS = (
    "deploy the billing worker after the schema migration and check the retry queue latency "
    "metrics on staging before the customer report goes out tomorrow morning"
).split()

# The threshold sits above each setup's fixed part (system prompt and tools) by the same room.
SETUPS = {"minimal": (False, 10_000), "full": (True, 21_000)}


def message(i: int) -> str:
    """A user turn of about 300 tokens, distinct words per turn so no two are alike."""
    body = " ".join(f"{WORDS[(i * 7 + k) % len(WORDS)]}{k % 13}" for k in range(220))
    return f"turn {i}: please note these details for later. {body}"


def _find(obj: Any, key: str) -> Any:
    if isinstance(obj, dict):
        if key in obj:
            return obj[key]
        for value in obj.values():
            found = _find(value, key)
            if found is not None:
                return found
    return None


def _plugin_name(tree: Path) -> str:
    for line in (tree / "plugin.yaml").read_text(encoding="utf-8").splitlines():
        if line.startswith("name:"):
            return line.split(":", 1)[1].strip()
    raise SystemExit(f"{tree}/plugin.yaml names no plugin")


# A summary's opening tag as the rendered (JSON) request spells it.
_SUMMARY_TAG = re.compile(r'<summary-[0-9a-f]{8} id=\\"([^"\\]+)\\"')


def ceiling(request: Recorded, before: Recorded | None) -> int:
    """What any cache could keep of a compaction turn's request: everything before the first
    summary the turn before did not have (a new leaf, or a condensed node in place of leaves).
    Text after it (the fresh tail) sits at new offsets, which no prefix cache can reuse."""
    text, seen = PrefixCache.render(request.body), set()
    if before is not None:
        seen = set(_SUMMARY_TAG.findall(PrefixCache.render(before.body)))
    for match in _SUMMARY_TAG.finditer(text):
        if match.group(1) not in seen:
            tokens = min(request.prompt_tokens, count_tokens(text[: match.start()]))
            return tokens - tokens % PrefixCache.BLOCK
    return request.prompt_tokens


def share(requests: list[Recorded]) -> float | None:
    prompt = sum(r.prompt_tokens for r in requests)
    return round(sum(r.cached_tokens for r in requests) / prompt, 3) if prompt else None


def run(label: str, plugin: Path, setup: str, turns: int, summary_s: float) -> dict[str, Any]:
    host_defaults, threshold = SETUPS[setup]

    def policy(req: Recorded) -> Reply:
        if req.kind == "summary":
            time.sleep(summary_s)
        return directive_policy(req)

    texts = [message(i) for i in range(turns)]
    name = _plugin_name(plugin)
    with (
        tempfile.TemporaryDirectory(prefix="lcm-cache-") as tmp,
        StubLLM(policy, prefix_cache=True) as stub,
    ):
        home = make_home(
            Path(tmp),
            stub,
            plugin_src=plugin,
            plugin_dirname=name,
            plugin_name=name,
            env={"LCM_ABSOLUTE_THRESHOLD_TOKENS": str(threshold)},
            host_defaults=host_defaults,
        )
        done = run_host(
            home,
            texts,
            host_defaults=host_defaults,
            think_seconds=2.0,
            think_until_idle=True,
            timeout=turns * 40 + 120,
        )
        requests = stub.requests
    firsts: dict[int, Recorded] = {}
    for req in requests:
        if req.kind != "main":
            continue
        text = req.last_user_text()
        for i, t in enumerate(texts):
            if i not in firsts and text.startswith(t[:40]) and t in text:
                firsts[i] = req
                break
    measured = _find(done.report.get("engine_final") or {}, "plugin_path")
    if Path(str(measured)).resolve() != plugin.resolve():
        raise SystemExit(f"the host ran the plugin at {measured}, not {plugin} (see --before)")
    rows = done.report["turns"]
    compaction, ordinary, previous = [], [], 0
    ceilings: list[int] = []
    for row in rows:
        count = int(row.get("compression_count") or 0)
        req = firsts.get(int(row["i"]))
        if req is not None and count > previous:
            compaction.append(req)
            ceilings.append(ceiling(req, firsts.get(int(row["i"]) - 1)))
        elif req is not None:
            ordinary.append(req)
        previous = count
    fixed = min((r.prompt_tokens for r in firsts.values()), default=0)
    engine = _find(done.report.get("engine_final") or {}, "prompt_cache") or {}
    per = [r.cached_tokens / r.prompt_tokens for r in compaction if r.prompt_tokens]
    return {
        "label": label,
        "setup": setup,
        "threshold": threshold,
        "turns": len(rows),
        "first_prompt_tokens": fixed,
        "compaction_turns": len(compaction),
        "compaction_share": share(compaction),
        "compaction_share_min": round(min(per), 3) if per else None,
        "compaction_share_median": round(statistics.median(per), 3) if per else None,
        "compaction_ceiling": (
            round(sum(ceilings) / sum(r.prompt_tokens for r in compaction), 3)
            if compaction
            else None
        ),
        "ordinary_share": share(ordinary),
        "session_share": share(list(firsts.values())),
        "all_requests_share": share([r for r in requests if r.kind == "main"]),
        "engine_cached_share": engine.get("cached_share"),
        "engine_share_after_compaction": engine.get("cached_share_after_compaction"),
        "engine_replies": engine.get("replies"),
    }


CEILING_SHARE = 0.98


def judged(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per setup: the compaction turns' cached share, against the baseline's when run.
    The target: a compaction keeps what came before the newest summary (system, tools and the
    earlier summaries): a compaction turn keeps a larger share than the baseline's, within 2% of
    what is cacheable at all (:func:`ceiling`), and the session as a whole no less."""
    rows = []
    before = {r["setup"]: r for r in results if r["label"] == "before"}
    for r in results:
        if r["label"] != "after":
            continue
        base = before.get(r["setup"])
        ours = (
            f"compaction turns {r['compaction_share']} cached (min {r['compaction_share_min']}, "
            f"{r['compaction_turns']} turns; at most {r['compaction_ceiling']} cacheable); "
            f"ordinary {r['ordinary_share']}; session {r['session_share']}; engine reports "
            f"{r['engine_cached_share']}"
        )
        if base is None:
            reference, verdict = "-", "measured"
        else:
            reference = (
                f"before: compaction turns {base['compaction_share']} (min "
                f"{base['compaction_share_min']}); ordinary {base['ordinary_share']}; session "
                f"{base['session_share']}"
            )
            verdict = (
                "met"
                if (r["compaction_share"] or 0) > (base["compaction_share"] or 0)
                and (r["compaction_share"] or 0) >= CEILING_SHARE * (r["compaction_ceiling"] or 0)
                and (r["session_share"] or 0) >= (base["session_share"] or 0)
                else "missed"
            )
        rows.append(
            {
                "target": f"{r['setup']} toolset ({r['first_prompt_tokens']:,} tokens at the first "
                "turn): a compaction keeps the cached prefix before the newest summary",
                "ours": ours,
                "reference": reference,
                "verdict": verdict,
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, help="the baseline plugin tree")
    parser.add_argument("--turns", type=int, default=100)
    parser.add_argument("--summary-seconds", type=float, default=0.3)
    parser.add_argument("--setups", default="minimal,full")
    args = parser.parse_args()
    results = []
    for setup in args.setups.split(","):
        trees = [("after", ROOT)] + ([("before", args.before)] if args.before else [])
        for label, tree in trees:
            result = run(label, tree, setup, args.turns, args.summary_seconds)
            print(result, flush=True)
            results.append(result)
    rows = judged(results)
    print_table(rows)
    save_result(
        "prompt_cache",
        rows,
        {"turns": args.turns, "summary_seconds": args.summary_seconds, "runs": results},
    )


if __name__ == "__main__":
    main()

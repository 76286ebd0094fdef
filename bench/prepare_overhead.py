"""What deferred compaction adds to every turn: the preparation point's check, against inline.

One command: ``.venv/bin/python bench/prepare_overhead.py [--sizes 1000,10000] [--turns 300]``.

Each conversation is grown once (bench/steady_state.build) and copied; one copy is run with
``LCM_COMPACTION_MODE=inline``, the other with the default ``deferred``, the same host turns in the
same process, interleaved turn by turn (each goes first every other turn) so machine drift hits
both alike (steady_state.HostTurns: the post_llm_call hook on the host's list, should_compress, one
assembly; the CLI and the API shapes). Before each turn's hook the engine observes the request
and is handed the reply's usage, as the host has it do, and compacts and assembles to the budget
it computes from them (the one its preparer plans under), so the deferred engine checks the
preparation point on every turn and, past it, asks its preparer for a run. That run is on its
own thread, with the offline summarizer, and is waited for after the turn, untimed. The target:
the check and the request cost nothing measurable (ratio within the machine's noise, 1.1x), for
the whole turn and for the hook alone, where the check is (the whole turn also carries what the
two engines' compactions left to assemble).
"""

from __future__ import annotations

import argparse
import statistics
from typing import Any

from common import History, core_of, print_table, save_result
from steady_state import (
    PROMPT_OVERHEAD,
    WARMUP_TURNS,
    HostTurns,
    context_tokens,
    copies,
    play_pair,
)

TARGET_RATIO = 1.1
MODES = ("inline", "deferred")


# The system prompt and tool schemas the host sends: measured by the engine from each request, as
# the host's pre-request hook has it do (host/overhead.py), so the engine's own budget, the one
# compress and the preparer plan under, is the one this benchmark compacts and assembles to.
SYSTEM = {"role": "system", "content": "policy " * (PROMPT_OVERHEAD - 16)}


class UsageTurns(HostTurns):
    """HostTurns as the host drives an engine around a reply: the request observed and the reply's
    usage handed over first (untimed, both the host's), and the budget the engine computes from
    them, not a fixed one, for the compaction and the assembly."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.parts["hook_and_check"] = []
        self.prompts: list[int] = []

    def turn(self, turn: int, timed: bool) -> None:
        reported = context_tokens(self.core) + PROMPT_OVERHEAD
        self.engine.observe_request([SYSTEM, *self.host], [])
        self.engine.update_from_response({"prompt_tokens": reported})
        self.budget = self.core.budget(
            self.engine.threshold_tokens, self.engine.overhead(self.host, reported)
        )
        super().turn(turn, timed)
        if timed:  # the engine's own work of the turn, and the prompt the turn assembled from
            engine_s = self.parts["ingest"][-1] + self.parts["should_compress"][-1]
            self.parts["hook_and_check"].append(engine_s)
            self.prompts.append(reported)

    def result(self) -> dict[str, Any]:
        return {**super().result(), "prompt_tokens_median": statistics.median(self.prompts)}


def settled(player: HostTurns) -> None:
    """What the turn asked the preparer for, done before any timed turn."""
    preparer = player.core.preparer
    if preparer is not None:
        assert preparer.settle(60), "the preparer did not finish within 60 s"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    history = History(args.seed)
    results: dict[str, Any] = {}

    for size in (int(s) for s in args.sizes.split(",")):
        pair, seconds = copies(
            size, history, {mode: {"LCM_COMPACTION_MODE": mode} for mode in MODES}, "prepare"
        )
        entry: dict[str, Any] = {"build_seconds": round(seconds, 1)}
        for shape in ("cli", "api"):
            start = size if shape == "cli" else size + 4 * (WARMUP_TURNS + args.turns)
            players: dict[str, HostTurns] = {
                mode: UsageTurns(*pair[mode], history, start, shape) for mode in MODES
            }
            print(f"{size:>7} msgs", end=" ")
            play_pair(entry, shape, players, args.turns, settled)
        deferred = core_of(pair["deferred"][0]).preparer
        assert deferred is not None, "the deferred engine has no preparer"
        view = deferred.view()
        entry["preparer"] = {k: view[k] for k in ("runs", "prepared", "published")}
        assert view["runs"] > 0, "no turn passed the preparation point: the run proves little"
        results[str(size)] = entry
    rows = [
        _row(
            results,
            f"the engine's work of a turn, the post_llm_call hook and should_compress (where the "
            f"check is), deferred vs inline <= {TARGET_RATIO}x",
            "hook_and_check",
            judged=True,
        ),
        _row(
            results,
            "the whole turn, with the assembly of what each engine's compactions left",
            "total",
            judged=False,
        ),
    ]
    print_table(rows)
    save_result("prepare_overhead", rows, {"sizes": results, "turns": args.turns})


def _row(results: dict[str, Any], target: str, part: str, *, judged: bool) -> dict[str, Any]:
    """One verdict row over sizes and shapes: the ratio of deferred's median ``part`` to inline's.
    The whole turn is reported, not judged: its assembly is of two different prompts (a deferred
    compaction that published prepared summaries stops once the prompt is within half of the
    budget over its goal, where inline goes on to the goal), so the prompt medians stand beside it."""
    ratios = {
        f"{int(size) // 1000}k {shape}": (
            entry[f"{shape}_deferred"][part]["median_ms"],
            entry[f"{shape}_inline"][part]["median_ms"],
            entry[f"{shape}_deferred"]["prompt_tokens_median"],
            entry[f"{shape}_inline"]["prompt_tokens_median"],
        )
        for size, entry in results.items()
        for shape in ("cli", "api")
    }
    ours = ", ".join(
        f"{k} {d / i:.2f}x ({d:.2f} vs {i:.2f} ms"
        + ("" if judged else f"; prompts {pd:,.0f} vs {pi:,.0f} tokens")
        + ")"
        for k, (d, i, pd, pi) in ratios.items()
    )
    worst = max(d / i for d, i, _, _ in ratios.values())
    return {
        "target": target,
        "ours": ours,
        "reference": "the same engine with LCM_COMPACTION_MODE=inline, same turns",
        "verdict": ("met" if worst <= TARGET_RATIO else "missed") if judged else "measured",
    }


if __name__ == "__main__":
    main()

"""Where preparation should start: LCM_PREPARE_AT_RATIO swept over turn shapes, against inline.

One command: ``.venv/bin/python bench/prepare_point.py [--ratios 0.4,0.5,0.6,0.75,0.85,0.95]
[--turns 40] [--delay 0.1] [--think 1.5] [--repeat 3]``.

The tests' summarizer stub on 127.0.0.1 answers each summary call after ``--delay`` seconds; the
engines are the tests' deferred-compaction engines (a 4,000-token threshold, a 6-message fresh
tail, 1,000-token leaf chunks) played turn by turn in the host's order (tests/deferred_play.py).
After each reply the user pauses ``--think`` summary calls' time (the preparer gets about that
many calls between turns, never more: a preparation point too late leaves it too few pauses).
Three turn shapes: short questions (~T/30 a turn), work (varied sizes, a tool call every third
turn) and long notes (~T/7 a turn). For each ratio and shape: the summary calls made inside a
turn after the first compaction (what the user waits for), all calls, and the prepared summaries
waiting after an average turn (the calls lost if the session ended there: what starting early
costs). The default is the ratio with the fewest calls inside turns over the three shapes (the
highest such one: it leaves the least waiting).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from common import ROOT, print_table, save_result

sys.path.insert(0, str(ROOT))
from hermes_lcm import store as store_module
from hermes_lcm.config import LcmConfig
from tests.deferred_play import long_turn, play, turn, working_turn
from tests.reliability.stub_summarizer import StubSummarizer

SHAPES = {"questions": turn, "work": working_turn, "notes": long_turn}


def run(
    stub: StubSummarizer, ratio: float | None, shape: str, turns: int, think: float
) -> dict[str, Any]:
    """One session; ``ratio`` None: inline compaction (the reference)."""
    with tempfile.TemporaryDirectory(prefix="lcm-prepare-point-") as home:
        extra = (
            {"LCM_COMPACTION_MODE": "inline"}
            if ratio is None
            else {"LCM_PREPARE_AT_RATIO": f"{ratio:g}"}
        )
        engine = stub.engine(Path(home), "point", **extra)
        played = play(
            engine,
            stub,
            think=None if ratio is None else think,
            shape=SHAPES[shape],
            turns=turns,
            done=False,
        )
        core = engine.core
        assert core is not None and core.binding.conversation_id is not None
        waiting = len(core.store.prepared_summaries(core.binding.conversation_id))
        published = core.preparer.view()["published"] if core.preparer is not None else 0
        summarized = core.store.conversation(core.binding.conversation_id).frontier_seq
        engine.on_session_end("point", [])
        store_module.close_all()
    inside = played["inside"]
    return {
        "ratio": ratio,
        "shape": shape,
        "compactions": len(inside),
        "calls": played["calls"],
        "calls_inside": sum(inside),
        "calls_inside_after_first": sum(inside[1:]),
        "published": published,
        "waiting_at_end": waiting,
        "summarized": summarized,
        "waiting_mean": round(statistics.mean(played["waiting"]), 2) if played["waiting"] else 0,
    }


def summed(sessions: list[dict[str, Any]]) -> dict[str, Any]:
    """Sessions of one shape and ratio as one row: the counts summed, the waiting averaged. The
    user's pause is wall time, so a call lands inside a turn or not by a few milliseconds: one
    session's counts are noisy, their sum over repeats less so."""
    first = sessions[0]
    row: dict[str, Any] = {"ratio": first["ratio"], "shape": first["shape"]}
    for key in first:
        if key not in row:
            values = [s[key] for s in sessions]
            row[key] = round(statistics.mean(values), 2) if key == "waiting_mean" else sum(values)
    return {**row, "sessions": len(sessions)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ratios", default="0.4,0.5,0.6,0.75,0.85,0.95")
    parser.add_argument("--turns", type=int, default=40)
    parser.add_argument("--delay", type=float, default=0.1)
    parser.add_argument("--think", type=float, default=1.5, help="in summary calls' time")
    parser.add_argument(
        "--repeat", type=int, default=3, help="sessions per shape and ratio, summed"
    )
    args = parser.parse_args()
    ratios = [float(r) for r in args.ratios.split(",")]
    stub = StubSummarizer("timeout", delay_s=args.delay)
    stub.env = {"LCM_SUMMARY_TIMEOUT_MS": str(int(max(5.0, 20 * args.delay) * 1000))}
    results = []
    try:
        for shape in SHAPES:
            for ratio in [None, *ratios]:
                sessions = [
                    run(stub, ratio, shape, args.turns, args.think * args.delay)
                    for _ in range(args.repeat)
                ]
                result = summed(sessions)
                print(result, flush=True)
                results.append(result)
    finally:
        stub.close()
    default = LcmConfig().prepare_at_ratio
    deferred = [r for r in results if r["ratio"] is not None]
    inside = {
        ratio: sum(r["calls_inside_after_first"] for r in deferred if r["ratio"] == ratio)
        for ratio in ratios
    }
    waiting = {
        ratio: round(sum(r["waiting_mean"] for r in deferred if r["ratio"] == ratio), 2)
        for ratio in ratios
    }
    fewest = min(inside.values())
    best = max(ratio for ratio in ratios if inside[ratio] == fewest)
    rows = [
        {
            "target": "LCM_PREPARE_AT_RATIO default: the fewest summary calls inside turns (after "
            "the first compaction) over the three turn shapes, the highest such ratio",
            "ours": f"default {default:g}: {inside.get(default, '-')} inside, "
            f"{waiting.get(default, '-')} waiting per turn; best {best:g}",
            "reference": "; ".join(
                f"{ratio:g}: {inside[ratio]} inside, {waiting[ratio]} waiting" for ratio in ratios
            )
            + f"; inline: {sum(r['calls_inside_after_first'] for r in results if r['ratio'] is None)}"
            " inside",
            "verdict": "met" if best == default else f"missed: best {best:g}",
        }
    ]
    print_table(rows)
    save_result(
        "prepare_point",
        rows,
        {
            "turns": args.turns,
            "delay_s": args.delay,
            "think_calls": args.think,
            "repeat": args.repeat,
            "default": default,
            "runs": results,
        },
    )


if __name__ == "__main__":
    main()

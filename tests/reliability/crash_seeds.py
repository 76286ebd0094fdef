"""Run the randomized long crash/resume session for many seeds; report duplicates and losses.

    PYTHONPATH=... python -m tests.reliability.crash_seeds --seeds 24 --turns 2000 --kills 24

Each seed: a repetitive transcript (``crashplay.transcript``), ``--kills`` kills at random turns and
steps, the API shape for even seeds and the CLI shape for odd ones. Duplicates are rows stored
that the transcript does not have at that place, losses transcript messages never stored.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from .crashplay import differences, flat, play, random_kills, transcript


def run_seed(seed: int, turns: int, kills: int) -> dict[str, object]:
    script = transcript(seed, turns)
    killed_at = random_kills(seed, turns, kills)
    shape = "cli" if seed % 2 else "api"
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as home:
        errors = play(Path(home), script, killed_at, shape=shape)
        duplicates, losses, where = differences(Path(home) / "lcm.db", script)
    return {
        "seed": seed,
        "shape": shape,
        "turns": turns,
        "messages": len(flat(script)),
        "kills": len(killed_at),
        "duplicates": duplicates,
        "losses": losses,
        "errors": len(errors),
        "where": where,
        "seconds": round(time.monotonic() - started, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--first", type=int, default=0)
    parser.add_argument("--turns", type=int, default=2000)
    parser.add_argument("--kills", type=int, default=24)
    args = parser.parse_args()
    totals = {"runs": 0, "duplicates": 0, "losses": 0, "errors": 0, "runs_with_problems": 0}
    for seed in range(args.first, args.first + args.seeds):
        result = run_seed(seed, args.turns, args.kills)
        print(json.dumps(result), flush=True)
        totals["runs"] += 1
        for key in ("duplicates", "losses", "errors"):
            totals[key] += int(str(result[key]))
        totals["runs_with_problems"] += bool(
            result["duplicates"] or result["losses"] or result["errors"]
        )
    print("TOTAL " + json.dumps(totals))


if __name__ == "__main__":
    main()

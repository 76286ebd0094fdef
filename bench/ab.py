"""One benchmark on two revisions of the code, interleaved, in the same session on this machine.

One command: ``.venv/bin/python bench/ab.py --before REV [--after HEAD] [--bench steady_state]
[--rounds 3] [-- ARGS...]``.

A change that should not move a figure (a layout move, a refactor) is checked against the code
before it, not against a number measured on another day: on a shared 2-core machine one run of a
benchmark varies by a third from the next. Each revision is exported (``git archive``) into a
directory of its own and the benchmark of that revision runs there with its own code first on the
path (the benchmark of each side, so a revision whose module names differ still runs), the sides
alternating round by round so a slow minute of the machine falls on both. Every ``median_ms``
figure the benchmark records is compared: the median over the rounds on each side, and their
ratio (after / before).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from common import ROOT, print_table, save_result


def medians(tree: Any, path: str = "") -> Iterator[tuple[str, float]]:
    """Every ``median_ms`` figure of a result's details, with the keys that lead to it."""
    if isinstance(tree, dict):
        for key, value in tree.items():
            if key == "median_ms" and isinstance(value, int | float):
                yield path, float(value)
            else:
                yield from medians(value, f"{path}/{key}" if path else str(key))


def export(rev: str, into: Path) -> str:
    """``rev`` as files under ``into/hermes_lcm``; returns the commit it resolved to."""
    commit = subprocess.run(
        ["git", "rev-parse", "--short", rev], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()
    package = into / "hermes_lcm"
    package.mkdir(parents=True)
    archive = into / "tree.tar"
    with archive.open("wb") as out:
        subprocess.run(["git", "archive", commit], cwd=ROOT, stdout=out, check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(package, filter="data")
    archive.unlink()
    return commit


def run_side(tree: Path, bench: str, args: list[str]) -> dict[str, float]:
    """One run of ``bench`` with ``tree``'s code; its result's ``median_ms`` figures."""
    package = tree / "hermes_lcm"
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run(
        [sys.executable, f"bench/{bench}.py", *args],
        cwd=package,
        env=env,
        capture_output=True,
        text=True,
    )
    if done.returncode:
        raise SystemExit(f"{bench} failed in {tree}:\n{done.stderr[-2000:]}")
    result = json.loads((package / "bench" / "results" / f"{bench}.json").read_text("utf-8"))
    return dict(medians(result["details"]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, help="the revision to compare against")
    parser.add_argument("--after", default="HEAD")
    parser.add_argument(
        "--bench", default="steady_state", help="a bench/<name>.py that records median_ms"
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("args", nargs="*", help="passed to the benchmark (after --)")
    opts = parser.parse_args()
    runs: dict[str, dict[str, list[float]]] = {"before": {}, "after": {}}
    with tempfile.TemporaryDirectory(prefix="lcm-ab-") as tmp:
        trees = {side: Path(tmp) / side for side in runs}
        commits = {side: export(getattr(opts, side), trees[side]) for side in runs}
        for round_ in range(opts.rounds):
            for side in runs:
                for path, value in run_side(trees[side], opts.bench, opts.args).items():
                    runs[side].setdefault(path, []).append(value)
                print(
                    f"round {round_ + 1}/{opts.rounds}: {side} ({commits[side]}) done", flush=True
                )
    figures = {}
    for path in sorted(set(runs["before"]) & set(runs["after"])):
        before, after = (statistics.median(runs[side][path]) for side in ("before", "after"))
        figures[path] = {
            "before_ms": runs["before"][path],
            "after_ms": runs["after"][path],
            "ratio": round(after / before, 2) if before else None,
        }
    ratios = [f["ratio"] for f in figures.values() if f["ratio"] is not None]
    rows = [
        {
            "target": f"{opts.bench} unchanged by {commits['before']}..{commits['after']} "
            "(median of per-figure ratios after/before)",
            "ours": f"{statistics.median(ratios):.2f}x over {len(ratios)} figures "
            f"({min(ratios):.2f}x..{max(ratios):.2f}x)"
            if ratios
            else "no figure in common",
            "reference": f"{opts.rounds} interleaved rounds per side",
        }
    ]
    print_table(rows)
    save_result(
        f"ab_{opts.bench}",
        rows,
        {
            "bench": opts.bench,
            "before": commits["before"],
            "after": commits["after"],
            "rounds": opts.rounds,
            "args": opts.args,
            "load": list(os.getloadavg()),
            "figures": figures,
        },
    )


if __name__ == "__main__":
    main()

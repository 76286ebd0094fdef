"""LoCoMo evidence recall@1/5/10/20 (lenient and strict) into docs/benchmarks.md.

One command: ``.venv/bin/python bench/recall.py [--files conv-30]``.

The measurement itself is bench/locomo_recall.py (each conversation ingested through the engine,
the raw questions asked through lcm_grep and lcm_recall); this script runs it and records its
figures next to the plain-bm25 baseline published with the data (../shared/data/locomo/README.md).
"""

from __future__ import annotations

import argparse
from typing import Any

import locomo_recall
from common import print_table, save_result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", default="", help="comma-separated conversation names (default: all seven)")
    args = parser.parse_args()
    result = locomo_recall.main(["--files", args.files] if args.files else [])
    target = locomo_recall.TARGET_R10
    base = locomo_recall.BASELINE
    rows = []
    for tool, figures in result.items():
        r10, strict10 = figures["lenient"][10], figures["strict"][10]
        rows.append({"target": f"LoCoMo evidence R@10 via {tool}, FTS-only >= {target}",
                     "ours": f"{r10:.3f} lenient, {strict10:.3f} strict ({figures['questions']} questions, "
                             f"{figures['ms_per_query']} ms/question)",
                     "reference": f"plain bm25 OR baseline: {base['lenient'][10]} lenient, {base['strict'][10]} strict",
                     "verdict": "met" if r10 >= target else f"missed by {target - r10:.3f}"})
    systems: dict[str, Any] = {tool: {mode: {str(k): v for k, v in figures[mode].items()}
                                      for mode in ("lenient", "strict")} for tool, figures in result.items()}
    systems["plain bm25 OR (data README)"] = {mode: {str(k): v for k, v in base[mode].items()}
                                              for mode in ("lenient", "strict")}
    questions = next(iter(result.values()))["questions"] if result else 0
    print_table(rows)
    save_result("recall", rows, {"systems": systems, "questions": questions,
                                 "conversations": len(args.files.split(",")) if args.files else 7,
                                 "ms_per_query": {t: f["ms_per_query"] for t, f in result.items()}})


if __name__ == "__main__":
    main()

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
    parser.add_argument(
        "--files", default="", help="comma-separated conversation names (default: all seven)"
    )
    parser.add_argument(
        "--hybrid",
        action="store_true",
        help="also lcm_recall with the local int8 MiniLM (bench/results/recall_hybrid.json)",
    )
    parser.add_argument(
        "--weights", default="0.3", help="LCM_RECALL_VECTOR_WEIGHT values to measure with --hybrid"
    )
    args = parser.parse_args()
    argv = ["--files", args.files] if args.files else []
    if args.hybrid:
        return save_hybrid(locomo_recall.main([*argv, "--hybrid", "--weights", args.weights]))
    result = locomo_recall.main(argv)
    target = locomo_recall.TARGET_R10
    base = locomo_recall.BASELINE
    rows = []
    for tool, figures in result.items():
        r10, strict10 = figures["lenient"][10], figures["strict"][10]
        rows.append(
            {
                "target": f"LoCoMo evidence R@10 via {tool}, FTS-only >= {target}",
                "ours": f"{r10:.3f} lenient, {strict10:.3f} strict ({figures['questions']} questions, "
                f"{figures['ms_per_query']} ms/question)",
                "reference": f"plain bm25 OR baseline: {base['lenient'][10]} lenient, {base['strict'][10]} strict",
                "verdict": "met" if r10 >= target else f"missed by {target - r10:.3f}",
            }
        )
    systems: dict[str, Any] = {
        tool: {
            mode: {str(k): v for k, v in figures[mode].items()} for mode in ("lenient", "strict")
        }
        for tool, figures in result.items()
    }
    systems["plain bm25 OR (data README)"] = {
        mode: {str(k): v for k, v in base[mode].items()} for mode in ("lenient", "strict")
    }
    questions = next(iter(result.values()))["questions"] if result else 0
    print_table(rows)
    save_result(
        "recall",
        rows,
        {
            "systems": systems,
            "questions": questions,
            "conversations": len(args.files.split(",")) if args.files else 7,
            "ms_per_query": {t: f["ms_per_query"] for t, f in result.items()},
        },
    )


TARGET_GAIN = 0.03


def save_hybrid(result: dict[str, Any]) -> None:
    """R@1/5/10 of lcm_grep, lcm_recall FTS-only and hybrid at each weight, overall and per
    conversation, with the target (hybrid >= FTS-only + 0.03 at R@10, never below per conversation)."""
    per = result.pop("per_conversation")
    fts = result["lcm_recall"]["lenient"][10]
    rows = []
    for tool, figures in result.items():
        if not tool.startswith("hybrid@"):
            continue
        r10 = figures["lenient"][10]
        worst = min(per[c][tool]["lenient"][10] - per[c]["lcm_recall"]["lenient"][10] for c in per)
        met = r10 >= fts + TARGET_GAIN - 1e-9 and worst >= 0
        target = f"LoCoMo R@10 lcm_recall {tool} >= FTS-only + {TARGET_GAIN}, never below per conversation"
        rows.append(
            {
                "target": target,
                "ours": f"{r10:.3f} vs FTS-only {fts:.3f} ({r10 - fts:+.3f}); worst conversation {worst:+.3f}",
                "reference": "earlier runs: plain bm25 OR 0.65, plain RRF 0.60, dense weight 0.3 0.66",
                "verdict": "met"
                if met
                else (f"missed: gain {r10 - fts:+.3f}, worst conversation {worst:+.3f}"),
            }
        )
    print_table(rows)
    save_result(
        "recall_hybrid",
        rows,
        {
            "overall": result,
            "per_conversation": per,
            "model": "local:all-minilm-l6-v2-int8 (int8 storage)",
        },
    )


if __name__ == "__main__":
    main()

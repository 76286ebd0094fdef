"""LoCoMo evidence recall of lcm_grep on PostgreSQL next to SQLite (ranking parity).

One command: ``.venv/bin/python bench/pg_recall.py [--files conv-30] [--url URL]``.

bench/locomo_recall.py's measurement (each conversation ingested through the engine, the raw
questions asked through lcm_grep, R@k of the evidence turns), run once on a SQLite file and once
on a PostgreSQL schema (a throwaway server unless ``--url``), in the same process. The two full-text
engines differ (FTS5 bm25 there, tsvector ranking here), so this is where their ranking is compared.
"""

from __future__ import annotations

import argparse
import tempfile
import uuid
from pathlib import Path
from typing import Any

import locomo_recall
from common import print_table, save_result
from pg_compare import schema_url, start_server

TOOLS = ("lcm_grep", "lcm_recall")


def run(conversations: list[Any], env: dict[str, str]) -> dict[str, Any]:
    locomo_recall.EXTRA_ENV.clear()
    locomo_recall.EXTRA_ENV.update(env)
    out: dict[str, Any] = {}
    for name, tool, tally in locomo_recall.evaluate(
        conversations, TOOLS, Path(tempfile.mkdtemp(prefix="pgrec-"))
    ):
        if name == "all":
            out[tool] = {
                "questions": tally.questions,
                "lenient": tally.rates("lenient"),
                "strict": tally.rates("strict"),
                "ms_per_query": round(tally.seconds / max(1, tally.questions) * 1000, 2),
            }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    locomo_recall.add_data_arguments(parser)
    parser.add_argument("--url", help="a PostgreSQL server to use (default: a throwaway one)")
    args = parser.parse_args()
    conversations = locomo_recall.load_selected(args.data, args.files or "conv-30")
    url = schema_url(args.url or start_server(), f"recall_{uuid.uuid4().hex[:8]}")
    results = {
        "sqlite": run(conversations, {}),
        "postgres": run(conversations, {"LCM_DATABASE_URL": url}),
    }
    rows = []
    for tool in TOOLS:
        sq, pg = results["sqlite"][tool], results["postgres"][tool]
        rows.append(
            {
                "target": f"LoCoMo R@10 via {tool} on PostgreSQL, comparable to SQLite",
                "ours": f"PostgreSQL {pg['lenient'][10]:.3f} lenient, {pg['strict'][10]:.3f} strict; "
                f"SQLite {sq['lenient'][10]:.3f}, {sq['strict'][10]:.3f} ({sq['questions']} questions)",
                "reference": "-",
                "verdict": f"{pg['lenient'][10] - sq['lenient'][10]:+.3f}",
            }
        )
        print(f"{tool}: sqlite {sq['lenient']} | postgres {pg['lenient']}")
    print_table(rows)
    save_result(
        "pg_recall",
        rows,
        {
            "files": args.files or "conv-30",
            "backends": {
                b: {
                    t: {
                        **f,
                        "lenient": {str(k): v for k, v in f["lenient"].items()},
                        "strict": {str(k): v for k, v in f["strict"].items()},
                    }
                    for t, f in r.items()
                }
                for b, r in results.items()
            },
        },
    )


if __name__ == "__main__":
    main()

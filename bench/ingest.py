"""Bulk import rate and compaction cost with the offline (extractive) summarizer.

One command: ``.venv/bin/python bench/ingest.py [--messages 200000]``.

* import: ``core.ingest`` of 1,000- and 10,000-message batches (each batch starting with the 8
  newest stored messages, as a host's or importer's list does) into a fresh database, no
  compaction: messages per second including normalization, token counting, payload guard,
  alignment, the FTS index and the commit;
* compaction, steady: a conversation growing by 1,000 messages between compactions (what a
  long session does), total compaction time / source tokens summarized;
* compaction, backlog: 20,000 never-compacted messages compacted at once (a first compaction
  after import); ms per 1k source tokens again, and per pass.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from common import History, bulk_ingest, core_of, make_engine, print_table, save_result, temp_dir

TARGET_RATE = 20_000


def import_rate(history: History, count: int, batch: int) -> float:
    engine = make_engine(temp_dir(f"import-{batch}"), session=f"import-{batch}")
    seconds = bulk_ingest(core_of(engine), history, 0, count, batch=batch)
    return count / seconds


def source_tokens(core: Any, since_node: int) -> tuple[int, int, int]:
    """(source tokens summarized, leaf nodes, condensed nodes) for nodes made after ``since_node``."""
    nodes = [n for n in core.dag.nodes(core.binding.conversation_id, limit=1_000_000) if n.id > since_node]
    return (sum(n.source_tokens for n in nodes), sum(1 for n in nodes if n.depth == 0),
            sum(1 for n in nodes if n.depth > 0))


def compaction_steady(history: History, count: int) -> dict[str, Any]:
    engine = make_engine(temp_dir("compact-steady"), session="compact-steady")
    core = core_of(engine)
    budget = core.budget(engine.threshold_tokens, 3000)
    spent = 0.0
    for lo in range(0, count, 1000):
        bulk_ingest(core, history, lo, lo + 1000, batch=1000)
        t0 = time.perf_counter()
        core.compact(budget)
        spent += time.perf_counter() - t0
    tokens, leaves, condensed = source_tokens(core, 0)
    return {"messages": count, "seconds": round(spent, 2), "source_tokens": tokens, "leaf_nodes": leaves,
            "condensed_nodes": condensed, "ms_per_1k_tokens": round(spent * 1000 / (tokens / 1000), 3)}


def compaction_backlog(history: History, count: int) -> dict[str, Any]:
    engine = make_engine(temp_dir("compact-backlog"), session="compact-backlog")
    core = core_of(engine)
    budget = core.budget(engine.threshold_tokens, 3000)
    bulk_ingest(core, history, 0, count, batch=5000)
    spent, calls, passes = 0.0, 0, 0
    while True:
        t0 = time.perf_counter()
        report = core.compact(budget)
        spent += time.perf_counter() - t0
        calls += 1
        passes += report.passes
        if report.passes == 0 or "pass limit" not in report.stop_reason:
            break
    tokens, leaves, condensed = source_tokens(core, 0)
    return {"messages": count, "seconds": round(spent, 2), "compact_calls": calls, "passes": passes,
            "ms_per_pass": round(spent * 1000 / max(1, passes), 1), "source_tokens": tokens, "leaf_nodes": leaves,
            "condensed_nodes": condensed, "ms_per_1k_tokens": round(spent * 1000 / (tokens / 1000), 3),
            "stop_reason": report.stop_reason}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--seed", type=int, default=5)
    args = parser.parse_args()
    history = History(args.seed)
    rates = {}
    for batch in (1000, 10_000):
        rates[batch] = import_rate(history, args.messages, batch)
        print(f"  import, {batch:>6}-message batches: {rates[batch]:,.0f} messages/s", flush=True)
    steady = compaction_steady(history, 20_000)
    print(f"  compaction, steady: {steady['ms_per_1k_tokens']} ms per 1k source tokens", flush=True)
    backlog = compaction_backlog(history, 20_000)
    print(f"  compaction, 20k backlog: {backlog['ms_per_1k_tokens']} ms per 1k source tokens, "
          f"{backlog['ms_per_pass']} ms/pass", flush=True)
    best = max(rates.values())
    rows = [
        {"target": f"bulk import >= {TARGET_RATE:,} messages/s",
         "ours": ", ".join(f"{rate:,.0f} msg/s ({batch:,}-msg batches)" for batch, rate in rates.items()),
         "reference": "not published",
         "verdict": "met" if best >= TARGET_RATE else f"missed by {TARGET_RATE - best:,.0f} msg/s"},
        {"target": "compaction cost, offline summarizer (ms per 1k source tokens)",
         "ours": f"{steady['ms_per_1k_tokens']} ms steady; {backlog['ms_per_1k_tokens']} ms for a 20k-message "
                 "backlog", "reference": "not published (LLM summarizers: seconds per call)", "verdict": "-"},
    ]
    print_table(rows)
    details = {"messages_imported": args.messages,
               **{f"import_rate_batch_{b}": round(r) for b, r in rates.items()},
               **{f"steady_{k}": v for k, v in steady.items()},
               **{f"backlog_{k}": v for k, v in backlog.items()}}
    save_result("ingest", rows, details)


if __name__ == "__main__":
    main()

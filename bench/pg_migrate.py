"""How fast ``lcm migrate-to-postgres`` copies a 100k-message file into PostgreSQL.

``python bench/pg_migrate.py [--messages 100000] [--runs 3]`` builds a history through the engine's
own ingest (compacted every 1,000 messages, so summaries and edges exist, as bench/db_size.py does),
starts the tests' PostgreSQL 16 (tests/pgserver.py, from the pgserver wheel), and times
``migrate_pg.apply`` (copy in 2,000-row transactions + sequences + payloads + the full verify) into
a fresh schema per run; the copy and the verify are also timed apart. The baseline, in the same
process and interleaved with the runs: the same messages' ``(id, content)`` inserted in the same
batches into a bare table (no index, no tsvector), i.e. what the server's insert path costs alone.
Medians; the ratio is ours over the baseline.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(
    0, str(Path(__file__).resolve().parents[1] / ".pyroot")
)  # this checkout's hermes_lcm
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.pgserver

from common import History, bulk_ingest, core_of, make_engine, print_table, save_result, temp_dir


def build(size: int) -> Path:
    engine = make_engine(temp_dir(f"pgmig-{size}"), session=f"pgmig-{size}")
    core = core_of(engine)
    budget = core.budget(engine.threshold_tokens, 3000)
    bulk_ingest(core, History(), 0, size, batch=1000, compact_every=1000, budget=budget)
    path = Path(str(core.store.path))
    core.store.close()
    return path


def baseline(path: Path, url: str, batch: int = 2000) -> float:
    import sqlite3

    import psycopg

    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    started = time.perf_counter()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE bare(id bigint, content text)")
        after = 0
        while rows := con.execute(
            "SELECT id, replace(content, char(0), '') FROM messages WHERE id > ? "
            "ORDER BY id LIMIT ?",
            (after, batch),
        ).fetchall():
            with conn.transaction(), conn.cursor() as cur:
                cur.executemany("INSERT INTO bare VALUES (%s, %s)", rows)
            after = rows[-1][0]
    con.close()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()

    from hermes_lcm import store as store_module
    from hermes_lcm.importers import postgres as migrate_pg
    from tests.pgserver import fresh_url

    path = build(args.messages)
    ours: list[float] = []
    verify: list[float] = []
    base: list[float] = []
    counts: dict[str, int] = {}
    for _ in range(args.runs):
        base.append(baseline(path, fresh_url()))
        url = fresh_url()
        started = time.perf_counter()
        out = migrate_pg.apply(path, url)
        ours.append(time.perf_counter() - started)
        assert out["verify"]["ok"], out["verify"]
        started = time.perf_counter()
        assert migrate_pg.verify(path, url)["ok"]
        verify.append(time.perf_counter() - started)
        counts = out["verify"]["counts"]
        store_module.close_all()
    med, med_verify, med_base = (
        statistics.median(ours),
        statistics.median(verify),
        statistics.median(base),
    )
    copy_only = max(med - med_verify, 1e-9)
    details: dict[str, Any] = {
        "messages": counts.get("messages", 0),
        "rows_all_tables": sum(counts.values()),
        "summaries": counts.get("summaries", 0),
        "runs": args.runs,
        "apply_s_median": round(med, 2),
        "verify_s_median": round(med_verify, 2),
        "copy_s_median": round(copy_only, 2),
        "baseline_bare_insert_s_median": round(med_base, 2),
        "messages_per_s_apply": round(counts.get("messages", 0) / med),
        "rows_per_s_copy": round(sum(counts.values()) / copy_only),
        "copy_over_bare_insert": round(copy_only / med_base, 2),
        "file_bytes": path.stat().st_size,
    }
    rows = [
        {
            "target": f"migrate-to-postgres at {details['messages']:,} messages (copy + verify)",
            "ours": f"{med:.1f} s, {details['messages_per_s_apply']:,} messages/s",
            "reference": f"bare insert of (id, content): {med_base:.1f} s; copy is "
            f"{details['copy_over_bare_insert']}x that",
        }
    ]
    print_table(rows)
    save_result("pg_migrate", rows, details)


if __name__ == "__main__":
    main()

"""Database size: bytes per message, per table/index and per column, against the raw text.

One command: ``.venv/bin/python bench/db_size.py [--size 100000] [--migrate-from PATH]``.

The history is built through the engine's own ingest in 1,000-message batches and compacted every
1,000 messages (as bench/search.py does), then VACUUMed. ``dbstat`` gives the bytes of every table
and index; the byte budget of a ``messages`` row is estimated per column from the SQLite record
format (a serial-type header byte per column plus the value's payload: integers 0-8 bytes by
magnitude, reals 8, text and blobs their length). The baseline, built in the same process from the
same rows: the raw text (content plus tool-call JSON) and a plain one-column table holding only it.

``--migrate-from`` times opening (and so migrating) a copy of an older database, the schema upgrade
cost at this size.
"""

from __future__ import annotations

import argparse
import shutil
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(
    0, str(Path(__file__).resolve().parents[1] / ".pyroot")
)  # this checkout's hermes_lcm

from common import (
    History,
    bulk_ingest,
    core_of,
    file_size,
    make_engine,
    print_table,
    save_result,
    temp_dir,
)

TARGET_RATIO = 1.3

# Payload bytes of one value in a record (schema format 4: the integers 0 and 1 take no payload).
_VALUE_BYTES = (
    "CASE typeof({c}) WHEN 'integer' THEN (CASE WHEN {c} IN (0, 1) THEN 0 "
    "WHEN abs({c}) < 128 THEN 1 WHEN abs({c}) < 32768 THEN 2 WHEN abs({c}) < 8388608 THEN 3 "
    "WHEN abs({c}) < 2147483648 THEN 4 WHEN abs({c}) < 140737488355328 THEN 6 ELSE 8 END) "
    "WHEN 'real' THEN 8 WHEN 'text' THEN length(CAST({c} AS BLOB)) WHEN 'blob' THEN length({c}) ELSE 0 END"
)


def build(size: int, history: History) -> tuple[str, float]:
    engine = make_engine(temp_dir(f"dbsize-{size}"), session=f"dbsize-{size}")
    core = core_of(engine)
    budget = core.budget(engine.threshold_tokens, 3000)
    seconds = bulk_ingest(core, history, 0, size, batch=1000, compact_every=1000, budget=budget)
    path = str(core.store.path)
    core.store.close()
    return path, seconds


def vacuum(path: str) -> None:
    con = sqlite3.connect(path)
    try:
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        con.execute("VACUUM")
    finally:
        con.close()


def per_part(path: str, count: int) -> dict[str, float]:
    con = sqlite3.connect(path)
    try:
        rows = con.execute(
            "SELECT name, sum(pgsize) FROM dbstat GROUP BY name ORDER BY 2 DESC"
        ).fetchall()
    finally:
        con.close()
    return {name: round(size / count, 1) for name, size in rows}


def row_budget(path: str) -> dict[str, float]:
    """Mean bytes per ``messages`` row, per column (payload plus its header byte)."""
    con = sqlite3.connect(path)
    try:
        columns = [r[1] for r in con.execute("PRAGMA table_info(messages)")]
        sums = ", ".join(f"sum({_VALUE_BYTES.format(c=c)})" for c in columns)
        values = con.execute(f"SELECT count(*), {sums} FROM messages").fetchone()
    finally:
        con.close()
    count = values[0]
    return {c: round(v / count + 1, 1) for c, v in zip(columns, values[1:], strict=True)}


def baseline(path: str, directory: Path) -> dict[str, float]:
    """The same rows' raw text, and a plain table holding only that text (VACUUMed)."""
    plain = directory / "plain.db"
    con = sqlite3.connect(str(plain))
    try:
        con.execute("ATTACH DATABASE ? AS lcm", (path,))
        count, raw = con.execute(
            "SELECT count(*), sum(length(CAST(content AS BLOB)) + "
            "coalesce(length(CAST(tool_calls AS BLOB)), 0)) FROM lcm.messages"
        ).fetchone()
        con.execute("CREATE TABLE plain(text TEXT NOT NULL)")
        con.execute(
            "INSERT INTO plain(text) SELECT content || coalesce(tool_calls, '') FROM lcm.messages"
        )
        con.commit()
        con.execute("DETACH DATABASE lcm")
        con.execute("VACUUM")
    finally:
        con.close()
    return {
        "raw_text": round(raw / count, 1),
        "plain_table": round(plain.stat().st_size / count, 1),
    }


def time_migration(source: str, directory: Path) -> dict[str, Any]:
    """Seconds to open (and so migrate) a copy of an older database."""
    from hermes_lcm.store import SqliteStore

    copy = directory / "migrate.db"
    shutil.copyfile(source, copy)
    con = sqlite3.connect(str(copy))
    before = con.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0]
    messages = con.execute("SELECT count(*) FROM messages").fetchone()[0]
    con.close()
    t0 = time.perf_counter()
    store = SqliteStore(str(copy))
    seconds = time.perf_counter() - t0
    store.close()
    con = sqlite3.connect(str(copy))
    after = con.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0]
    fts_check = (
        con.execute("INSERT INTO messages_fts(messages_fts, rank) VALUES ('integrity-check', 1)")
        and "ok"
    )
    con.close()
    unvacuumed = file_size(copy) / messages
    vacuum(str(copy))
    return {
        "from_version": int(before),
        "to_version": int(after),
        "messages": messages,
        "seconds": round(seconds, 2),
        "fts_integrity_check": fts_check,
        "bytes_per_message_before_vacuum": round(unvacuumed, 1),
        "bytes_per_message_after_vacuum": round(file_size(copy) / messages, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument(
        "--migrate-from", default=None, help="an older database to time the upgrade on"
    )
    parser.add_argument(
        "--before",
        default=None,
        help="a db_size.json written by the older schema's code: shown beside this run",
    )
    parser.add_argument(
        "--keep", default=None, help="copy the built database here (a fixture for --migrate-from)"
    )
    args = parser.parse_args()
    history = History(args.seed)
    print(f"building {args.size:,} messages ...", flush=True)
    path, seconds = build(args.size, history)
    vacuum(path)
    if args.keep:
        shutil.copyfile(path, args.keep)
    total = file_size(path)
    parts = per_part(path, args.size)
    budget = row_budget(path)
    base = baseline(path, Path(path).parent)
    fts = sum(v for k, v in parts.items() if k.startswith(("messages_fts", "summaries_fts")))
    per_message = total / args.size
    con = sqlite3.connect(path)
    version = int(con.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0])
    con.close()
    details: dict[str, Any] = {
        "size": args.size,
        "schema_version": version,
        "build_seconds": round(seconds, 1),
        "bytes_per_message": round(per_message, 1),
        "fts_bytes_per_message": round(fts, 1),
        "ratio": round(per_message / base["raw_text"], 2),
        "ratio_without_fts": round((per_message - fts) / base["raw_text"], 2),
        "ratio_to_plain_table": round(per_message / base["plain_table"], 2),
        "baseline": base,
        "parts": parts,
        "row_budget": budget,
    }
    if args.before:
        import json

        old = json.loads(Path(args.before).read_text(encoding="utf-8"))["details"]
        details["before"] = {
            k: old[k]
            for k in (
                "schema_version",
                "bytes_per_message",
                "fts_bytes_per_message",
                "ratio",
                "ratio_without_fts",
                "baseline",
                "parts",
                "row_budget",
            )
        }
    if args.migrate_from:
        details["migration"] = time_migration(args.migrate_from, Path(path).parent)
    ratio = details["ratio_without_fts"]
    rows = [
        {
            "target": f"database size at {args.size:,} msgs <= {TARGET_RATIO}x raw text without FTS",
            "ours": f"{details['bytes_per_message']} bytes/msg (schema {version}; raw text {base['raw_text']}, "
            f"plain text table {base['plain_table']}); {details['ratio']}x raw with FTS, {ratio}x without",
            "reference": "plain one-column table of the same text, same process",
            "verdict": "met" if ratio <= TARGET_RATIO else f"missed by {ratio - TARGET_RATIO:.2f}x",
        }
    ]
    print_table(rows)
    for name, value in parts.items():
        print(f"  {name:32} {value:8.1f} B/msg")
    for name, value in budget.items():
        print(f"  messages.{name:23} {value:8.1f} B/row")
    if "migration" in details:
        print(f"  migration: {details['migration']}")
    save_result("db_size", rows, details)


if __name__ == "__main__":
    main()

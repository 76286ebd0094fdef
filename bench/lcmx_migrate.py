"""How long the in-place upgrade of an LCM-X database takes at 100k messages.

``python bench/lcmx_migrate.py [messages]`` builds an LCM-X-schema database in a temp dir by
copying the rows of tests/peers/lcm_x/lcmx.db (LCM-X's own schema, written by LCM-X) over and
over, each copy a conversation of its own with its summary nodes' ``source_ids`` renumbered,
then times ``lcmx_swap.upgrade_in_place`` on it (snapshot, build, verify, backup, swap: the
whole upgrade the engine runs at start). It writes ``bench/results/lcmx_migrate.json`` and
re-renders docs/benchmarks.md, like every benchmark here (bench/common.py).
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "peers" / "lcm_x" / "lcmx.db"
sys.path.insert(
    0, str(ROOT / ".pyroot")
)  # this checkout's hermes_lcm (a worktree has .pyroot/hermes_lcm)


def grow(path: Path, target: int) -> dict[str, int]:
    """Copies of the fixture's conversations until ``path`` holds ``target`` messages."""
    con = sqlite3.connect(path)
    cols = [r[1] for r in con.execute("PRAGMA table_info(messages)") if r[1] != "store_id"]
    msgs = con.execute(
        f"SELECT store_id, {', '.join(cols)} FROM messages ORDER BY store_id"
    ).fetchall()
    ncols = [r[1] for r in con.execute("PRAGMA table_info(summary_nodes)") if r[1] != "node_id"]
    nodes = con.execute(
        f"SELECT node_id, {', '.join(ncols)} FROM summary_nodes ORDER BY node_id"
    ).fetchall()
    si, ci = cols.index("session_id"), cols.index("conversation_id")
    nsi, idi, tyi = ncols.index("session_id"), ncols.index("source_ids"), ncols.index("source_type")
    copy = 0
    while con.execute("SELECT max(store_id) FROM messages").fetchone()[0] < target:
        copy += 1
        base_m = con.execute("SELECT max(store_id) FROM messages").fetchone()[0]
        base_n = con.execute("SELECT max(node_id) FROM summary_nodes").fetchone()[0]
        rows = []
        for store_id, *vals in msgs:
            vals[si] = f"{vals[si]}-{copy}"
            vals[ci] = f"{vals[ci]}-{copy}" if vals[ci] else vals[ci]
            rows.append((base_m + store_id, *vals))
        marks = ", ".join("?" * (len(cols) + 1))
        con.executemany(f"INSERT INTO messages(store_id, {', '.join(cols)}) VALUES ({marks})", rows)
        nrows = []
        for node_id, *vals in nodes:
            vals[nsi] = f"{vals[nsi]}-{copy}"
            shift = base_m if vals[tyi] == "messages" else base_n
            vals[idi] = json.dumps([i + shift for i in json.loads(vals[idi])])
            nrows.append((base_n + node_id, *vals))
        con.executemany(
            f"INSERT INTO summary_nodes(node_id, {', '.join(ncols)}) "
            f"VALUES ({', '.join('?' * (len(ncols) + 1))})",
            nrows,
        )
        if copy % 500 == 0:
            con.commit()
    con.commit()
    counts = {
        t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
        for t in ("messages", "summary_nodes")
    }
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    return counts


def main(target: int = 100_000) -> dict[str, object]:
    from common import print_table, save_result  # sibling module; imports hermes_lcm

    from hermes_lcm.importers import lcmx_swap

    work = Path(tempfile.mkdtemp(prefix="lcmx-bench-"))
    try:
        path = work / "lcm.db"
        shutil.copy(FIXTURE, path)
        started = time.perf_counter()
        counts = grow(path, target)
        built = time.perf_counter() - started
        size = path.stat().st_size
        started = time.perf_counter()
        out = lcmx_swap.upgrade_in_place(path)
        seconds = time.perf_counter() - started
        details = {
            "lcmx_messages": counts["messages"],
            "lcmx_summary_nodes": counts["summary_nodes"],
            "lcmx_bytes": size,
            "build_source_seconds": round(built, 2),
            "upgrade_seconds": round(seconds, 2),
            "messages_per_second": round(counts["messages"] / seconds),
            "conversations": out["conversations"]["imported"],
            "summaries_imported": out["summaries"]["imported"],
            "edges_imported": out["edges"]["imported"],
            "verified": out["verify"]["ok"],
            "balanced": out["balanced"],
            "hermes_lcm_bytes": path.stat().st_size,
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(details, indent=2))
    ok = details["verified"] and details["balanced"]
    rows = [
        {
            "target": f"upgrade a {counts['messages']:,}-message LCM-X database in place",
            "ours": f"{seconds:.1f} s, {details['messages_per_second']:,} messages/s"
            + ("" if ok else " (DID NOT VERIFY)"),
            "reference": "LCM-X / lossless-claw: no importer to compare",
            "verdict": "measured" if ok else "failed",
        }
    ]
    print_table(rows)
    save_result("lcmx_migrate", rows, details)
    return details


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 100_000)

"""Bulk import: a large list ingested in one call is prepared once and stored in
several chunk transactions; nothing may be lost, doubled, reordered or left out of the FTS index.

The checks are on the database file: every message exactly once in order, FTS5's own
integrity-check against the external content, and a MATCH on each message's rare token that finds
exactly its row (what per-row triggers give).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from hermes_lcm.store import close_all

from .worker import make_engine

ENV = {"LCM_ABSOLUTE_THRESHOLD_TOKENS": "500000"}


def rare(session: str, i: int) -> str:
    return f"zq{session}{i:05d}x"


def message(session: str, i: int) -> dict[str, Any]:
    role = ("user", "assistant")[i % 2]
    return {"role": role, "content": f"message {i} of the import mentions {rare(session, i)} once"}


def fts_rows(db: Path, token: str) -> list[int]:
    con = sqlite3.connect(str(db))
    try:
        return [
            r[0]
            for r in con.execute(
                "SELECT rowid FROM messages_fts WHERE messages_fts MATCH ?", (token,)
            )
        ]
    finally:
        con.close()


def check_store(db: Path, sessions: dict[str, int]) -> None:
    """Each session's messages stored once, in order, each found by its own rare token and by no other."""
    con = sqlite3.connect(str(db))
    try:
        con.execute("INSERT INTO messages_fts(messages_fts, rank) VALUES ('integrity-check', 1)")
        rows = con.execute(
            "SELECT m.id, m.content FROM messages m JOIN conversations c ON c.id=m.conversation_id "
            "ORDER BY c.key, m.seq"
        ).fetchall()
        postings = con.execute("SELECT count(*) FROM messages_fts_docsize").fetchone()[0]
    finally:
        con.close()
    assert postings == len(rows) == sum(sessions.values())
    by_text = {content: rowid for rowid, content in rows}
    for session, count in sessions.items():
        for i in range(count):
            text = message(session, i)["content"]
            assert text in by_text, f"{session} {i} lost"
            assert fts_rows(db, rare(session, i)) == [by_text[text]], (
                f"{session} {i} not indexed as its row"
            )
    assert len(by_text) == len(rows), "a message stored twice"


def test_bulk_list_in_chunks_is_stored_once_and_indexed(tmp_path: Path) -> None:
    """5,000 messages in one call, chunked by 700 rows (several transactions, the memo kept between them)."""
    engine = make_engine(str(tmp_path), "bulk", ENV)
    try:
        core = engine.ensure_core()
        assert core is not None
        core.ingest_chunk_rows = 700
        history = [message("bulk", i) for i in range(5000)]
        engine.ingest_host(history[:3000])
        engine.ingest_host(history)  # overlaps the 3,000 stored: only the rest is new
        engine.ingest_host(history)  # the same list again: nothing new
        assert not engine.errors
    finally:
        close_all()
    check_store(tmp_path / "lcm.db", {"bulk": 5000})


def test_bulk_import_interleaved_with_turns_on_another_connection(tmp_path: Path) -> None:
    """A bulk writer (lists of 2,500) and a turn-by-turn writer (2 messages a call), each its own
    engine and connection on one file, alternating: nothing lost, nothing doubled, the FTS whole."""
    bulk = make_engine(str(tmp_path), "bulk", ENV)
    turns = make_engine(str(tmp_path), "turns", ENV)
    try:
        core = bulk.ensure_core()
        assert core is not None
        core.ingest_chunk_rows = 900
        history: list[dict[str, Any]] = []
        mine: list[dict[str, Any]] = []
        for round_ in range(4):
            history.extend(message("bulk", i) for i in range(round_ * 2500, (round_ + 1) * 2500))
            bulk.ingest_host(list(history))
            for k in range(10):
                i = round_ * 20 + 2 * k
                mine.extend([message("turns", i), message("turns", i + 1)])
                turns.ingest_host(list(mine))
        assert not bulk.errors and not turns.errors
    finally:
        close_all()
    check_store(tmp_path / "lcm.db", {"bulk": 10_000, "turns": 80})


_CHILD = """
import sys
from tests.reliability.test_bulk_import import ENV, message
from tests.reliability.worker import make_engine
engine = make_engine(sys.argv[1], "bulk", ENV)
engine.ensure_core().ingest_chunk_rows = 200
for n in range(2000, 200_000, 2000):
    engine.ingest_host([message("bulk", i) for i in range(n)])
    print("STORED", n, flush=True)
"""


def test_kill_mid_import_leaves_every_row_indexed(tmp_path: Path) -> None:
    """SIGKILL while a bulk import runs (chunks of 200 rows): every stored row has its FTS posting,
    the stored rows are a prefix of the list, and a second run completes it without doubling."""
    import os
    import signal
    import subprocess
    import sys

    from .helpers import child_env

    root = Path(__file__).resolve().parents[2]
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(tmp_path)],
        stdout=subprocess.PIPE,
        text=True,
        env=child_env(),
        cwd=str(root),
    )
    assert child.stdout is not None
    for line in child.stdout:
        if line.startswith("STORED") and int(line.split()[1]) >= 6000:
            break
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    con = sqlite3.connect(str(tmp_path / "lcm.db"))
    try:
        stored = con.execute("SELECT count(*) FROM messages").fetchone()[0]
        texts = [r[0] for r in con.execute("SELECT content FROM messages ORDER BY seq")]
    finally:
        con.close()
    assert stored >= 6000
    assert texts == [message("bulk", i)["content"] for i in range(stored)]
    check_store(tmp_path / "lcm.db", {"bulk": stored})
    engine = make_engine(str(tmp_path), "bulk", ENV)
    try:
        engine.ingest_host([message("bulk", i) for i in range(stored + 3000)])
        assert not engine.errors
    finally:
        close_all()
    check_store(tmp_path / "lcm.db", {"bulk": stored + 3000})

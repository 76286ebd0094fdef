"""A full disk under the real Hermes host: no message is lost.

The engine's database lives on a small tmpfs the test mounts (as root; otherwise the
database file is made read-only, which the store refuses just the same). The disk is left
with a few kilobytes, so the first turns are stored and the rest cannot be. The real host
runs a conversation past the compaction threshold: whenever it compacts, every message the
store does not hold must stay in the host's own list. Space comes back mid-conversation (the
stub model frees it when turn FREE_AT arrives) and the engine's next ingest stores the
backlog: at the end every message of every turn is stored exactly once, in order.
"""

from __future__ import annotations

import contextlib
import os
import random
import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from hermes_lcm import store as store_module
from hermes_lcm.store import open_store

from ..reliability.test_full_disk import Disk, small_disk
from .harness import make_home, run_host
from .stub_llm import Recorded, Reply, StubLLM

pytestmark = pytest.mark.host

MARK = re.compile(r"^mk:(\d+) ")
ROOM = 1200 * 1024  # about fifteen turns, compactions included, then every write fails
N_TURNS = 34
FREE_AT = 26
WORDS = (
    "cache index schema migration latency budget replica shard queue worker batch retry timeout "
    "backoff checksum snapshot rollback canary metric alert dashboard quota tenant region"
).split()


def user_turn(i: int) -> str:
    rng = random.Random(500 + i)
    return f"mk:{i} " + " ".join(rng.choice(WORDS) for _ in range(260))


def stored_count(db: Path, role: str) -> int:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return int(con.execute("SELECT count(*) FROM messages WHERE role=?", (role,)).fetchone()[0])
    finally:
        con.close()


def stored_marks(db: Path) -> list[int]:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = con.execute(
            "SELECT content FROM messages WHERE role='user' ORDER BY conversation_id, seq"
        ).fetchall()
    finally:
        con.close()
    return [int(h.group(1)) for (c,) in rows if (h := MARK.match(c or ""))]


@contextlib.contextmanager
def refusing_disk(tmp_path: Path) -> Iterator[tuple[Disk | None, Path]]:
    """(the tmpfs, the database path); without a mount, a database file made read-only."""
    with small_disk(tmp_path) as disk:
        db = disk.root / "lcm.db"
        open_store(db).ensure_conversation("created-before-the-run")
        store_module.close_all()
        if disk.mode == "tmpfs":
            disk.fill(None, ROOM)
            yield disk, db
        else:
            os.chmod(db, 0o444)
            yield None, db


def test_the_real_host_loses_no_message_when_the_disk_fills(stub: StubLLM, tmp_path: Path) -> None:
    """The stub model answers every turn with the same long reply (no "turn N" in the asks), the
    case where content alone cannot tell a new reply from a stored one."""
    turns = [user_turn(i) for i in range(N_TURNS)]
    with refusing_disk(tmp_path) as (disk, db):
        answer = stub.policy
        freed: list[int] = []

        def policy(req: Recorded) -> Reply:
            if not freed and req.last_user_text().startswith(f"mk:{FREE_AT} "):
                free(disk, db)  # space comes back while the host is mid-conversation
                freed.append(len(stored_marks(db)))
            return answer(req)

        stub.policy = policy
        hh = make_home(
            tmp_path,
            stub,
            env={
                "LCM_DATABASE_PATH": str(db),
                "LCM_CONTEXT_THRESHOLD": "0.11",
                "LCM_FRESH_TAIL_COUNT": "8",
                "LCM_SUMMARY_PROVIDER": "extractive",
            },
        )
        report = run_host(hh, turns).report
        assert all(t["completed"] and not t["failed"] for t in report["turns"])
        assert report["engine_final"]["compression_count"] >= 1, "the host never compacted"
        assert freed and freed[0] < FREE_AT, "the disk never refused a write"
        # every message ever handed to the engine is stored, exactly once and in order
        assert stored_marks(db) == list(range(N_TURNS))
        assert stored_count(db, "assistant") == N_TURNS
        store_module.close_all()


def free(disk: Disk | None, db: Path) -> None:
    if disk is not None:
        disk.free(None)
    else:
        os.chmod(db, 0o644)

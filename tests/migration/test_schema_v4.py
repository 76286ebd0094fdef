"""Schema 4 (compact keys): the upgrade of a real schema-3 file keeps every message, summary and edge,
keeps rowids (so the external-content FTS stays valid), and a process killed mid-upgrade leaves
version 3 intact. ``fixtures/schema_v3.db`` was written by the schema-3 code (make_v3_fixture.py).
"""

from __future__ import annotations

import hashlib
import shutil
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from hermes_lcm.storage.messages import SqlitePrints
from hermes_lcm.store import SCHEMA_VERSION, SqliteStore, close_all, open_store

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "schema_v3.db"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def v3(tmp_path: Path) -> Path:
    path = tmp_path / "lcm.db"
    shutil.copyfile(FIXTURE, path)
    return path


def _raw(path: Path) -> dict[str, Any]:
    """Everything the upgrade must keep, read with a plain connection from a schema-3 file."""
    con = sqlite3.connect(str(path))
    try:
        return {
            "messages": con.execute(
                "SELECT id, conversation_id, seq, session_id, role, content, parts, tool_calls, tool_call_id, "
                "tool_name, source, host_ts, created_at, tokens, fingerprint, extra, synthetic FROM messages "
                "ORDER BY id"
            ).fetchall(),
            "summaries": con.execute("SELECT * FROM summaries ORDER BY id").fetchall(),
            "edges": con.execute(
                "SELECT parent_id, child_kind, child_id, ord FROM edges ORDER BY parent_id, ord"
            ).fetchall(),
            "context": con.execute(
                "SELECT * FROM context_items ORDER BY conversation_id, ord"
            ).fetchall(),
            "sessions": con.execute("SELECT * FROM sessions ORDER BY id").fetchall(),
            "conversations": con.execute("SELECT * FROM conversations ORDER BY id").fetchall(),
        }
    finally:
        con.close()


def _raw_version(path: Path) -> int:
    con = sqlite3.connect(str(path))
    try:
        return int(con.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0])
    finally:
        con.close()


def _digest(path: Path) -> str:
    con = sqlite3.connect(str(path))
    try:
        return hashlib.sha256("\n".join(con.iterdump()).encode()).hexdigest()
    finally:
        con.close()


def test_fixture_is_schema_3() -> None:
    con = sqlite3.connect(f"file:{FIXTURE}?mode=ro", uri=True)
    assert con.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone() == ("3",)
    kinds = {r[0] for r in con.execute("SELECT fingerprint FROM messages")}
    con.close()
    assert any(k.startswith("import:") for k in kinds) and "legacy-Fingerprint" in kinds


def test_upgrade_keeps_every_message_summary_and_edge(v3: Path) -> None:
    before = _raw(v3)
    store = open_store(v3)
    try:
        assert (
            store.schema_version() == SCHEMA_VERSION == 5
        )  # 4 (compact keys), then 5 (payload grants)
        for row in before["messages"]:
            got = store.message(row[0])
            assert got is not None
            assert (
                got.id,
                got.conversation_id,
                got.seq,
                got.session_id,
                got.role,
                got.content,
                got.parts,
                got.tool_calls,
                got.tool_call_id,
                got.tool_name,
                got.source,
                got.created_at,
                got.tokens,
                got.extra,
            ) == (*row[:11], *row[12:14], row[15])
            assert isinstance(got.session_id, str)
        for conv in {r[1] for r in before["messages"]}:
            want = {r[14]: r[0] for r in before["messages"] if r[1] == conv}
            assert store.fingerprint_ids(conv) == want
            with store.read() as db:
                prints = SqlitePrints(db, conv)
                rows = [r for r in before["messages"] if r[1] == conv]
                assert prints.tail(len(rows)) == [r[14] for r in rows]
                for r in rows[:5] + rows[-5:]:
                    assert r[2] in prints.seqs(r[14], 100)
                    assert prints.fingerprint_of(r[0]) == r[14]
                assert prints.present([r[14] for r in rows] + ["0" * 16]) == {r[14] for r in rows}
                assert prints.once([r[14] for r in rows]) == {r[14] for r in rows}
        by_parent: dict[int, list[tuple[str, int]]] = {}
        for parent, kind, child, _ord in before["edges"]:
            by_parent.setdefault(parent, []).append((kind, child))
        for node in before["summaries"]:
            assert store.summary(node[0]) is not None
            edges = by_parent[node[0]]
            assert [m.id for m in store.summary_sources(node[0])] == [
                c for k, c in edges if k == "message"
            ]
            assert [n.id for n in store.child_summaries(node[0])] == [
                c for k, c in edges if k == "summary"
            ]
            for kind, child in edges:
                assert node[0] in store.parent_ids(kind, child)
        assert store.lineage_problems() == {}
        with store.read() as db:
            assert (
                db.execute("SELECT * FROM summaries ORDER BY id").fetchall() == before["summaries"]
            )
            assert (
                db.execute("SELECT * FROM context_items ORDER BY conversation_id, ord").fetchall()
                == before["context"]
            )
            assert db.execute("SELECT * FROM sessions ORDER BY id").fetchall() == before["sessions"]
            assert (
                db.execute("SELECT * FROM conversations ORDER BY id").fetchall()
                == before["conversations"]
            )
            assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
            db.execute("INSERT INTO messages_fts(messages_fts, rank) VALUES ('integrity-check', 1)")
            db.execute(
                "INSERT INTO summaries_fts(summaries_fts, rank) VALUES ('integrity-check', 1)"
            )
            hit = db.execute(
                "SELECT rowid FROM messages_fts WHERE messages_fts MATCH 'beta' ORDER BY rowid LIMIT 1"
            ).fetchone()
            assert hit is not None and "beta" in str(store.message(hit[0]).content)  # type: ignore[union-attr]
    finally:
        close_all()


def test_upgraded_rows_are_compact(v3: Path) -> None:
    open_store(v3)
    close_all()
    con = sqlite3.connect(str(v3))
    kinds = dict(
        con.execute(
            "SELECT typeof(fingerprint) || length(fingerprint), count(*) FROM messages GROUP BY 1"
        ).fetchall()
    )
    assert kinds == {
        "blob8": 320,
        "blob16": 5,
        "text18": 1,
    }  # host hex, import:<hex>, other text kept as is
    assert {r[0] for r in con.execute("SELECT DISTINCT typeof(child_kind) FROM edges")} == {
        "integer"
    }
    assert {r[0] for r in con.execute("SELECT DISTINCT typeof(session_key) FROM messages")} == {
        "integer"
    }
    assert "session_id" not in {r[1] for r in con.execute("PRAGMA table_info(messages)")}
    con.close()


def test_new_rows_store_packed_keys_and_read_back_as_text(v3: Path) -> None:
    store = open_store(v3)
    try:
        conv = store.ensure_conversation("session:new")
        store.upsert_session("new-session", conv)
        from hermes_lcm.base.records import MessageIn

        fp = "0123456789abcdef"
        ids, skipped = store.append_imported(
            conv,
            "new-session",
            "cli",
            [MessageIn("user", "hello compact", None, None, None, None, None, 2, fp)],
        )
        assert skipped == 0 and store.fingerprint_ids(conv) == {fp: ids[0]}
        assert store.last_fingerprint(conv) == fp
        assert store.message(ids[0]).session_id == "new-session"  # type: ignore[union-attr]
        assert [m.id for m in store.session_messages("new-session", 0, 10)] == ids
        again, skipped = store.append_imported(
            conv,
            "new-session",
            "cli",
            [MessageIn("user", "hello compact", None, None, None, None, None, 2, fp)],
        )
        assert again == [] and skipped == 1
    finally:
        close_all()


def test_readonly_reads_an_unmigrated_schema_3_file(v3: Path) -> None:
    """The CLI opens read-only and never migrates: a schema-3 file must read as before."""
    before = _raw(v3)
    store = SqliteStore.open_readonly(v3)
    try:
        assert store.schema_version() == 3
        first = before["messages"][0]
        got = store.message(first[0])
        assert got is not None and got.session_id == first[3]
        assert [m.id for m in store.session_messages(first[3], 0, 3)] == [
            r[0] for r in before["messages"][:3]
        ]
        assert store.fingerprint_ids(first[1])[first[14]] == first[0]
        leaf = next(n for n in before["summaries"] if n[3] == 0)
        assert [m.id for m in store.summary_sources(leaf[0])] == [
            c for p, k, c, _ in before["edges"] if p == leaf[0] and k == "message"
        ]
        assert store.lineage_problems() == {}
    finally:
        store.close()
    assert _digest(v3) == _digest(FIXTURE)


_KILLER = textwrap.dedent("""
    import os, signal, sqlite3, sys
    sys.path.insert(0, sys.argv[3])
    steps = int(sys.argv[2])
    real_connect = sqlite3.connect
    calls = [0]  # progress ticks (100 VM steps each) over every connection the store opens
    def connect(*args, **kwargs):
        con = real_connect(*args, **kwargs)
        def tick():
            calls[0] += 1
            if calls[0] >= steps:
                os.kill(os.getpid(), signal.SIGKILL)
            return 0
        con.set_progress_handler(tick, 100)
        return con
    sqlite3.connect = connect
    from hermes_lcm.store import open_store
    open_store(sys.argv[1])
    print("migrated", calls[0])
""")


def _kill_at(path: Path, steps: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _KILLER, str(path), str(steps), str(ROOT / ".pyroot")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize("fraction", [0.1, 0.5, 0.9, 0.99])
def test_killed_mid_upgrade_leaves_schema_3_intact(
    v3: Path, tmp_path: Path, fraction: float
) -> None:
    """SIGKILL after a fraction of the upgrade's SQLite work (counted by a first, unkilled run)."""
    probe = tmp_path / "probe" / "lcm.db"
    probe.parent.mkdir()
    shutil.copyfile(FIXTURE, probe)
    counted = _kill_at(probe, 10**9)
    assert counted.returncode == 0 and counted.stdout.startswith("migrated"), counted.stderr[-2000:]
    total = int(counted.stdout.split()[1])
    original = _digest(v3)
    proc = _kill_at(v3, max(1, int(total * fraction)))
    assert proc.returncode == -9, (
        proc.returncode,
        proc.stdout,
        proc.stderr[-2000:],
    )  # killed, not finished
    # version 3, every row as it was (the last point may fall after the upgrade's COMMIT: then it is whole)
    assert _digest(v3) == original or (fraction > 0.95 and _raw_version(v3) == SCHEMA_VERSION)
    store = open_store(v3)  # and the next open upgrades it whole
    try:
        assert store.schema_version() == SCHEMA_VERSION and store.lineage_problems() == {}
        assert store.message_count() == len(_raw(FIXTURE)["messages"])
    finally:
        close_all()


def test_rewrite_keeps_the_packed_form(v3: Path) -> None:
    """``lcm redact`` reads a row's fingerprint and writes a new one: both in the form alignment compares."""
    store = open_store(v3)
    try:
        message, fingerprint = store.message_rows_after(0, 1)[0]
        assert len(fingerprint) == 16  # text again for the caller
        fields = {
            "content": "scrubbed",
            "parts": None,
            "tool_calls": None,
            "extra": None,
            "tokens": 1,
            "fingerprint": "fedcba9876543210",
        }
        with store.write():
            store.rewrite_message(message.id, fields)
        with store.read() as db:
            assert db.execute(
                "SELECT typeof(fingerprint) FROM messages WHERE id=?", (message.id,)
            ).fetchone() == ("blob",)
            assert SqlitePrints(db, message.conversation_id).seqs("fedcba9876543210", 5) == [
                message.seq
            ]
    finally:
        close_all()

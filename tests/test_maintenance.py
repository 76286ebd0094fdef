"""Backups, doctor, repair, rotate and the narrow cleanups, on databases the engine built.

Rows are only written by hand where the engine cannot make them (a damaged index, a legacy
blank source); everything else comes from driving a real engine. Doctor, source, lifecycle,
clean and retention run on SQLite and PostgreSQL (``both_backends``); the file backup/restore,
FTS5 damage and repair, and the rotate slot file are SQLite's (PostgreSQL's doctor, pg_dump
backup and rotate are in tests/test_cli_pg.py and tests/test_command.py).
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from hermes_lcm import store as store_module
from hermes_lcm.dag import Dag
from hermes_lcm.maintenance import backups, checks, cleanup, doctor, repairs, retention, rotate
from hermes_lcm.search.query import build_query
from hermes_lcm.storage.sqlite import SqliteStore as Store
from hermes_lcm.store import is_url

from .backends import raw_sql
from .conftest import new_engine
from .convo import assert_lineage_complete, conversation, host_run

NO_COMPACTION = 10**9


WHERE: dict[
    str, str
] = {}  # the running test's database settings (empty: a SQLite file in its home)


@pytest.fixture
def on_backend(backend_env, tmp_path, monkeypatch):
    """Engines of a ``both_backends`` test go to its backend; a URL's backups (pg_dump, on PATH
    here) go under the Hermes home, this test's tmp_path."""
    WHERE.update(backend_env)
    if backend_env:
        from .pgserver import binaries

        monkeypatch.setenv("HERMES_HOME", str(tmp_path))
        monkeypatch.setenv("PATH", f"{binaries()}{os.pathsep}{os.environ.get('PATH', '')}")
    yield
    WHERE.clear()


def built(home: Path, turns: int = 40, threshold: int = 6000, session: str = "s1", **env: str):
    """An engine that ran ``turns`` turns (compacting at ``threshold``)."""
    engine = new_engine(home, threshold, session, **WHERE, **env)
    history, _ = host_run(engine, list(conversation(7, turns)))
    return engine, history


def rows(db: Path | str, sql: str, args: tuple = ()) -> list[tuple]:
    if is_url(str(db)):
        return raw_sql(str(db), sql, args)
    con = sqlite3.connect(db)
    try:
        return con.execute(sql, args).fetchall()
    finally:
        con.close()


def finds(store: Store, text: str) -> list[str]:
    """Contents of the messages a full-text search for ``text`` returns (what the tools see)."""
    return [m.content for m, _ in store.search_messages(build_query(text).match, None, 20)]


def snapshot_of(db: Path | str) -> dict[str, list[tuple]]:
    return {
        "messages": rows(
            db,
            "SELECT id, conversation_id, seq, session_key, role, content, parts, tool_calls, "
            "tool_call_id, source, created_at FROM messages ORDER BY id",
        ),
        "summaries": rows(
            db, "SELECT id, depth, content, first_seq, last_seq FROM summaries ORDER BY id"
        ),
        "edges": rows(
            db, "SELECT parent_id, child_kind, child_id, ord FROM edges ORDER BY 1, 2, 3"
        ),
        "conversations": rows(
            db, "SELECT id, key, frontier_seq, last_seq FROM conversations ORDER BY id"
        ),
        "context": rows(
            db, "SELECT conversation_id, ord, summary_id FROM context_items ORDER BY 1, 2"
        ),
    }


# -- backup and restore -----------------------------------------------------------------------


def test_backup_then_restore_round_trip(tmp_path):
    engine, history = built(tmp_path)
    store = engine.core.store
    db = Path(store.path)
    assert rows(db, "SELECT count(*) FROM summaries")[0][0] > 0, "the run must have compacted"
    saved = backups.backup(store, backups.backup_dir(db))
    at_backup = snapshot_of(db)
    stored_at_backup = len(at_backup["messages"])

    later = [
        {"role": "user", "content": "after the backup: the answer is PELICAN-42"},
        {"role": "assistant", "content": "noted PELICAN-42"},
    ]
    history = history + later
    engine.ingest_host(history)
    assert rows(db, "SELECT count(*) FROM messages")[0][0] == stored_at_backup + 2

    # restore as the guide says: stop, move the live files aside, copy the backup in
    store_module.close_all()
    aside = tmp_path / "aside"
    aside.mkdir()
    for suffix in ("", "-wal", "-shm"):
        if Path(str(db) + suffix).exists():
            shutil.move(str(db) + suffix, aside / (db.name + suffix))
    shutil.copy(saved.path, db)
    assert snapshot_of(db) == at_backup
    assert_lineage_complete(str(db))

    restored = new_engine(tmp_path, NO_COMPACTION, "s1")
    assert any(c.startswith("turn 3 answer") for c in finds(restored.core.store, "turn 3 answer"))
    assert doctor.doctor_report(restored.core.store)["status"] in ("ok", "warn")
    # the host re-sends its history: only what the backup did not have is stored again
    restored.ingest_host(history)
    assert rows(db, "SELECT count(*) FROM messages")[0][0] == stored_at_backup + 2
    assert (
        rows(db, "SELECT content FROM messages ORDER BY seq DESC LIMIT 1")[0][0]
        == "noted PELICAN-42"
    )
    store_module.close_all()


WRITER = textwrap.dedent("""
    import copy, sys
    from pathlib import Path
    from hermes_lcm.engine import LcmEngine
    home = Path(sys.argv[1])
    engine = copy.deepcopy(LcmEngine(env={"HERMES_HOME": str(home), "LCM_SUMMARY_PROVIDER": "extractive"}))
    engine.update_model("fake-model", 64000)
    engine.threshold_tokens = 10**9
    engine.on_session_start("writer", hermes_home=str(home), platform="cli")
    history = []
    for i in range(100000):
        if (home / "stop").exists():
            break
        history += [{"role": "user", "content": f"writer turn {i} " + "lorem ipsum " * 40},
                    {"role": "assistant", "content": f"ack {i}"}]
        engine.ingest_host(history[-40:])
        if i == 5:
            (home / "started").write_text("1")
    print(i)
""")


def _consistent(path: Path) -> int:
    """A backup is one consistent snapshot: every index and counter agrees with the rows."""
    con = sqlite3.connect(path)
    try:
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        con.execute("INSERT INTO messages_fts(messages_fts, rank) VALUES('integrity-check', 1)")
        for cid, last_seq, count, top in con.execute(
            "SELECT c.id, c.last_seq, count(m.id), max(m.seq) FROM conversations c "
            "LEFT JOIN messages m ON m.conversation_id=c.id GROUP BY c.id"
        ):
            assert last_seq == count == (top or 0), (cid, last_seq, count, top)
        return int(con.execute("SELECT count(*) FROM messages").fetchone()[0])
    finally:
        con.close()


def test_backup_is_consistent_while_another_process_writes(tmp_path):
    engine, _ = built(tmp_path, turns=5, threshold=NO_COMPACTION)
    store = engine.core.store
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(tmp_path)],
        cwd=str(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not (tmp_path / "started").exists():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "writer did not start"
            time.sleep(0.05)
        counts = []
        for _ in range(6):
            saved = backups.backup(store, tmp_path / "backups")
            counts.append(_consistent(Path(saved.path)))
            time.sleep(0.15)
    finally:
        (tmp_path / "stop").write_text("1")
        _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert counts == sorted(counts) and counts[-1] > counts[0], (
        f"the writer was live during backups: {counts}"
    )
    assert len({Path(p).name for p in os.listdir(tmp_path / "backups")}) == 6
    store_module.close_all()


# -- doctor and repair ---------------------------------------------------------------------------


def _fts_status(report: dict, table: str) -> str:
    return next(c["status"] for c in report["checks"] if c["name"] == f"fts:{table}")


@pytest.mark.both_backends
def test_doctor_is_clean_on_an_engine_database(tmp_path, on_backend):
    engine, _ = built(tmp_path)
    report = doctor.doctor_report(engine.core.store, config=engine.config)
    assert report["status"] == "ok", report["guidance"]
    assert report["guidance"] == []
    assert {c["name"] for c in report["checks"]} >= {
        "database",
        "fts:messages_fts",
        "fts:summaries_fts",
        "lineage",
        "source",
        "lifecycle",
        "clean",
        "payloads",
        "config",
    }
    store_module.close_all()


def test_doctor_detects_a_drifted_index_and_repair_fixes_it(tmp_path):
    engine, _ = built(tmp_path)
    store = engine.core.store
    db = Path(store.path)
    damaged = [r[0] for r in rows(db, "SELECT id FROM messages ORDER BY id LIMIT 12")]
    with store.write() as con:  # the index forgets rows the table still has
        for mid in damaged:
            content = con.execute("SELECT content FROM messages WHERE id=?", (mid,)).fetchone()[0]
            con.execute(
                "INSERT INTO messages_fts(messages_fts, rowid, content) VALUES('delete', ?, ?)",
                (mid, content),
            )
    report = doctor.doctor_report(store)
    assert report["status"] == "fail" and _fts_status(report, "messages_fts") == "fail"
    assert any("doctor repair apply" in g for g in report["guidance"])
    plan = repairs.repair_scan(store)
    assert plan["status"] == "ready" and plan["rebuild"] == ["messages_fts"]
    assert plan["fts"]["messages_fts"]["missing_ids"] == damaged

    backup_folder = backups.backup_dir(db)
    result = repairs.repair_apply(store, backup_folder)
    assert result["status"] == "applied" and result["after"] == "noop", result
    assert Path(result["backup"]["path"]).exists()
    assert doctor.doctor_report(store)["status"] == "ok"
    assert store.fts_finds("messages_fts", damaged[0], '"turn"')
    # re-running is a no-op and takes no second backup
    again = repairs.repair_apply(store, backup_folder)
    assert again["status"] == "noop" and len(list(backup_folder.iterdir())) == 1
    store_module.close_all()


def test_doctor_detects_a_damaged_index_and_repair_fixes_it(tmp_path):
    engine, _ = built(tmp_path)
    store = engine.core.store
    with store.write() as con:  # zero the index's data blocks: corruption, not drift
        con.execute("UPDATE messages_fts_data SET block=zeroblob(length(block)) WHERE id > 10")
    plan = repairs.repair_scan(store)
    info = plan["fts"]["messages_fts"]
    assert plan["status"] == "ready" and info["integrity"], info
    assert info["unfindable_ids"], "sampled rows can no longer be found"
    assert info["missing_ids"] == [] and info["stale_ids"] == []  # structure alone would miss it
    result = repairs.repair_apply(store, backups.backup_dir(store.path))
    assert result["after"] == "noop"
    assert any(c.startswith("turn 30 answer") for c in finds(store, "turn 30 answer"))
    store_module.close_all()


def test_repair_recreates_a_dropped_trigger_so_new_rows_are_indexed(tmp_path):
    engine, history = built(tmp_path, turns=6, threshold=NO_COMPACTION)
    store = engine.core.store
    with store.write() as con:
        con.execute("DROP TRIGGER messages_ai")
    history.append({"role": "user", "content": "unindexed zeppelin question"})
    engine.ingest_host(history)
    report = doctor.doctor_report(store)
    assert any(c["name"] == "fts:triggers" and c["status"] == "fail" for c in report["checks"])
    plan = repairs.repair_scan(store)
    assert "recreate trigger messages_ai" in plan["actions"]
    repairs.repair_apply(store, backups.backup_dir(store.path))
    assert store.missing_triggers() == []
    assert finds(store, "zeppelin") == ["unindexed zeppelin question"]
    history.append({"role": "assistant", "content": "indexed hovercraft answer"})
    engine.ingest_host(history)
    assert finds(store, "hovercraft") == ["indexed hovercraft answer"]
    store_module.close_all()


def test_readonly_doctor_skips_the_integrity_check_but_still_probes(tmp_path):
    engine, _ = built(tmp_path, turns=10)
    db = engine.core.store.path
    with engine.core.store.write() as con:
        con.execute("UPDATE messages_fts_data SET block=zeroblob(length(block)) WHERE id > 10")
    view = Store.open_readonly(db)
    scan = checks.fts_scan(view)
    assert scan["tables"]["messages_fts"]["integrity"] == "skipped (read-only connection)"
    assert scan["tables"]["messages_fts"]["needs_rebuild"]
    view.close()
    store_module.close_all()


# -- source, lifecycle, clean -------------------------------------------------------------------------


@pytest.mark.both_backends
def test_source_scan_apply_and_rerun(tmp_path, on_backend):
    engine, _ = built(tmp_path, turns=6, threshold=NO_COMPACTION)
    store = engine.core.store
    with store.write() as con:  # legacy rows: the engine itself always writes a source
        con.execute("UPDATE messages SET source='' WHERE id IN (1, 2, 3)")
        con.execute("UPDATE messages SET source='  ' WHERE id=4")
    scan = repairs.source_scan(store)
    assert scan["status"] == "ready" and scan["blank_source_rows"] == 4
    result = repairs.source_apply(store, backups.backup_dir(store.path))
    assert result["updated"] == 4 and result["remaining"] == 0
    assert rows(store.path, "SELECT DISTINCT source FROM messages WHERE id<=4") == [("unknown",)]
    assert rows(store.path, "SELECT count(*) FROM messages WHERE source='cli'")[0][0] > 0
    assert repairs.source_apply(store, backups.backup_dir(store.path))["status"] == "noop"
    store_module.close_all()


@pytest.mark.both_backends
def test_lifecycle_clean_removes_only_old_empty_sessions(tmp_path, on_backend):
    engine, _ = built(tmp_path, turns=4, threshold=NO_COMPACTION)
    for sid in ("fork-a", "fork-b"):  # agents that started and never stored anything
        new_engine(tmp_path, NO_COMPACTION, sid, **WHERE)
    live = new_engine(tmp_path, NO_COMPACTION, "fork-live", **WHERE)
    store = engine.core.store
    db = store.path
    assert cleanup.lifecycle_scan(store, 24)["status"] == "noop"  # too young
    scan = cleanup.lifecycle_scan(store, 0, live_sessions=[live.session_id, engine.session_id])
    assert sorted(scan["session_ids"]) == ["fork-a", "fork-b"]
    with pytest.raises(backups.MaintenanceError, match="LCM_DOCTOR_CLEAN_APPLY_ENABLED"):
        cleanup.lifecycle_apply(store, backups.backup_dir(db), 0, [live.session_id], allowed=False)
    result = cleanup.lifecycle_apply(
        store, backups.backup_dir(db), 0, [live.session_id, engine.session_id], allowed=True
    )
    assert result["deleted"] == {"sessions": 2, "conversations": 2}
    assert sorted(r[0] for r in rows(db, "SELECT id FROM sessions")) == ["fork-live", "s1"]
    again = cleanup.lifecycle_apply(
        store, backups.backup_dir(db), 0, [live.session_id, engine.session_id], allowed=True
    )
    assert again["status"] == "noop"
    assert len(list(backups.backup_dir(db).iterdir())) == 1
    store_module.close_all()


@pytest.mark.both_backends
def test_clean_deletes_only_conversations_matching_ignore_patterns(tmp_path, on_backend):
    keep, _ = built(tmp_path, turns=6, threshold=NO_COMPACTION)
    noisy = new_engine(tmp_path, 6000, "cron:nightly", **WHERE)
    host_run(noisy, list(conversation(3, 30)))  # stored (and compacted) before the pattern existed
    store = keep.core.store
    db = store.path
    noisy_conversation = noisy.core.binding.conversation_id
    assert (
        rows(db, "SELECT count(*) FROM summaries WHERE conversation_id=?", (noisy_conversation,))[
            0
        ][0]
        > 0
    )
    before = snapshot_of(db)

    assert cleanup.clean_scan(store, "")["status"] == "noop"
    scan = cleanup.clean_scan(store, "cron:*")
    assert [c["conversation_id"] for c in scan["conversations"]] == [noisy_conversation]
    assert cleanup.clean_scan(store, "cron:*", live_sessions=["cron:nightly"])["status"] == "noop"
    with pytest.raises(backups.MaintenanceError):
        cleanup.clean_apply(store, backups.backup_dir(db), "cron:*", allowed=False)
    assert snapshot_of(db) == before
    result = cleanup.clean_apply(store, backups.backup_dir(db), "cron:*", allowed=True)
    assert result["deleted"]["conversations"] == 1 and result["deleted"]["summaries"] > 0
    assert (
        rows(db, "SELECT count(*) FROM messages WHERE conversation_id=?", (noisy_conversation,))[0][
            0
        ]
        == 0
    )
    kept = [m for m in before["messages"] if m[1] != noisy_conversation]
    assert snapshot_of(db)["messages"] == kept
    assert_lineage_complete(str(db))
    assert Dag(store).lineage_problems() == {}
    assert doctor.doctor_report(store)["status"] == "ok"
    assert (
        cleanup.clean_apply(store, backups.backup_dir(db), "cron:*", allowed=True)["status"]
        == "noop"
    )
    store_module.close_all()


# -- retention ----------------------------------------------------------------------------------------


@pytest.mark.both_backends
def test_retention_reports_by_conversation_and_age(tmp_path, on_backend):
    engine = new_engine(tmp_path, NO_COMPACTION, "s1", **WHERE)
    now = time.time()
    old = [
        {"role": "user", "content": f"old question {i}", "timestamp": now - 100 * 86400 + i}
        for i in range(5)
    ]
    new = [
        {"role": "user", "content": f"new question {i}", "timestamp": now - 60 + i}
        for i in range(3)
    ]
    engine.ingest_host(old + new)
    other = new_engine(tmp_path, NO_COMPACTION, "s2", **WHERE)
    other.ingest_host([{"role": "user", "content": "lorem ipsum dolor " * 400}])
    report = retention.retention_report(engine.core.store, now=now)
    assert report["totals"]["conversations"] == 2 and report["totals"]["messages"] == 9
    assert report["messages_by_age"] == {
        "older_than_7d": 5,
        "older_than_30d": 5,
        "older_than_90d": 5,
        "older_than_365d": 0,
    }
    assert report["largest_conversations"][0]["key"] == "session:s2"
    assert report["idle_conversations_90d"]["count"] == 0
    assert any("LCM_IGNORE_SESSION_PATTERNS" in tip for tip in report["how_to_bound"])
    store_module.close_all()


# -- rotate ------------------------------------------------------------------------------------------


def test_rotate_preview_apply_and_noop(tmp_path):
    engine, history = built(tmp_path, turns=20, threshold=NO_COMPACTION)
    store, cid = engine.core.store, engine.core.binding.conversation_id
    db = Path(store.path)
    before = snapshot_of(db)
    plan = rotate.rotate_scan(store, cid, tail_count=8)
    assert plan["status"] == "ready" and plan["frontier_seq"] == 0
    assert (
        plan["tail_messages"] <= 8
        and plan["target_frontier_seq"] == plan["last_seq"] - plan["tail_messages"]
    )
    assert snapshot_of(db) == before  # preview writes nothing

    backup_folder = tmp_path / "backups"
    result = rotate.rotate_apply(store, cid, "normal", backup_folder, tail_count=8)
    assert (
        result["status"] == "applied"
        and result["frontier_seq_after"] == plan["target_frontier_seq"]
    )
    slot = Path(result["backup"]["path"])
    assert slot.name == "lcm-rotate-latest.sqlite3" and slot.exists()
    after = snapshot_of(db)
    assert after["messages"] == before["messages"] and after["summaries"] == before["summaries"]
    assert Dag(store).lineage_problems() == {}
    # the raw rows left the prompt but stay recoverable
    first = store.messages_after(cid, 0, 1)[0]
    assert first.seq == 1 and first.content.startswith("turn 0 ask")
    prompt = engine.compress(history, current_tokens=1000)
    assert all(not str(m.get("content", "")).startswith("turn 0 ask") for m in prompt)

    stamp = slot.stat().st_mtime_ns
    again = rotate.rotate_apply(store, cid, "normal", backup_folder, tail_count=8)
    assert again["status"] == "noop" and again["backup"] is None
    assert slot.stat().st_mtime_ns == stamp and sorted(p.name for p in backup_folder.iterdir()) == [
        slot.name
    ]
    with pytest.raises(backups.MaintenanceError, match="stateless"):
        rotate.rotate_apply(store, cid, "stateless", backup_folder, tail_count=8)
    store_module.close_all()


def test_rotate_slot_is_overwritten_not_accumulated(tmp_path):
    engine, history = built(tmp_path, turns=10, threshold=NO_COMPACTION)
    store, cid = engine.core.store, engine.core.binding.conversation_id
    backup_folder = tmp_path / "backups"
    first = rotate.rotate_apply(store, cid, "normal", backup_folder, tail_count=4)
    history += [m for t in conversation(99, 6) for m in t]
    engine.ingest_host(history)
    second = rotate.rotate_apply(store, cid, "normal", backup_folder, tail_count=4)
    assert (
        second["status"] == "applied"
        and second["target_frontier_seq"] > first["target_frontier_seq"]
    )
    assert [p.name for p in backup_folder.iterdir()] == ["lcm-rotate-latest.sqlite3"]
    restored = sqlite3.connect(backup_folder / "lcm-rotate-latest.sqlite3")
    assert (
        restored.execute("SELECT frontier_seq FROM conversations WHERE id=?", (cid,)).fetchone()[0]
        == first["target_frontier_seq"]
    )
    restored.close()
    store_module.close_all()


def test_a_backup_name_reads_as_a_time(tmp_path):
    """``lcm-20261201T214501.123456Z.sqlite3``: the seconds, then their fraction after a dot."""
    import re

    from hermes_lcm.maintenance import backups
    from hermes_lcm.store import open_store

    store = open_store(tmp_path / "lcm.db")
    saved = backups.backup(store, tmp_path / "backups")
    assert re.fullmatch(r"lcm-\d{8}T\d{6}\.\d{6}Z\.sqlite3", Path(saved.path).name), saved.path

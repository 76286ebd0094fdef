"""LCM-X databases: the import reconciles, and the engine upgrades one in place at start.

The fixture (tests/peers/lcm_x/lcmx.db) was written by LCM-X's own code (make_db.py beside it).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from hermes_lcm.dag import Dag
from hermes_lcm.importers import lcmx as li
from hermes_lcm.importers import lcmx_swap as swap
from hermes_lcm.store import ForeignDatabase, close_all, open_readonly, open_store

from ..conftest import new_engine

FIXTURE = Path(__file__).resolve().parent.parent / "peers" / "lcm_x" / "lcmx.db"


@pytest.fixture(autouse=True)
def _closed():
    yield
    close_all()
    assert not any(
        Path(f"{FIXTURE}{side}").exists() for side in ("-wal", "-shm", "-journal")
    )  # copies only


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def lcmx_copy(tmp_path: Path, name: str = "lcm.db") -> Path:
    path = tmp_path / name
    shutil.copy(FIXTURE, path)
    return path


def source_rows(path: Path) -> dict:
    """An LCM-X file's rows, read with SQL of our own (never the fixture itself: see fixture_rows)."""
    assert path.resolve() != FIXTURE.resolve(), (
        "read a copy: opening the fixture can leave a -wal/-shm"
    )
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        cols = {r[1] for r in con.execute("PRAGMA table_info(messages)")}
        conv = "conversation_id" if "conversation_id" in cols else "''"
        msgs = con.execute(
            "SELECT role, content, tool_call_id, tool_calls, tool_name, pinned, "
            f"coalesce(observed_at, timestamp), store_id, session_id, {conv} "
            "FROM messages ORDER BY store_id"
        ).fetchall()
        nodes = con.execute(
            "SELECT depth, summary, source_ids, source_type, node_id, session_id "
            "FROM summary_nodes ORDER BY node_id"
        ).fetchall()
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        life = (
            con.execute(
                "SELECT conversation_id, current_frontier_store_id, last_finalized_frontier_store_id "
                "FROM lcm_lifecycle_state"
            ).fetchall()
            if "lcm_lifecycle_state" in tables
            else []
        )
    finally:
        con.close()
    node_ids = {n[4] for n in nodes}
    dangling = sum(
        1 for n in nodes if n[3] == "nodes" for s in set(json.loads(n[2])) if s not in node_ids
    )
    return {
        "messages": msgs,
        "nodes": nodes,
        "links": sum(len(set(json.loads(n[2]))) for n in nodes),
        "dangling": dangling,
        "lifecycle": {r[0]: r[1:] for r in life},
    }


def fixture_rows(tmp_path: Path) -> dict:
    return source_rows(lcmx_copy(tmp_path, "reference.db"))


def all_messages(store) -> list:
    out = []
    for cid in (1, 2, 3):
        out += store.messages_after(cid, 0)
    return out


def test_fixture_is_what_lcmx_writes(tmp_path):
    rows = fixture_rows(tmp_path)
    assert FIXTURE.stat().st_size < 300_000
    assert {m[0] for m in rows["messages"]} == {"system", "user", "assistant", "tool"}
    assert any(n[0] == 1 for n in rows["nodes"]) and any(m[5] for m in rows["messages"])


def test_import_reconciles_every_message_summary_and_edge(tmp_path):
    source, target = lcmx_copy(tmp_path, "x.db"), tmp_path / "ours.db"
    before = sha(source)
    want = source_rows(source)
    plan = li.run_import(source, target)
    assert plan["dry_run"] and not target.exists()
    assert plan["would_import"] == {
        "conversations": 2,
        "messages": len(want["messages"]),
        "summaries": len(want["nodes"]),
    }
    out = li.run_import(source, target, apply=True)
    assert out["verify"]["ok"] and out["balanced"], out
    # LCM-X's /new deleted the children of the nodes it kept: those links cannot be rebuilt as edges
    assert want["dangling"] > 0
    assert {k: out["edges"][k] for k in ("source", "imported", "dropped")} == {
        "source": want["links"],
        "imported": want["links"] - want["dangling"],
        "dropped": want["dangling"],
    }
    assert sha(source) == before
    store = open_readonly(target)
    rows = all_messages(store)
    assert [(m.role, m.content, m.tool_call_id, m.tool_name) for m in rows] == [
        (r[0], r[1], r[2], r[4]) for r in want["messages"]
    ]
    assert [json.loads(m.tool_calls) if m.tool_calls else None for m in rows] == [
        json.loads(r[3]) if r[3] else None for r in want["messages"]
    ]
    assert [m.created_at for m in rows] == [r[6] for r in want["messages"]]
    # tool links: every result follows the call that names it
    calls = {c["id"] for m in rows if m.tool_calls for c in json.loads(m.tool_calls)}
    assert {m.tool_call_id for m in rows if m.role == "tool"} == calls and calls
    dag = Dag(store)
    assert dag.lineage_problems() == {}
    assert (
        store.table_counts()["edges"]
        == want["links"] - want["dangling"] + out["edges"]["relinked_by_time"]
    )
    nodes = dag.nodes(1) + dag.nodes(2)
    assert sorted(n.content for n in nodes) == sorted(n[1] for n in want["nodes"])
    condensed = next(n for n in nodes if n.depth == 1)
    assert [c.depth for c in dag.children(condensed.id)] == [0, 0]
    # the context: LCM-X's top nodes, the frontier at LCM-X's lifecycle frontier
    conv = store.conversation_by_key("telegram:chat-42")
    chat = [m for m in want["messages"] if m[9] == "telegram:chat-42"]
    frontier = max(want["lifecycle"]["telegram:chat-42"])
    assert conv is not None and conv.last_seq == len(chat)
    assert conv.frontier_seq == sum(1 for m in chat if m[7] <= frontier)
    children = {s for n in want["nodes"] if n[3] == "nodes" for s in json.loads(n[2])}
    assert sorted(n.content for n in dag.context(conv.id)) == sorted(
        n[1] for n in want["nodes"] if n[4] not in children and n[5] in {m[8] for m in chat}
    )
    assert store.session("sess-a2").parent_session_id == "sess-a1"
    assert store.session("sess-a1").platform == "telegram"
    store.close()


def _what_it_does(report: dict) -> dict:
    return {k: report[k] for k in ("conversations", "messages", "summaries", "edges", "warnings")}


def test_a_dry_run_reports_what_the_apply_does(tmp_path):
    """Warnings, relinked lineage and invalid nodes included: into a new file, in place, and into
    a target that already holds one of the conversation keys."""
    source, target = lcmx_copy(tmp_path, "x.db"), tmp_path / "ours.db"
    dry = li.run_import(source, target)
    assert dry["dry_run"] and not target.exists()
    applied = li.run_import(source, target, apply=True)
    assert _what_it_does(dry) == _what_it_does(applied)
    assert applied["edges"]["relinked_by_time"] > 0 or applied["warnings"], applied
    close_all()
    (tmp_path / "b").mkdir()
    (tmp_path / "c").mkdir()
    in_place = lcmx_copy(tmp_path / "b", "x.db")
    before = sha(in_place)
    dry = li.run_import(in_place)
    assert sha(in_place) == before
    assert _what_it_does(dry) == _what_it_does(li.run_import(in_place, apply=True))
    close_all()
    # another target holding one of the keys already (not from this import): warned of both ways
    other = tmp_path / "other.db"
    engine_store = open_store(other)
    engine_store.ensure_conversation("telegram:chat-42")
    close_all()
    dry = li.run_import(lcmx_copy(tmp_path / "c", "x.db"), other)
    assert any("already exists in the target" in w for w in dry["warnings"]), dry["warnings"]
    applied = li.run_import(tmp_path / "c" / "x.db", other, apply=True)
    assert _what_it_does(dry) == _what_it_does(applied)
    close_all()


def test_rerun_is_a_no_op(tmp_path):
    source, target = lcmx_copy(tmp_path, "x.db"), tmp_path / "ours.db"
    li.run_import(source, target, apply=True)
    counts = open_readonly(target).table_counts()
    again = li.run_import(source, target, apply=True)
    assert (
        again["conversations"]["imported"] == 0 and again["conversations"]["skipped_existing"] == 2
    )
    assert again["messages"]["skipped_existing"] == len(source_rows(source)["messages"])
    assert li.run_import(source, target)["would_import"]["messages"] == 0
    close_all()
    assert open_readonly(target).table_counts() == counts


def _set_version(path: Path, version: str) -> None:
    con = sqlite3.connect(path)
    con.execute("UPDATE metadata SET value=? WHERE key='schema_version'", (version,))
    con.commit()
    con.close()


def test_unknown_version_is_refused_clearly(tmp_path):
    source = lcmx_copy(tmp_path)
    _set_version(source, "99")
    before = sha(source)
    with pytest.raises(li.ImportFailure, match=r"schema_version 99.*versions 0-5"):
        li.run_import(source, apply=True)
    engine = new_engine(tmp_path)
    engine.compress([{"role": "user", "content": "hello"}], current_tokens=10)
    assert "schema_version 99" in engine.get_status()["startup_error"]
    assert sha(source) == before and not swap.backup_path(source).exists()


def test_an_older_version_without_lifecycle_or_conversation_ids(tmp_path):
    source = lcmx_copy(tmp_path, "old.db")
    con = sqlite3.connect(source)
    con.execute("DROP INDEX IF EXISTS idx_msg_conversation_session")
    con.execute("ALTER TABLE messages DROP COLUMN conversation_id")
    con.execute("DROP TABLE lcm_lifecycle_state")
    con.commit()
    con.close()
    _set_version(source, "2")
    out = li.run_import(source, tmp_path / "ours.db", apply=True)
    assert out["version"] == 2 and out["verify"]["ok"] and out["balanced"]
    store = open_readonly(tmp_path / "ours.db")
    assert (
        store.conversation_by_key("session:sess-a1") is not None
    )  # keyed by session: v2 has no conversation id
    assert sum(store.message_count(c) for c in (1, 2, 3)) == len(source_rows(source)["messages"])


def test_engine_upgrades_at_the_default_path_and_keeps_the_turn(tmp_path):
    path = lcmx_copy(tmp_path)
    original = sha(path)
    want = fixture_rows(tmp_path)
    chat = [m for m in want["messages"] if m[9] == "telegram:chat-42"]
    engine = new_engine(tmp_path, session="sess-a2")
    # the resumed session's last turn as the host holds it (LCM-X's rows), plus a new request
    history = []
    for role, content, call_id, calls, name, *_ in chat[-4:]:
        msg = {"role": role, "content": content}
        msg.update({"tool_calls": json.loads(calls)} if calls else {})
        msg.update({"tool_call_id": call_id, "name": name} if role == "tool" else {})
        history.append(msg)
    assert [m["role"] for m in history] == ["user", "assistant", "tool", "assistant"]
    history.append({"role": "user", "content": "zebra-marker: and the queue depth?"})
    engine.ingest_host(history)
    status = engine.get_status()
    assert status["startup_error"] is None
    backup = swap.backup_path(path)
    assert sha(backup) == original  # the original, byte for byte
    store = open_readonly(path)
    conv = store.conversation_by_key("telegram:chat-42")
    assert (
        conv is not None and conv.last_seq == len(chat) + 1
    )  # the migrated rows + only the new request
    assert (
        store.messages_after(conv.id, len(chat))[0].content == "zebra-marker: and the queue depth?"
    )
    assert Dag(store).lineage_problems() == {}
    assert not any(
        p.exists() for p in (tmp_path / "lcm.db.migrating", tmp_path / "lcm.db.lcm-x-snapshot")
    )


def test_migrate_on_start_off_leaves_the_file_and_names_the_command(tmp_path):
    path = lcmx_copy(tmp_path)
    original = sha(path)
    engine = new_engine(tmp_path, LCM_MIGRATE_ON_START="0")
    engine.compress([{"role": "user", "content": "hello"}], current_tokens=10)
    command = f"lcm import lcm-x --source-db {path.resolve()} --apply"
    assert command in engine.get_status()["startup_error"]
    doctor = json.loads(engine.handle_tool_call("lcm_doctor", {}))
    assert command in json.dumps(doctor)
    assert sha(path) == original and not swap.backup_path(path).exists()
    with pytest.raises(ForeignDatabase):
        li.prepare(path, migrate_on_start=False)


@pytest.mark.parametrize("step", swap.STEPS)
def test_a_crash_at_any_step_leaves_the_old_file_or_the_new_one_complete(
    tmp_path, monkeypatch, step
):
    path = lcmx_copy(tmp_path)
    original, want = sha(path), len(source_rows(path)["messages"])

    def crash(name: str) -> None:
        if name == step:
            raise KeyboardInterrupt(f"killed at {name}")

    monkeypatch.setattr(swap, "_hook", crash)
    with pytest.raises(KeyboardInterrupt):
        swap.upgrade_in_place(path)
    assert li.is_lcmx(path) and sha(path) == original  # the old file, untouched
    monkeypatch.setattr(swap, "_hook", lambda name: None)
    out = swap.upgrade_in_place(path)  # the next start finishes the job
    assert out["verify"]["ok"] and not li.is_lcmx(path)
    store = open_readonly(path)
    assert sum(store.message_count(c) for c in (1, 2)) == want
    assert sha(swap.backup_path(path)) == original


def test_a_crash_inside_the_swap_after_the_wal_left(tmp_path, monkeypatch):
    """Between the old WAL leaving and the replace: the rerun reads the backup (the same inode)."""
    path = lcmx_copy(tmp_path)
    original = sha(path)
    real = swap.os.replace

    def dies(a, b):
        raise KeyboardInterrupt("power cut")

    monkeypatch.setattr(swap.os, "replace", dies)
    with pytest.raises(KeyboardInterrupt):
        swap.upgrade_in_place(path)
    monkeypatch.setattr(swap.os, "replace", real)
    assert li.is_lcmx(path)
    out = swap.upgrade_in_place(path)
    assert out["verify"]["ok"] and out["messages"]["imported"] == len(
        fixture_rows(tmp_path)["messages"]
    )
    assert sha(swap.backup_path(path)) == original


def test_engines_starting_together_upgrade_once(tmp_path):
    import threading

    path = lcmx_copy(tmp_path)
    results, errors = [], []

    def start() -> None:
        try:
            results.append(li.prepare(path, migrate_on_start=True))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=start) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert sum(r is not None for r in results) == 1
    store = open_readonly(path)
    assert sum(store.message_count(c) for c in (1, 2)) == len(fixture_rows(tmp_path)["messages"])
    assert store.message_count(3) == 0

"""The store's guarantees: schema identity, refusal of foreign and newer files,
WAL, and two processes writing one file.

On SQLite and PostgreSQL (``both_backends``: a file, or a fresh schema of the test server), but
for the file's own machinery (WAL mode, its checkpoint thread, PRAGMA integrity_check)."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from hermes_lcm import store as store_module
from hermes_lcm.storage.sqlite import SqliteStore as Store
from hermes_lcm.store import SCHEMA_VERSION, ForeignDatabase, NewerSchema, is_url, open_store

from .backends import every_value, raw_sql, table_names

pytestmark = pytest.mark.both_backends


@pytest.fixture
def db(tmp_path, backend_env):
    """The test's database: lcm.db in its directory, or a fresh schema's URL."""
    return backend_env.get("LCM_DATABASE_URL") or str(tmp_path / "lcm.db")


def opened(db):
    """The store class for ``db`` (what open_store picks), opened directly."""
    if is_url(db):
        from hermes_lcm.storage.pg.store import PgStore

        return PgStore(db)
    return Store(db)


def everything(db):
    """The database's whole content, to compare before and after."""
    return every_value(db) if is_url(db) else Path(db).read_bytes()


def test_new_database_is_wal_and_versioned(db):
    store = open_store(db if is_url(db) else Path(db))
    if not is_url(db):
        assert store.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert store.schema_version() == SCHEMA_VERSION
    assert (
        open_store(db if is_url(db) else Path(db)) is store
    )  # one connection (pool) per database and process
    store_module.close_all()


def test_reopening_an_existing_database_keeps_its_rows(db):
    store = open_store(db)
    conv = store.ensure_conversation("k")
    store_module.close_all()
    again = open_store(db)
    assert again.conversation_by_key("k").id == conv
    store_module.close_all()


def test_foreign_database_is_refused_and_not_written(db):
    raw_sql(db, "CREATE TABLE messages(id INTEGER PRIMARY KEY, body TEXT)")
    before = everything(db)
    with pytest.raises(ForeignDatabase):
        opened(db)
    assert everything(db) == before
    assert table_names(db) == {"messages"}


def test_newer_schema_is_refused(db):
    opened(db).close()
    raw_sql(db, "UPDATE meta SET value=? WHERE key='schema_version'", (str(SCHEMA_VERSION + 1),))
    with pytest.raises(NewerSchema):
        opened(db)


def test_engine_on_a_foreign_database_degrades_and_says_why(tmp_path, db, backend_env):
    from .conftest import new_engine

    raw_sql(db, "CREATE TABLE summary_nodes(id INTEGER PRIMARY KEY)")
    engine = new_engine(tmp_path, **backend_env)
    out = engine.compress([{"role": "user", "content": "hello"}], current_tokens=10)
    assert out == [{"role": "user", "content": "hello"}]
    status = engine.get_status()
    assert "not written by hermes-lcm" in status["startup_error"]
    assert "import" in status["startup_error"]


_WRITER = textwrap.dedent("""
    import copy, sys
    from hermes_lcm.engine import LcmEngine
    home, session, turns = sys.argv[1], sys.argv[2], int(sys.argv[3])
    where = {"LCM_DATABASE_URL": sys.argv[4]} if len(sys.argv) > 4 else {}
    engine = copy.deepcopy(LcmEngine(env={"HERMES_HOME": home, "LCM_SUMMARY_PROVIDER": "extractive", **where}))
    engine.update_model("m", 64000)
    engine.threshold_tokens = 3000
    engine.on_session_start(session, hermes_home=home)
    history = []
    for t in range(turns):
        history += [{"role": "user", "content": f"{session} turn {t} " + "word " * 80},
                    {"role": "assistant", "content": f"{session} reply {t} " + "text " * 80}]
        engine.ingest_host(list(history))
        if engine.should_compress(len(history) * 100):
            history = engine.compress(list(history), current_tokens=len(history) * 100)
    errors = engine.get_status()["engine_errors"]
    print("ERRORS", errors)
    sys.exit(1 if errors else 0)
""")


def test_two_processes_write_one_database_without_lock_errors(tmp_path, db):
    """Gateway and CLI on one file (one URL): both sessions complete, nothing lost, nothing doubled."""
    script = tmp_path / "writer.py"
    script.write_text(_WRITER)
    url = [db] if is_url(db) else []
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), str(tmp_path), name, "60", *url],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for name in ("gateway", "cli")
    ]
    outputs = [p.communicate(timeout=300)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    if not is_url(db):
        assert raw_sql(db, "PRAGMA integrity_check")[0][0] == "ok"
    for name in ("gateway", "cli"):
        rows = [
            r[0]
            for r in raw_sql(
                db,
                "SELECT m.content FROM messages m JOIN session_keys k ON k.id=m.session_key JOIN sessions s ON s.id=k.name WHERE s.id=? ORDER BY m.seq",  # noqa: E501 (schema 4 raw SQL)
                (name,),
            )
        ]
        assert len(rows) == 120 and len(set(rows)) == 120
        assert (
            raw_sql(
                db,
                "SELECT count(*) FROM summaries s JOIN sessions x ON x.conversation_id="
                "s.conversation_id WHERE x.id=?",
                (name,),
            )[0][0]
            > 0
        )


def test_many_processes_opening_a_new_file_at_once_all_succeed(tmp_path, backend_env):
    """The first open switches the file to WAL (creates the schema's tables); the others must wait
    for it, not fail."""
    db = backend_env.get("LCM_DATABASE_URL") or str(tmp_path / "new.db")
    code = (
        "import sys; from hermes_lcm.store import open_store; "
        "s = open_store(sys.argv[1]); s.ensure_conversation(sys.argv[2]); print('ok')"
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, db, f"k{i}"],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            cwd=tmp_path,
        )
        for i in range(6)
    ]
    outputs = [p.communicate(timeout=120)[0] for p in procs]
    assert all(o.strip() == "ok" for o in outputs), outputs
    assert raw_sql(db, "SELECT count(*) FROM conversations")[0][0] == 6


def test_the_wal_is_checkpointed_by_a_thread_of_its_own_and_stops_with_the_store(tmp_path):
    """No writer's COMMIT pays for copying the WAL back: a background
    connection checkpoints every CHECKPOINT_EVERY_COMMITS commits, SQLite's own automatic
    checkpoint stays only as a backstop."""
    store = open_store(tmp_path / "lcm.db")
    assert (
        store.conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0]
        == store_module.WAL_AUTOCHECKPOINT_PAGES
    )
    for i in range(store_module.CHECKPOINT_EVERY_COMMITS * 2):
        store.record_event("info", "test", f"event {i}")
    checkpointer = store.checkpointer
    assert checkpointer is not None and checkpointer._thread is not None
    for _ in range(500):  # wait for the thread to catch up (bounded; not a timing assertion)
        if checkpointer.checkpoints:
            break
        checkpointer._thread.join(0.02)
    assert checkpointer.checkpoints >= 1
    reader = sqlite3.connect(tmp_path / "lcm.db")
    assert (
        reader.execute("SELECT count(*) FROM events").fetchone()[0]
        == store_module.CHECKPOINT_EVERY_COMMITS * 2
    )
    reader.close()
    thread = checkpointer._thread
    store_module.close_all()
    assert not thread.is_alive()

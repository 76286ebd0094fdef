"""The host's exit leaves the database file complete: a copy of lcm.db alone (no -wal beside it)
holds every stored message, as an operator's backup-by-copy or a file sync expects.

Hermes' CLI ends a session by firing ``on_session_finalize`` (reason ``shutdown``), handing the
engine the final messages (``on_session_end``), then leaving by ``os._exit``: no atexit handler
runs and no connection is closed, so only a checkpoint made on the way merges the WAL."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

SCRIPT = textwrap.dedent("""
    import copy, os, sys
    from hermes_lcm.host import hooks
    from hermes_lcm.engine import LcmEngine
    home, finalize = sys.argv[1], sys.argv[2] == "finalize"
    engine = copy.deepcopy(LcmEngine(env={"HERMES_HOME": home, "LCM_SUMMARY_PROVIDER": "extractive"}))
    engine.update_model("m", 64000)
    engine.on_session_start("s1", hermes_home=home, platform="cli")
    turns = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i} " + "words " * 30}
             for i in range(400)]
    engine.ingest_host(turns)
    if finalize:  # the CLI's cleanup (cli.py): the finalize hook, then the final messages
        hooks.on_session_finalize(session_id="s1", platform="cli", reason="shutdown")
    engine.on_session_end("s1", [*turns, {"role": "user", "content": "the last one"}])
    sys.stdout.flush()
    os._exit(0)  # as hermes_cli/main.py leaves: past atexit and every close
""")


def run(home: Path, mode: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(home), mode], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-2000:]


def copied_rows(home: Path, tmp: Path) -> int:
    shutil.copyfile(home / "lcm.db", tmp / "copy.db")  # the file alone, as `cp lcm.db backup/` does
    con = sqlite3.connect(tmp / "copy.db")
    try:
        return int(con.execute("SELECT count(*) FROM messages").fetchone()[0])
    except sqlite3.OperationalError:  # not even the schema reached the file: it is all in the WAL
        return 0
    finally:
        con.close()


def test_the_hosts_exit_merges_the_wal_into_the_file(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    run(home, "finalize")
    wal = home / "lcm.db-wal"
    assert not wal.exists() or wal.stat().st_size == 0, (
        "the WAL still holds pages after the host's exit"
    )
    assert copied_rows(home, tmp_path) == 401


def test_without_the_finalize_hook_the_rows_wait_in_the_wal(tmp_path):
    """The control: the same run without the host's finalize hook leaves rows only in the WAL (a
    killed process too). Nothing is lost, SQLite replays the WAL at the next open, but a copy of
    the file alone is short, which is what the hook is for."""
    home = tmp_path / "home"
    home.mkdir()
    run(home, "plain")
    assert copied_rows(home, tmp_path) < 401
    con = sqlite3.connect(home / "lcm.db")  # opened in place, with its WAL: everything is there
    try:
        assert con.execute("SELECT count(*) FROM messages").fetchone()[0] == 401
    finally:
        con.close()


def test_a_session_bound_after_the_finalize_is_not_ending(tmp_path):
    """``/new``: the host finalizes the old session and the engine goes on with a new one, whose
    turns must not each pay for a full checkpoint."""
    from hermes_lcm import store
    from hermes_lcm.host import hooks

    from .conftest import new_engine

    engine = new_engine(tmp_path, 10**9, "old-1")
    hooks.post_llm_call(
        session_id="old-1", conversation_history=[{"role": "user", "content": "one"}]
    )
    hooks.on_session_finalize(session_id="old-1", platform="cli", reason="new")
    assert engine.core is not None and engine.core.finalizing
    engine.on_session_reset()
    hooks.post_llm_call(
        session_id="new-2", conversation_history=[{"role": "user", "content": "two"}]
    )
    assert engine.session_id == "new-2" and not engine.core.finalizing
    store.close_all()

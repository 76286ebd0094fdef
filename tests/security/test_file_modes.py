"""Every file the engine makes is 0600 and every directory 0700, whatever the umask.

The attack is the ordinary umask: under 022 (and 000) a new lcm.db, its -wal/-shm, payload files,
backups and exports would be readable by every local user. Under each umask the test creates a
store through a real engine, writes, compacts, stores a payload, takes a backup, an export and a
rotate, imports a JSONL session into a second database, and then stats everything under the
directories the engine made.
"""

from __future__ import annotations

import io
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from hermes_lcm import store as store_module
from hermes_lcm.cli.main import main as lcm_main
from hermes_lcm.importers.claw import run_import
from hermes_lcm.maintenance import backups, rotate

from ..conftest import new_engine
from ..test_import_fixtures import openclaw_session


@pytest.fixture(params=[0o000, 0o022], ids=["umask000", "umask022"])
def umask(request: pytest.FixtureRequest) -> Iterator[int]:
    old = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(old)
        store_module.close_all()


def history(turns: int) -> list[dict[str, str]]:
    image = (
        "data:image/png;base64," + "iVBORw0KGgo" + "QUFB" * 1200
    )  # long enough for the payload guard
    messages = []
    for turn in range(turns):
        user = f"turn {turn} about module {turn}: " + "words " * 80
        messages.append(
            {"role": "user", "content": user + (f" screenshot {image}" if turn == 1 else "")}
        )
        messages.append({"role": "assistant", "content": f"answer {turn}: " + "result " * 80})
    return messages


def modes_under(root: Path) -> dict[str, str]:
    """Every path under ``root`` (root included) whose mode is not private, with its mode."""
    wrong = {}
    for path in [root, *root.rglob("*")]:
        info = path.lstat()
        mode = stat.S_IMODE(info.st_mode)
        want = 0o700 if stat.S_ISDIR(info.st_mode) else 0o600
        if mode != want:
            wrong[str(path.relative_to(root.parent))] = oct(mode)
    return wrong


def test_every_file_and_directory_is_private(tmp_path: Path, umask: int) -> None:
    home = tmp_path / "home"  # made by the engine (the database's directory)
    engine = new_engine(home, threshold=3000, LCM_FRESH_TAIL_COUNT="4", LCM_LEAF_CHUNK_TOKENS="800")
    messages = history(20)
    engine.ingest_host(messages)
    engine.compress(messages, current_tokens=20000, force=True)
    core = engine.ensure_core()
    assert core is not None
    status = engine.get_status()
    assert status["frontier_seq"] > 0, "compaction made no progress"
    payloads = list((home / "lcm-payloads").glob("*.payload"))
    assert payloads, "the payload guard wrote no file"
    assert (home / "lcm.db-wal").exists(), "the WAL is checked too"

    store = core.store
    backup_folder = home / "lcm-backups"
    backups.backup(store, backup_folder, "test")
    conversation = status["conversation_id"]
    rotated = rotate.rotate_apply(store, conversation, "normal", backup_folder, tail_count=2)
    assert rotated["status"] == "applied"
    export = home / "export.jsonl"
    assert (
        lcm_main(
            [
                "--db",
                str(home / "lcm.db"),
                "export",
                "--conversation",
                str(conversation),
                "--as",
                "jsonl",
                "--output",
                str(export),
            ],
            out=io.StringIO(),
        )
        == 0
    )
    assert export.stat().st_size > 0

    sources = tmp_path / "sources"
    sources.mkdir()
    imported = tmp_path / "imported" / "db"  # a directory the importer creates
    report = run_import(
        target_db=imported / "lcm.db", jsonl=[openclaw_session(sources)], import_id="m", apply=True
    )
    assert report["imported"] > 0
    report = run_import(
        target_db=imported / "lcm.db",
        jsonl=[openclaw_session(sources, "sess-bbb")],
        import_id="m2",
        apply=True,
    )
    assert report["backup_path"], "the second import takes a backup first"
    store_module.close_all()

    wrong = {**modes_under(home), **modes_under(tmp_path / "imported")}
    assert not wrong, f"under umask {umask:03o} these are not private: {wrong}"


def test_existing_world_readable_database_is_tightened(tmp_path: Path, umask: int) -> None:
    """A database an older version left 0644 (and its WAL) becomes 0600 when opened."""
    home = tmp_path / "home"
    engine = new_engine(home)
    engine.ingest_host(history(2))
    store_module.close_all()
    for name in ("lcm.db", "lcm.db-wal", "lcm.db-shm"):
        if (home / name).exists():
            os.chmod(home / name, 0o644)
    engine = new_engine(home)
    engine.ingest_host(history(3))
    assert stat.S_IMODE((home / "lcm.db").stat().st_mode) == 0o600
    for name in ("lcm.db-wal", "lcm.db-shm"):
        if (home / name).exists():
            assert stat.S_IMODE((home / name).stat().st_mode) == 0o600, name

"""Verified backups: the first step of every command that writes, and ``lcm backup`` itself.

The rule of every maintenance command: read-only first, apply second, backup before any mutation.
This module is that backup: a timestamped snapshot (SQLite's online backup API, then verified,
fsynced and renamed into place) or, for a PostgreSQL database, a verified ``pg_dump``. An apply
that cannot back up refuses (:class:`MaintenanceError`) and changes nothing.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from ..base import private
from ..base.progress import Tick
from ..base.startup import local_home
from ..store import Store, database_tag, is_url, open_readonly, verify_backup

ROTATE_SLOT = "rotate-latest"


class MaintenanceError(RuntimeError):
    """An operation refused for a stated reason (shown to the operator as is)."""


@dataclass(frozen=True)
class Backup:
    path: str
    bytes: int
    seconds: float
    source: str


def backup_dir(db_path: str | os.PathLike[str], configured: str = "") -> Path:
    """Where backups go: ``LCM_BACKUP_DIR`` if set, else ``<db dir>/lcm-backups``."""
    if configured:
        return Path(configured).expanduser()
    if is_url(
        db_path
    ):  # a server's database: this machine's Hermes home (pg_dump is the backup there)
        return local_home() / "lcm-backups"
    return Path(db_path).expanduser().resolve().parent / "lcm-backups"


def backup(
    store: Store, directory: str | os.PathLike[str], label: str = "", progress: Tick | None = None
) -> Backup:
    """A new timestamped, verified snapshot of the whole database; ``progress(pages_done, pages_total)``
    while it copies (an exception from it, such as Ctrl-C, leaves no file behind)."""
    stamp = datetime.now(UTC).strftime(
        "%Y%m%dT%H%M%S.%fZ"
    )  # seconds, then their fraction: two backups a second
    suffix = f"-{label}" if label else ""
    if is_url(store.path):
        return snapshot(store, Path(directory) / f"{_stem(store)}-{stamp}{suffix}.dump")
    target = Path(directory) / f"{_stem(store)}-{stamp}{suffix}.sqlite3"
    return snapshot(store, target, progress)


def _stem(store: Store) -> str:
    """Backup names: the file's stem, or ``lcm-pg-<tag>`` for a server's database (one tag per URL)."""
    return f"lcm-pg-{database_tag(store.path)}" if is_url(store.path) else Path(store.path).stem


def backup_before_import(target: Path, configured: str = "") -> str:
    """A verified ``pre-import`` backup of the hermes-lcm database ``target``, read through a
    read-only view, before an importer writes to it; the backup's path."""
    view = open_readonly(target)
    try:
        return backup(view, backup_dir(target, configured), "pre-import").path
    finally:
        view.close()


def rotate_slot(store: Store, directory: str | os.PathLike[str]) -> Path:
    return (
        Path(directory)
        / f"{_stem(store)}-{ROTATE_SLOT}.{'dump' if is_url(store.path) else 'sqlite3'}"
    )


def snapshot(store: Store, target: Path, progress: Tick | None = None) -> Backup:
    """Write ``target`` atomically: copy to a temp file, verify, fsync, rename over.

    The copy uses SQLite's online backup API in one step (a consistent snapshot
    while writers continue); the file is switched to a rollback journal so it is
    one self-contained file that can be copied back as ``lcm.db``.
    """
    if is_url(store.path):
        return _dumped(store, target)
    started = time.monotonic()
    private.make_dir(target.parent)
    # An exclusive 0600 file with an unpredictable name: the copy is as private as the database,
    # and no planted file or symlink can take its place.
    fd, temp = private.temp_file(target.parent, f".{target.name}.")
    os.close(fd)
    try:
        store.backup_to(temp, progress) if progress is not None else store.backup_to(temp)
        _verify(temp)
        with open(temp, "rb") as handle:
            os.fsync(handle.fileno())
        os.replace(temp, target)
        _fsync_dir(target.parent)
    finally:
        temp.unlink(missing_ok=True)
    return Backup(
        str(target), target.stat().st_size, round(time.monotonic() - started, 3), store.path
    )


def _dumped(store: Store, target: Path) -> Backup:
    """A server's database before a writing command: a verified ``pg_dump`` (pg_backup.py); without
    pg_dump here the command refuses, naming the dump to take first (every apply backs up first)."""
    from . import pg_backup

    done = pg_backup.dump_to(store, target)
    if not done.path:
        raise MaintenanceError(
            f"pg_dump and pg_restore are not on PATH: nothing was changed. Back up first with "
            f"`{done.command}`, or install the PostgreSQL client tools"
        )
    return Backup(done.path, done.bytes, done.seconds, store.path)


def _verify(path: Path) -> None:
    problem = verify_backup(path)
    if problem is not None:
        raise MaintenanceError(f"backup verification failed for {path}: {problem}")


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)

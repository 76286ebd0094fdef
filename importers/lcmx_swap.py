"""The in-place upgrade of an LCM-X database: snapshot, build, verify, backup, swap.

Its own module because its job is crash safety, not mapping: every step leaves either the
untouched LCM-X file or the complete new one at the path (``upgrade_in_place`` gives the
argument), and tests raise from each step (``_hook``) to prove it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..base.progress import Tick, quiet_tick
from ..storage import lcmx as x
from .lcmx_build import build
from .lcmx_report import ImportFailure

STEPS = ("snapshot", "build", "verify", "backup", "swap")
_hook: Callable[[str], None] = lambda step: None  # noqa: E731 - tests raise from a step to prove crash safety


def _step(name: str) -> None:
    _hook(name)


def backup_path(path: Path) -> Path:
    return path.with_name(path.name + ".lcm-x-backup")


def upgrade_in_place(
    path: str | Path, redact_patterns: str | None = None, progress: Tick = quiet_tick
) -> dict[str, Any]:
    """Replace the LCM-X database at ``path`` by a hermes-lcm one built from it.

    Crash safety, step by step: the new database is built at ``<db>.migrating`` from a snapshot
    (``<db>.lcm-x-snapshot``) and verified there, so until the swap ``<db>`` is the untouched
    LCM-X file. The original is then kept by a hard link (its bytes, never written; its WAL linked
    beside it), the old WAL and shm leave (they must not meet the new file) and ``os.replace``
    swaps the new file in; the directory is fsynced. A crash after the link re-runs from the
    backup (the same inode, complete with its WAL), so it yields the same result.
    """
    path = Path(path).expanduser().resolve()
    version = x.check_version(path)
    backup, building, snap = (
        backup_path(path),
        sibling(path, ".migrating"),
        sibling(path, ".lcm-x-snapshot"),
    )
    if backup.exists() and not _same(backup, path):
        backup = sibling(path, f".lcm-x-backup.{int(time.time())}")
    source = backup if backup.exists() else path
    for stale in (building, snap):
        _remove_db(stale)
    try:  # until the swap <db> is the LCM-X file: an interrupt (Ctrl-C) leaves nothing beside it
        _step("snapshot")
        x.snapshot(source, snap)
        _step("build")
        out = build(
            snap,
            building,
            label=path,
            private=True,
            redact_patterns=redact_patterns,
            progress=progress,
        )
        _step("verify")
        problems = _reconciled(out)
        if problems:  # the except below removes the new file and the snapshot
            raise ImportFailure(
                f"the upgrade of {path} did not verify ({'; '.join(problems)}); "
                "the LCM-X file is untouched"
            )
        x.seal(building)
        _fsync(building)
        _step("backup")
        if not backup.exists():
            _keep(path, backup)
        _step("swap")
    except BaseException:
        _remove_db(building)
        _remove_db(snap)
        raise
    for side in ("-wal", "-shm", "-journal"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(str(path) + side)
    os.replace(building, path)
    _fsync(path.parent)
    _remove_db(snap)
    out.update(
        source=str(path), target=str(path), backup=str(backup), lcmx_version=version, upgraded=True
    )
    return out


def _reconciled(out: dict[str, Any]) -> list[str]:
    problems = list(out["verify"]["problems"])
    if out["verify"]["lineage_problems"]:
        problems.append(f"lineage: {sorted(out['verify']['lineage_problems'])}")
    if not out["balanced"]:
        problems.append("counts do not reconcile")
    if out["messages"]["imported"] != out["verify"]["source_counts"]["messages"]:
        problems.append(
            f"{out['messages']['imported']} of {out['verify']['source_counts']['messages']} messages"
        )
    return problems


def sibling(path: Path, suffix: str) -> Path:
    """A file beside ``path``: the same directory, so a rename onto ``path`` never crosses a
    filesystem."""
    return path.with_name(path.name + suffix)


def _same(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _keep(path: Path, backup: Path) -> None:
    """``backup`` becomes the original file (a hard link: the same bytes, never opened for writing);
    a filesystem without links gets a byte copy."""
    for side in ("", "-wal"):
        src, dst = Path(str(path) + side), Path(str(backup) + side)
        if not src.exists():
            continue
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)
        _fsync(dst)
    _fsync(path.parent)


def _remove_db(path: Path) -> None:
    for side in ("", "-wal", "-shm", "-journal"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(str(path) + side)


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    except OSError:
        pass  # some filesystems refuse a directory fsync; the replace stays atomic
    finally:
        os.close(fd)

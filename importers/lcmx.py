"""LCM-X databases into hermes-lcm: the import, and the in-place upgrade at start.

LCM-X (also published as a Hermes plugin named ``hermes-lcm``) keeps its store at our default
path, ``$HERMES_HOME/lcm.db``. Without these modules our engine refused that file and ran without
a store. Here each LCM-X row becomes ours:

- a message keeps role (system included), content, tool_calls, tool_call_id, tool_name, session,
  source (the session's platform) and its host time; its fingerprint is computed as the engine's
  own ingest computes it, so the host's next turn aligns with the migrated tail;
- a conversation is LCM-X's ``conversation_id`` (a gateway chat) or, where it has none, its
  session (``session:<id>``, our own key for such a session);
- a summary node keeps depth, text and time range; its lineage (LCM-X's JSON ``source_ids`` over
  store ids or node ids) becomes edges;
- the lifecycle (frontier, the session a ``/new`` finalized) becomes our frontier, context and
  the sessions' parent links; pinned flags and LCM-X's lifecycle row are kept in ``meta``.

The work is divided by job: ``lcmx_source`` reads LCM-X's rows, ``lcmx_write`` writes one
conversation, ``lcmx_build`` plans, builds and verifies a whole database, ``lcmx_swap`` upgrades
a file in place, ``lcmx_report`` holds the records they share. This module is the way in: the
``lcm import lcm-x`` command (:func:`run_import`) and the check at engine start (:func:`prepare`).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..base.progress import Tick, quiet_tick
from ..maintenance.backups import backup_before_import
from ..storage import lcmx as x
from ..store import ForeignDatabase, StoreError, detect_source
from .lcmx_build import build, plan
from .lcmx_report import ImportFailure
from .lcmx_swap import backup_path, sibling, upgrade_in_place

try:
    import fcntl
except (
    ImportError
):  # pragma: no cover - Windows: no lock, one engine at a time is the operator's job
    fcntl = None  # type: ignore[assignment]


def is_lcmx(path: str | Path) -> bool:
    return x.lcmx_version(path) is not None


def command_for(path: str | Path) -> str:
    """The command an operator runs to upgrade ``path`` by hand."""
    return f"lcm import lcm-x --source-db {path} --apply"


def run_import(
    source_db: str | Path,
    target_db: str | Path | None = None,
    *,
    apply: bool = False,
    backup_dir: str = "",
    redact_patterns: str | None = None,
    progress: Tick = quiet_tick,
) -> dict[str, Any]:
    """Plan (dry run, the default) or apply the import of ``source_db`` into ``target_db``;
    ``progress(messages_done, messages_total)`` after each conversation (each commits whole).

    Without a target, the source is upgraded in place (:func:`upgrade_in_place`). A re-run finds
    every conversation marked as done and writes nothing.
    """
    source = Path(source_db).expanduser().resolve()
    target = Path(target_db).expanduser().resolve() if target_db else source
    try:
        db = x.LcmxDatabase(source)
    except StoreError as exc:
        raise ImportFailure(str(exc)) from exc
    db.close()
    if target == source:
        if not apply:
            out = plan(source, target, redact_patterns)
            out["note"] = (
                f"dry run: `{command_for(source)}` upgrades it in place (the original kept beside it)"
            )
            return out
        return upgrade_in_place(source, redact_patterns, progress)
    if not apply:
        return plan(source, target, redact_patterns)
    if target.exists() and detect_source(target) != "hermes-lcm":
        raise ImportFailure(
            f"target {target} is not a hermes-lcm database; refusing to write to it"
        )
    backup = backup_before_import(target, backup_dir) if target.exists() else None
    out = build(source, target, redact_patterns=redact_patterns, progress=progress)
    out["backup_path"] = backup
    return out


# -- at engine start ----------------------------------------------------------------------------------


def prepare(
    path: Path | str, migrate_on_start: bool, redact_patterns: str | None = None
) -> dict[str, Any] | None:
    """Before the engine opens ``path``: upgrade an LCM-X database found there (or, when
    ``LCM_MIGRATE_ON_START=0``, refuse it naming the command). None: nothing to do (a
    ``postgresql://`` URL is never an LCM-X file; ``lcm migrate-to-postgres`` moves one there).

    Engines starting together (a gateway and a CLI, agent copies on threads) take turns on a lock
    file; the ones that wait find the upgrade done and open the new file."""
    if isinstance(path, str) or str(path) == ":memory:" or x.lcmx_version(path) is None:
        return None
    if not migrate_on_start:
        raise ForeignDatabase(
            f"{path} is an LCM-X database and LCM_MIGRATE_ON_START=0: upgrade it with "
            f"`{command_for(path)}` (dry run without --apply; the original is kept as "
            f"{backup_path(path).name}), or set LCM_MIGRATE_ON_START=1"
        )
    with _exclusive(sibling(Path(path), ".lcm-x-lock")):
        if x.lcmx_version(path) is None:
            return None
        return upgrade_in_place(path, redact_patterns)


@contextlib.contextmanager
def _exclusive(lock: Path) -> Iterator[None]:
    """An exclusive ``flock`` on ``lock`` (held per open file, so threads exclude each other too)."""
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock

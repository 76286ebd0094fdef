"""The narrow backup-first repairs: rebuild full-text indexes and recreate their triggers, label
blank sources, remove payload files no row references.

Each ``*_scan`` only reads; each ``*_apply`` re-plans, does nothing (not even a backup) when the
scan finds nothing, else backs up, makes the one change the scan described and reports the rest.
"""

from __future__ import annotations

import os
from dataclasses import asdict
from typing import Any

from ..base.progress import Tick
from ..store import Store
from . import payload_gc
from .backups import backup
from .checks import fts_scan


def gc_payloads_scan(
    store: Store, grace_seconds: float = payload_gc.GRACE_SECONDS
) -> dict[str, Any]:
    """Which payload files no message or summary references (read-only)."""
    plan = payload_gc.scan(store, grace_seconds)
    plan["orphan_refs"] = plan.pop("removable_refs")[:100]
    return plan


def gc_payloads_apply(
    store: Store,
    directory: str | os.PathLike[str],
    grace_seconds: float = payload_gc.GRACE_SECONDS,
    progress: Tick | None = None,
) -> dict[str, Any]:
    """Backup first (``progress`` follows its pages), then remove the orphans the scan found, re-checked
    under the write lock."""
    plan = payload_gc.scan(store, grace_seconds)
    refs = plan.pop("removable_refs")
    if plan["status"] == "noop":
        return plan
    saved = backup(store, directory, "pre-gc-payloads", progress)
    done = payload_gc.remove(store, refs, grace_seconds)
    return {
        **plan,
        "status": "applied",
        "backup": asdict(saved),
        "removed": len(done["removed"]),
        "bytes_freed": done["bytes_freed"],
        "kept": done["kept"],
        "removed_refs": done["removed"][:100],
    }


def repair_scan(store: Store) -> dict[str, Any]:
    scan = fts_scan(store, deep=True)
    rebuild = [t for t, info in scan["tables"].items() if info["needs_rebuild"]]
    actions = [f"recreate trigger {name}" for name in scan["missing_triggers"]]
    actions += [f"rebuild {table} from its content table" for table in rebuild]
    return {
        "status": "ready" if actions else "noop",
        "actions": actions,
        "rebuild": rebuild,
        "missing_triggers": scan["missing_triggers"],
        "fts": scan["tables"],
    }


def repair_apply(store: Store, directory: str | os.PathLike[str]) -> dict[str, Any]:
    plan = repair_scan(store)
    if plan["status"] == "noop":
        return {**plan, "applied": []}
    saved = backup(store, directory, "pre-repair")
    applied = [f"recreated trigger {n}" for n in store.restore_triggers(plan["missing_triggers"])]
    for table in plan["rebuild"]:
        store.fts_rebuild(table)
        applied.append(f"rebuilt {table}")
    after = repair_scan(store)
    return {
        "status": "applied",
        "backup": asdict(saved),
        "applied": applied,
        "after": after["status"],
        "remaining": after["actions"],
    }


def source_scan(store: Store) -> dict[str, Any]:
    total, ids = store.blank_source_ids(20)
    return {
        "status": "ready" if total else "noop",
        "blank_source_rows": total,
        "sample_ids": ids,
        "action": "set source='unknown' on these rows" if total else None,
    }


def source_apply(store: Store, directory: str | os.PathLike[str]) -> dict[str, Any]:
    plan = source_scan(store)
    if plan["status"] == "noop":
        return plan
    saved = backup(store, directory, "pre-source")
    updated = store.normalize_blank_sources()
    return {
        "status": "applied",
        "backup": asdict(saved),
        "updated": updated,
        "remaining": store.blank_source_ids(1)[0],
    }

"""The doctor's cleanups, the commands that delete rows: empty lifecycle sessions, whole
conversations the operator's ignore patterns match, and the host's review-fork turns.

Every apply needs ``LCM_DOCTOR_CLEAN_APPLY_ENABLED=true`` and backs up first; a preview
(``*_scan``) is always allowed. Lifecycle and clean never touch a session live in this process.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from dataclasses import asdict
from typing import Any

from ..base.display import iso
from ..base.patterns import SessionPatterns
from ..store import Store
from . import fork_turns
from .backups import MaintenanceError, backup
from .rebuild import Rebuild


def lifecycle_scan(
    store: Store, min_age_hours: float, live_sessions: Iterable[str] = ()
) -> dict[str, Any]:
    """Session rows that never stored a message or a summary, older than the age limit,
    excluding sessions live in this process."""
    live = set(live_sessions)
    cutoff = time.time() - min_age_hours * 3600
    rows = [r for r in store.empty_sessions(cutoff) if r["id"] not in live]
    return {
        "status": "ready" if rows else "noop",
        "count": len(rows),
        "min_age_hours": min_age_hours,
        "sessions": [{**r, "started_at": iso(r["started_at"])} for r in rows[:50]],
        "session_ids": [r["id"] for r in rows],
    }


def lifecycle_apply(
    store: Store,
    directory: str | os.PathLike[str],
    min_age_hours: float,
    live_sessions: Iterable[str] = (),
    *,
    allowed: bool,
) -> dict[str, Any]:
    plan = lifecycle_scan(store, min_age_hours, live_sessions)
    if plan["status"] == "noop":
        return public_plan(plan)
    if not allowed:
        raise MaintenanceError(
            "clean apply is disabled: set LCM_DOCTOR_CLEAN_APPLY_ENABLED=true in a trusted "
            "operator context, then run it again"
        )
    saved = backup(store, directory, "pre-lifecycle")
    deleted = store.delete_empty_sessions(plan["session_ids"])
    return {"status": "applied", "backup": asdict(saved), "deleted": deleted}


def public_plan(plan: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in plan.items() if k != "session_ids"}


def clean_scan(store: Store, patterns: str, live_sessions: Iterable[str] = ()) -> dict[str, Any]:
    """Conversations every one of whose sessions matches LCM_IGNORE_SESSION_PATTERNS.

    Such rows were stored before the operator excluded those sessions; ignored
    sessions never write now. A conversation with any live or non-matching
    session is never a candidate.
    """
    compiled = SessionPatterns.parse(patterns)
    live = set(live_sessions)
    by_conversation: dict[int, list[tuple[str, str, str | None]]] = {}
    for session_id, conversation_id, platform in store.all_sessions():
        by_conversation.setdefault(conversation_id, []).append(
            (
                session_id,
                platform,
                compiled.match(session_id, platform) if compiled.patterns else None,
            )
        )
    candidates = []
    for conversation_id, sessions in sorted(by_conversation.items()):
        if all(matched for _, _, matched in sessions) and not any(
            s in live for s, _, _ in sessions
        ):
            candidates.append(
                {
                    "conversation_id": conversation_id,
                    "sessions": [{"id": s, "platform": p, "pattern": m} for s, p, m in sessions],
                    "messages": store.message_count(conversation_id),
                }
            )
    return {
        "status": "ready" if candidates else "noop",
        "patterns": list(compiled.patterns),
        "conversations": candidates,
    }


def clean_apply(
    store: Store,
    directory: str | os.PathLike[str],
    patterns: str,
    live_sessions: Iterable[str] = (),
    *,
    allowed: bool,
) -> dict[str, Any]:
    plan = clean_scan(store, patterns, live_sessions)
    if plan["status"] == "noop":
        return plan
    if not allowed:
        raise MaintenanceError(
            "clean apply is disabled: set LCM_DOCTOR_CLEAN_APPLY_ENABLED=true in a trusted "
            "operator context, then run it again"
        )
    saved = backup(store, directory, "pre-clean")
    deleted = store.delete_conversations([c["conversation_id"] for c in plan["conversations"]])
    return {"status": "applied", "backup": asdict(saved), "deleted": deleted}


def harness_apply(
    store: Store,
    directory: str | os.PathLike[str],
    *,
    allowed: bool,
    rebuild: Rebuild | None = None,
) -> dict[str, Any]:
    plan = fork_turns.scan(store)
    if plan["status"] == "noop":
        return fork_turns.public(plan)
    if not allowed:
        raise MaintenanceError(
            "clean apply is disabled: set LCM_DOCTOR_CLEAN_APPLY_ENABLED=true in a trusted "
            "operator context, then run it again"
        )
    return fork_turns.apply(
        store, plan, lambda: asdict(backup(store, directory, "pre-harness")), rebuild
    )

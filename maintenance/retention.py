"""What the database holds, by table, conversation and age, and how to keep it bounded
(``/lcm doctor retention``, ``lcm retention``); read-only.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..base.display import file_sizes, iso
from ..store import Store, is_url


def payload_stats(db_path: str, store: Store | None = None) -> dict[str, Any]:
    """Payload files beside the database, or (a PostgreSQL ``store``) its payload rows."""
    if store is not None and is_url(db_path):
        rows = getattr(store, "payload_list")()  # noqa: B009 - PgStore's method, not in the Store protocol
        return {
            "directory": "(the payloads table)",
            "files": len(rows),
            "bytes": sum(r[1] for r in rows),
        }
    directory = Path(db_path).parent / "lcm-payloads"
    if directory.is_symlink():  # the engine refuses to write or read through it; so does the count
        return {"directory": str(directory), "files": 0, "bytes": 0, "symlink": True}
    files = (
        [p for p in directory.glob("*.payload") if p.is_file() and not p.is_symlink()]
        if directory.is_dir()
        else []
    )
    return {
        "directory": str(directory),
        "files": len(files),
        "bytes": sum(p.stat().st_size for p in files),
    }


AGE_BUCKETS_DAYS = (7, 30, 90, 365)


def retention_report(store: Store, now: float | None = None, top: int = 20) -> dict[str, Any]:
    """What the database holds, by conversation and age, and how to bound it (read-only)."""
    now = time.time() if now is None else now
    cutoffs = [now - days * 86400 for days in AGE_BUCKETS_DAYS]
    rows = store.retention_rows(cutoffs)
    totals = {
        "conversations": len(rows),
        "messages": sum(r["messages"] for r in rows),
        "message_bytes": sum(r["message_bytes"] for r in rows),
        "summaries": sum(r["summaries"] for r in rows),
        "summary_bytes": sum(r["summary_bytes"] for r in rows),
    }
    older = {
        f"older_than_{d}d": sum(r["older_than"][i] for r in rows)
        for i, d in enumerate(AGE_BUCKETS_DAYS)
    }
    idle = [r for r in rows if r["last_at"] is not None and r["last_at"] < cutoffs[2]]
    largest = sorted(rows, key=lambda r: r["message_bytes"] + r["summary_bytes"], reverse=True)[
        :top
    ]
    return {
        "database": {"path": store.path, **file_sizes(store.path)},
        "bytes_by_table": store.database_facts().get("bytes_by_table"),
        "payloads": payload_stats(store.path, store),
        "totals": totals,
        "messages_by_age": older,
        "idle_conversations_90d": {
            "count": len(idle),
            "message_bytes": sum(r["message_bytes"] for r in idle),
        },
        "largest_conversations": [_retention_row(r) for r in largest],
        "how_to_bound": _bounding_guidance(totals, idle),
    }


def _retention_row(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "conversation_id": row["conversation_id"],
        "key": row["key"],
        "messages": row["messages"],
        "message_bytes": row["message_bytes"],
        "summaries": row["summaries"],
        "summary_bytes": row["summary_bytes"],
        "first_at": iso(row["first_at"]),
        "last_at": iso(row["last_at"]),
        **{f"older_than_{d}d": row["older_than"][i] for i, d in enumerate(AGE_BUCKETS_DAYS)},
    }


def _bounding_guidance(totals: dict[str, Any], idle: Sequence[dict[str, Any]]) -> list[str]:
    tips = [
        "Keep noisy lanes out: add them to LCM_IGNORE_SESSION_PATTERNS (cron:*, ...); rows already stored "
        "become /lcm doctor clean candidates (preview first; apply is backup-first and needs "
        "LCM_DOCTOR_CLEAN_APPLY_ENABLED=true).",
        "Archive before removing: `lcm export --conversation ID --as jsonl` keeps an exact copy of a "
        "conversation outside the database.",
        "Empty lifecycle rows: /lcm doctor clean lifecycle (preview), then apply.",
        "Start a fresh database for a new era: `lcm backup`, stop Hermes, move lcm.db aside (or set "
        "LCM_DATABASE_PATH), restart; the old file stays readable with `lcm --db OLD ...`.",
        "Space freed by deletions is reused by SQLite; to shrink the file itself, stop Hermes and run "
        "`sqlite3 lcm.db 'VACUUM'` after taking a backup.",
    ]
    if idle:
        tips.insert(
            0,
            f"{len(idle)} conversations have been idle for 90+ days; export them, then consider "
            "excluding their sessions via patterns and cleaning them.",
        )
    return tips

"""Rotate: move a conversation's frontier past every raw message before the fresh tail, so the
next prompt starts small; the rows stay stored and recoverable, and no summary is made.

The snapshot taken first goes to one fixed slot per database (``rotate-latest``), overwritten by
the next rotate: :func:`last_rotate` reads when that was.
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict
from typing import Any

from ..base.display import iso
from ..prompt.assemble import tail_start
from ..prompt.blocks import Item, group
from ..store import Store
from .backups import MaintenanceError, rotate_slot, snapshot


def rotate_scan(
    store: Store, conversation_id: int, tail_count: int, tail_max_tokens: int = 0
) -> dict[str, Any]:
    """Where a rotate would move the frontier: past every raw message before the fresh tail."""
    state = store.conversation(conversation_id)
    raw = store.messages_after(conversation_id, state.frontier_seq)
    groups = group([Item.stored(m) for m in raw])
    start = tail_start(groups, tail_count, tail_max_tokens if tail_max_tokens > 0 else 1 << 62)
    before = [item for g in groups[:start] for item in g]
    seq_of = {m.id: m.seq for m in raw}
    target = state.frontier_seq
    if start < len(groups) and groups[start][0].store_id in seq_of:
        target = max(state.frontier_seq, seq_of[groups[start][0].store_id or 0] - 1)
    return {
        "status": "ready" if target > state.frontier_seq else "noop",
        "conversation_id": conversation_id,
        "frontier_seq": state.frontier_seq,
        "last_seq": state.last_seq,
        "target_frontier_seq": target,
        "raw_messages_leaving_prompt": sum(1 for m in raw if m.seq <= target),
        "replayable_before_tail": len(before),
        "tail_messages": sum(len(g) for g in groups[start:]),
        "note": "raw rows stay stored and recoverable (lcm_load_session, lcm_expand); no summary is made",
    }


def rotate_apply(
    store: Store,
    conversation_id: int,
    mode: str,
    directory: str | os.PathLike[str],
    tail_count: int,
    tail_max_tokens: int = 0,
) -> dict[str, Any]:
    if mode != "normal":
        raise MaintenanceError(f"rotate refuses a {mode} session: it stores nothing of its own")
    plan = rotate_scan(store, conversation_id, tail_count, tail_max_tokens)
    if plan["status"] == "noop":
        return {**plan, "backup": None}
    saved = snapshot(store, rotate_slot(store, directory))
    moved = store.advance_frontier(conversation_id, plan["target_frontier_seq"])
    state = store.conversation(conversation_id)
    return {
        **plan,
        "status": "applied" if moved else "noop",
        "frontier_seq_after": state.frontier_seq,
        "backup": asdict(saved),
        "rotated_at": iso(time.time()),
    }


def last_rotate(store: Store, directory: str | os.PathLike[str]) -> dict[str, Any]:
    slot = rotate_slot(store, directory)
    return {
        "last_rotate_at": iso(slot.stat().st_mtime) if slot.exists() else None,
        "rotate_backup": str(slot) if slot.exists() else None,
    }

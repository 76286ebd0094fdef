"""The compaction record: what a prompt is made of, before and after each compaction.

``lcm view`` draws it (stacked tokens of the system prompt, summaries, fresh tail and tool
messages), so an operator can see where the room went and what a compaction bought. One event per
compaction that changed something, kept in the events table beside the errors and warnings.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ..base.scaffold import BlockSeal, is_own_block
from .assemble import message_cost

KIND = "compaction"
PARTS = ("system", "summaries", "tail", "tools")


def part_of(message: Mapping[str, Any], seal: BlockSeal | None) -> str:
    role = message.get("role")
    if role == "system":
        return "system"
    if is_own_block(message, seal):
        return "summaries"
    if role == "tool" or (role == "assistant" and message.get("tool_calls")):
        return "tools"
    return "tail"


def composition(
    messages: Sequence[Any], seal: BlockSeal | None, overhead_tokens: int = 0
) -> dict[str, int]:
    """Tokens of each part of a prompt; ``overhead_tokens`` (tool schemas, the host's system text not
    in the list) count as system."""
    out = dict.fromkeys(PARTS, 0)
    out["system"] = max(0, int(overhead_tokens))
    for message in messages:
        if isinstance(message, dict):
            out[part_of(message, seal)] += message_cost(message)
    return out


def event_detail(
    before: Sequence[Any],
    after: Sequence[Any],
    seal: BlockSeal | None,
    *,
    nodes: Sequence[int],
    limit: int,
    evicted: int = 0,
    forced: bool = False,
    overhead_tokens: int = 0,
    rebuild: bool = False,
) -> str:
    """The JSON detail of one compaction event (``rebuild``: no new summary, the prompt changed)."""
    return json.dumps(
        {
            "before": composition(before, seal, overhead_tokens),
            "after": composition(after, seal, overhead_tokens),
            "nodes": list(nodes),
            "evicted": evicted,
            "limit": limit,
            "forced": forced,
            **({"rebuild": True} if rebuild else {}),
        },
        separators=(",", ":"),
    )


def record(
    store: Any,
    conversation_id: int,
    before: Sequence[Any],
    after: Sequence[Any],
    seal: BlockSeal | None,
    report: Any,
    budget: Any,
    forced: bool,
    changed: bool = False,
) -> None:
    """Keep one event for a compaction that changed something: new summaries, or (``changed``) a
    prompt rebuilt from stored ones, which the host counts as a compression all the same; best
    effort (a failed write of the record never fails the turn: the compaction is already stored)."""
    if not (report.nodes or report.evicted or changed):
        return
    try:
        limit = budget.limit or budget.total + budget.overhead
        detail = event_detail(
            before,
            after,
            seal,
            nodes=report.nodes,
            limit=limit,
            evicted=report.evicted,
            forced=forced,
            overhead_tokens=budget.overhead,
            rebuild=not (report.nodes or report.evicted),
        )
        store.record_event("info", KIND, detail, conversation_id)
    except Exception:  # noqa: BLE001 - the record is a view aid; the turn must not pay for it
        return

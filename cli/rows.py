"""The JSON rows a stored message and a summary node are shown as: one shape for every verb that
lists them (``messages``, ``summaries``, ``expand``, ``export``), content cut to ``max_chars`` with
``truncated`` saying so."""

from __future__ import annotations

import json
from typing import Any

from ..base.display import cut, iso
from ..base.records import StoredMessage, SummaryNode


def message_row(m: StoredMessage, max_chars: int) -> dict[str, Any]:
    content, truncated = cut(m.content, max_chars)
    row: dict[str, Any] = {
        "store_id": m.id,
        "conversation_id": m.conversation_id,
        "seq": m.seq,
        "session_id": m.session_id,
        "role": m.role,
        "created_at": iso(m.created_at),
        "source": m.source,
        "tokens": m.tokens,
        "content": content,
        "truncated": truncated,
        "content_chars": len(m.content),
    }
    if m.tool_calls:
        row["tool_calls"] = json.loads(m.tool_calls)
    if m.tool_call_id:
        row["tool_call_id"] = m.tool_call_id
    if m.tool_name:
        row["tool_name"] = m.tool_name
    return row


def node_row(n: SummaryNode, max_chars: int = 400) -> dict[str, Any]:
    content, truncated = cut(n.content, max_chars)
    return {
        "node_id": n.node_id,
        "conversation_id": n.conversation_id,
        "depth": n.depth,
        "tokens": n.tokens,
        "first_seq": n.first_seq,
        "last_seq": n.last_seq,
        "earliest_at": iso(n.earliest_at),
        "latest_at": iso(n.latest_at),
        "level": n.level,
        "route": n.route,
        "content": content,
        "truncated": truncated,
    }

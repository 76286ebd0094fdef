"""Reading an LCM-X database: its rows grouped into our conversations, each row as a host message.

A conversation is LCM-X's ``conversation_id`` (a gateway chat) or, where it has none, its
session (``session:<id>``, our own key for such a session); LCM-X's lifecycle rows decide which
sessions belong together. No SQL here: the peer's schema is read through ``storage/lcmx.py``.
"""

from __future__ import annotations

import json
from typing import Any

from ..base.times import host_time as parse_host_time
from ..storage import lcmx as x
from .lcmx_report import Conversation, Report


def conversation_key(lcmx_conversation: Any, session_id: str) -> str:
    """Our key for an LCM-X conversation: its gateway key, or ``session:<id>`` for a session the
    host gave no conversation (LCM-X then writes the session's own id as its conversation id;
    our engine keys such a session ``session:<id>``, so a resumed CLI session finds its history)."""
    conv = str(lcmx_conversation or "")
    return f"session:{session_id}" if not conv or conv == session_id else conv


def read_source(db: x.LcmxDatabase, report: Report) -> list[Conversation]:
    """Every LCM-X conversation with its messages, nodes and lifecycle row, oldest first."""
    convs: dict[str, Conversation] = {}
    by_session: dict[str, str] = {}
    lifecycle: dict[str, dict[str, Any]] = {}
    for row in db.lifecycle():
        sids = [
            str(s)
            for s in (row.get("last_finalized_session_id"), row.get("current_session_id"))
            if s
        ]
        conv_id = str(row["conversation_id"])
        key = (
            conversation_key(conv_id, conv_id) if conv_id in sids else conversation_key(conv_id, "")
        )
        lifecycle.setdefault(key, row)
        for sid in sids:
            by_session.setdefault(sid, key)
    for m in db.messages():
        sid = str(m["session_id"])
        key = by_session.get(sid) or conversation_key(m.get("conversation_id"), sid)
        by_session.setdefault(sid, key)
        conv = convs.get(key)
        if conv is None:
            owner = "local" if key.startswith("session:") else f"chat:{key}"
            conv = convs[key] = Conversation(key, owner, lifecycle=lifecycle.get(key))
        if sid not in conv.platforms:
            conv.sessions.append(sid)
            conv.platforms[sid] = str(m.get("source") or "")
        conv.messages.append(m)
    for node in db.nodes():
        owner_key = by_session.get(str(node["session_id"]))
        report.summaries["source"] += 1
        report.edges["source"] += len(set(node["source_ids"]))
        if owner_key is None:
            report.summaries["invalid"] += 1
            report.edges["dropped"] += len(set(node["source_ids"]))
            report.warn(
                f"lcm-x node {node['node_id']}: session {node['session_id']} has no messages; skipped"
            )
            continue
        convs[owner_key].nodes.append(node)
    report.conversations["source"] = len(convs)
    report.messages["source"] = sum(len(c.messages) for c in convs.values())
    return list(convs.values())


def host_message(m: dict[str, Any]) -> dict[str, Any]:
    """An LCM-X row as the host message it stored (LCM-X's own ``to_openai_msg``, plus the time)."""
    msg: dict[str, Any] = {"role": m["role"], "content": m["content"]}
    if m.get("tool_calls"):
        try:
            msg["tool_calls"] = json.loads(m["tool_calls"])
        except ValueError:
            msg["tool_calls"] = m["tool_calls"]
    if m.get("tool_call_id"):
        msg["tool_call_id"] = m["tool_call_id"]
    if m.get("tool_name") and m["role"] == "tool":
        msg["name"] = m["tool_name"]  # a tool result's name is a column of ours, not an extra field
    elif m.get("tool_name"):
        msg["tool_name"] = m["tool_name"]
    return msg


def host_time(m: dict[str, Any]) -> float | None:
    """When the host sent it (LCM-X's ``observed_at``), else when LCM-X stored it."""
    return parse_host_time(m.get("observed_at")) or parse_host_time(m.get("timestamp"))

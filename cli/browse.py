"""``lcm conversations``, ``sessions``, ``messages``, ``summaries`` and ``expand``: walking what the
store holds, page by page (keyset cursors), from a conversation down to one message's exact
content. Read-only, like the agent's lcm_describe and lcm_expand tools they mirror."""

from __future__ import annotations

import argparse
import time
from typing import Any

from ..base.display import iso
from ..base.records import SummaryNode, node_label, parse_node_label
from ..dag import Dag
from ..store import Store
from . import common
from .common import ID, ID_MAX, OFFSET, RECENCY, Subparsers, page_limit
from .output import EXIT_USAGE, CliError
from .rows import message_row, node_row


def register(subparsers: Subparsers) -> None:
    c = common.verb(
        subparsers,
        "conversations",
        conversations,
        "conversations with message/summary/session counts",
    )
    c.add_argument(
        "--session-key",
        metavar="KEY",
        help="only the conversation with this key (agent:main:telegram:dm:42); * matches anything",
    )
    common.paged(c)
    s = common.verb(
        subparsers,
        "sessions",
        sessions,
        "sessions (host session ids), optionally of one conversation",
    )
    common.conversation(s, "only this conversation's sessions")
    common.paged(s)
    m = common.verb(
        subparsers,
        "messages",
        messages,
        "raw messages: 'tail' (newest) or 'page' (keyset, oldest first)",
    )
    m.add_argument(
        "mode",
        choices=("tail", "page"),
        metavar="tail|page",
        help="tail: a conversation's newest; page: oldest first, from --after",
    )
    common.conversation(m, "the conversation to read (tail needs it)")
    m.add_argument("--session", help="page one host session's messages instead of a conversation's")
    common.max_chars(m, 2000)
    common.paged(m, 20)
    sm = common.verb(
        subparsers,
        "summaries",
        summaries,
        "summary nodes: 'list' them (the default), or 'show' one with lineage",
    )
    sm.add_argument(
        "mode",
        nargs="?",
        default="list",
        choices=("list", "show"),
        metavar="list|show",
        help="list (the default): nodes, oldest first; show: one node, its lineage and sources",
    )
    sm.add_argument("node", nargs="?", help="node id for show (S12)")
    common.conversation(sm, "list only this conversation's nodes (else every conversation's)")
    sm.add_argument(
        "--depth", type=ID, metavar="N", help="list only nodes of this depth (0: over messages)"
    )
    sm.add_argument(
        "--recency",
        type=RECENCY,
        metavar="AGE",
        help="list only nodes made within this long (30m, 12h, 7d, 2w)",
    )
    common.max_chars(sm, 400)
    common.source_window(sm)
    common.paged(sm)
    e = common.verb(
        subparsers,
        "expand",
        expand,
        "one node's sources or one message's exact content, paged",
    )
    e.add_argument("--node", metavar="NODE_ID", help="a summary node id (S12): its sources")
    e.add_argument(
        "--message", type=ID, metavar="STORE_ID", help="a message's store_id: its exact content"
    )
    e.add_argument(
        "--ref",
        metavar="REF",
        help="a large tool output kept as a payload (the ref in its stub): its whole text, paged",
    )
    common.source_window(e)
    e.add_argument(
        "--content-offset",
        type=OFFSET,
        default=0,
        metavar="N",
        help="start the message's content at this character (the previous next_content_offset)",
    )
    common.max_chars(e, 20000)


def conversations(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    limit = page_limit(args.limit)
    rows = store.conversations_page(args.after or 0, limit, args.session_key)
    for r in rows:
        for key in ("created_at", "first_message_at", "last_message_at"):
            r[key] = iso(r[key])
    return {"items": rows, "next_cursor": rows[-1]["id"] if len(rows) == limit else None}


def sessions(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    limit = page_limit(args.limit)
    rows = store.sessions_page(args.conversation, args.after or 0, limit)
    for r in rows:
        r["started_at"], r["ended_at"] = iso(r["started_at"]), iso(r["ended_at"])
    return {"items": rows, "next_cursor": rows[-1]["rowid"] if len(rows) == limit else None}


def messages(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    limit = page_limit(args.limit)
    if args.mode == "tail":
        if args.conversation is None:
            raise CliError("messages tail needs --conversation", EXIT_USAGE)
        _conversation_or_fail(store, args.conversation)
        rows = store.messages_tail(args.conversation, limit)
        return {"items": [message_row(m, args.max_chars) for m in rows], "next_cursor": None}
    if (args.conversation is None) == (args.session is None):
        raise CliError("messages page needs exactly one of --conversation or --session", EXIT_USAGE)
    if args.session is not None:
        rows = store.session_messages(args.session, args.after or 0, limit)
        cursor = rows[-1].id if len(rows) == limit else None
    else:
        _conversation_or_fail(store, args.conversation)
        rows = store.messages_after(args.conversation, args.after or 0, limit)
        cursor = rows[-1].seq if len(rows) == limit else None
    return {"items": [message_row(m, args.max_chars) for m in rows], "next_cursor": cursor}


def _conversation_or_fail(store: Store, conversation_id: int) -> None:
    try:
        store.conversation(conversation_id)
    except KeyError as exc:
        raise CliError(f"no conversation {conversation_id}") from exc


def _node_or_fail(dag: Dag, label: str) -> SummaryNode:
    try:
        node_id = parse_node_label(label)
    except ValueError as exc:
        raise CliError(str(exc), EXIT_USAGE) from exc
    if node_id > ID_MAX:
        raise CliError(f"no summary node {label}")
    node = dag.node(node_id)
    if node is None:
        raise CliError(f"no summary node {label}")
    return node


def summaries(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    dag = Dag(store)
    if args.mode == "list":
        limit = page_limit(args.limit)
        since = time.time() - args.recency if args.recency is not None else None
        nodes = dag.nodes_page(args.conversation, args.depth, args.after or 0, limit, since)
        return {
            "items": [node_row(n, args.max_chars) for n in nodes],
            "next_cursor": nodes[-1].id if len(nodes) == limit else None,
        }
    if not args.node:
        raise CliError("summaries show needs a node id (S12)", EXIT_USAGE)
    return expand_node(store, dag, _node_or_fail(dag, args.node), args)


def expand_node(
    store: Store, dag: Dag, node: SummaryNode, args: argparse.Namespace
) -> dict[str, Any]:
    offset, limit = max(0, args.source_offset), page_limit(args.source_limit)
    if node.depth == 0:
        children: list[dict[str, Any]] = [
            message_row(m, args.max_chars) for m in dag.sources(node.id, offset, limit)
        ]
    else:
        children = [
            node_row(c, args.max_chars) for c in dag.children(node.id)[offset : offset + limit]
        ]
    total = dag.edge_count(node.id)
    nxt = offset + len(children)
    return {
        "node": {
            **node_row(node, 0),
            "in_context": dag.in_context(node.id),
            "descendant_messages": len(dag.descendant_message_ids(node.id)),
        },
        "lineage_up": [{"node_id": a.node_id, "depth": a.depth} for a in dag.ancestors(node.id)],
        "children_kind": "message" if node.depth == 0 else "summary",
        "children": children,
        "source_offset": offset,
        "source_count": total,
        "next_source_offset": nxt if nxt < total else None,
    }


def expand(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    if sum(x is not None for x in (args.node, args.message, args.ref)) != 1:
        raise CliError("give exactly one of --node, --message or --ref", EXIT_USAGE)
    if args.ref is not None:
        return expand_payload(store, args.ref.strip(), args)
    dag = Dag(store)
    if args.node is not None:
        return expand_node(store, dag, _node_or_fail(dag, args.node), args)
    message = store.message(args.message)
    if message is None:
        raise CliError(f"no message {args.message}")
    page = args.max_chars if args.max_chars > 0 else 1 << 62
    offset = max(0, args.content_offset)
    text = message.content[offset : offset + page]
    row = message_row(message, 0)
    row.update(
        content=text,
        truncated=offset + page < len(message.content),
        content_offset=offset,
        next_content_offset=offset + page if offset + page < len(message.content) else None,
        exact=message.to_host(),
        summarized_by=[node_label(p) for p in dag.parents("message", message.id)],
    )
    if offset or row["truncated"]:
        row.pop("exact")
    return row


def expand_payload(store: Store, ref: str, args: argparse.Namespace) -> dict[str, Any]:
    """A payload's text from ``--content-offset``, ``--max-chars`` of it: one the engine kept
    for a stored row (its grant); a ref no row was given reads as one that does not exist."""
    from ..maintenance.payload_rekey import reading_guard

    guard = reading_guard(store)
    try:
        guard.path_for(ref)
    except ValueError as exc:
        raise CliError(f"--ref must be 24 hex characters, got {ref!r}", EXIT_USAGE) from exc
    grant = store.payload_grant(ref, None)
    if grant is None:
        raise CliError(f"no stored row was given payload {ref}")
    offset = max(0, args.content_offset)
    page = args.max_chars if args.max_chars > 0 else 1 << 62
    try:
        text, total = guard.read(ref, offset, page)
    except (FileNotFoundError, OSError) as exc:
        raise CliError(f"payload {ref} is missing or unreadable ({exc}); run lcm doctor") from exc
    if offset > total:
        raise CliError(
            f"--content-offset {offset} is past the end ({total} characters)", EXIT_USAGE
        )
    nxt = offset + len(text)
    return {
        "ref": ref,
        "store_id": grant.message_id,
        "conversation_id": grant.conversation_id,
        "kind": grant.kind,
        "chars": total,
        "content_offset": offset,
        "content": text,
        "next_content_offset": nxt if nxt < total else None,
    }

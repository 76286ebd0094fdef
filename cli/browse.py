"""The browsing verbs of ``lcm``: conversations, sessions, messages, summaries, grep, expand.

They read a store opened read-only and answer one page at a time (keyset cursors, ``--after``),
so a large memory never loads whole; lcm grep ranks the way lcm_grep does, through the searcher.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..base.display import cut, iso, score
from ..base.records import StoredMessage, SummaryNode, node_label, parse_node_label
from ..dag import Dag
from ..search.snippets import first_words, snippet
from ..store import Store
from .export import node_row
from .output import EXIT_USAGE, CliError

if TYPE_CHECKING:
    from ..search.query import Query
    from ..search.searcher import Hit

ID_MAX = (
    1 << 63
) - 1  # SQLite's INTEGER range: an id or cursor beyond it names nothing we could store
PAGE_MAX = 500
GREP_PAGES = 8  # pages of lcm_grep's walk `lcm grep` reads to find --limit hits of each kind


def page_limit(value: int) -> int:
    if value < 1 or value > PAGE_MAX:
        raise CliError(f"--limit must be between 1 and {PAGE_MAX}", EXIT_USAGE)
    return value


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


def cmd_conversations(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    limit = page_limit(args.limit)
    rows = store.conversations_page(args.after or 0, limit)
    for r in rows:
        for key in ("created_at", "first_message_at", "last_message_at"):
            r[key] = iso(r[key])
    return {"items": rows, "next_cursor": rows[-1]["id"] if len(rows) == limit else None}


def cmd_sessions(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    limit = page_limit(args.limit)
    rows = store.sessions_page(args.conversation, args.after or 0, limit)
    for r in rows:
        r["started_at"], r["ended_at"] = iso(r["started_at"]), iso(r["ended_at"])
    return {"items": rows, "next_cursor": rows[-1]["rowid"] if len(rows) == limit else None}


def cmd_messages(store: Store, args: argparse.Namespace) -> dict[str, Any]:
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


def cmd_summaries(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    dag = Dag(store)
    if args.mode == "list":
        if args.conversation is None:
            raise CliError("summaries list needs --conversation", EXIT_USAGE)
        limit = page_limit(args.limit)
        nodes = dag.nodes_page(args.conversation, args.depth, args.after or 0, limit)
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


def cmd_grep(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    """The lcm_grep tool's search (same arms, same ranking), over every conversation or one."""
    from ..search.query import build_query  # lazy, like every verb's work

    query = build_query(args.query)
    if query.empty:
        raise CliError("query has no searchable terms", EXIT_USAGE)
    limit = page_limit(args.limit)
    kinds = {"all": ("message", "summary"), "messages": ("message",), "summaries": ("summary",)}[
        args.kind
    ]
    hits: list[dict[str, Any]] = []
    for h in _ranked_hits(store, query, args, kinds, limit):
        if h.kind == "message":
            item = {
                "kind": "message",
                "store_id": h.id,
                "conversation_id": h.conversation_id,
                "seq": h.seq,
                "role": h.role,
                "created_at": iso(h.created_at),
                "score": score(h.score),
                "snippet": snippet(
                    h.text, first_words(query.parts), 200, lead=24, fill=False, word_start=True
                ),
            }
        elif h.node is not None:
            item = {
                "kind": "summary",
                "node_id": h.node.node_id,
                "conversation_id": h.conversation_id,
                "depth": h.node.depth,
                "score": score(h.score),
                "snippet": snippet(
                    h.text, first_words(query.parts), 200, lead=24, fill=False, word_start=True
                ),
            }
        else:
            continue
        hits.append({**item, "in_context": True} if h.in_context else item)
    return {
        "query": query.match,
        **({"excluded": query.excluded_match} if query.excluded else {}),
        "count": len(hits),
        "items": hits,
        "note": "ranked as lcm_grep ranks them, best first; up to --limit of each kind" + GREP_NOTE,
    }


GREP_NOTE = (
    "; with --conversation, what its prompt shows now is marked in_context and listed last "
    "(--include-in-context ranks it in place); lcm_* tool traffic is left out (--include-lcm-traffic)"
)


def _ranked_hits(
    store: Store, query: Query, args: argparse.Namespace, kinds: Sequence[str], limit: int
) -> list[Hit]:
    """Up to ``limit`` hits of each wanted kind, walking lcm_grep's pages (at most GREP_PAGES), by lcm_grep's
    rules: with one conversation, the rows its prompt shows are listed last."""
    from ..search.searcher import Scope, Searcher, SearchRequest
    from ..search.visible import visible_now

    conversation, visible = args.conversation, None
    if conversation is not None:
        try:
            store.conversation(conversation)
        except KeyError:
            return []  # nothing to find in a conversation that does not exist
        visible = visible_now(store, Dag(store), conversation)
    scope = Scope("all") if conversation is None else Scope("current", conversation)
    request = SearchRequest(
        query,
        scope,
        limit=PAGE_MAX,
        summaries="summary" in kinds,
        visible=visible,
        rank_visible=args.include_in_context,
        own_tools=args.include_lcm_traffic,
    )
    taken: dict[str, list[Hit]] = {kind: [] for kind in kinds}
    for _ in range(GREP_PAGES):
        page = Searcher(store, Dag(store), request).page()
        for h in page.hits:
            if h.kind in taken and len(taken[h.kind]) < limit:
                taken[h.kind].append(h)
        if page.next_cursor is None or all(len(v) >= limit for v in taken.values()):
            break
        request = replace(request, cursor=page.next_cursor)
    return [h for kind in kinds for h in taken[kind]]


def cmd_expand(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    if (args.node is None) == (args.message is None):
        raise CliError("give exactly one of --node or --message", EXIT_USAGE)
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

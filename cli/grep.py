"""``lcm grep``: the lcm_grep tool's search (same arms, same ranking) from the shell, over every
conversation or one, each hit's text cut (search/snippets) to start just before the match, so a
table column cut at its right edge still shows it."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..base.display import iso, score
from ..dag import Dag
from ..store import Store
from . import common
from .common import COUNT, PAGE_MAX, Subparsers, page_limit
from .output import EXIT_USAGE, CliError

if TYPE_CHECKING:
    from ..search.query import Query
    from ..search.searcher import Hit

GREP_PAGES = 8  # pages of lcm_grep's walk `lcm grep` reads to find --limit hits of each kind


def register(subparsers: Subparsers) -> None:
    g = common.verb(
        subparsers,
        "grep",
        grep,
        "full-text search of messages and summaries (natural language works)",
    )
    g.add_argument("query", help='what to find: words or a question, "a phrase", prefix*, NOT word')
    common.conversation(g, "search only this conversation (default: every one)")
    g.add_argument("--limit", type=COUNT, default=20, metavar="N", help="hits per kind")
    g.add_argument(
        "--kind",
        choices=("all", "messages", "summaries"),
        default="all",
        help="which kind of hit to list",
    )
    g.add_argument(
        "--include-in-context", action="store_true", help="rank what the prompt shows in place"
    )
    g.add_argument(
        "--include-lcm-traffic",
        action="store_true",
        help="also search lcm_* tool calls and results",
    )
    g.add_argument(
        "--content-scope",
        choices=("inline", "externalized", "both"),
        default="inline",
        help="externalized/both: also the lines of large tool outputs kept as payloads "
        "(each hit pages on with lcm expand --ref)",
    )


def grep(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    """The lcm_grep tool's search (same arms, same ranking), over every conversation or one."""
    from ..search.query import build_query  # lazy, like every verb's work
    from ..search.snippets import first_words, snippet

    query = build_query(args.query)
    if query.empty:
        raise CliError("query has no searchable terms", EXIT_USAGE)
    limit = page_limit(args.limit)
    kinds = {"all": ("message", "summary"), "messages": ("message",), "summaries": ("summary",)}[
        args.kind
    ]
    hits: list[dict[str, Any]] = []
    outputs = _output_hits(store, args, limit) if args.content_scope != "inline" else None
    inline = (
        []
        if args.content_scope == "externalized"
        else _ranked_hits(store, query, args, kinds, limit)
    )
    for h in inline:
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
    extra: dict[str, Any] = {}
    if outputs is not None:
        hits += outputs.pop("items")
        extra = outputs
    return {
        "query": query.match,
        **({"excluded": query.excluded_match} if query.excluded else {}),
        "count": len(hits),
        "items": hits,
        **extra,
        "note": "ranked as lcm_grep ranks them, best first; up to --limit of each kind" + GREP_NOTE,
    }


def _output_hits(store: Store, args: argparse.Namespace, limit: int) -> dict[str, Any]:
    """Lines of the large tool outputs kept as payloads (lcm_grep's content_scope), newest
    outputs first, of one conversation or every one: kind ``output`` rows after the others."""
    from ..maintenance.payload_rekey import reading_guard
    from ..search.outputs import MAX_REFS, scan_outputs, words_of

    words = words_of(args.query)
    if not words:
        raise CliError("the query has no word to look for in the outputs", EXIT_USAGE)
    reach = None if args.conversation is None else (args.conversation,)
    owners = [(g.ref, g.message_id) for g in store.output_grants(reach, MAX_REFS + 1)]
    found = scan_outputs(reading_guard(store).read, owners, words, limit)
    return {
        "items": [
            {
                "kind": "output",
                "ref": h.ref,
                "store_id": h.owner,
                "content_offset": h.offset,
                "snippet": h.line,
            }
            for h in found.hits
        ],
        "outputs_scanned": found.scanned,
        **({"outputs_stopped": found.stopped} if found.stopped else {}),
        "outputs_note": "an output's line pages on with lcm expand --ref REF --content-offset N",
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
        visible = visible_now(store, conversation)
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

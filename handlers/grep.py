"""lcm_grep and lcm_recall: keyword search in a scope, and whole-store recall.

Both run :class:`search.Searcher`; they differ in scope and in the boost applied to the
ranked pool. lcm_recall fuses its arms by weighted score, not plain RRF (which was seen to push
the right semantic hit down): with embeddings on (LCM_EMBEDDINGS_ENABLED) the vector arm joins
the full-text arm and ``LCM_RECALL_VECTOR_WEIGHT`` is the dense share (search/fusion.py).
lcm_grep stays keyword-only.
"""

from __future__ import annotations

import time
from typing import Any

from ..base.display import iso, score
from ..search.query import Query, build_query
from ..search.searcher import (
    SNIPPET_TOKENS,
    Filters,
    Hit,
    Scope,
    Searcher,
    SearchPage,
    SearchRequest,
    whole_text,
)
from ..search.snippets import snippet
from .grep_outputs import scan_in_reach
from .toolkit import Args, Ctx, ToolError, dumps, fit

ROLES = ("user", "assistant", "tool", "system")
SNIPPET_CHARS = 260  # a highlighted snippet is cut to this (FTS5 counts tokens, not characters)
PLAIN_CHARS = 200  # a hit with no highlighted match shows its start, cut on a word, this long
HIT_CHARS = (
    450  # a rendered hit is at most about this long: limits are clamped so a page always fits
)
RECALL_HALF_LIFE_DAYS = 30.0
RECALL_RECENCY_GAIN = 0.15


def _query(args: Args) -> Query:
    text = args.text("query", required=True)
    query = build_query(str(text))
    if query.empty:
        raise ToolError("query has no searchable words")
    return query


def _filters(args: Args) -> Filters:
    since, until = args.time("time_from"), args.time("time_to", end=True)
    if since is not None and until is not None and since >= until:
        raise ToolError("time_from must be before time_to")
    return Filters(
        role=args.choice("role", ROLES, None), source=args.text("source"), since=since, until=until
    )


def _snippets(ctx: Ctx, hits: list[Hit], query: Query, page: SearchPage) -> dict[int, str]:
    """Each hit's highlighted snippet, as the scratch table over its search text would give it.

    Snippets the search already made come first (``page.snippets``; None: that row has none).
    When the query matches few rows (``page.index_snippets``), a row whose search text is its
    whole indexed ``content`` column (``whole_text``) gets it from the real index in one
    statement; the rest (cut texts, tool calls, found by meaning) go through the scratch table,
    which costs a transaction (a rare term's snippets used to be a fixed cost of every call)."""
    known = page.snippets
    snippets = {k: v for k, v in known.items() if v is not None}
    todo = [h for h in hits if h.scratch_id not in known]
    index = [h for h in todo if page.index_snippets and whole_text(h)]
    if index:
        snippets.update(
            ctx.core.store.fts_snippets(query.match, [h.scratch_id for h in index], SNIPPET_TOKENS)
        )
    done = {id(h) for h in index}
    rest = [h for h in todo if id(h) not in done]
    if rest:
        snippets.update(
            ctx.core.store.scratch_fts(
                [(h.scratch_id, h.text) for h in rest], [], query.match, SNIPPET_TOKENS
            )[1]
        )
    return snippets


def render_hit(hit: Hit, highlighted: str | None, current: int | None) -> dict[str, Any]:
    """A hit as the model sees it: the id to pass to lcm_expand first. ``highlighted`` is its
    FTS5 snippet (None: no query word in its text, so it shows its start)."""
    text = (
        snippet(highlighted, width=SNIPPET_CHARS)
        if highlighted
        else snippet(hit.text, width=PLAIN_CHARS, word_end=True)
    )
    if hit.kind == "summary" and hit.node is not None:
        node = hit.node
        item: dict[str, Any] = {
            "node_id": node.node_id,
            "depth": node.depth,
            "from": iso(node.earliest_at),
            "to": iso(node.latest_at),
        }
    else:
        item = {
            "store_id": hit.id,
            "role": hit.role,
            "at": iso(hit.created_at),
            "session_id": hit.session_id,
        }
        if hit.tool_name:
            item["tool"] = hit.tool_name
        if not highlighted and hit.cosine is not None and not hit.matched:
            item["semantic"] = True  # found by meaning: no query word in it
        elif not highlighted and not hit.matched:
            item["neighbour"] = (
                True  # no query word: the turn next to a strong match, listed after the matches
            )
    if hit.conversation_id != current:
        item["conversation_id"] = hit.conversation_id
    item["snippet"] = text
    if hit.chars > len(text):
        item["chars"] = hit.chars
    if score(hit.score):
        item["score"] = score(hit.score)  # relevance order only
    if hit.in_context:
        item["in_context"] = True
    if hit.covered is not None:
        item["copy_of"] = hit.covered  # its matching words are that message's, listed above it
    return item


def _answer(
    ctx: Ctx, request: SearchRequest, page: SearchPage, extra: dict[str, Any]
) -> dict[str, Any]:
    """Hits first (what the model reads first), then how the query was understood."""
    query = request.query
    snippets = _snippets(ctx, page.hits, query, page)
    items = [render_hit(h, snippets.get(h.scratch_id), ctx.conversation_id) for h in page.hits]
    meta: dict[str, Any] = {"terms": [t.text for t in query.parts], **extra}
    if query.dropped:
        meta["dropped_words"] = list(query.dropped)
    if query.excluded:
        meta["excluded_terms"] = [
            t.text for t in query.excluded
        ]  # NOT word / -word: rows holding one are left out
    if page.common_terms:
        meta["common_terms"] = page.common_terms
    if request.rank_visible:
        meta["in_context_ranked"] = True
    if request.own_tools:
        meta["lcm_traffic_searched"] = True
    if page.in_context:
        meta["in_context"] = page.in_context
        meta["in_context_note"] = IN_CONTEXT_NOTE[request.rank_visible]
    answer: dict[str, Any] = {}
    shown = fit(answer, "hits", items, ctx.cap - len(dumps(meta)))
    answer["count"] = shown
    answer["next_cursor"] = page.next_cursor if shown == len(items) else None
    answer.update(meta)
    if shown < len(items):  # cannot happen with clamped limits; the backstop keeps the answer valid
        answer["truncated_by_size_cap"] = True
        answer["hint"] = "answer hit the size cap; lower limit to page through the rest"
    elif not items:
        answer["hint"] = "no match; try other words, session_scope='all', or lcm_recall"
    else:
        answer["next"] = "lcm_expand with a store_id or node_id for the exact text"
    return answer


IN_CONTEXT_NOTE = {
    False: "hits your prompt already shows (marked in_context) are listed after the others; "
    "include_in_context=true ranks them in place",
    True: "hits your prompt already shows are marked in_context",
}


def visibility(ctx: Ctx, args: Args) -> dict[str, Any]:
    """The request fields every search tool shares: the caller's prompt (its rows marked, and
    listed last unless ``include_in_context``), and whether LCM's own tool traffic is searched
    (``include_lcm_traffic``); ``_answer`` says which of them the answer followed."""
    return {
        "visible": ctx.visible(),
        "rank_visible": args.flag("include_in_context"),
        "own_tools": args.flag("include_lcm_traffic"),
    }


def lcm_grep(ctx: Ctx, args: Args) -> dict[str, Any]:
    content_scope = args.choice("content_scope", CONTENT_SCOPES, "inline") or "inline"
    if content_scope == "externalized":  # the payload files only: no full-text search
        limit = args.integer("limit", 10, 1, max_hits(ctx, 50))
        found = scan_in_reach(ctx, args, str(args.text("query", required=True)), limit)
        return {"content_scope": content_scope, **found, "count": len(found["externalized_hits"])}
    answer = _grep(ctx, args)
    if content_scope == "both":
        limit = args.integer("limit", 10, 1, max_hits(ctx, 50))
        answer.update(
            content_scope=content_scope,
            **scan_in_reach(ctx, args, str(args.text("query", required=True)), limit),
        )
    return answer


CONTENT_SCOPES = ("inline", "externalized", "both")


def _grep(ctx: Ctx, args: Args) -> dict[str, Any]:
    query = _query(args)
    scope = ctx.scope(args)
    filters = _filters(args)
    sort = args.choice("sort", ("relevance", "recency"), "relevance") or "relevance"
    limit = args.integer("limit", 10, 1, max_hits(ctx, 50))
    mode = args.choice("mode", GREP_MODES, "full_text") or "full_text"
    request = SearchRequest(
        query,
        scope,
        filters,
        sort,
        limit,
        args.text("cursor"),
        **visibility(ctx, args),
        **grep_vectors(ctx, mode, sort, str(args.text("query"))),
    )
    page = Searcher(ctx.core.store, ctx.core.dag, request).page()
    extra: dict[str, Any] = {"scope": _scope_view(scope), "sort": sort}
    if mode != "full_text":
        extra.update({"mode": mode, "arms": {"fts": "on", "vectors": vector_arm_state(ctx, page)}})
    if filters.raw_only:
        extra["summary_results_omitted"] = True
    return _answer(ctx, request, page, extra)


GREP_MODES = ("full_text", "hybrid", "semantic")


def grep_vectors(ctx: Ctx, mode: str, sort: str, text: str) -> dict[str, Any]:
    """LCM-X's lcm_grep modes: ``hybrid`` adds the vector arm with lcm_recall's weight, ``semantic``
    lets meaning alone rank (full text still brings its candidates); both rank by relevance, and
    fall back to full text (the answer says why) when embeddings are off or the query fails."""
    semantic = ctx.core.semantic
    if mode == "full_text" or sort != "relevance" or not semantic.enabled:
        return {}
    weight = 1.0 if mode == "semantic" else ctx.core.config.recall_vector_weight
    return {"vectors": semantic, "vector_weight": weight, "text": text}


def max_hits(ctx: Ctx, ceiling: int) -> int:
    """The most hits one answer can carry under the size cap."""
    return max(1, min(ceiling, (ctx.cap - 1500) // HIT_CHARS))


def _scope_view(scope: Scope) -> dict[str, Any]:
    view: dict[str, Any] = {"session_scope": scope.kind}
    if scope.session_id:
        view["session_id"] = scope.session_id
    return view


def recall_boost(current: int | None, bias: float, now: float | None = None) -> Any:
    """Soft current-conversation bias times a recency prior (half-life ``RECALL_HALF_LIFE_DAYS``)."""
    moment = (time.time() // 3600) * 3600 if now is None else now  # hourly, so pages rank alike

    def boost(hit: Hit) -> float:
        age_days = max(0.0, moment - hit.created_at) / 86400.0
        recency = 1.0 + RECALL_RECENCY_GAIN * 0.5 ** (age_days / RECALL_HALF_LIFE_DAYS)
        return (1.0 + bias if hit.conversation_id == current else 1.0) * recency

    return boost


def lcm_recall(ctx: Ctx, args: Args) -> dict[str, Any]:
    query = _query(args)
    limit = args.integer("limit", 8, 1, max_hits(ctx, 30))
    bias = args.number("scope_bias", 0.25, 0.0, 1.0)
    # The whole store within the caller's reach (its owner's conversations unless memory is shared);
    # the boost favours the current conversation, so it is part of the walk's identity.
    semantic = ctx.core.semantic
    request = SearchRequest(
        query,
        Scope("all", conversations=ctx.reach()),
        Filters(),
        "relevance",
        limit,
        args.text("cursor"),
        boost=recall_boost(ctx.conversation_id, bias),
        boost_key=f"recall:{bias}:{ctx.conversation_id}",
        **visibility(ctx, args),
        vectors=semantic if semantic.enabled else None,
        vector_weight=ctx.core.config.recall_vector_weight,
        text=str(args.text("query")),
    )
    page = Searcher(ctx.core.store, ctx.core.dag, request).page()
    vectors = vector_arm_state(ctx, page)
    arms = {
        "fts": "on",
        "vectors": vectors,
        "summary_vectors": vectors
        if not vectors.startswith(("on", "partial"))
        else "on (when embedded)",
        "chunk_vectors": "off (messages are embedded whole)",
    }
    return _answer(
        ctx, request, page, {"scope": {"session_scope": "all", "scope_bias": bias}, "arms": arms}
    )


def vector_arm_state(ctx: Ctx, page: SearchPage) -> str:
    """The vector arm as this answer used it: on (model, rows searched), partial (rows still
    waiting), off (why) or unavailable (why: the answer is then full text alone). The row counts
    are the whole store's, so they are shown only when the caller reaches the whole store."""
    semantic = ctx.core.semantic
    if not semantic.enabled:
        return f"off ({semantic.problem})" if semantic.problem else "off (embeddings not enabled)"
    state = page.vectors or "off"
    if not state.startswith("on"):
        return state
    model, searched, waiting = semantic.coverage()
    if (
        ctx.reach() is not None
    ):  # the counts are store-wide: another owner's size is not this caller's to see
        return f"partial ({model}; newer messages not embedded yet)" if waiting else f"on ({model})"
    if waiting:
        more = "+" if waiting >= 1000 else ""
        return f"partial ({model}, {searched} messages; {waiting}{more} not embedded yet)"
    return f"on ({model}, {searched} messages)"

"""Running a search against the store: scope, the arms' candidates fused, ranking, pages.

Cost is bounded whatever the store size: each term's matches in scope are counted up to a cap,
bm25 ranks only the selective terms' rows (at most ``BM25_BUDGET`` of them), common terms add
their newest matches, and the rerank (coverage, exact text, conversational context) runs on
at most a few hundred rows. Filters (scope, role, source, time) are applied in SQL before LIMIT.

Pages: relevance first walks the ranked pool, then every remaining match newest first, so a
walk visits each matching row exactly once; recency order is that second phase from the start.
Cursors pin the store snapshot (ids at the first page) and always move forward; the ranked pool
of a walk is kept per process, so messages arriving mid-walk change nothing.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
from bisect import bisect_left, bisect_right
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..dag import Dag
from ..store import Store, StoreError
from .arms import (
    SNIPPET_TOKENS,
    TEXT_CHARS,
    Arm,
    Candidates,
    Filters,
    FullTextArm,
    Hit,
    Scope,
    VectorArm,
    VectorSource,
    View,
    fuse,
    message_hit,
    whole_text,
)
from .fusion import mix, reserve, reserved_places
from .query import Query, conversational
from .rank import coverage, idf, is_exact, own_score, summary_relevance, with_context
from .visible import Visible

__all__ = [
    "SNIPPET_TOKENS",
    "Filters",
    "Hit",
    "Scope",
    "SearchError",
    "SearchPage",
    "SearchRequest",
    "Searcher",
    "whole_text",
]

POOL = 100  # raw candidates reranked per query
SUMMARY_POOL = 30  # summary candidates reranked per query
# Candidates at most for which the scratch table the rerank needs anyway also makes the snippets
# (one transaction, not two); a larger pool leaves them to the page's few hits.
SNIPPETS_WITH_MATCH = 20
INDEX_SNIPPET_ROWS = 100  # matches at most (counted) for which snippets come from the real index

# A row holding this weighted share of the query's words: full text is fully trusted (fusion).
# Measured (bench/locomo_recall.py --hybrid --weights w:c): 0.5 lifts the paraphrase set (R@10 0.11 -> 0.36)
# but costs LoCoMo (conversation conv-30 -0.024 below full text); 0.25 keeps LoCoMo never below full text.
CONFIDENT_COVER = 0.25
POOL_CACHE = 8  # ranked pools kept per process, so later pages rank exactly like the first

_pools: OrderedDict[tuple[Any, ...], list[Hit]] = OrderedDict()
_pools_lock = threading.Lock()


class SearchError(ValueError):
    """A request the search cannot serve (bad cursor); the message says why."""


@dataclass(frozen=True)
class SearchRequest:
    query: Query
    scope: Scope
    filters: Filters = field(default_factory=Filters)
    sort: str = "relevance"
    limit: int = 10
    cursor: str | None = None
    summaries: bool = True
    boost: Callable[[Hit], float] | None = None
    boost_key: str = ""
    visible: Visible | None = None  # the caller's prompt: its rows are marked, and listed last
    rank_visible: bool = False  # rank the prompt's rows in place instead
    own_tools: bool = False  # also search LCM's own tool traffic (copies of stored rows)
    vectors: VectorSource | None = (
        None  # embeddings on: the vector arm joins (lcm_recall; grep stays keyword-only)
    )
    vector_weight: float = 0.3  # LCM_RECALL_VECTOR_WEIGHT: the dense share of a fused score
    text: str = ""  # the query as the caller wrote it: what is embedded (the terms when empty)

    @property
    def hybrid(self) -> bool:
        return self.vectors is not None and self.vectors.enabled


@dataclass
class SearchPage:
    hits: list[Hit]
    next_cursor: str | None
    pool: int
    common_terms: list[str] = field(default_factory=list)
    summaries_searched: bool = True
    in_context: int = 0  # ranked hits the caller's prompt already shows
    vectors: str | None = None  # the vector arm's state (None: not asked for)
    snippets: dict[int, str | None] = field(
        default_factory=dict
    )  # by scratch id, made while ranking
    index_snippets: bool = (
        False  # every match is a rare term's: the real index makes snippets cheaply
    )


@dataclass(frozen=True)
class _Cursor:
    phase: str  # r: ranked pool at ``offset`` | t: remaining matches below the two id bounds
    offset: int
    m_before: int  # exclusive upper bounds of the next tail page
    s_before: int
    m_snap: int  # newest ids of the first page's snapshot
    s_snap: int


CURSOR_SECRET = "search_cursor"
_keys: dict[str, bytes] = {}
_keys_lock = threading.Lock()
_PROCESS_KEY = secrets.token_bytes(32)


def _cursor_key(store: Store) -> bytes:
    """The store's own key for cursors (``store.secret``, the same in every process); a read-only
    view, or a store that cannot write its secret now, signs with this process's key instead (its
    cursors then hold within the process, like the operator CLI's paged walk)."""
    with _keys_lock:
        key = _keys.get(store.path)
    if key is not None:
        return key
    if store.readonly:
        return _PROCESS_KEY
    try:
        key = store.secret(CURSOR_SECRET)
    except StoreError:
        return _PROCESS_KEY
    with _keys_lock:
        _keys[store.path] = key
    return key


EXCLUDE_CHUNK = 200  # cut rows per index lookup (one UNION ALL statement; SQLite allows 500 arms)


def _digest(req: SearchRequest, key: bytes) -> str:
    """A keyed hash of everything that decides a walk's rows: query, scope (with its reach),
    filters, order, boost, and whether (and how much) vectors were asked for, so a hybrid page's
    cursor never continues a full-text pool. Full length, so no crafted query can share another
    scope's pool."""
    fields = repr(
        (
            req.query.match,
            req.query.excluded_match,
            req.scope,
            req.filters,
            req.sort,
            req.summaries,
            req.boost_key,
            req.visible is not None,
            req.rank_visible,
            req.own_tools,
            (req.vector_weight, req.text) if req.hybrid else None,
        )
    )
    return hmac.new(key, fields.encode("utf-8"), hashlib.sha256).hexdigest()


def _sign(digest: str, body: str, key: bytes) -> str:
    return hmac.new(key, f"{digest}|{body}".encode(), hashlib.sha256).hexdigest()


def _parse_cursor(req: SearchRequest, key: bytes) -> _Cursor | None:
    """A cursor this search handed out, unchanged: its signature covers the request and every number
    in it, so a cursor that was modified, forged, or made for another query or scope is an error."""
    if not req.cursor:
        return None
    body, _, mac = str(req.cursor).rpartition(":")
    parts = body.split(":")
    if len(parts) != 6 or parts[0] not in ("r", "t") or len(mac) != 64:
        raise SearchError(f"malformed cursor {req.cursor[:80]!r}; pass next_cursor unchanged")
    if not hmac.compare_digest(mac, _sign(_digest(req, key), body, key)):
        raise SearchError(
            "cursor belongs to another query, scope or filter, or was changed; "
            "repeat the call without it"
        )
    try:
        numbers = [int(x) for x in parts[1:6]]
    except ValueError as exc:
        raise SearchError(f"malformed cursor {req.cursor[:80]!r}") from exc
    return _Cursor(parts[0], *numbers)


def _format_cursor(req: SearchRequest, cur: _Cursor | None, key: bytes) -> str | None:
    if cur is None:
        return None
    body = f"{cur.phase}:{cur.offset}:{cur.m_before}:{cur.s_before}:{cur.m_snap}:{cur.s_snap}"
    return f"{body}:{_sign(_digest(req, key), body, key)}"


class Searcher:
    """One search over one store; holds the scope's id ranges and the snapshot bounds."""

    def __init__(self, store: Store, dag: Dag, req: SearchRequest) -> None:
        self.store, self.dag, self.req = store, dag, req
        self.key = _cursor_key(store)
        self.view = _view(store, dag, req)
        self.m_bounds, self.s_bounds = self.view.m_bounds, self.view.s_bounds
        self.with_summaries = self.view.with_summaries
        self.fulltext = FullTextArm(store, dag, req.query, self.view)
        self.vector: VectorArm | None = None
        self.arms: tuple[Arm, ...] = (self.fulltext,)
        self.snippets: dict[int, str | None] = {}
        if req.hybrid and req.vectors is not None and req.sort == "relevance":
            self.vector = VectorArm(
                store, req.vectors, req.text or " ".join(t.text for t in req.query.parts), self.view
            )
            self.arms = (self.fulltext, self.vector)

    def _candidates(self, kind: str, upper: int, pool: int) -> Candidates:
        return fuse([arm.candidates(kind, upper, pool) for arm in self.arms])

    def ranked_pool(self, m_upper: int, s_upper: int) -> list[Hit]:
        self.fulltext.prepare(m_upper, s_upper)
        found = self._candidates("messages", m_upper, POOL)
        messages, counts = found.hits, found.counts
        summaries = (
            self._candidates("summaries", s_upper, SUMMARY_POOL).hits if self.with_summaries else []
        )
        candidates = messages + summaries
        if not candidates:
            return []
        terms = self.req.query.parts
        low, high = self.view.bounded(self.m_bounds, m_upper)
        matched = self._matched(candidates)
        weights = [
            idf(high - low + 1, c if c is not None else max(1, len(hits)))
            for c, hits in zip(counts, matched, strict=True)
        ]
        floor = min((h.score for h in messages if h.score > 0), default=1.0) * 0.5
        best_cover = 0.0
        for h in candidates:
            if (
                h.kind == "summary"
            ):  # bm25 over the few summaries is unreliable: score on the messages' scale
                relevance = summary_relevance(h.scratch_id, matched, weights)
            elif h.score > 0:
                relevance = h.score
            else:  # rows found through common terms only have no bm25: half the weakest ranked row
                relevance = (
                    floor if h.matched or any(h.scratch_id in rows for rows in matched) else 0.0
                )
            cover = coverage(h.scratch_id, matched, weights)
            best_cover = max(best_cover, cover if h.kind == "message" else 0.0)
            # length matters to coverage only when there is more than one term to cover; a
            # summary is condensed by design
            chars = len(h.text) if h.kind == "message" and len(terms) > 1 else 0
            h.score = own_score(relevance, cover, is_exact(h.text, terms), chars)
        hybrid = self.vector is not None and self.vector.used
        if hybrid:
            self._fuse(candidates, min(1.0, best_cover / CONFIDENT_COVER))
        ranked = (
            self._add_context(messages, m_upper) if conversational(terms) else messages
        ) + summaries
        if self.req.boost is not None:
            for h in ranked:
                h.score *= self.req.boost(h)
        ranked.sort(key=lambda h: (-h.score, -h.created_at, h.kind, -h.id))
        if hybrid:
            assert self.vector is not None
            ranked = reserve(ranked, *reserved_places(self.vector.source.model))
        kept, covered = _one_per_source(self._without_excluded(ranked), matched)
        # a turn with no query word, there only as a strong match's neighbour, never outranks a match
        kept = [h for h in kept if not h.neighbour] + [h for h in kept if h.neighbour]
        return self._shown_last(kept) + self._shown_last(covered)

    def _matched(self, candidates: Sequence[Hit]) -> list[set[int]]:
        """Which candidates (scratch ids) each query term matches, in the text the rerank sees.

        The scratch index tokenizes every candidate's text (up to ``TEXT_CHARS`` each), which was
        the largest fixed cost of a one-term query (an identifier's 130 candidates: ~260 KB). A
        one-term query needs none of it for the rows that term's own FTS query found whole: their
        text is all the index holds for them (content and tool calls; a summary's content), under
        ``TEXT_CHARS``, so the scratch table would match them too. Only the rest (cut texts, rows
        found by meaning) are tokenized."""
        terms = self.req.query.parts
        known = [
            h for h in candidates if len(terms) == 1 and h.matched and len(h.text) < TEXT_CHARS
        ]
        ids = {id(h) for h in known}
        rest = [(h.scratch_id, h.text) for h in candidates if id(h) not in ids]
        if not rest:
            return [{h.scratch_id for h in known}] if known else [set() for _ in terms]
        if (
            len(candidates) <= SNIPPETS_WITH_MATCH
        ):  # every candidate, so the page needs no snippet statement (known rows match their term anyway)
            rest += [(h.scratch_id, h.text) for h in known]
        # Few rows in the table: their snippets in the same transaction, so a page showing one of
        # them (a cut summary, most often) needs no second table of its own.
        snippet = len(rest) <= SNIPPETS_WITH_MATCH
        matched, snippets = self.store.scratch_fts(
            rest,
            [t.match for t in terms],
            self.req.query.match if snippet else None,
            SNIPPET_TOKENS,
        )
        if snippet:
            self.snippets = {sid: snippets.get(sid) for sid, _ in rest}
        if known:
            matched[0] |= {h.scratch_id for h in known}
        return matched

    def _fuse(self, candidates: list[Hit], confidence: float) -> None:
        """Each candidate's cosine looked up, then its fused score (``fusion.mix``)."""
        assert self.vector is not None
        self.vector.cosines(candidates)
        mix(candidates, self.req.vector_weight, confidence)

    def _shown_last(self, ranked: list[Hit]) -> list[Hit]:
        """The hits the caller's prompt shows, marked, and moved behind the others unless asked
        to rank them in place: the model sees them already (above all, the request it answers)."""
        for hit in ranked:
            hit.in_context = self._shown(hit)
        if self.req.rank_visible:
            return ranked
        return [h for h in ranked if not h.in_context] + [h for h in ranked if h.in_context]

    def _shown(self, hit: Hit) -> bool:
        visible = self.req.visible
        if visible is None:
            return False
        if hit.kind == "summary":
            return visible.shows_summary(hit.id)
        return visible.shows_message(hit.conversation_id, hit.seq, hit.id)

    def _add_context(self, messages: list[Hit], upper: int) -> list[Hit]:
        """Neighbouring turns inherit part of a strong match's score (``search.with_context``);
        rows newer than the snapshot (``upper``) stay out, so later pages rank the same pool."""
        by_key = {(h.conversation_id, h.seq): h for h in messages}
        scores = with_context({k: h.score for k, h in by_key.items()})
        missing: dict[int, list[int]] = {}
        fetched: list[Hit] = []
        for conv, seq in scores:
            if (conv, seq) not in by_key and seq > 0:
                missing.setdefault(conv, []).append(seq)
        for conv, seqs in missing.items():
            rows = self.store.messages_at(
                conv,
                seqs,
                TEXT_CHARS,
                session_id=self.req.scope.session_id,
                **self.view.derived_sql,
                **self.req.filters.sql(),
            )
            for row in rows:
                hit = message_hit((*row, 0.0), matched=False)
                if hit.id <= upper:
                    by_key[(hit.conversation_id, hit.seq)] = hit
                    fetched.append(hit)
        # a fetched neighbour may hold a query word all the same (outside the candidate pool)
        matching = self._matching(self.req.query.match, fetched)
        for hit in fetched:
            hit.matched = hit.id in matching
            hit.neighbour = not hit.matched
        for key, hit in by_key.items():
            hit.score = scores.get(key, hit.score)
        return [h for h in by_key.values() if h.score > 0]

    # -- pages ----------------------------------------------------------------------------------

    def _first_cursor(self) -> _Cursor:
        m_snap, s_snap = self.m_bounds[1], self.s_bounds[1]
        phase = "r" if self.req.sort == "relevance" else "t"
        return _Cursor(phase, 0, m_snap + 1, s_snap + 1, m_snap, s_snap)

    def page(self) -> SearchPage:
        cur = _parse_cursor(self.req, self.key) or self._first_cursor()
        pool = self._pool(cur) if self.req.sort == "relevance" else []
        hits: list[Hit] = []
        nxt: _Cursor | None = None
        if cur.phase == "r":
            hits = pool[cur.offset : cur.offset + self.req.limit]
            if cur.offset + len(hits) < len(pool):
                nxt = replace(cur, offset=cur.offset + len(hits))
        if nxt is None:
            more, nxt = self._tail(cur, self.req.limit - len(hits), pool)
            for hit in more:
                hit.in_context = self._shown(hit)
            hits += more
        return SearchPage(
            hits,
            _format_cursor(self.req, nxt, self.key),
            len(pool),
            [t.text for t in self.fulltext.common],
            self.with_summaries,
            sum(h.in_context for h in pool),
            self.vector_state(pool),
            self.snippets,
            self._few_matches(),
        )

    def vector_state(self, pool: Sequence[Hit]) -> str | None:
        """What the vector arm did for this page: None (not asked), "on", "off (why)",
        "unavailable (why)"; a later page served from the cached pool reports what ranked it."""
        if self.vector is None:
            return None
        if not self.vector.tried:  # a cached pool: ranked with vectors if a hit has a cosine
            return (
                "on"
                if any(h.cosine is not None for h in pool)
                else "off (the first page ranked without vectors)"
            )
        return self.vector.state

    def _pool(self, cur: _Cursor) -> list[Hit]:
        """The ranked pool of this query and snapshot: computed once, then reused by later pages
        (bm25's corpus statistics move as messages arrive, which would reorder a recomputed pool)."""
        key = (self.store.path, _digest(self.req, self.key), cur.m_snap, cur.s_snap)
        with _pools_lock:
            pool = _pools.get(key) if self.req.cursor else None  # a first page always ranks afresh
            if pool is not None:
                _pools.move_to_end(key)
                return pool
        pool = self.ranked_pool(cur.m_snap, cur.s_snap)
        with _pools_lock:
            _pools[key] = pool
            while len(_pools) > POOL_CACHE:
                _pools.popitem(last=False)
        return pool

    def _tail(
        self, cur: _Cursor, limit: int, pool: Sequence[Hit]
    ) -> tuple[list[Hit], _Cursor | None]:
        """Matches outside the ranked pool, newest first, messages and summaries merged by time.

        Each kind is keyset-paged by id, so every call takes at least one row or ends the walk;
        with ``limit`` 0 it only looks whether anything is left.
        """
        match = self.req.query.match
        exclude_m = [h.id for h in pool if h.kind == "message"]
        exclude_s = [h.id for h in pool if h.kind == "summary"]
        want = max(limit, 1) + 1
        messages = (
            []
            if self._exhausted("messages", pool)
            else self.fulltext.message_rows(
                match, "recent", want, cur.m_before - 1, exclude_m, walk=True
            )
        )
        summaries = (
            []
            if self._exhausted("summaries", pool)
            else self.fulltext.summary_rows(match, "recent", want, cur.s_before - 1, exclude_s)
        )
        taken = _merge_newest(messages, summaries, limit)
        if len(taken) == len(messages) + len(summaries):
            return self._without_excluded(taken), None
        m_before = min((h.id for h in taken if h.kind == "message"), default=cur.m_before)
        s_before = min((h.id for h in taken if h.kind == "summary"), default=cur.s_before)
        return self._without_excluded(taken), replace(
            cur, phase="t", offset=0, m_before=m_before, s_before=s_before
        )

    def _without_excluded(self, hits: list[Hit]) -> list[Hit]:
        """The hits without those holding an excluded term (``NOT word``, ``-word``), as the real
        index has the whole row (a hit's text may be cut)."""
        if not self.req.query.excluded or not hits:
            return hits
        found = self._matching(self.req.query.excluded_match, hits)
        return [h for h in hits if h.scratch_id not in found]

    def _matching(self, match: str, hits: Sequence[Hit]) -> set[int]:
        """Which of these hits (scratch ids) hold ``match``, as the real index has the whole row. A
        whole text (under ``TEXT_CHARS``: content and tool calls, all the index holds of the row) is
        matched in one scratch table; only cut texts take a lookup in the real index, which for a
        query of common words walks their long position lists per row (a prose question's 200
        neighbours: ~100 ms at 100k)."""
        whole = [(h.scratch_id, h.text) for h in hits if len(h.text) < TEXT_CHARS]
        cut = [h.scratch_id for h in hits if len(h.text) >= TEXT_CHARS]
        found = set(self.store.scratch_fts(whole, [match])[0][0]) if whole else set()
        for i in range(0, len(cut), EXCLUDE_CHUNK):
            found.update(self.store.fts_snippets(match, cut[i : i + EXCLUDE_CHUNK], 1))
        return found

    def _few_matches(self) -> bool:
        """Every term was counted exactly and the query matches few rows (this search ranked its
        pool): a snippet from the real index (``Store.fts_snippets``, a lookup per row) is then
        cheaper than a scratch table. A phrase of common words is not: its lookup per row walks
        those words' long position lists (measured at 100k rows: 0.3 ms a row)."""
        totals = [
            self.fulltext.totals.get(kind)
            for kind in ("messages", "summaries")[: 1 + self.with_summaries]
        ]
        return all(t is not None and t <= INDEX_SNIPPET_ROWS for t in totals)

    def _exhausted(self, kind: str, pool: Sequence[Hit]) -> bool:
        """Whether the pool this search just ranked holds every match of ``kind`` in its range: the
        counts were exact and as many matched rows are in the pool, so a walk past the pool would
        find nothing (a rare term's walk is skipped, not run to find nothing). A pool from the
        cache (a later page) was not counted here: unknown, walk."""
        total = self.fulltext.totals.get(kind)
        if total is None:
            return False
        name = "message" if kind == "messages" else "summary"
        return len({h.id for h in pool if h.kind == name and h.matched}) >= total


def _one_per_source(ranked: list[Hit], matched: Sequence[set[int]]) -> tuple[list[Hit], list[Hit]]:
    """One hit per source: a summary is left out when a message it was made from is a hit that
    matches every query term the summary matches (the summary's match is then a copy of that
    message's words, and the message is the exact text). A summary that brings together terms no
    single source holds stays.

    The summaries left out come back second, to be listed after every other ranked hit (marked
    ``covered``), so a walk still visits every match once."""

    known: dict[int, frozenset[int]] = {}

    def terms(h: Hit) -> frozenset[int]:
        found = known.get(h.scratch_id)
        if found is None:
            found = known[h.scratch_id] = frozenset(
                i for i, rows in enumerate(matched) if h.scratch_id in rows
            )
        return found

    # Per conversation, the matched message hits by seq (with their rank): a summary looks up
    # the few inside its span by bisection instead of walking every hit.
    sources: dict[int, list[tuple[int, int, Hit]]] = {}
    for rank, h in enumerate(ranked):
        if h.kind == "message" and h.matched:
            sources.setdefault(h.conversation_id, []).append((h.seq, rank, h))
    for rows in sources.values():
        rows.sort(key=lambda row: (row[0], row[1]))
    seqs = {conv: [row[0] for row in rows] for conv, rows in sources.items()}

    def source(h: Hit) -> int | None:
        """The best-ranked message hit inside the summary's span matching its terms."""
        node = h.node
        if h.kind != "summary" or node is None or h.conversation_id not in sources:
            return None
        keys, wanted = seqs[h.conversation_id], terms(h)
        inside = sources[h.conversation_id][
            bisect_left(keys, node.first_seq) : bisect_right(keys, node.last_seq)
        ]
        best = min(
            (row for row in inside if wanted <= terms(row[2])), key=lambda row: row[1], default=None
        )
        return best[2].id if best is not None else None

    for h in ranked:
        h.covered = source(h)
    return [h for h in ranked if h.covered is None], [h for h in ranked if h.covered is not None]


def _merge_newest(messages: list[Hit], summaries: list[Hit], limit: int) -> list[Hit]:
    """Take from the heads of two id-ordered lists, newer first, so each kind's taken rows are a prefix."""
    out: list[Hit] = []
    i = j = 0
    while len(out) < limit and (i < len(messages) or j < len(summaries)):
        if j >= len(summaries) or (
            i < len(messages) and messages[i].created_at >= summaries[j].created_at
        ):
            out.append(messages[i])
            i += 1
        else:
            out.append(summaries[j])
            j += 1
    return out


def _view(store: Store, dag: Dag, req: SearchRequest) -> View:
    """The scope's id ranges; a conversation whose rows fill its id range is searched by range alone.
    An "all" scope with a reach (the caller's owner's conversations) is bounded to them in SQL."""
    scope = req.scope
    reach = scope.conversations if scope.kind == "all" else None
    scope_sql: dict[str, Any] = {
        "conversation_id": scope.conversation_id,
        "session_id": scope.session_id,
        "conversation_ids": reach,
        "skip_own_tools": not req.own_tools,
        "skip_memory_turns": not req.own_tools,
    }
    summary_conversation = scope.conversation_id
    if scope.kind == "current" and scope.conversation_id is not None and scope.session_id is None:
        # One statement for the ranges and whether each holds this conversation only (one round trip, not one each).
        m_bounds, s_bounds, last_seq, nodes, generation = store.conversation_ranges(
            scope.conversation_id
        )
        if last_seq == m_bounds[1] - m_bounds[0] + 1:
            scope_sql["conversation_id"] = None  # the id range holds this conversation only
        if nodes == s_bounds[1] - s_bounds[0] + 1:
            summary_conversation = None  # likewise for the summaries' id range
    else:
        m_bounds = store.message_id_bounds(
            scope.conversation_id, scope.session_id, conversation_ids=reach
        )
        s_bounds = dag.summary_id_bounds(scope.conversation_id, conversation_ids=reach)
        generation = store.rewrite_generation()
    return View(
        m_bounds,
        s_bounds,
        scope_sql,
        summary_conversation,
        scope.session_id,
        reach,
        req.filters,
        req.summaries and not req.filters.raw_only,
        # the store object too: a database made anew at the same path starts its counter at 0 again
        (f"{store.path}@{id(store):x}", generation),
    )

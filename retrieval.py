"""Running a keyword search against the store: scope, filters, candidates, ranking, pages.

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
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from .dag import Dag
from .records import SummaryNode
from .search import (
    Query,
    Term,
    conversational,
    coverage,
    idf,
    is_exact,
    or_match,
    own_score,
    plan_terms,
    summary_relevance,
    with_context,
)
from .store import Store

BM25_BUDGET = 8000          # raw rows bm25 may rank per query
SUMMARY_BM25_BUDGET = 1500  # summaries are long, so fewer of them
POOL = 100                  # raw candidates reranked per query
SUMMARY_POOL = 30           # summary candidates reranked per query
TEXT_CHARS = 2000           # text per candidate used for coverage and snippets


POOL_CACHE = 8             # ranked pools kept per process, so later pages rank exactly like the first

_pools: OrderedDict[tuple[Any, ...], list[Hit]] = OrderedDict()
_pools_lock = threading.Lock()


class SearchError(ValueError):
    """A request the search cannot serve (bad cursor); the message says why."""


@dataclass(frozen=True)
class Scope:
    kind: str  # current | session | all
    conversation_id: int | None = None
    session_id: str | None = None


@dataclass(frozen=True)
class Filters:
    role: str | None = None
    source: str | None = None
    since: float | None = None
    until: float | None = None

    @property
    def raw_only(self) -> bool:
        """Role and time describe raw messages: summaries are left out when they are set."""
        return self.role is not None or self.since is not None or self.until is not None

    def sql(self) -> dict[str, Any]:
        return {"role": self.role, "source": self.source, "since": self.since, "until": self.until}


@dataclass
class Hit:
    kind: str  # message | summary
    id: int
    score: float
    matched: bool
    text: str
    chars: int
    created_at: float
    conversation_id: int
    seq: int = 0
    session_id: str = ""
    role: str = ""
    source: str = ""
    tool_name: str | None = None
    node: SummaryNode | None = None

    @property
    def scratch_id(self) -> int:
        """Unique rowid in the scratch index: summaries are negated."""
        return self.id if self.kind == "message" else -self.id


@dataclass(frozen=True)
class SearchRequest:
    query: Query
    scope: Scope
    filters: Filters = Filters()
    sort: str = "relevance"
    limit: int = 10
    cursor: str | None = None
    summaries: bool = True
    boost: Callable[[Hit], float] | None = None
    boost_key: str = ""


@dataclass
class SearchPage:
    hits: list[Hit]
    next_cursor: str | None
    pool: int
    common_terms: list[str] = field(default_factory=list)
    summaries_searched: bool = True


@dataclass(frozen=True)
class _Cursor:
    phase: str  # r: ranked pool at ``offset`` | t: remaining matches below the two id bounds
    offset: int
    m_before: int  # exclusive upper bounds of the next tail page
    s_before: int
    m_snap: int  # newest ids of the first page's snapshot
    s_snap: int


def _fingerprint(req: SearchRequest) -> str:
    key = repr((req.query.match, req.scope, req.filters, req.sort, req.summaries, req.boost_key))
    return hashlib.blake2b(key.encode("utf-8"), digest_size=3).hexdigest()


def _parse_cursor(req: SearchRequest) -> _Cursor | None:
    if not req.cursor:
        return None
    parts = str(req.cursor).split(":")
    if len(parts) != 7 or parts[0] not in ("r", "t"):
        raise SearchError(f"malformed cursor {req.cursor!r}; pass next_cursor unchanged")
    if parts[6] != _fingerprint(req):
        raise SearchError("cursor belongs to another query, scope or filter; repeat the call without it")
    try:
        numbers = [int(x) for x in parts[1:6]]
    except ValueError as exc:
        raise SearchError(f"malformed cursor {req.cursor!r}") from exc
    return _Cursor(parts[0], *numbers)


def _format_cursor(req: SearchRequest, cur: _Cursor | None) -> str | None:
    if cur is None:
        return None
    return f"{cur.phase}:{cur.offset}:{cur.m_before}:{cur.s_before}:{cur.m_snap}:{cur.s_snap}:{_fingerprint(req)}"


class Searcher:
    """One search over one store; holds the scope's id ranges and the snapshot bounds."""

    def __init__(self, store: Store, dag: Dag, req: SearchRequest) -> None:
        self.store, self.dag, self.req = store, dag, req
        scope = req.scope
        self.m_bounds = store.message_id_bounds(scope.conversation_id, scope.session_id)
        self.s_bounds = dag.summary_id_bounds(scope.conversation_id)
        self.with_summaries = req.summaries and not req.filters.raw_only
        self.common: list[Term] = []
        self.scope_sql: dict[str, Any] = {"conversation_id": scope.conversation_id, "session_id": scope.session_id,
                                          "skip_own_tools": True}
        if scope.kind == "current" and scope.conversation_id is not None:
            low, high = self.m_bounds
            if store.conversation(scope.conversation_id).last_seq == high - low + 1:
                self.scope_sql["conversation_id"] = None  # the id range holds this conversation only
        self.summary_conversation = scope.conversation_id
        if scope.kind == "current" and scope.conversation_id is not None:
            low, high = self.s_bounds
            if sum(dag.depth_counts(scope.conversation_id).values()) == high - low + 1:
                self.summary_conversation = None  # likewise for the summaries' id range

    # -- SQL access ------------------------------------------------------------------------

    @staticmethod
    def _bounds(bounds: tuple[int, int], upper: int) -> tuple[int, int]:
        return bounds[0], min(bounds[1], upper)

    def _message_rows(self, match: str, order: str, limit: int, upper: int,
                      exclude: Sequence[int] = ()) -> list[Hit]:
        rows = self.store.message_hits(
            match, order=order, limit=limit, bounds=self._bounds(self.m_bounds, upper), text_chars=TEXT_CHARS,
            exclude_ids=list(exclude), **self.scope_sql, **self.req.filters.sql())
        return [_message_hit(r, matched=True) for r in rows]

    def _summary_rows(self, match: str, order: str, limit: int, upper: int,
                      exclude: Sequence[int] = ()) -> list[Hit]:
        if not self.with_summaries:
            return []
        rows = self.dag.summary_hits(
            match, order=order, limit=limit, bounds=self._bounds(self.s_bounds, upper),
            conversation_id=self.summary_conversation, session_id=self.req.scope.session_id,
            source=self.req.filters.source, exclude_ids=exclude)
        return [_summary_hit(node, score) for node, score in rows]

    # -- the ranked pool ----------------------------------------------------------------------

    def _candidates(self, kind: str, upper: int, pool: int) -> tuple[list[Hit], list[int | None]]:
        """Up to ``pool`` rows worth ranking, and each term's match count (None: not counted).

        Selective words: bm25's best rows. Identifiers, phrases and prefixes: their newest matches
        (a phrase or prefix of common tokens costs as much to count as to find, and any of their
        matches is exact). Common words: newest matches, only to fill the pool.
        """
        terms = self.req.query.parts
        bounds = self._bounds(self.m_bounds if kind == "messages" else self.s_bounds, upper)
        budget = BM25_BUDGET if kind == "messages" else SUMMARY_BM25_BUDGET
        word_counts = self._countable(kind, terms, bounds, budget)
        words = [t for t in terms if t.match in word_counts]
        structured = [t for t in terms if t.match not in word_counts]
        selective, common = plan_terms(words, [word_counts[t.match] for t in words], budget)
        fetch = self._message_rows if kind == "messages" else self._summary_rows
        hits = fetch(or_match(selective), "rank", pool, upper) if selective else []
        if kind == "messages":
            self.common = common
        if structured:
            hits = _union(hits, fetch(or_match(structured), "recent", pool, upper), 2 * pool)
        if common and len(hits) < pool:
            hits = _union(hits, fetch(or_match(common), "recent", pool, upper), pool)
        return hits, [word_counts.get(t.match) for t in terms]

    def _countable(self, kind: str, terms: Sequence[Term], bounds: tuple[int, int], budget: int) -> dict[str, int]:
        """Match counts (capped) of the terms bm25 can rank cheaply: words, and phrases whose every
        word is within the budget. A phrase of common words or a prefix is left out: counting it
        would cost as much as walking those words' whole index entries."""
        words = {w for t in terms for w in (t.words if t.kind in ("word", "ident", "phrase") else ())}
        counted = dict(zip(words, self.store.fts_term_counts(kind, [f'"{w}"' for w in words], bounds, budget + 1),
                           strict=True))
        cheap = [t for t in terms if t.kind != "prefix" and all(counted[w] <= budget for w in t.words)]
        out = {t.match: counted[t.words[0]] for t in cheap if t.kind == "word"}
        phrases = [t for t in cheap if t.kind != "word"]
        out.update(zip((t.match for t in phrases),
                       self.store.fts_term_counts(kind, [t.match for t in phrases], bounds, budget + 1), strict=True))
        out.update({t.match: budget + 1 for t in terms if t.kind == "word" and t.match not in out})
        return out

    def ranked_pool(self, m_upper: int, s_upper: int) -> list[Hit]:
        messages, counts = self._candidates("messages", m_upper, POOL)
        summaries = self._candidates("summaries", s_upper, SUMMARY_POOL)[0] if self.with_summaries else []
        candidates = messages + summaries
        if not candidates:
            return []
        terms = self.req.query.parts
        low, high = self._bounds(self.m_bounds, m_upper)
        matched, _ = self.store.scratch_fts([(h.scratch_id, h.text) for h in candidates], [t.match for t in terms])
        weights = [idf(high - low + 1, c if c is not None else max(1, len(hits)))
                   for c, hits in zip(counts, matched, strict=True)]
        floor = min((h.score for h in messages if h.score > 0), default=1.0) * 0.5
        for h in candidates:
            if h.kind == "summary":  # bm25 over the few summaries is unreliable: score on the messages' scale
                relevance = summary_relevance(h.scratch_id, matched, weights)
            else:  # rows found through common terms only have no bm25: half the weakest ranked row
                relevance = h.score if h.score > 0 else floor
            h.score = own_score(relevance, coverage(h.scratch_id, matched, weights), is_exact(h.text, terms))
        ranked = (self._add_context(messages, m_upper) if conversational(terms) else messages) + summaries
        if self.req.boost is not None:
            for h in ranked:
                h.score *= self.req.boost(h)
        ranked.sort(key=lambda h: (-h.score, -h.created_at, h.kind, -h.id))
        return ranked

    def _add_context(self, messages: list[Hit], upper: int) -> list[Hit]:
        """Neighbouring turns inherit part of a strong match's score (``search.with_context``);
        rows newer than the snapshot (``upper``) stay out, so later pages rank the same pool."""
        by_key = {(h.conversation_id, h.seq): h for h in messages}
        scores = with_context({k: h.score for k, h in by_key.items()})
        missing: dict[int, list[int]] = {}
        for conv, seq in scores:
            if (conv, seq) not in by_key and seq > 0:
                missing.setdefault(conv, []).append(seq)
        for conv, seqs in missing.items():
            rows = self.store.messages_at(conv, seqs, TEXT_CHARS, session_id=self.req.scope.session_id,
                                          skip_own_tools=True, **self.req.filters.sql())
            for row in rows:
                hit = _message_hit((*row, 0.0), matched=False)
                if hit.id <= upper:
                    by_key[(hit.conversation_id, hit.seq)] = hit
        for key, hit in by_key.items():
            hit.score = scores.get(key, hit.score)
        return [h for h in by_key.values() if h.score > 0]

    # -- pages ----------------------------------------------------------------------------------

    def _first_cursor(self) -> _Cursor:
        m_snap, s_snap = self.m_bounds[1], self.s_bounds[1]
        phase = "r" if self.req.sort == "relevance" else "t"
        return _Cursor(phase, 0, m_snap + 1, s_snap + 1, m_snap, s_snap)

    def page(self) -> SearchPage:
        cur = _parse_cursor(self.req) or self._first_cursor()
        pool = self._pool(cur) if self.req.sort == "relevance" else []
        hits: list[Hit] = []
        nxt: _Cursor | None = None
        if cur.phase == "r":
            hits = pool[cur.offset:cur.offset + self.req.limit]
            if cur.offset + len(hits) < len(pool):
                nxt = replace(cur, offset=cur.offset + len(hits))
        if nxt is None:
            more, nxt = self._tail(cur, self.req.limit - len(hits), pool)
            hits += more
        return SearchPage(hits, _format_cursor(self.req, nxt), len(pool), [t.text for t in self.common],
                          self.with_summaries)

    def _pool(self, cur: _Cursor) -> list[Hit]:
        """The ranked pool of this query and snapshot: computed once, then reused by later pages
        (bm25's corpus statistics move as messages arrive, which would reorder a recomputed pool)."""
        key = (self.store.path, _fingerprint(self.req), cur.m_snap, cur.s_snap)
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

    def _tail(self, cur: _Cursor, limit: int, pool: Sequence[Hit]) -> tuple[list[Hit], _Cursor | None]:
        """Matches outside the ranked pool, newest first, messages and summaries merged by time.

        Each kind is keyset-paged by id, so every call takes at least one row or ends the walk;
        with ``limit`` 0 it only looks whether anything is left.
        """
        match = self.req.query.match
        exclude_m = [h.id for h in pool if h.kind == "message"]
        exclude_s = [h.id for h in pool if h.kind == "summary"]
        want = max(limit, 1) + 1
        messages = self._message_rows(match, "recent", want, cur.m_before - 1, exclude_m)
        summaries = self._summary_rows(match, "recent", want, cur.s_before - 1, exclude_s)
        taken = _merge_newest(messages, summaries, limit)
        if len(taken) == len(messages) + len(summaries):
            return taken, None
        m_before = min((h.id for h in taken if h.kind == "message"), default=cur.m_before)
        s_before = min((h.id for h in taken if h.kind == "summary"), default=cur.s_before)
        return taken, replace(cur, phase="t", offset=0, m_before=m_before, s_before=s_before)


def _union(hits: list[Hit], more: list[Hit], cap: int) -> list[Hit]:
    """``hits`` then the rows of ``more`` not in it, up to ``cap`` rows."""
    seen = {h.id for h in hits}
    return (hits + [h for h in more if h.id not in seen])[:max(cap, len(hits))]


def _merge_newest(messages: list[Hit], summaries: list[Hit], limit: int) -> list[Hit]:
    """Take from the heads of two id-ordered lists, newer first, so each kind's taken rows are a prefix."""
    out: list[Hit] = []
    i = j = 0
    while len(out) < limit and (i < len(messages) or j < len(summaries)):
        if j >= len(summaries) or (i < len(messages) and messages[i].created_at >= summaries[j].created_at):
            out.append(messages[i])
            i += 1
        else:
            out.append(summaries[j])
            j += 1
    return out


def _message_hit(row: Sequence[Any], matched: bool) -> Hit:
    mid, conv, seq, session, role, source, created, tool, text, chars, score = row
    return Hit("message", int(mid), -float(score), matched, str(text), int(chars), float(created), int(conv),
               int(seq), str(session), str(role), str(source or "unknown"), tool)


def _summary_hit(node: SummaryNode, score: float) -> Hit:
    return Hit("summary", node.id, -score, True, node.content[:TEXT_CHARS], len(node.content), node.latest_at,
               node.conversation_id, node=node)

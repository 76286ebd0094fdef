"""Where search candidates come from: the hit record, the arm interface, and the full-text arm.

A search asks each of its arms for the rows worth ranking; the searcher (search.py) fuses
what they return and one ranker (rank.py) orders them, whichever arm found a row. Full text is
one arm; the vector arm (``VectorArm``, lcm_recall with embeddings on) returns ``Hit`` records the
same way, found by cosine over the stored embeddings and kept to the same scope in SQL.
Every arm reads the store through its methods only, with scope and filters applied in SQL
before LIMIT, so its cost is bounded whatever the store's size.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from ..base.records import SummaryNode
from ..dag import Dag
from ..store import Store
from .query import Query, Term, or_match, plan_terms

BM25_BUDGET = 8000  # raw rows bm25 may rank per query
SUMMARY_BM25_BUDGET = 1500  # summaries are long, so fewer of them
TEXT_CHARS = 2000  # text per candidate used for coverage and snippets
SNIPPET_TOKENS = 28  # tokens per highlighted snippet (lcm_grep, lcm_recall)


@dataclass(frozen=True)
class Scope:
    """Which rows a search may see. ``conversations`` bounds an "all" scope to the caller's reach
    (its owner's conversations); None there means the whole store (shared memory, the operator)."""

    kind: str  # current | session | all
    conversation_id: int | None = None
    session_id: str | None = None
    conversations: tuple[int, ...] | None = None


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
    in_context: bool = False  # the caller's prompt shows it already (search.Searcher marks it)
    covered: int | None = (
        None  # a summary whose match is a copy of this message hit's: listed after the others
    )
    cosine: float | None = None  # similarity to the query's embedding (hybrid recall only)
    neighbour: bool = (
        False  # no query word: brought in as the turn next to a strong match (listed after matches)
    )

    @property
    def scratch_id(self) -> int:
        """Unique rowid in the scratch index: summaries are negated."""
        return self.id if self.kind == "message" else -self.id


@dataclass(frozen=True)
class View:
    """What one search may see: the scope's id ranges, and the scope as SQL arguments."""

    m_bounds: tuple[int, int]
    s_bounds: tuple[int, int]
    scope_sql: dict[str, Any]
    summary_conversation: int | None
    session_id: str | None
    summary_conversations: tuple[int, ...] | None
    filters: Filters
    with_summaries: bool
    # The store and its rewrite counter when the scope was read: what an earlier search learnt of
    # the indexes under the same key still holds (``CommonWords``).
    indexes: tuple[str, int] = ("", -1)

    @property
    def derived_sql(self) -> dict[str, Any]:
        """The filters that leave LCM's own traffic and memory turns out (``SearchRequest.own_tools``)."""
        return {key: self.scope_sql[key] for key in ("skip_own_tools", "skip_memory_turns")}

    @staticmethod
    def bounded(bounds: tuple[int, int], upper: int) -> tuple[int, int]:
        return bounds[0], min(bounds[1], upper)


@dataclass
class Candidates:
    """An arm's rows for one kind, and each query term's match count where the arm counted it
    (the ranker weighs terms by rarity; None: not counted)."""

    hits: list[Hit]
    counts: list[int | None]


class Arm(Protocol):
    """One way to find rows worth ranking for a query."""

    def candidates(self, kind: str, upper: int, pool: int) -> Candidates:
        """Up to ``pool`` rows of ``kind`` ("messages" | "summaries") with ids up to ``upper``."""
        ...


class CommonWords:
    """Which probes were seen over their cap, per store and rewrite counter, across searches.

    A word over bm25's budget in one conversation stays over it: rows are only added to an id
    range while the store's rewrite counter stands (text changes in place and deletes move it), so
    the count of a range ``[low, high]`` never falls, and a probe over its cap there is over it in
    any range ``[low, high']`` with ``high' >= high``. Probing a common word for its cap is the one
    costly count (its index entries walked up to the cap: ~0.2 ms a word at 100k rows, three words
    for an identifier such as AUTH_BATCH_LIMIT, a dozen for a prose question), and the same words
    (file, error, limit) come back query after query. Exact counts under the cap move with every
    stored row and are never kept."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._over: OrderedDict[tuple[Any, ...], int] = OrderedDict()
        self._lock = threading.Lock()

    def over(
        self, indexes: tuple[str, int], kind: str, match: str, bounds: tuple[int, int], cap: int
    ) -> bool:
        key = (indexes, kind, match, bounds[0], cap)
        with self._lock:
            high = self._over.get(key)
            if high is None or bounds[1] < high:
                return False
            self._over.move_to_end(key)
            return True

    def clear(self) -> None:
        with self._lock:
            self._over.clear()

    def __len__(self) -> int:
        return len(self._over)

    def learn(
        self, indexes: tuple[str, int], kind: str, match: str, bounds: tuple[int, int], cap: int
    ) -> None:
        if indexes[1] < 0:  # a scope read without the counter: nothing to key it on
            return
        key = (indexes, kind, match, bounds[0], cap)
        with self._lock:
            self._over[key] = min(bounds[1], self._over.get(key, bounds[1]))
            self._over.move_to_end(key)
            while len(self._over) > self.size:
                self._over.popitem(last=False)


COMMON_WORDS = CommonWords(4096)


class FullTextArm:
    """Candidates from the FTS5 indexes, and the walk over every remaining match."""

    def __init__(self, store: Store, dag: Dag, query: Query, view: View) -> None:
        self.store, self.dag, self.query, self.view = store, dag, query, view
        self.common: list[Term] = []  # the message terms too common to drive selection
        # Per kind: how many rows in the candidates' range match the query at most, when every
        # term was counted exactly (the sum of the counts); None: not known. A search whose pool
        # holds that many matched rows knows the walk after it finds nothing (search._tail).
        self.totals: dict[str, int | None] = {}
        self._counts: dict[tuple[str, str], int] = {}
        self._twins = True  # a messages count takes the summaries' twin probe along
        self._over: dict[
            tuple[str, str], int
        ] = {}  # probes that only asked whether the cap is reached
        self._ranges: dict[
            str, tuple[tuple[int, int], int]
        ] = {}  # kind: (rowid range, cap) of the counts

    def prepare(self, m_upper: int, s_upper: int) -> None:
        """Count every plain word in both indexes in one statement, before either kind asks
        (a rare word's two probes cost one statement); later counts of the messages' index
        (an identifier's words, phrases) take the summaries' twin probe along, unless the
        summaries' range fits their budget (``_uncounted``: they need no count but the words')."""
        view = self.view
        self._ranges = {"messages": (view.bounded(view.m_bounds, m_upper), BM25_BUDGET + 1)}
        if view.with_summaries:
            self._ranges["summaries"] = (
                view.bounded(view.s_bounds, s_upper),
                SUMMARY_BM25_BUDGET + 1,
            )
        self._count(
            "messages", sorted({f'"{t.words[0]}"' for t in self.query.parts if t.kind == "word"})
        )
        self._twins = view.with_summaries and not self._few("summaries", s_upper)

    def _count(self, kind: str, matches: Sequence[str], exact: bool = True) -> list[int]:
        """Capped match counts in ``kind``'s range, each probe run once per search. Not ``exact``:
        only whether each reaches the cap (the cap, or 0 below it; one walk fewer under the cap)."""
        kinds = (list(self._ranges) if self._twins else [kind]) if kind == "messages" else [kind]
        probes = [(k, m, *self._ranges[k]) for k in kinds for m in matches]
        known = self._counts if exact else self._over
        missing = [p for p in probes if p[:2] not in self._counts and p[:2] not in known]
        learnt = [p for p in missing if COMMON_WORDS.over(self.view.indexes, *p)]
        for probe in learnt:  # over the cap in a range this one holds: over it here too
            known[probe[:2]] = probe[3]
        missing = [p for p in missing if p not in learnt]
        for probe, n in zip(missing, self.store.fts_probe_counts(missing, exact), strict=True):
            known[probe[:2]] = n
            if n >= probe[3]:
                COMMON_WORDS.learn(self.view.indexes, *probe)
        return [self._counts.get((kind, m), known.get((kind, m), 0)) for m in matches]

    def _known_over(self, kind: str, match: str) -> bool:
        """Whether ``match`` is known over its cap in ``kind``'s range without a probe: counted
        so in this search, or seen so by an earlier one (``COMMON_WORDS``)."""
        bounds, cap = self._ranges[kind]
        n = self._counts.get((kind, match), self._over.get((kind, match)))
        return (
            n >= cap
            if n is not None
            else COMMON_WORDS.over(self.view.indexes, kind, match, bounds, cap)
        )

    def _bounds(self, kind: str, upper: int) -> tuple[int, int]:
        view = self.view
        return view.bounded(view.m_bounds if kind == "messages" else view.s_bounds, upper)

    @staticmethod
    def _budget(kind: str) -> int:
        return BM25_BUDGET if kind == "messages" else SUMMARY_BM25_BUDGET

    def _few(self, kind: str, upper: int) -> bool:
        """The kind's whole id range fits bm25's budget: any term is selective, nothing to count."""
        low, high = self._bounds(kind, upper)
        return high - low + 1 <= self._budget(kind)

    def candidates(self, kind: str, upper: int, pool: int) -> Candidates:
        """Up to ``pool`` rows worth ranking, and each term's match count (None: not counted).

        Selective words: bm25's best rows. Identifiers, phrases and prefixes: their newest matches
        (a phrase or prefix of common tokens costs as much to count as to find, and any of their
        matches is exact). Common words: newest matches, only to fill the pool.
        """
        terms = self.query.parts
        fetch = self.message_rows if kind == "messages" else self.summary_rows
        if kind == "summaries" and self._few(kind, upper):
            return self._uncounted(fetch, upper, pool)
        bounds, budget = self._bounds(kind, upper), self._budget(kind)
        word_counts = self._countable(kind, terms, bounds, budget)
        exact = [word_counts.get(t.match, budget + 1) for t in terms]
        self.totals[kind] = sum(exact) if all(n <= budget for n in exact) else None
        words = [t for t in terms if t.match in word_counts]
        structured = [t for t in terms if t.match not in word_counts]
        selective, common = plan_terms(words, [word_counts[t.match] for t in words], budget)
        hits = fetch(or_match(selective), "rank", pool, upper) if selective else []
        if kind == "messages":
            self.common = common
        if structured:
            hits = _union(hits, fetch(or_match(structured), "recent", pool, upper), 2 * pool)
        if common and len(hits) < pool:
            hits = _union(hits, fetch(or_match(common), "recent", pool, upper), pool)
        return Candidates(hits, [word_counts.get(t.match) for t in terms])

    def _uncounted(self, fetch: Callable[..., list[Hit]], upper: int, pool: int) -> Candidates:
        """A range within the budget (the summaries of most conversations): bm25 ranks every
        word's and phrase's rows straight away, as counting them first would only confirm; the
        fetch itself says how many match when it comes back short of the pool (a prefix is
        still fetched newest first, uncounted). A plain word's count came along with the
        messages' probe (``prepare``): a word found nowhere is not fetched."""
        terms = self.query.parts
        ranked = [
            t
            for t in terms
            if t.kind != "prefix"
            and not (t.kind == "word" and self._counts.get(("summaries", f'"{t.words[0]}"')) == 0)
        ]
        prefixes = [t for t in terms if t.kind == "prefix"]
        hits = fetch(or_match(ranked), "rank", pool, upper) if ranked else []
        if prefixes:
            hits = _union(hits, fetch(or_match(prefixes), "recent", pool, upper), 2 * pool)
        self.totals["summaries"] = len(hits) if len(hits) < pool and not prefixes else None
        return Candidates(hits, [None] * len(terms))

    def _countable(
        self, kind: str, terms: Sequence[Term], bounds: tuple[int, int], budget: int
    ) -> dict[str, int]:
        """Match counts (capped) of the terms bm25 can rank cheaply: words, and phrases whose every
        word is within the budget. A phrase of common words or a prefix is left out: counting it
        would cost as much as walking those words' whole index entries."""
        plain = sorted({t.words[0] for t in terms if t.kind == "word"})
        if self._ranges.get(kind) != (
            bounds,
            budget + 1,
        ):  # not the range ``prepare`` counted: count afresh
            self._ranges[kind] = (bounds, budget + 1)
            self._counts = {key: n for key, n in self._counts.items() if key[0] != kind}
            self._over = {key: n for key, n in self._over.items() if key[0] != kind}
        counted = dict(zip(plain, self._count(kind, [f'"{w}"' for w in plain]), strict=True))

        def within(term: Term) -> bool:
            """Every word of the term within the budget; the first word over it settles the answer,
            so an identifier of common words (AUTH_BATCH_LIMIT) stops counting there. A word of a
            phrase only needs that answer, not its count: the probe alone."""
            if any(self._known_over(kind, f'"{w}"') for w in term.words):
                return False  # a word seen over the budget before settles it without a probe
            for w in term.words:
                n = counted[w] if w in counted else self._count(kind, [f'"{w}"'], exact=False)[0]
                if n > budget:
                    return False
            return True

        cheap = [t for t in terms if t.kind != "prefix" and within(t)]
        out = {t.match: counted[t.words[0]] for t in cheap if t.kind == "word"}
        phrases = [t for t in cheap if t.kind != "word"]
        out.update(
            zip(
                (t.match for t in phrases),
                self._count(kind, [t.match for t in phrases]),
                strict=True,
            )
        )
        out.update({t.match: budget + 1 for t in terms if t.kind == "word" and t.match not in out})
        return out

    def message_rows(
        self,
        match: str,
        order: str,
        limit: int,
        upper: int,
        exclude: Sequence[int] = (),
        *,
        walk: bool = False,
    ) -> list[Hit]:
        """Messages matching ``match`` in scope, by bm25 (``order`` "rank") or newest first. The
        ranked candidates leave memory turns out (a walk, ``walk``, lists them after the pool)."""
        view = self.view
        scope = {
            **view.scope_sql,
            "skip_memory_turns": view.scope_sql["skip_memory_turns"] and not walk,
        }
        rows = self.store.message_hits(
            match,
            order=order,
            limit=limit,
            bounds=view.bounded(view.m_bounds, upper),
            text_chars=TEXT_CHARS,
            exclude_ids=list(exclude),
            **scope,
            **view.filters.sql(),
        )
        return [message_hit(r, matched=True) for r in rows]

    def summary_rows(
        self, match: str, order: str, limit: int, upper: int, exclude: Sequence[int] = ()
    ) -> list[Hit]:
        view = self.view
        if not view.with_summaries:
            return []
        rows = self.dag.summary_hits(
            match,
            order=order,
            limit=limit,
            bounds=view.bounded(view.s_bounds, upper),
            conversation_id=view.summary_conversation,
            session_id=view.session_id,
            source=view.filters.source,
            exclude_ids=exclude,
            conversation_ids=view.summary_conversations,
        )
        return [summary_hit(node, score) for node, score in rows]


# Rows the vector arm adds at most: as deep as full text (search.POOL). bench/fusion_lab.py: 40 -> 100
# lifted LoCoMo (R@10 0.778 -> 0.780) and the paraphrase set (0.100 -> 0.114), lowered no conversation.
VECTOR_POOL = 100
VECTOR_WIDEN = 3  # KNN rows asked for per pool row before the scope filter
VECTOR_ALLOWED_CAP = (
    200_000  # in-scope ids passed to the index when the scope is a small part of it
)


class KnnIndex(Protocol):
    """What the vector arm searches: ``vectors.VectorIndex`` (in memory) or ``semantic.StoredIndex``
    (in the store, pgvector)."""

    dim: int

    def __len__(self) -> int: ...
    def search(
        self, query: np.ndarray, k: int, multiplier: int = 8, allowed: np.ndarray | None = None
    ) -> list[tuple[int, float]]: ...


class VectorSource(Protocol):
    """What the vector arm needs of ``semantic.Semantic`` (a protocol: the search does not import
    the provider side)."""

    last_query_error: str | None

    @property
    def enabled(self) -> bool: ...
    @property
    def model(self) -> str | None:
        """The name of the model that makes the vectors ("local:all-minilm-l6-v2-int8")."""
        ...

    @property
    def prescreen_multiplier(self) -> int:
        """The index's prescreen shortlist per asked row (LCM_KNN_PRESCREEN_MULTIPLIER)."""
        ...

    def query_vector(self, text: str) -> np.ndarray | None: ...
    def index(self, kind: str) -> KnnIndex | None: ...


class VectorArm:
    """Candidates by cosine to the query's embedding, kept to the search's scope and filters.

    The index is store-wide; the arm asks it for more rows than the pool holds and keeps those
    the store's scope SQL lets through (``message_hits_by_ids``: reach, session, role, source,
    time, id bounds of the snapshot, LCM's own traffic and memory turns left out). When that
    leaves the pool short and the index holds more, the scope is a small part of the store: its
    ids are fetched in SQL and the index searches only them (``allowed``), so another owner's
    rows can never fill the pool. Nothing here raises: an arm that cannot run says why in
    ``state`` and returns nothing, and the search is full text alone."""

    def __init__(self, store: Store, source: VectorSource, text: str, view: View) -> None:
        self.store, self.source, self.text, self.view = store, source, text, view
        self.query: np.ndarray | None = None
        self.messages: KnnIndex | None = None
        self.state = "off"
        self.tried = False

    @property
    def used(self) -> bool:
        return self.query is not None and self.messages is not None

    def ready(self) -> bool:
        """Load the index and embed the query, once; ``state`` says what happened."""
        if not self.tried:
            self.tried = True
            try:
                self.messages = self.source.index("m")
            except Exception as exc:  # noqa: BLE001 - a broken index is a state line, full text still answers
                self.state = f"unavailable (vector index: {type(exc).__name__}: {str(exc)[:160]})"
                return False
            self.query = self.source.query_vector(
                self.text
            )  # warms the provider up: the index needs its model
            if self.query is None:
                self.state = f"unavailable (query embedding failed: {self.source.last_query_error or 'no vector'})"
                return False
            if self.messages is None:
                self.messages = self.source.index("m")
            if self.messages is None or len(self.messages) == 0:
                self.messages = None
                self.state = "off (no message embedded yet: lcm embed)"
                return False
            self.state = "on"
        return self.used

    def candidates(self, kind: str, upper: int, pool: int) -> Candidates:
        if kind != "messages" or not self.ready():
            return Candidates([], [])
        assert self.messages is not None and self.query is not None
        pool = min(pool, VECTOR_POOL)
        found = self.messages.search(
            self.query, pool * VECTOR_WIDEN, self.source.prescreen_multiplier
        )
        hits = self._scoped(found, upper, pool)
        if len(hits) < pool and len(self.messages) > len(found):
            view = self.view
            allowed = self.store.message_ids_in_scope(
                bounds=view.bounded(view.m_bounds, upper),
                limit=VECTOR_ALLOWED_CAP,
                **view.scope_sql,
                **view.filters.sql(),
            )
            ids = np.asarray(allowed, dtype=np.int64)
            found = self.messages.search(
                self.query, pool, self.source.prescreen_multiplier, allowed=ids
            )
            hits = self._scoped(found, upper, pool)
        return Candidates(hits, [])

    def _scoped(self, found: Sequence[tuple[int, float]], upper: int, pool: int) -> list[Hit]:
        view = self.view
        rows = self.store.message_hits_by_ids(
            [i for i, _ in found],
            bounds=view.bounded(view.m_bounds, upper),
            text_chars=TEXT_CHARS,
            **view.scope_sql,
            **view.filters.sql(),
        )
        by_id = {int(r[0]): r for r in rows}
        hits = []
        for mid, cos in found:
            if mid in by_id:
                hit = message_hit(by_id[mid], matched=False)
                hit.cosine = cos
                hits.append(hit)
        return hits[:pool]

    def cosines(self, hits: Sequence[Hit]) -> None:
        """Set each hit's cosine (messages and, when summaries are embedded, summaries) by id:
        the full-text candidates get a dense score on the same scale as the arm's own."""
        if not self.used:
            return
        assert self.query is not None
        for kind, index in (("message", self.messages), ("summary", self._summaries())):
            wanted = [h for h in hits if h.kind == kind and h.cosine is None]
            if index is None or not wanted:
                continue
            found = dict(
                index.search(self.query, len(wanted), allowed=np.asarray([h.id for h in wanted]))
            )
            for h in wanted:
                h.cosine = found.get(h.id)

    def _summaries(self) -> KnnIndex | None:
        try:
            index = self.source.index("s")
        except Exception:  # noqa: BLE001 - summaries without vectors keep their full-text score
            return None
        if (
            index is None
            or not len(index)
            or self.query is None
            or index.dim != self.query.shape[0]
        ):
            return None
        return index


def _union(hits: list[Hit], more: list[Hit], cap: int) -> list[Hit]:
    """``hits`` then the rows of ``more`` not in it, up to ``cap`` rows."""
    seen = {h.id for h in hits}
    return (hits + [h for h in more if h.id not in seen])[: max(cap, len(hits))]


def fuse(found: Sequence[Candidates]) -> Candidates:
    """The arms' rows for one kind, each row once (the first arm's copy), in the arms' order;
    term counts from the first arm that counted them."""
    hits: dict[int, Hit] = {}
    for c in found:
        for h in c.hits:
            hits.setdefault(h.id, h)
    counts = [
        next((c.counts[i] for c in found if i < len(c.counts) and c.counts[i] is not None), None)
        for i in range(max((len(c.counts) for c in found), default=0))
    ]
    return Candidates(list(hits.values()), counts)


def message_hit(row: Sequence[Any], matched: bool) -> Hit:
    mid, conv, seq, session, role, source, created, tool, text, chars, score = row
    return Hit(
        "message",
        int(mid),
        -float(score),
        matched,
        str(text),
        int(chars),
        float(created),
        int(conv),
        int(seq),
        str(session),
        str(role),
        str(source or "unknown"),
        tool,
    )


def whole_text(hit: Hit) -> bool:
    """The hit's search text is its whole indexed ``content`` column: not cut, and (a message) no
    tool calls appended, whose text would then be longer than its content. The real index then
    gives the same snippet as a scratch table over that text."""
    return hit.chars == len(hit.text) < TEXT_CHARS


def summary_hit(node: SummaryNode, score: float) -> Hit:
    return Hit(
        "summary",
        node.id,
        -score,
        True,
        node.content[:TEXT_CHARS],
        len(node.content),
        node.latest_at,
        node.conversation_id,
        node=node,
    )

"""The full-text methods of the store on PostgreSQL: the same answers as ``MessageSearch`` and
``SummaryQueries.summary_hits``, from the ``tsv`` columns and their GIN indexes.

Every other search method (bounds, hits by id, scratch FTS for reranking and snippets) is the
shared one: the scratch index is an in-memory SQLite table on the few candidates, so reranking
and snippets are computed by the same tokenizer on both backends.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from ...base.records import StoredMessage, SummaryNode
from ..message_search import ConversationRanges, MessageSearch, ranges_of
from ..rows import NODE_COLUMNS_S, REWRITES_VALUE, id_list, row_to_message, row_to_node
from ..summaries import SummaryQueries
from .fulltext import to_tsquery_text

_FAR = 2**62
# A term's rows are counted up to this for its idf: past it the weight is near zero anyway.
IDF_CAP = 20_000


class PgMessageSearch(MessageSearch):
    """Messages by full text."""

    def fts_probe_counts(
        self, probes: Sequence[tuple[str, str, tuple[int, int] | None, int]], exact: bool = True
    ) -> list[int]:
        """As on SQLite, in one statement: a column per (kind, expression, id range, cap) probe. Not
        ``exact``: whether the cap is reached (the cap), else 0."""
        if not probes:
            return []
        columns: list[str] = []
        args: list[Any] = []
        for kind, match, bounds, cap in probes:
            table = {"messages": "messages", "summaries": "summaries"}[kind]
            low, high = bounds if bounds is not None else (-_FAR, _FAR)
            capped = (
                f"(SELECT count(*) FROM (SELECT 1 FROM {table} WHERE tsv @@ lcm_tsq(?) AND id BETWEEN ? AND ? "
                "LIMIT ?) AS c)"
            )
            columns.append(capped if exact else f"CASE WHEN {capped} >= ? THEN ? ELSE 0 END")
            args += [to_tsquery_text(match) or "", low, high, cap] + ([] if exact else [cap, cap])
        with self.read() as db:
            row = db.execute(f"SELECT {', '.join(columns)}", args).fetchone()
        return [min(cap, int(n)) for n, (_, _, _, cap) in zip(row, probes, strict=True)]

    def conversation_ranges(self, conversation_id: int) -> ConversationRanges:
        """As on SQLite (PostgreSQL has no numbered ``?1`` parameters): one round trip while the
        conversation's summaries stand."""
        with self.read() as db:
            m_low, m_high, last_seq, generation, newest = db.execute(
                "SELECT (SELECT id FROM messages WHERE conversation_id=c.id ORDER BY seq LIMIT 1), "
                "(SELECT id FROM messages WHERE conversation_id=c.id ORDER BY seq DESC LIMIT 1), "
                f"c.last_seq, {REWRITES_VALUE}, (SELECT max(id) FROM summaries) "
                "FROM (SELECT CAST(? AS BIGINT) AS id, (SELECT last_seq FROM conversations WHERE id=?) AS last_seq) c",
                (conversation_id, conversation_id),
            ).fetchone()
            s_low, s_high, nodes = self._summary_span(db, conversation_id, (generation, newest))
        return ranges_of((m_low, m_high, s_low, s_high, last_seq, nodes, generation))

    def fts_snippets(self, match: str, ids: Sequence[int], tokens: int) -> dict[int, str]:
        """The snippets SQLite's index would give: the rows' ``content`` through the same in-memory
        FTS5 scratch table reranking uses, so both backends show the same snippet."""
        if not ids:
            return {}
        with self.read() as db:
            docs = [
                (int(r[0]), str(r[1]))
                for r in db.execute(
                    "SELECT m.id, m.content FROM messages m WHERE m.id IN (SELECT value FROM json_each(?)) "
                    "UNION ALL SELECT -s.id, s.content FROM summaries s WHERE s.id IN (SELECT value FROM json_each(?))",
                    (id_list([i for i in ids if i > 0]), id_list([-i for i in ids if i < 0])),
                )
            ]
        return self.scratch_fts(docs, [], snippet_match=match, snippet_tokens=tokens)[1]

    def fts_term_counts(
        self, kind: str, matches: Sequence[str], bounds: tuple[int, int] | None, cap: int
    ) -> list[int]:
        """Per expression, how many rows in the id range match it, counted up to ``cap``."""
        table = {"messages": "messages", "summaries": "summaries"}[kind]
        low, high = bounds if bounds is not None else (-_FAR, _FAR)
        queries = [to_tsquery_text(match) for match in matches]
        asked = [q for q in queries if q]
        counted = iter(self._capped_counts(table, asked, low, high, cap)[1] if asked else [])
        return [next(counted) if q else 0 for q in queries]

    def _capped_counts(
        self, table: str, queries: Sequence[str], low: int, high: int, cap: int
    ) -> tuple[int, list[int]]:
        """The largest message id and, per tsquery, its rows in [low, high] counted up to ``cap``:
        one statement, where a round trip per term cost ~1 ms each (a prose question has ten)."""
        capped = (
            f"(SELECT count(*) FROM (SELECT 1 FROM {table} WHERE tsv @@ lcm_tsq(?) AND id BETWEEN ? AND ? "
            "LIMIT ?) AS c)"
        )
        args: list[Any] = []
        for query in queries:
            args += [query, low, high, cap]
        with self.read() as db:
            row = db.execute(
                f"SELECT (SELECT coalesce(max(id), 0) FROM messages)"
                f"{''.join(', ' + capped for _ in queries)}",
                args,
            ).fetchone()
        return int(row[0]), [int(n) for n in row[1:]]

    def message_hits(
        self,
        match: str,
        *,
        order: str,
        limit: int,
        bounds: tuple[int, int] | None,
        text_chars: int,
        **filters: Any,
    ) -> list[tuple[Any, ...]]:
        """As :meth:`MessageSearch.message_hits`; "rank" orders by ``ts_rank_cd`` (score negated)."""
        query = to_tsquery_text(match)
        if not query:
            return []
        rank = order == "rank"
        later = {
            key: True
            for key in ("skip_own_tools", "skip_memory_turns")
            if rank and filters.get(key)
        }
        where, args = self._message_filters({**filters, **{key: False for key in later}})
        outer, _ = self._message_filters(later)
        low, high = bounds if bounds is not None else (-_FAR, _FAR)
        score, weights = self._bm25_like(query, low, high) if rank else ("0.0", [])
        sort = "score, m.id DESC" if rank else "m.id DESC"
        inner = 2 * limit if later else limit
        with self.read() as db:
            return db.execute(
                f"SELECT {self._HIT_COLUMNS}, t.score FROM (SELECT m.id AS id, {score} AS score "
                f"FROM messages m, (SELECT lcm_tsq(?) AS q) AS q WHERE m.tsv @@ q.q AND m.id BETWEEN ? AND ? "
                f"{where} ORDER BY {sort} LIMIT ?) AS t JOIN messages m ON m.id=t.id WHERE 1 {outer} "
                f"ORDER BY {'t.score, m.id DESC' if rank else 'm.id DESC'} LIMIT ?",
                (text_chars, *weights, query, low, high, *args, inner, limit),
            ).fetchall()

    def _bm25_like(self, query: str, low: int, high: int) -> tuple[str, list[Any]]:
        """A score on FTS5's bm25 scale (negative, lower is better) for ``query``'s OR terms.

        ``ts_rank_cd`` has no inverse document frequency: for a question's OR of words, a row with
        two common words outranked one with the rare word the question is about (LoCoMo R@10 on
        conv-30: 0.802 against SQLite's 0.840, bench/pg_recall.py). Here each term a row matches
        adds bm25's idf (from the term's row count in scope, counted up to ``IDF_CAP``) times its
        length factor (k1 1.2, b 0.75, the row's lexeme count against the matches' mean); term
        frequency is left to ``ts_rank_cd``, which breaks ties.
        """
        parts = query.split(" | ")
        if len(parts) == 1:
            return "-ts_rank_cd(m.tsv, q.q, 1)", []
        top, counts = self._capped_counts("messages", parts, low, high, IDF_CAP)
        rows = max(1, min(high, top) - max(low, 0) + 1)
        terms = " + ".join("CASE WHEN m.tsv @@ lcm_tsq(?) THEN ?::float8 ELSE 0 END" for _ in parts)
        weights: list[Any] = []
        for part, n in zip(parts, counts, strict=True):
            weights += [part, math.log(1 + (rows - n + 0.5) / (n + 0.5))]
        length = "greatest(length(m.tsv), 1)::float8"
        return (
            f"-(({terms}) * 2.2 / (1 + 1.2 * (0.25 + 0.75 * {length} / avg({length}) OVER ())) "
            "+ 0.01 * ts_rank_cd(m.tsv, q.q, 1))",
            weights,
        )

    def search_messages(
        self, match: str, conversation_id: int | None, limit: int
    ) -> list[tuple[StoredMessage, float]]:
        query = to_tsquery_text(match)
        if not query:
            return []
        scope = "AND m.conversation_id=?" if conversation_id is not None else ""
        args: tuple[object, ...] = (
            (query, conversation_id, limit) if conversation_id is not None else (query, limit)
        )
        with self.read() as db:
            rows = db.execute(
                f"SELECT {self.message_columns_m}, -ts_rank_cd(m.tsv, q.q, 1) AS score "
                f"FROM messages m, (SELECT lcm_tsq(?) AS q) AS q WHERE m.tsv @@ q.q {scope} "
                "ORDER BY score, m.id LIMIT ?",
                args,
            ).fetchall()
        return [(row_to_message(r[:-1]), float(r[-1])) for r in rows]

    _PHRASE_MATCH = "SELECT m.id FROM messages m WHERE m.tsv @@ lcm_tsq(?)"

    def _phrase_argument(self, phrase: str) -> str:
        return to_tsquery_text(phrase)


class PgSummarySearch(SummaryQueries):
    """Summaries by full text."""

    def summary_hits(
        self,
        match: str,
        *,
        order: str,
        limit: int,
        bounds: tuple[int, int] | None,
        conversation_id: int | None = None,
        session_id: str | None = None,
        source: str | None = None,
        exclude_ids: Sequence[int] = (),
        conversation_ids: Sequence[int] | None = None,
    ) -> list[tuple[SummaryNode, float]]:
        query = to_tsquery_text(match)
        if not query:
            return []
        low, high = bounds if bounds is not None else (-_FAR, _FAR)
        where, args = self._summary_scope(
            conversation_id, session_id, source, exclude_ids, conversation_ids
        )
        rank = order == "rank"
        score, sort = (
            ("-ts_rank_cd(s.tsv, q.q, 1)", "score, s.id DESC") if rank else ("0.0", "s.id DESC")
        )
        with self.read() as db:
            rows = db.execute(
                f"SELECT {NODE_COLUMNS_S}, {score} AS score FROM summaries s, (SELECT lcm_tsq(?) AS q) AS q "
                f"WHERE s.tsv @@ q.q AND s.id BETWEEN ? AND ? {where} ORDER BY {sort} LIMIT ?",
                (query, low, high, *args, limit),
            ).fetchall()
        return [(row_to_node(r[:-1]), float(r[-1])) for r in rows]

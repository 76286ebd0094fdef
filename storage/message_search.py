"""Searching messages: the message FTS index with scope and filters applied in SQL before
LIMIT (for the lcm_* tools through search.py), payload-reference lookups, and a private
in-memory FTS table that scores a few candidates with the real index's tokenizer.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from ..base.records import StoredMessage
from .connection import SqliteConnection, faults_mapped
from .rows import REWRITES_VALUE, conversation_scope, id_list, row_to_message


def _all_lcm_calls(alias: str) -> str:
    """SQL: the row's tool calls are all lcm_* calls. It counts the calls' names in the stored JSON:
    ``"name": "`` is 9 characters, ``"name": "lcm_`` 13 (argument strings escape their quotes)."""
    calls = f"coalesce({alias}.tool_calls, '')"
    return (
        f"({calls} LIKE '%\"name\": \"lcm\\_%' ESCAPE '\\' AND 9 * (length({calls}) - length(replace("
        f"{calls}, '\"name\": \"lcm_', ''))) = 13 * (length({calls}) - length(replace({calls}, "
        "'\"name\": \"', ''))))"
    )


class MessageSearch(SqliteConnection):
    """Full-text and filtered reads over the messages."""

    _scratch: sqlite3.Connection | None = None

    @classmethod
    def _message_filters(cls, filters: dict[str, Any]) -> tuple[str, list[Any]]:
        """``AND ...`` clauses for conversation/session/role/source/time/keyset/exclusion filters."""
        clauses = (
            (
                "session_id",
                "m.session_key=(SELECT k.id FROM session_keys k WHERE k.name=?)",
            ),  # schema 4 key
            ("role", "m.role=?"),
            ("source", "coalesce(nullif(trim(m.source), ''), 'unknown')=?"),
            ("since", "m.created_at>=?"),
            ("until", "m.created_at<?"),
            ("before_id", "m.id<?"),
        )
        sql, args = conversation_scope(
            "m.conversation_id", filters.get("conversation_id"), filters.get("conversation_ids")
        )
        for key, clause in clauses:
            if filters.get(key) is not None:
                sql += " AND " + clause
                args.append(filters[key])
        if filters.get("exclude_ids"):
            sql += " AND m.id NOT IN (SELECT value FROM json_each(?))"
            args.append(id_list(filters["exclude_ids"]))
        if filters.get("skip_own_tools"):
            sql += " AND " + cls._NOT_OWN_TOOLS
        if filters.get("skip_memory_turns"):
            sql += " AND " + cls._NOT_MEMORY_TURNS
        return sql, args

    # LCM's own tool traffic is derived data: an lcm_* result is a copy of stored rows, and an
    # assistant turn whose every call is an lcm_* call echoes the query (its words, often in its
    # text too). Searches leave both out by default; the rows stay readable through
    # lcm_load_session / lcm_expand.
    _NOT_OWN_TOOLS = (
        f"NOT (coalesce(m.tool_name, '') LIKE 'lcm\\_%' ESCAPE '\\' OR {_all_lcm_calls('m')})"
    )

    # The turn around a memory search: the request that was put to memory (the user message right
    # before an assistant turn of lcm_* calls only: its words are the query's) and the reply
    # composed from the results (the assistant text right after an lcm_* result: it restates
    # stored rows). They rank behind the rows they echo: left out of the ranked candidates, found
    # by the walk that follows them (``skip_memory_turns``).
    # Each neighbour is one scalar lookup by (conversation_id, seq), unique: PostgreSQL plans an
    # EXISTS inside this OR as a "hashed SubPlan" that first reads every message of the database
    # (1.6 s of a 1.7 s lcm_grep at 1M messages); SQLite runs either form as a lookup per candidate.
    _NOT_MEMORY_TURNS = (
        "NOT ((m.role = 'assistant' AND coalesce(m.tool_calls, '') IN ('', '[]') AND coalesce((SELECT "
        "p.tool_name FROM messages p WHERE p.conversation_id = m.conversation_id AND p.seq = m.seq - 1), '') "
        "LIKE 'lcm\\_%' ESCAPE '\\') OR (m.role = 'user' AND coalesce((SELECT "
        f"{_all_lcm_calls('n')} FROM messages n WHERE n.conversation_id = m.conversation_id AND "
        "n.seq = m.seq + 1), false)))"
    )

    def message_id_bounds(
        self,
        conversation_id: int | None = None,
        session_id: str | None = None,
        conversation_ids: Sequence[int] | None = None,
    ) -> tuple[int, int]:
        """First and last message id of a session, a conversation (ids grow with seq), several
        conversations or the whole store, so an FTS query can seek to that rowid range instead of
        walking every match. An empty scope gives the empty range (0, -1)."""
        key: Any
        if session_id is None and conversation_id is None and conversation_ids is not None:
            with self.read() as db:  # each conversation's ends by its (conversation_id, seq) index
                low, high = db.execute(
                    "SELECT min(lo), max(hi) FROM (SELECT "
                    "(SELECT id FROM messages WHERE conversation_id=c.value ORDER BY seq LIMIT 1) AS lo, "
                    "(SELECT id FROM messages WHERE conversation_id=c.value ORDER BY seq DESC LIMIT 1) AS hi "
                    "FROM json_each(?) c) AS spans",
                    (id_list(conversation_ids),),
                ).fetchone()  # PG needs the alias
            return (int(low), int(high)) if low is not None and high is not None else (0, -1)
        if session_id is not None:
            where, key, order = (
                "WHERE session_key=(SELECT k.id FROM session_keys k WHERE k.name=?)",  # schema 4
                (session_id,),
                "id",
            )
        elif conversation_id is not None:
            where, key, order = "WHERE conversation_id=?", (conversation_id,), "seq"
        else:
            where, key, order = "", (), "id"
        with self.read() as db:
            low = db.execute(
                f"SELECT id FROM messages {where} ORDER BY {order} LIMIT 1", key
            ).fetchone()
            high = db.execute(
                f"SELECT id FROM messages {where} ORDER BY {order} DESC LIMIT 1", key
            ).fetchone()
        return (int(low[0]), int(high[0])) if low and high else (0, -1)

    def fts_term_counts(
        self, kind: str, matches: Sequence[str], bounds: tuple[int, int] | None, cap: int
    ) -> list[int]:
        """Per FTS5 expression, how many rows in the rowid range match it, counted up to ``cap``
        (cheap: at most ``cap`` rowids are read per expression).

        A probe for the ``cap``-th match comes first: stepping over rowids with OFFSET costs about
        half of counting them through a LIMIT subquery (measured at 100k rows: 0.4 against 0.7 ms
        for a word past 8,000 matches), and a term over the cap, the costly case, needs nothing
        more; a term under it is then counted by a plain count(*), as fast as the probe."""
        return self.fts_probe_counts([(kind, match, bounds, cap) for match in matches])

    def fts_probe_counts(
        self, probes: Sequence[tuple[str, str, tuple[int, int] | None, int]], exact: bool = True
    ) -> list[int]:
        """``fts_term_counts`` for several (kind, expression, rowid range, cap) probes, messages and
        summaries alike, in ONE statement (a column per probe): a rare word's counts in both
        indexes cost one statement, not one each. Not ``exact``: only the probe, so a
        count under the cap reads 0 (whether the cap is reached, without counting a second time)."""
        if not probes:
            return []
        columns: list[str] = []
        args: list[Any] = []
        for kind, match, bounds, cap in probes:
            table = {"messages": "messages_fts", "summaries": "summaries_fts"}[kind]
            low, high = bounds if bounds is not None else (-(2**62), 2**62)
            where = f"FROM {table} WHERE {table} MATCH ? AND rowid BETWEEN ? AND ?"
            if exact:
                columns.append(
                    f"CASE WHEN (SELECT 1 {where} LIMIT 1 OFFSET ?) IS NOT NULL THEN ? "
                    f"ELSE (SELECT count(*) {where}) END"
                )
                args += [match, low, high, max(0, cap - 1), cap, match, low, high]
            else:
                columns.append(
                    f"CASE WHEN (SELECT 1 {where} LIMIT 1 OFFSET ?) IS NOT NULL THEN ? ELSE 0 END"
                )
                args += [match, low, high, max(0, cap - 1), cap]
        with self.read() as db:
            row = db.execute(f"SELECT {', '.join(columns)}", args).fetchone()
        return [min(cap, int(n)) for n, (_, _, _, cap) in zip(row, probes, strict=True)]

    def conversation_ranges(self, conversation_id: int) -> ConversationRanges:
        """One conversation's message id range, summary id range, last seq, summary count and the
        rewrite counter: what a search of the current conversation needs to know about its scope
        (the same answers as ``message_id_bounds``, ``summary_id_bounds``,
        ``conversation().last_seq``, ``depth_counts`` and ``rewrite_generation``). One statement
        while the summaries stand (``_summary_span``); an empty range is (0, -1)."""
        with self.read() as db:
            m_low, m_high, last_seq, generation, newest = db.execute(
                "SELECT (SELECT id FROM messages WHERE conversation_id=?1 ORDER BY seq LIMIT 1), "
                "(SELECT id FROM messages WHERE conversation_id=?1 ORDER BY seq DESC LIMIT 1), "
                f"(SELECT last_seq FROM conversations WHERE id=?1), {REWRITES_VALUE}, "
                "(SELECT max(id) FROM summaries)",
                (conversation_id,),
            ).fetchone()
            s_low, s_high, nodes = self._summary_span(db, conversation_id, (generation, newest))
        return ranges_of((m_low, m_high, s_low, s_high, last_seq, nodes, generation))

    # A conversation's summary id range and count, kept per (rewrite counter, newest summary id):
    # counting walks the conversation's index entries (7,000 summaries at 1M messages: 0.48 ms on
    # every search), while a summary made anywhere moves the newest id and a delete or rewrite
    # moves the counter, so an unchanged key means unchanged figures.
    _summary_spans: dict[int, tuple[tuple[Any, Any], tuple[Any, Any, int]]] | None = None
    SUMMARY_SPANS = 256  # conversations kept

    def _summary_span(
        self, db: Any, conversation_id: int, key: tuple[Any, Any]
    ) -> tuple[Any, Any, int]:
        if self._summary_spans is None:
            self._summary_spans = {}
        kept = self._summary_spans.get(conversation_id)
        if kept is not None and kept[0] == key:
            return kept[1]
        low, high, nodes = db.execute(
            # the three figures from one pass over the index entries (min and max alone walk it
            # each: the index is ordered by depth before id)
            "SELECT min(id), max(id), count(*) FROM summaries WHERE conversation_id=?",
            (conversation_id,),
        ).fetchone()
        if len(self._summary_spans) >= self.SUMMARY_SPANS:
            self._summary_spans.pop(next(iter(self._summary_spans)))
        self._summary_spans[conversation_id] = (key, (low, high, int(nodes)))
        return low, high, int(nodes)

    def rewrite_generation(self) -> int:
        """The store's rewrite counter (``rows.REWRITES_KEY``): it moves whenever stored text
        changed in place or rows were deleted, so what a reader learnt of the indexes before
        holds while it stands."""
        with self.read() as db:
            return int(db.execute(f"SELECT {REWRITES_VALUE}").fetchone()[0])

    def fts_snippets(self, match: str, ids: Sequence[int], tokens: int) -> dict[int, str]:
        """Highlighted snippets of a few rows straight from the real indexes (column ``content``),
        in ONE statement: ids are scratch ids (a summary's negated). Only for rows whose search
        text is that whole column (the scratch table would hold the same text, so the snippet is
        the same); rows that do not match ``match`` have none."""
        arms: list[str] = []
        args: list[Any] = []
        for i in ids:
            table, sign = ("messages_fts", 1) if i > 0 else ("summaries_fts", -1)
            arms.append(
                f"SELECT {sign} * rowid, snippet({table}, 0, '«', '»', '…', ?) FROM {table} "
                f"WHERE {table} MATCH ? AND rowid = ?"
            )
            args += [tokens, match, abs(i)]
        if not arms:
            return {}
        with self.read() as db:
            return {int(r[0]): str(r[1]) for r in db.execute(" UNION ALL ".join(arms), args)}

    # The text of a hit is its content, then its tool calls (both are indexed), cut to a size.
    _HIT_COLUMNS = (
        "m.id, m.conversation_id, m.seq, (SELECT k.name FROM session_keys k WHERE k.id=m.session_key), "
        "m.role, m.source, m.created_at, m.tool_name, "
        "substr(m.content || coalesce(char(10) || m.tool_calls, ''), 1, ?), length(m.content)"
    )

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
        """Messages matching ``match``: ``order`` "rank" (bm25, best first) or "recent" (newest first,
        no ranking cost). Rows: the ``_HIT_COLUMNS`` (text cut to ``text_chars``) and the bm25 score.

        The inner query ranks rowids only (joining messages just for the filters, if any), so the
        row text is read for the ``limit`` winners, not for every match. For "rank", skipping LCM's
        own tool traffic and memory turns is left to the outer query (no join per match), which
        keeps ``limit`` of the best twice ``limit``.
        """
        rank = order == "rank"
        later = {
            key: True
            for key in ("skip_own_tools", "skip_memory_turns")
            if rank and filters.get(key)
        }
        where, args = self._message_filters({**filters, **{key: False for key in later}})
        outer, _ = self._message_filters(later)
        low, high = bounds if bounds is not None else (-(2**62), 2**62)
        score, sort = (
            ("bm25(messages_fts)", "score") if rank else ("0.0", "messages_fts.rowid DESC")
        )
        join = "JOIN messages m ON m.id=messages_fts.rowid" if where else ""
        inner = (
            2 * limit if later else limit
        )  # rows the outer filter drops leave room for the next best
        with self.read() as db:
            return db.execute(
                f"SELECT {self._HIT_COLUMNS}, t.score FROM (SELECT messages_fts.rowid AS id, {score} AS score "
                f"FROM messages_fts {join} WHERE messages_fts MATCH ? AND messages_fts.rowid BETWEEN ? AND ? {where} "
                f"ORDER BY {sort} LIMIT ?) AS t JOIN messages m ON m.id=t.id WHERE 1 {outer} "
                f"ORDER BY {'t.score, m.id DESC' if rank else 'm.id DESC'} LIMIT ?",
                (text_chars, match, low, high, *args, inner, limit),
            ).fetchall()

    def message_hits_by_ids(
        self, ids: Sequence[int], *, bounds: tuple[int, int] | None, text_chars: int, **filters: Any
    ) -> list[tuple[Any, ...]]:
        """The rows (``_HIT_COLUMNS`` and a 0.0 score) among ``ids`` that pass the same scope and
        filters as ``message_hits``: how the vector arm keeps to a search's scope, in SQL."""
        if not ids:
            return []
        where, args = self._message_filters(filters)
        low, high = bounds if bounds is not None else (-(2**62), 2**62)
        with self.read() as db:
            return db.execute(
                f"SELECT {self._HIT_COLUMNS}, 0.0 FROM messages m WHERE m.id IN (SELECT value FROM json_each(?)) "
                f"AND m.id BETWEEN ? AND ? {where} ORDER BY m.id",
                (text_chars, id_list(ids), low, high, *args),
            ).fetchall()

    def message_ids_in_scope(
        self, *, bounds: tuple[int, int] | None, limit: int, **filters: Any
    ) -> list[int]:
        """Ids of up to ``limit`` messages in scope (newest first): the allowed set of a vector
        search whose scope is a small part of the store."""
        where, args = self._message_filters(filters)
        low, high = bounds if bounds is not None else (-(2**62), 2**62)
        with self.read() as db:
            rows = db.execute(
                f"SELECT m.id FROM messages m WHERE m.id BETWEEN ? AND ? {where} "
                "ORDER BY m.id DESC LIMIT ?",
                (low, high, *args, limit),
            ).fetchall()
        return [int(r[0]) for r in rows]

    def messages_at(
        self, conversation_id: int, seqs: Sequence[int], text_chars: int, **filters: Any
    ) -> list[tuple[Any, ...]]:
        """Rows (``_HIT_COLUMNS``) at these seqs of one conversation that pass the filters."""
        where, args = self._message_filters(filters)
        with self.read() as db:
            return db.execute(
                f"SELECT {self._HIT_COLUMNS} FROM messages m WHERE m.conversation_id=? "
                f"AND m.seq IN (SELECT value FROM json_each(?)) {where} ORDER BY m.seq",
                (text_chars, conversation_id, id_list(seqs), *args),
            ).fetchall()

    def search_messages(
        self, match: str, conversation_id: int | None, limit: int
    ) -> list[tuple[StoredMessage, float]]:
        """Raw messages matching an FTS5 ``match`` expression, best bm25 first."""
        scope = "AND m.conversation_id=?" if conversation_id is not None else ""
        args: tuple[object, ...] = (
            (match, conversation_id, limit) if conversation_id is not None else (match, limit)
        )
        cols = self.message_columns_m
        with self.read() as db:
            rows = db.execute(
                f"SELECT {cols}, bm25(messages_fts) AS score FROM messages_fts "
                "JOIN messages m ON m.id=messages_fts.rowid "
                f"WHERE messages_fts MATCH ? {scope} ORDER BY score LIMIT ?",
                args,
            ).fetchall()
        return [(row_to_message(r[:-1]), float(r[-1])) for r in rows]

    # How one quoted phrase is looked up in the index (PostgreSQL overrides both: its tsv column).
    _PHRASE_MATCH = (
        "SELECT m.id FROM messages_fts JOIN messages m ON m.id=messages_fts.rowid "
        "WHERE messages_fts MATCH ?"
    )

    def _phrase_argument(self, phrase: str) -> str:
        return phrase

    def message_ids_mentioning(
        self,
        token: str,
        conversation_id: int | None,
        limit: int = 50,
        conversation_ids: Sequence[int] | None = None,
    ) -> list[int]:
        """Messages whose text, structured content or tool calls contain ``token`` (a payload ref):
        the index first, then a scan of the structured columns, which the index does not cover."""
        scope, args = conversation_scope("m.conversation_id", conversation_id, conversation_ids)
        phrase = self._phrase_argument('"' + token.replace('"', '""') + '"')
        with self.read() as db:
            rows = (
                db.execute(
                    f"{self._PHRASE_MATCH} {scope} ORDER BY m.id LIMIT ?", (phrase, *args, limit)
                ).fetchall()
                if phrase
                else []
            )
            if not rows:
                rows = db.execute(
                    f"SELECT m.id FROM messages m WHERE 1 {scope} AND (instr(coalesce(m.parts, ''), ?) > 0 "
                    "OR instr(coalesce(m.tool_calls, ''), ?) > 0) ORDER BY m.id LIMIT ?",
                    (*args, token, token, limit),
                ).fetchall()
        return [int(r[0]) for r in rows]

    def messages_in_period(
        self,
        conversation_id: int | None,
        since: float,
        until: float,
        cap: int = 1000,
        conversation_ids: Sequence[int] | None = None,
    ) -> int:
        """How many messages (up to ``cap``) were stored in [since, until)."""
        scope, args = conversation_scope("m.conversation_id", conversation_id, conversation_ids)
        with self.read() as db:
            return int(
                db.execute(
                    f"SELECT count(*) FROM (SELECT 1 FROM messages m WHERE 1 {scope} AND created_at>=? "
                    "AND created_at<? LIMIT ?)",
                    (*args, since, until, cap),
                ).fetchone()[0]
            )

    def scratch_fts(
        self,
        docs: Sequence[tuple[int, str]],
        matches: Sequence[str],
        snippet_match: str | None = None,
        snippet_tokens: int = 24,
    ) -> tuple[list[set[int]], dict[int, str]]:
        """Evaluate expressions over a few candidate texts with the same tokenizer as the real index.

        Which candidates each expression matches (term coverage for reranking) and highlighted
        snippets, from a private in-memory FTS5 table: the cost follows the candidates, not the store.
        """
        with self.lock, faults_mapped():
            scratch = self._scratch
            if scratch is None:
                scratch = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
                scratch.execute(
                    "CREATE VIRTUAL TABLE scratch USING fts5(content, tokenize='porter unicode61')"
                )
                self._scratch = scratch
            scratch.execute("BEGIN")
            try:
                # In rowid order: FTS5 writes its pending terms out as a segment whenever a rowid
                # is not above the last one inserted, so candidates in rank order (and summaries'
                # negated ids) flushed a segment per row (17 cut summaries: 0.80 ms, not 0.30).
                ordered: list[tuple[int, str]] = sorted(docs, key=lambda doc: doc[0])
                scratch.executemany("INSERT INTO scratch(rowid, content) VALUES (?, ?)", ordered)
                sets = [
                    {
                        int(r[0])
                        for r in scratch.execute(
                            "SELECT rowid FROM scratch WHERE scratch MATCH ?", (match,)
                        )
                    }
                    for match in matches
                ]
                snippets: dict[int, str] = {}
                if snippet_match:
                    snippets = {
                        int(r[0]): str(r[1])
                        for r in scratch.execute(
                            "SELECT rowid, snippet(scratch, 0, '«', '»', '…', ?) FROM scratch WHERE scratch MATCH ?",
                            (snippet_tokens, snippet_match),
                        )
                    }
            finally:
                scratch.execute("ROLLBACK")
        return sets, snippets


ConversationRanges = tuple[tuple[int, int], tuple[int, int], int, int, int]


def ranges_of(row: Sequence[Any]) -> ConversationRanges:
    """``conversation_ranges``' answer from its row (either backend): message range, summary
    range (empty: (0, -1)), last seq, summary count, rewrite counter."""
    m_low, m_high, s_low, s_high, last_seq, nodes, generation = row
    messages = (int(m_low), int(m_high)) if m_low is not None and m_high is not None else (0, -1)
    summaries = (int(s_low), int(s_high)) if s_low is not None else (0, -1)
    return messages, summaries, int(last_seq or 0), int(nodes), int(generation or 0)

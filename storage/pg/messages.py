"""A host turn's write on PostgreSQL in as few round trips as SQLite makes calls.

Every statement to a PostgreSQL server is a network round trip, so the shared ingest path
(``MessageQueries.append``: the newest row, then the last seq twice, the session key in two
statements, the rows, the new last seq, the new ids) cost a turn eleven of them where SQLite
makes cheap in-process calls. Here the same decisions take one round trip, two when another
writer moved the conversation, under the same write lock and with the same rows written:

* a host's next turn extends the list it sent last, so the selection is made from the tail
  this process wrote last (kept per conversation), before the lock; BEGIN, the lock, an insert
  that writes only if the conversation still ends there, and COMMIT go in one pipeline. If
  another writer appended or removed the newest row, that insert writes nothing and the turn
  is decided again under the lock, as below (a selection that needs more than that tail, or
  rows with payload grants, go that way from the start);
* :class:`PgPrints` reads the conversation's ``last_seq`` together with the newest row (the
  alignment asks for both in one selection, and under the write lock neither can change
  until this transaction writes, which it does only after the selection); that read goes in
  the one message that begins the transaction and takes the lock;
* :func:`insert_messages` stores the rows, advances ``last_seq``, finds or makes the session
  key and returns the new ids in one statement (data-modifying CTEs), sent with the COMMIT;
* :class:`PgConversationQueries` reads a database secret (asked by every engine start and the
  first search of a process) without the write transaction that only its first use needs.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable, Sequence
from typing import Any, cast

from ...base.records import MessageIn
from ..conversations import ConversationQueries
from ..messages import MessageQueries, SqlitePrints
from ..payload_refs import record_grants
from ..rows import unpack_fingerprint
from .codec import encode
from .connection import PgConnection, PgDb

_TEXT = (
    "role",
    "content",
    "parts",
    "tool_calls",
    "tool_call_id",
    "tool_name",
    "fingerprint",
    "synthetic",
    "extra",
)
_INSERT = (
    "WITH c AS (UPDATE conversations SET last_seq = last_seq + %(n)s WHERE id = %(cid)s "
    "RETURNING last_seq - %(n)s AS base), "
    # The key exists after a session's first turn: look first, so an insert does not burn an identity value per turn.
    "k AS (INSERT INTO session_keys(name) SELECT %(session)s WHERE NOT EXISTS "
    "(SELECT 1 FROM session_keys WHERE name = %(session)s) ON CONFLICT DO NOTHING RETURNING id), "
    "s AS (SELECT id FROM k UNION ALL SELECT id FROM session_keys WHERE name = %(session)s) "
    "INSERT INTO messages(conversation_id, seq, session_key, role, content, parts, tool_calls, tool_call_id, "
    "tool_name, source, host_ts, created_at, tokens, fingerprint, synthetic, extra) "
    "SELECT %(cid)s, c.base + u.n, (SELECT id FROM s LIMIT 1), u.role, u.content, u.parts, u.tool_calls, "
    "u.tool_call_id, u.tool_name, %(source)s, u.host_ts, u.created_at, u.tokens, u.fingerprint, u.synthetic, u.extra "
    "FROM c, json_to_recordset(%(rows)s::json) AS u(role text, content text, parts text, tool_calls text, "
    "tool_call_id text, tool_name text, fingerprint text, synthetic text, extra text, host_ts float8, "
    "created_at float8, tokens bigint, n bigint) "
    "RETURNING id, seq"
)


# The insert when the decision was made from the tail this process wrote last, before the lock:
# it writes only if the conversation still ends there (no other writer appended or removed its
# newest row since), else nothing, and the caller decides again under the lock.
_INSERT_IF_UNMOVED = _INSERT.replace(
    "WHERE id = %(cid)s ",
    "WHERE id = %(cid)s AND last_seq = %(expect_last)s AND (SELECT max(seq) FROM messages "
    "WHERE conversation_id = %(cid)s) IS NOT DISTINCT FROM %(expect_newest)s::bigint ",
    1,
)

# The conversation's last_seq with its newest rows' (seq, fingerprint), newest first.
_TAIL = (
    "SELECT c.last_seq, m.seq, m.fingerprint FROM conversations c LEFT JOIN LATERAL "
    "(SELECT seq, fingerprint FROM messages WHERE conversation_id = c.id ORDER BY seq DESC LIMIT {limit}) m "
    "ON true WHERE c.id = {conversation} ORDER BY m.seq DESC"
)
# Rows of the tail sent with the write lock: a turn that extends the list seen last asks for the
# newest one only (ingest/align.py); a longer look is a statement of its own.
SENT_WITH_LOCK = 1


def tail_read(conversation_id: int, limit: int) -> str:
    """:data:`_TAIL` with its two integers written in (the simple protocol takes no parameters);
    a negative ``limit`` is SQLite's "no limit"."""
    return _TAIL.format(
        limit=int(limit) if limit >= 0 else "ALL", conversation=int(conversation_id)
    )


class PgPrints(SqlitePrints):
    """:class:`SqlitePrints` whose first look at the newest rows brings ``last_seq`` along.

    It lives for one selection: inside ``append``'s write transaction (no other writer can
    move ``last_seq`` before this one writes) or ``probe``'s read, where one statement's
    snapshot for both is as consistent as two. ``sent``: the rows of :func:`tail_read` with
    ``SENT_WITH_LOCK`` that came back with the write lock, in that same transaction.
    """

    _last_seq: int | None = None
    sent: list[Any] | None = None

    def tail_rows(self, limit: int) -> list[tuple[int, str]]:
        if self.sent is not None and 0 <= limit <= SENT_WITH_LOCK:
            rows = self.sent
        else:
            rows = self.db.execute(tail_read(self.conversation_id, limit)).fetchall()
        self._last_seq = int(rows[0][0]) if rows else 0
        newest = rows if limit < 0 else rows[:limit]
        return [(int(r[1]), unpack_fingerprint(r[2])) for r in reversed(newest) if r[1] is not None]

    def last_seq(self) -> int:
        if self._last_seq is None:
            self._last_seq = super().last_seq()
        return self._last_seq


class _NeedsRead(Exception):
    """The selection asked for more than the remembered tail: it is made again under the lock."""


class _Unread:
    """The database of a selection made from the remembered tail alone: any read refuses."""

    def execute(self, *_args: Any, **_kwargs: Any) -> Any:
        raise _NeedsRead


def _rows(records: Sequence[MessageIn]) -> dict[str, str]:
    """The insert's rows as one JSON parameter: psycopg dumping twelve arrays element by element
    cost a turn of four messages ~0.5 ms of Python, one ``json.dumps`` ~0.04 ms. Strings are
    escaped first (``codec``: the JSON text then holds no NUL for the server to refuse);
    ``n`` is each row's place, its seq after the conversation's last."""
    now = time.time()
    rows = []
    for n, m in enumerate(records, 1):
        row: dict[str, Any] = {
            name: None if (value := getattr(m, name)) is None else encode(value) for name in _TEXT
        }
        row.update(host_ts=m.host_ts, created_at=m.host_ts or now, tokens=m.tokens, n=n)
        rows.append(row)
    return {"rows": json.dumps(rows, ensure_ascii=False, allow_nan=False)}


def insert_messages(
    db: PgDb,
    conversation_id: int,
    session_id: str,
    source: str,
    records: Sequence[MessageIn],
    finish: bool = False,
) -> list[int]:
    """``storage.messages.insert_messages`` in one statement: the same rows, seqs and session key.
    ``finish``: nothing follows in the caller's write, so the COMMIT may go with the insert."""
    if not records:
        return []
    params = {"n": len(records), "cid": conversation_id, "session": session_id, "source": source}
    params.update(_rows(records))
    # The rows' payload grants are a statement more, after the insert: only without them is the
    # insert the write's last statement, sent with its COMMIT.
    last = finish and not any(m.payload_refs for m in records)
    rows = db.finish_with(_INSERT, params) if last else db.execute_named(_INSERT, params)
    if len(rows) != len(records):
        raise sqlite3.OperationalError(f"conversation {conversation_id} does not exist")
    ids = [int(r[0]) for r in sorted(rows, key=lambda r: int(r[1]))]
    record_grants(
        cast(sqlite3.Connection, db), ids, records
    )  # a statement more only for rows with payloads
    return ids


class PgMessageQueries(MessageQueries):
    """The shared message queries with a turn's append in one round trip (the module says how)."""

    # Per conversation, the tail rows (as ``tail_read`` returns them) after this process's last
    # write of it: a hint, checked by the insert under the lock, never trusted on its own.
    _tails: dict[int, list[Any]]

    def append(
        self,
        conversation_id: int,
        session_id: str,
        source: str,
        select: Callable[[SqlitePrints], Sequence[MessageIn]],
    ) -> list[int]:
        if not hasattr(self, "_tails"):
            self._tails = {}
        source = source or "unknown"
        ids = self._append_at_known_tail(conversation_id, session_id, source, select)
        if ids is not None:
            return ids
        pg = cast(PgConnection, self)  # the mixin runs on a PgStore
        with pg.write(first=tail_read(conversation_id, SENT_WITH_LOCK)) as db:
            prints = PgPrints(db, conversation_id, self.pack_fingerprint)
            prints.sent = sent = cast(PgDb, db).first_rows
            fresh = select(prints)
            ids = insert_messages(cast(PgDb, db), conversation_id, session_id, source, fresh, True)
            outermost = cast(PgDb, db).outermost
        if outermost and sent:  # committed, and the conversation exists
            self._tails[conversation_id] = _tail_after(sent, fresh)
        return ids

    def _append_at_known_tail(
        self,
        conversation_id: int,
        session_id: str,
        source: str,
        select: Callable[[SqlitePrints], Sequence[MessageIn]],
    ) -> list[int] | None:
        """The append in one round trip, or None: no remembered tail, a selection that needs
        more than it, nothing new or payload grants to write (their statement needs the ids), or
        a conversation another writer moved (nothing was written; the caller decides again)."""
        sent = self._tails.pop(conversation_id, None)
        if not sent:
            return None
        prints = PgPrints(cast(Any, _Unread()), conversation_id, self.pack_fingerprint)
        prints.sent = sent
        try:
            fresh = select(prints)
        except _NeedsRead:
            return None
        if not fresh or any(m.payload_refs for m in fresh):
            return None
        last = int(sent[0][0])
        params = {"n": len(fresh), "cid": conversation_id, "session": session_id, "source": source}
        params.update(_rows(fresh), expect_last=last, expect_newest=sent[0][1])
        rows = cast(PgConnection, self).write_alone(_INSERT_IF_UNMOVED, params)
        if not rows:  # moved (or a transaction is open): nothing written
            return None
        if len(rows) != len(fresh):
            raise sqlite3.OperationalError(f"conversation {conversation_id} does not exist")
        self._tails[conversation_id] = _tail_after(sent, fresh)
        return [int(r[0]) for r in sorted(rows, key=lambda r: int(r[1]))]

    def probe(
        self, conversation_id: int, select: Callable[[SqlitePrints], Sequence[MessageIn]]
    ) -> list[MessageIn]:
        with self.read() as db:
            return list(select(PgPrints(db, conversation_id, self.pack_fingerprint)))


def _tail_after(sent: list[Any], fresh: Sequence[MessageIn]) -> list[Any]:
    """The tail rows as ``tail_read`` would return them once ``fresh`` follows ``sent``'s."""
    if not fresh:
        return sent
    seq = int(sent[0][0]) + len(fresh)
    return [(seq, seq, fresh[-1].fingerprint)]


class PgConversationQueries(ConversationQueries):
    """The shared conversation queries; a secret that exists is read, not written."""

    def secret(self, name: str, size: int = 32) -> bytes:
        """``ConversationQueries.secret`` in one autocommit read once the secret exists: the write
        (BEGIN with the write lock, insert-if-missing, read, COMMIT) runs only the first time.
        Nothing is cached: every call reads the value the database holds now, as the write did."""
        with self.read() as db:
            row = db.execute("SELECT value FROM meta WHERE key=?", (f"secret:{name}",)).fetchone()
        return bytes.fromhex(row[0]) if row is not None else super().secret(name, size)

"""A host turn's write on PostgreSQL in as few round trips as SQLite makes calls.

Every statement to a PostgreSQL server is a network round trip, so the shared ingest path
(``MessageQueries.append``: the newest row, then the last seq twice, the session key in two
statements, the rows, the new last seq, the new ids) cost a turn eleven of them where SQLite
makes cheap in-process calls. Here the same decisions take two statements inside the write
transaction, under the same write lock and with the same rows written:

* :class:`PgPrints` reads the conversation's ``last_seq`` together with the newest rows (the
  alignment asks for both in one selection, and under the write lock neither can change
  until this transaction writes, which it does only after the selection);
* :func:`insert_messages` stores the rows, advances ``last_seq``, finds or makes the session
  key and returns the new ids in one statement (data-modifying CTEs);
* :class:`PgConversationQueries` reads a database secret (asked by every engine start and the
  first search of a process) without the write transaction that only its first use needs.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Sequence
from typing import Any, cast

from ...base.records import MessageIn
from ..conversations import ConversationQueries
from ..messages import MessageQueries, SqlitePrints
from ..payload_refs import record_grants
from ..rows import unpack_fingerprint
from .connection import PgDb

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
    "FROM c, unnest(%(role)s::text[], %(content)s::text[], %(parts)s::text[], %(tool_calls)s::text[], "
    "%(tool_call_id)s::text[], %(tool_name)s::text[], %(host_ts)s::float8[], %(created_at)s::float8[], "
    "%(tokens)s::bigint[], %(fingerprint)s::text[], %(synthetic)s::text[], %(extra)s::text[]) "
    "WITH ORDINALITY AS u(role, content, parts, tool_calls, tool_call_id, tool_name, host_ts, created_at, tokens, "
    "fingerprint, synthetic, extra, n) "
    "RETURNING id, seq"
)


class PgPrints(SqlitePrints):
    """:class:`SqlitePrints` whose first look at the newest rows brings ``last_seq`` along.

    It lives for one selection: inside ``append``'s write transaction (no other writer can
    move ``last_seq`` before this one writes) or ``probe``'s read, where one statement's
    snapshot for both is as consistent as two.
    """

    _last_seq: int | None = None

    def tail_rows(self, limit: int) -> list[tuple[int, str]]:
        rows = self.db.execute(
            "SELECT c.last_seq, m.seq, m.fingerprint FROM conversations c LEFT JOIN LATERAL "
            "(SELECT seq, fingerprint FROM messages WHERE conversation_id = c.id ORDER BY seq DESC LIMIT ?) m "
            "ON true WHERE c.id = ? ORDER BY m.seq DESC",
            (limit, self.conversation_id),
        ).fetchall()
        self._last_seq = int(rows[0][0]) if rows else 0
        return [(int(r[1]), unpack_fingerprint(r[2])) for r in reversed(rows) if r[1] is not None]

    def last_seq(self) -> int:
        if self._last_seq is None:
            self._last_seq = super().last_seq()
        return self._last_seq


def insert_messages(
    db: PgDb, conversation_id: int, session_id: str, source: str, records: Sequence[MessageIn]
) -> list[int]:
    """``storage.messages.insert_messages`` in one statement: the same rows, seqs and session key."""
    if not records:
        return []
    now = time.time()
    columns: dict[str, list[Any]] = {name: [getattr(m, name) for m in records] for name in _TEXT}
    columns["host_ts"] = [m.host_ts for m in records]
    columns["created_at"] = [m.host_ts or now for m in records]
    columns["tokens"] = [m.tokens for m in records]
    rows = db.execute_named(
        _INSERT,
        {
            "n": len(records),
            "cid": conversation_id,
            "session": session_id,
            "source": source,
            **columns,
        },
    )
    if len(rows) != len(records):
        raise sqlite3.OperationalError(f"conversation {conversation_id} does not exist")
    ids = [int(r[0]) for r in sorted(rows, key=lambda r: int(r[1]))]
    record_grants(
        cast(sqlite3.Connection, db), ids, records
    )  # a statement more only for rows with payloads
    return ids


class PgMessageQueries(MessageQueries):
    """The shared message queries with a turn's append in four round trips (BEGIN and the
    write lock, the newest rows with ``last_seq``, the insert, COMMIT) instead of eleven."""

    def append(
        self,
        conversation_id: int,
        session_id: str,
        source: str,
        select: Callable[[SqlitePrints], Sequence[MessageIn]],
    ) -> list[int]:
        with self.write() as db:
            fresh = select(PgPrints(db, conversation_id, self.pack_fingerprint))
            return insert_messages(
                cast(PgDb, db), conversation_id, session_id, source or "unknown", fresh
            )

    def probe(
        self, conversation_id: int, select: Callable[[SqlitePrints], Sequence[MessageIn]]
    ) -> list[MessageIn]:
        with self.read() as db:
            return list(select(PgPrints(db, conversation_id, self.pack_fingerprint)))


class PgConversationQueries(ConversationQueries):
    """The shared conversation queries; a secret that exists is read, not written."""

    def secret(self, name: str, size: int = 32) -> bytes:
        """``ConversationQueries.secret`` in one autocommit read once the secret exists: the write
        (BEGIN with the write lock, insert-if-missing, read, COMMIT) runs only the first time.
        Nothing is cached: every call reads the value the database holds now, as the write did."""
        with self.read() as db:
            row = db.execute("SELECT value FROM meta WHERE key=?", (f"secret:{name}",)).fetchone()
        return bytes.fromhex(row[0]) if row is not None else super().secret(name, size)

"""Messages: storing them at most once per conversation, reading them back as records,
and the fingerprint view (:class:`SqlitePrints`) alignment decides with.

A message is stored at most once per conversation. Identity is the pair
``(conversation_id, seq)`` under a UNIQUE constraint; the caller decides which
host messages are new while holding the write lock (:meth:`MessageQueries.append`),
so two processes replaying the same history serialize and the second finds the
first one's rows.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Sequence
from typing import Any

from ..base.records import MessageIn, StoredMessage
from .connection import SqliteConnection
from .payload_refs import record_grants
from .rows import SESSION_IS, pack_fingerprint, row_to_message, seq_bound, unpack_fingerprint

# The newest request at or before a seq: every assembly asks it (PostgreSQL keeps an index of exactly
# these rows, storage/pg/schema.py).
REQUEST_WHERE = (
    "conversation_id=? AND seq<=? AND role='user' AND synthetic IS NULL ORDER BY seq DESC LIMIT 1"
)


class SqlitePrints:
    """Read access to one conversation's message fingerprints, for alignment."""

    def __init__(
        self,
        db: sqlite3.Connection,
        conversation_id: int,
        pack: Callable[[str], str | bytes] = pack_fingerprint,
    ) -> None:
        # ``pack``: a fingerprint as stored (schema 4, or the read-only view of an older file)
        self.db, self.conversation_id, self.pack = db, conversation_id, pack

    def tail(self, limit: int) -> list[str]:
        """The newest ``limit`` fingerprints, oldest first."""
        return [fingerprint for _, fingerprint in self.tail_rows(limit)]

    def tail_rows(self, limit: int) -> list[tuple[int, str]]:
        """The newest ``limit`` rows as ``(seq, fingerprint)``, oldest first."""
        rows = self.db.execute(
            "SELECT seq, fingerprint FROM messages WHERE conversation_id=? ORDER BY seq DESC LIMIT ?",
            (self.conversation_id, limit),
        ).fetchall()
        return [(int(r[0]), unpack_fingerprint(r[1])) for r in reversed(rows)]

    def last_seq(self) -> int:
        """The conversation's newest seq (0 when it has no messages)."""
        row = self.db.execute(
            "SELECT last_seq FROM conversations WHERE id=?", (self.conversation_id,)
        ).fetchone()
        return int(row[0]) if row else 0

    def seqs(self, fingerprint: str, limit: int) -> list[int]:
        """Where a fingerprint occurs, newest first."""
        rows = self.db.execute(
            "SELECT seq FROM messages WHERE conversation_id=? AND fingerprint=? ORDER BY seq DESC LIMIT ?",
            (self.conversation_id, self.pack(fingerprint), limit),
        ).fetchall()
        return [int(r[0]) for r in rows]

    def fingerprint_of(self, message_id: int) -> str | None:
        """The stored fingerprint of one of this conversation's rows."""
        row = self.db.execute(
            "SELECT fingerprint FROM messages WHERE id=? AND conversation_id=?",
            (message_id, self.conversation_id),
        ).fetchone()
        return unpack_fingerprint(row[0]) if row else None

    def row_of(self, message_id: int) -> tuple[int, str] | None:
        """``(seq, fingerprint)`` of one of this conversation's rows."""
        row = self.db.execute(
            "SELECT seq, fingerprint FROM messages WHERE id=? AND conversation_id=?",
            (message_id, self.conversation_id),
        ).fetchone()
        return (int(row[0]), unpack_fingerprint(row[1])) if row else None

    def present(self, fingerprints: Sequence[str]) -> set[str]:
        """Which of these fingerprints the conversation holds (one query per 500)."""
        found: set[str] = set()
        for start in range(0, len(fingerprints), 500):
            chunk = [self.pack(f) for f in fingerprints[start : start + 500]]
            marks = ",".join("?" * len(chunk))
            found.update(
                unpack_fingerprint(r[0])
                for r in self.db.execute(
                    f"SELECT DISTINCT fingerprint FROM messages WHERE conversation_id=? AND fingerprint IN ({marks})",
                    (self.conversation_id, *chunk),
                )
            )
        return found

    def after(self, seq: int, limit: int) -> list[tuple[int, str]]:
        """The ``limit`` rows after ``seq`` as ``(seq, fingerprint)``, oldest first."""
        rows = self.db.execute(
            "SELECT seq, fingerprint FROM messages WHERE conversation_id=? AND seq>? ORDER BY seq LIMIT ?",
            (self.conversation_id, seq, limit),
        ).fetchall()
        return [(int(r[0]), unpack_fingerprint(r[1])) for r in rows]

    def once(self, fingerprints: Sequence[str]) -> set[str]:
        """Which of these fingerprints the conversation holds exactly once.

        Alignment takes such a message as proof of where the host's list meets the store: it can
        be only that row. One query; two index seeks per fingerprint (its first and last seq),
        so the cost does not grow with how often a short reply like "ok" was stored.
        """
        found: set[str] = set()
        for start in range(0, len(fingerprints), 500):
            chunk = [self.pack(f) for f in fingerprints[start : start + 500]]
            values = ",".join(
                ["(?)"] * len(chunk)
            )  # bound values, not JSON: a packed fingerprint is a blob
            found.update(
                unpack_fingerprint(r[0])
                for r in self.db.execute(
                    f"WITH v(fp) AS (VALUES {values}) SELECT fp FROM v WHERE "
                    "(SELECT min(seq) FROM messages WHERE conversation_id=? AND fingerprint=v.fp) = "
                    "(SELECT max(seq) FROM messages WHERE conversation_id=? AND fingerprint=v.fp)",
                    (*chunk, self.conversation_id, self.conversation_id),
                )
            )
        return found

    def window(self, seq: int, size: int) -> list[str]:
        """Fingerprints of the ``size`` messages ending at ``seq``, oldest first."""
        rows = self.db.execute(
            "SELECT fingerprint FROM messages WHERE conversation_id=? AND seq BETWEEN ? AND ? ORDER BY seq",
            (self.conversation_id, seq - size + 1, seq),
        ).fetchall()
        return [unpack_fingerprint(r[0]) for r in rows]


# Most rows per INSERT statement (fewer when the SQLite build allows fewer bound parameters).
_INSERT_BATCH_ROWS = 2000
_MESSAGE_INSERT_COLUMNS = (
    "conversation_id",
    "seq",
    "session_key",
    "role",
    "content",
    "parts",
    "tool_calls",
    "tool_call_id",
    "tool_name",
    "source",
    "host_ts",
    "created_at",
    "tokens",
    "fingerprint",
    "synthetic",
    "extra",
)
_MESSAGE_INSERT_PARAMS = len(_MESSAGE_INSERT_COLUMNS)


def session_key(db: sqlite3.Connection, session_id: str) -> int:
    """The integer key of a session's text id (schema 4), made on first use."""
    db.execute("INSERT OR IGNORE INTO session_keys(name) VALUES (?)", (session_id,))
    return int(db.execute("SELECT id FROM session_keys WHERE name=?", (session_id,)).fetchone()[0])


def insert_messages(
    db: sqlite3.Connection,
    conversation_id: int,
    session_id: str,
    source: str,
    records: Sequence[MessageIn],
    pack: Callable[[str], str | bytes] = pack_fingerprint,
) -> list[int]:
    """Append records after the conversation's last seq, in the caller's transaction.

    Rows go in as multi-row INSERT statements, not one statement per row: the FTS5 trigger
    flushes the index's pending terms at every statement, and each flush does incremental merge
    work that re-reads any large segment, so per-row statements after one huge row (a turn with
    100k tool calls) cost minutes; a few statements per call cost milliseconds. Each record's
    payload grants go in with it (storage/payload_refs.py).
    """
    if not records:
        return []
    last_seq = int(
        db.execute("SELECT last_seq FROM conversations WHERE id=?", (conversation_id,)).fetchone()[
            0
        ]
    )
    now = time.time()
    session = session_key(db, session_id)  # schema 4: integer session key, packed fingerprint
    rows = [
        (
            conversation_id,
            last_seq + offset,
            session,
            m.role,
            m.content,
            m.parts,
            m.tool_calls,
            m.tool_call_id,
            m.tool_name,
            source,
            m.host_ts,
            m.host_ts or now,
            m.tokens,
            pack(m.fingerprint),
            m.synthetic,
            m.extra,
        )
        for offset, m in enumerate(records, start=1)
    ]
    # A backend with a bulk path of its own (PostgreSQL: one statement whatever the row count, see
    # storage/pg/connection.py PgDb.insert_rows) takes the rows whole; SQLite gets multi-row INSERTs.
    bulk: Callable[[str, Sequence[str], Sequence[Sequence[object]]], None] | None = getattr(
        db, "insert_rows", None
    )
    if bulk is not None:
        bulk("messages", _MESSAGE_INSERT_COLUMNS, rows)
    else:
        per_statement = max(
            1,
            min(
                _INSERT_BATCH_ROWS,
                db.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER) // _MESSAGE_INSERT_PARAMS,
            ),
        )
        for start in range(0, len(rows), per_statement):
            batch = rows[start : start + per_statement]
            db.execute(
                f"INSERT INTO messages({', '.join(_MESSAGE_INSERT_COLUMNS)}) VALUES "
                + ",".join(["(" + ", ".join(["?"] * _MESSAGE_INSERT_PARAMS) + ")"] * len(batch)),
                [value for row in batch for value in row],
            )
    db.execute(
        "UPDATE conversations SET last_seq=? WHERE id=?", (last_seq + len(records), conversation_id)
    )
    ids = [
        int(r[0])
        for r in db.execute(
            "SELECT id FROM messages WHERE conversation_id=? AND seq>? ORDER BY seq",
            (conversation_id, last_seq),
        ).fetchall()
    ]
    record_grants(db, ids, records)  # the payloads the engine kept for these rows, with them
    return ids


class MessageQueries(SqliteConnection):
    """Storing and reading messages."""

    def append(
        self,
        conversation_id: int,
        session_id: str,
        source: str,
        select: Callable[[SqlitePrints], Sequence[MessageIn]],
    ) -> list[int]:
        """Store the records ``select`` picks as new; returns their ids.

        ``select`` runs inside the write lock with a view of the conversation's
        stored fingerprints, so concurrent writers serialize on the decision.
        """
        with self.write() as db:
            fresh = select(SqlitePrints(db, conversation_id, self.pack_fingerprint))
            return insert_messages(
                db, conversation_id, session_id, source or "unknown", fresh, self.pack_fingerprint
            )

    def probe(
        self, conversation_id: int, select: Callable[[SqlitePrints], Sequence[MessageIn]]
    ) -> list[MessageIn]:
        """What ``select`` would store now, without writing: reads work while writes fail."""
        with self.read() as db:
            return list(select(SqlitePrints(db, conversation_id, self.pack_fingerprint)))

    def append_imported(
        self, conversation_id: int, session_id: str, source: str, records: Sequence[MessageIn]
    ) -> tuple[list[int], int]:
        """Append import records whose fingerprint (their provenance id) the conversation
        does not hold yet, in one transaction; returns (new ids, skipped as existing)."""
        with self.write() as db:
            known = {
                unpack_fingerprint(r[0])
                for r in db.execute(
                    "SELECT fingerprint FROM messages WHERE conversation_id=?", (conversation_id,)
                ).fetchall()
            }
            fresh = [m for m in records if m.fingerprint not in known]
            ids = insert_messages(
                db, conversation_id, session_id, source, fresh, self.pack_fingerprint
            )
        return ids, len(records) - len(fresh)

    def fingerprint_ids(self, conversation_id: int) -> dict[str, int]:
        """fingerprint -> message id for a conversation (imports map provenance to rows)."""
        with self.read() as db:
            return {
                unpack_fingerprint(r[0]): int(r[1])
                for r in db.execute(
                    "SELECT fingerprint, id FROM messages WHERE conversation_id=?",
                    (conversation_id,),
                ).fetchall()
            }

    def _messages(self, where: str, args: Sequence[Any]) -> list[StoredMessage]:
        """``SELECT <message columns> FROM messages WHERE <where>`` as records, in the query's order."""
        with self.read() as db:
            return [
                row_to_message(r)
                for r in db.execute(
                    f"SELECT {self.message_columns} FROM messages WHERE {where}", args
                ).fetchall()
            ]

    def messages_after(
        self, conversation_id: int, seq: int, limit: int = -1
    ) -> list[StoredMessage]:
        return self._messages(
            "conversation_id=? AND seq>? ORDER BY seq LIMIT ?", (conversation_id, seq, limit)
        )

    def messages_newest(
        self, conversation_id: int, after_seq: int, limit: int, upto: int | None = None
    ) -> list[StoredMessage]:
        """The newest ``limit`` messages after ``after_seq`` (and at most ``upto``), oldest first."""
        return self._messages(
            "conversation_id=? AND seq>? AND seq<=? ORDER BY seq DESC LIMIT ?",
            (conversation_id, after_seq, seq_bound(upto), limit),
        )[::-1]

    def message_ids_newest(
        self, conversation_id: int, after_seq: int, limit: int, upto: int | None = None
    ) -> list[int]:
        """Ids of :meth:`messages_newest`'s rows, oldest first: the index alone answers it, so a
        caller holding most rows already reads only the new ones."""
        with self.read() as db:
            rows = db.execute(
                "SELECT id FROM messages WHERE conversation_id=? AND seq>? AND seq<=? ORDER BY seq DESC LIMIT ?",
                (conversation_id, after_seq, seq_bound(upto), limit),
            ).fetchall()
        return [r[0] for r in reversed(rows)]

    def raw_tokens(self, conversation_id: int, after_seq: int, upto: int | None = None) -> int:
        """Tokens of the messages after ``after_seq`` and at most ``upto`` (the raw part of the context)."""
        with self.read() as db:
            row = db.execute(
                "SELECT coalesce(sum(tokens), 0) FROM messages WHERE conversation_id=? AND seq>? "
                "AND seq<=?",
                (conversation_id, after_seq, seq_bound(upto)),
            ).fetchone()
        return int(row[0])

    def messages_between(
        self, conversation_id: int, first_seq: int, last_seq: int
    ) -> list[StoredMessage]:
        return self._messages(
            "conversation_id=? AND seq BETWEEN ? AND ? ORDER BY seq",
            (conversation_id, first_seq, last_seq),
        )

    def message(self, message_id: int) -> StoredMessage | None:
        with self.read() as db:
            row = db.execute(
                f"SELECT {self.message_columns} FROM messages WHERE id=?", (message_id,)
            ).fetchone()
        return row_to_message(row) if row else None

    def messages_by_ids(self, ids: Sequence[int]) -> list[StoredMessage]:
        if not ids:
            return []
        rows: list[Any] = []
        with self.read() as db:
            for start in range(0, len(ids), 500):
                chunk = tuple(ids[start : start + 500])
                marks = ",".join("?" * len(chunk))
                rows += db.execute(
                    f"SELECT {self.message_columns} FROM messages WHERE id IN ({marks})", chunk
                ).fetchall()
        rows.sort(key=lambda r: (r[1], r[2]))  # (conversation_id, seq): store order
        return [row_to_message(r) for r in rows]

    def messages_in_reach(
        self, ids: Sequence[int], conversations: Sequence[int] | None
    ) -> list[StoredMessage]:
        if conversations is None:
            return self.messages_by_ids(ids)
        reach = tuple(int(c) for c in conversations)
        if not ids or not reach:
            return []
        rows: list[Any] = []
        with self.read() as db:
            for start in range(0, len(ids), 400):
                chunk = tuple(ids[start : start + 400])
                sql = (
                    f"SELECT {self.message_columns} FROM messages WHERE id IN ({','.join('?' * len(chunk))})"
                    f" AND conversation_id IN ({','.join('?' * len(reach))})"
                )
                rows += db.execute(sql, (*chunk, *reach)).fetchall()
        rows.sort(key=lambda r: (r[1], r[2]))
        return [row_to_message(r) for r in rows]

    def session_messages(self, session_id: str, after_id: int, limit: int) -> list[StoredMessage]:
        return self._messages(
            f"{SESSION_IS.format(alias='')} AND id>? ORDER BY id LIMIT ?",
            (session_id, after_id, limit),
        )

    def messages_tail(self, conversation_id: int, limit: int) -> list[StoredMessage]:
        """The newest ``limit`` messages of a conversation, oldest first."""
        return self.messages_newest(conversation_id, 0, limit)

    def last_fingerprint(self, conversation_id: int) -> str | None:
        with self.read() as db:
            row = db.execute(
                "SELECT fingerprint FROM messages WHERE conversation_id=? ORDER BY seq DESC LIMIT 1",
                (conversation_id,),
            ).fetchone()
        return unpack_fingerprint(row[0]) if row else None

    def newest_request(self, conversation_id: int, upto: int | None = None) -> StoredMessage | None:
        """The newest user message a person sent at or before seq ``upto``: host scaffolding
        (``synthetic``) is skipped."""
        with self.read() as db:
            row = db.execute(
                f"SELECT {self.message_columns} FROM messages WHERE {REQUEST_WHERE}",
                (conversation_id, seq_bound(upto)),
            ).fetchone()
        return row_to_message(row) if row else None

    def newest_message(
        self, conversation_id: int, role: str | None = None, upto: int | None = None
    ) -> StoredMessage | None:
        """The newest message (of ``role``) at or before seq ``upto``."""
        where, args = (
            ("AND role=?", (conversation_id, seq_bound(upto), role))
            if role
            else ("", (conversation_id, seq_bound(upto)))
        )
        with self.read() as db:
            row = db.execute(
                f"SELECT {self.message_columns} FROM messages WHERE conversation_id=? AND seq<=? "
                f"{where} ORDER BY seq DESC LIMIT 1",
                args,
            ).fetchone()
        return row_to_message(row) if row else None

    def message_count(self, conversation_id: int | None = None) -> int:
        with self.read() as db:
            if conversation_id is None:
                return int(db.execute("SELECT count(*) FROM messages").fetchone()[0])
            return int(
                db.execute(
                    "SELECT count(*) FROM messages WHERE conversation_id=?", (conversation_id,)
                ).fetchone()[0]
            )

"""The SQLite store: one connection per database file and process, WAL mode,
``BEGIN IMMEDIATE`` for every write, forward-only schema migrations.

Guarantees, in the manner of SQLite's own documentation:

* A message is stored at most once per conversation. Identity is the pair
  ``(conversation_id, seq)`` under a UNIQUE constraint; the caller decides which
  host messages are new while holding the write lock (:meth:`Store.append`), so
  two processes replaying the same history serialize and the second finds the
  first one's rows.
* A database written by another program, or by a newer hermes-lcm, is never
  written to: opening it raises :class:`ForeignDatabase` or :class:`NewerSchema`.
* All SQL of the project lives in this module and ``dag.py``.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

from .records import ConversationState, MessageIn, SessionInfo, StoredMessage
from .scaffold import HOST_USER_PREFIXES, prefix_label

APP_ID = "hermes-lcm"
SCHEMA_VERSION = 2
BUSY_TIMEOUT_MS = 15000
# The WAL is copied back into the database file by a thread of its own every this many commits
# (a turn commits about 20 pages), so no host turn pays for a checkpoint (bench/ingest_growth.py).
CHECKPOINT_EVERY_COMMITS = 100
# The writer checkpoints by itself only if the background checkpoints fall this far behind (pages).
WAL_AUTOCHECKPOINT_PAGES = 10000

_MIGRATIONS: dict[int, str] = {
    1: """
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE conversations(
  id INTEGER PRIMARY KEY,
  key TEXT NOT NULL UNIQUE,
  created_at REAL NOT NULL,
  frontier_seq INTEGER NOT NULL DEFAULT 0,
  last_seq INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE sessions(
  id TEXT PRIMARY KEY,
  conversation_id INTEGER NOT NULL REFERENCES conversations(id),
  platform TEXT NOT NULL DEFAULT '',
  mode TEXT NOT NULL DEFAULT 'normal',
  started_at REAL NOT NULL,
  ended_at REAL,
  parent_session_id TEXT,
  reason TEXT
);
CREATE TABLE messages(
  id INTEGER PRIMARY KEY,
  conversation_id INTEGER NOT NULL REFERENCES conversations(id),
  seq INTEGER NOT NULL,
  session_id TEXT NOT NULL,
  role TEXT NOT NULL,
  content TEXT NOT NULL,
  parts TEXT,
  tool_calls TEXT,
  tool_call_id TEXT,
  tool_name TEXT,
  source TEXT NOT NULL DEFAULT 'unknown',
  host_ts REAL,
  created_at REAL NOT NULL,
  tokens INTEGER NOT NULL,
  fingerprint TEXT NOT NULL,
  UNIQUE(conversation_id, seq)
);
CREATE INDEX messages_fingerprint ON messages(conversation_id, fingerprint, seq);
CREATE INDEX messages_session ON messages(session_id, id);
CREATE VIRTUAL TABLE messages_fts USING fts5(
  content, tool_calls, content='messages', content_rowid='id', tokenize='porter unicode61'
);
CREATE TRIGGER messages_ai AFTER INSERT ON messages BEGIN
  INSERT INTO messages_fts(rowid, content, tool_calls) VALUES (new.id, new.content, new.tool_calls);
END;
CREATE TRIGGER messages_ad AFTER DELETE ON messages BEGIN
  INSERT INTO messages_fts(messages_fts, rowid, content, tool_calls)
    VALUES ('delete', old.id, old.content, old.tool_calls);
END;
CREATE TRIGGER messages_au AFTER UPDATE OF content, tool_calls ON messages BEGIN
  INSERT INTO messages_fts(messages_fts, rowid, content, tool_calls)
    VALUES ('delete', old.id, old.content, old.tool_calls);
  INSERT INTO messages_fts(rowid, content, tool_calls) VALUES (new.id, new.content, new.tool_calls);
END;
CREATE TABLE summaries(
  id INTEGER PRIMARY KEY,
  conversation_id INTEGER NOT NULL REFERENCES conversations(id),
  session_id TEXT NOT NULL,
  depth INTEGER NOT NULL,
  content TEXT NOT NULL,
  tokens INTEGER NOT NULL,
  first_seq INTEGER NOT NULL,
  last_seq INTEGER NOT NULL,
  earliest_at REAL NOT NULL,
  latest_at REAL NOT NULL,
  source_tokens INTEGER NOT NULL,
  level TEXT NOT NULL,
  route TEXT NOT NULL,
  created_at REAL NOT NULL
);
CREATE INDEX summaries_conversation ON summaries(conversation_id, depth, id);
CREATE VIRTUAL TABLE summaries_fts USING fts5(
  content, content='summaries', content_rowid='id', tokenize='porter unicode61'
);
CREATE TRIGGER summaries_ai AFTER INSERT ON summaries BEGIN
  INSERT INTO summaries_fts(rowid, content) VALUES (new.id, new.content);
END;
CREATE TRIGGER summaries_ad AFTER DELETE ON summaries BEGIN
  INSERT INTO summaries_fts(summaries_fts, rowid, content) VALUES ('delete', old.id, old.content);
END;
CREATE TABLE edges(
  parent_id INTEGER NOT NULL REFERENCES summaries(id),
  child_kind TEXT NOT NULL CHECK (child_kind IN ('message', 'summary')),
  child_id INTEGER NOT NULL,
  ord INTEGER NOT NULL,
  PRIMARY KEY(parent_id, child_kind, child_id)
) WITHOUT ROWID;
CREATE INDEX edges_child ON edges(child_kind, child_id);
CREATE TABLE context_items(
  conversation_id INTEGER NOT NULL REFERENCES conversations(id),
  ord INTEGER NOT NULL,
  summary_id INTEGER NOT NULL REFERENCES summaries(id),
  PRIMARY KEY(conversation_id, ord)
);
CREATE TABLE events(
  id INTEGER PRIMARY KEY,
  at REAL NOT NULL,
  level TEXT NOT NULL,
  kind TEXT NOT NULL,
  conversation_id INTEGER,
  detail TEXT NOT NULL
);
""",
    # The host's other public message fields (reasoning_content, reasoning_details,
    # codex_reasoning_items, anthropic_content_blocks, ...) as one JSON object, so a
    # message rebuilt from the store is the message the host gave us. NULL: none.
    2: """
ALTER TABLE messages ADD COLUMN extra TEXT;
""",
}


def _sql_text(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _scaffold_migration() -> str:
    """Version 2, second half: ``messages.synthetic`` labels host scaffolding (NULL for a real message).

    Rows stored before it are labelled by the host's text prefixes (their private
    flags were never stored); a todo snapshot stored by 0.x stops being "the request".
    """
    updates = [
        f"UPDATE messages SET synthetic={_sql_text(prefix_label(p))} WHERE role='user' AND synthetic IS NULL "
        f"AND substr(ltrim(content), 1, {len(p)})={_sql_text(p)};"
        for p in HOST_USER_PREFIXES
    ]
    return "ALTER TABLE messages ADD COLUMN synthetic TEXT;\n" + "\n".join(updates)


_MIGRATIONS[2] += _scaffold_migration()


class StoreError(Exception):
    """The database cannot be used as an hermes-lcm store."""


class ForeignDatabase(StoreError):
    """The file holds tables this program did not create (e.g. another LCM)."""


class NewerSchema(StoreError):
    """The file was written by a newer hermes-lcm; we refuse to touch it."""


# SQLite result codes (primary name prefixes) that mean "this write cannot happen now",
# each with the label status and doctor show.
_WRITE_FAILURES = (("SQLITE_FULL", "disk full"), ("SQLITE_IOERR", "I/O error"), ("SQLITE_READONLY", "read-only"),
                   ("SQLITE_BUSY", "locked"), ("SQLITE_LOCKED", "locked"), ("SQLITE_CANTOPEN", "cannot open"))


class WriteFailed(sqlite3.OperationalError):
    """The store could not write (disk full, I/O error, read-only, locked past the timeout).

    Nothing of the failed transaction is stored. It subclasses ``OperationalError`` so code
    that handled the raw SQLite error still does; callers that must not lose messages catch
    it to keep what was not stored (see ``LcmCore.compress``).
    """

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason


def write_failure(exc: BaseException) -> WriteFailed | None:
    """``exc`` as a :class:`WriteFailed` when it says the database cannot be written now."""
    if isinstance(exc, WriteFailed):
        return exc
    if not isinstance(exc, sqlite3.Error):
        return None
    name = str(getattr(exc, "sqlite_errorname", "") or "")
    for prefix, reason in _WRITE_FAILURES:
        if name.startswith(prefix):
            return WriteFailed(reason, str(exc))
    return None


_BASE_MESSAGE_COLUMNS = (
    "id, conversation_id, seq, session_id, role, content, parts, tool_calls, tool_call_id, "
    "tool_name, source, created_at, tokens"
)
MESSAGE_COLUMNS = _BASE_MESSAGE_COLUMNS + ", extra"


def qualified(columns: str, alias: str) -> str:
    """``"id, seq"`` -> ``"m.id, m.seq"`` for joins."""
    return ", ".join(f"{alias}.{c.strip()}" for c in columns.split(","))


MESSAGE_COLUMNS_M = qualified(MESSAGE_COLUMNS, "m")


def message_columns(version: int, alias: str = "") -> str:
    """The columns a :class:`StoredMessage` is read from under schema ``version``.

    A read-only connection never migrates, so a schema-1 file (no ``extra``)
    reads NULL in its place and the operator tools keep working on it.
    """
    base = qualified(_BASE_MESSAGE_COLUMNS, alias) if alias else _BASE_MESSAGE_COLUMNS
    if version >= 2:
        return f"{base}, {alias + '.' if alias else ''}extra"
    return f"{base}, NULL"


def row_to_message(row: sqlite3.Row) -> StoredMessage:
    return StoredMessage(*row)


class StoredPrints:
    """Read access to one conversation's message fingerprints, for alignment."""

    def __init__(self, db: sqlite3.Connection, conversation_id: int) -> None:
        self.db, self.conversation_id = db, conversation_id

    def tail(self, limit: int) -> list[str]:
        """The newest ``limit`` fingerprints, oldest first."""
        return [fingerprint for _, fingerprint in self.tail_rows(limit)]

    def tail_rows(self, limit: int) -> list[tuple[int, str]]:
        """The newest ``limit`` rows as ``(seq, fingerprint)``, oldest first."""
        rows = self.db.execute(
            "SELECT seq, fingerprint FROM messages WHERE conversation_id=? ORDER BY seq DESC LIMIT ?",
            (self.conversation_id, limit),
        ).fetchall()
        return [(int(r[0]), str(r[1])) for r in reversed(rows)]

    def last_seq(self) -> int:
        """The conversation's newest seq (0 when it has no messages)."""
        row = self.db.execute("SELECT last_seq FROM conversations WHERE id=?", (self.conversation_id,)).fetchone()
        return int(row[0]) if row else 0

    def seqs(self, fingerprint: str, limit: int) -> list[int]:
        """Where a fingerprint occurs, newest first."""
        rows = self.db.execute(
            "SELECT seq FROM messages WHERE conversation_id=? AND fingerprint=? ORDER BY seq DESC LIMIT ?",
            (self.conversation_id, fingerprint, limit),
        ).fetchall()
        return [int(r[0]) for r in rows]

    def fingerprint_of(self, message_id: int) -> str | None:
        """The stored fingerprint of one of this conversation's rows."""
        row = self.db.execute("SELECT fingerprint FROM messages WHERE id=? AND conversation_id=?",
                              (message_id, self.conversation_id)).fetchone()
        return str(row[0]) if row else None

    def row_of(self, message_id: int) -> tuple[int, str] | None:
        """``(seq, fingerprint)`` of one of this conversation's rows."""
        row = self.db.execute("SELECT seq, fingerprint FROM messages WHERE id=? AND conversation_id=?",
                              (message_id, self.conversation_id)).fetchone()
        return (int(row[0]), str(row[1])) if row else None

    def present(self, fingerprints: Sequence[str]) -> set[str]:
        """Which of these fingerprints the conversation holds (one query per 500)."""
        found: set[str] = set()
        for start in range(0, len(fingerprints), 500):
            chunk = fingerprints[start:start + 500]
            marks = ",".join("?" * len(chunk))
            found.update(r[0] for r in self.db.execute(
                f"SELECT DISTINCT fingerprint FROM messages WHERE conversation_id=? AND fingerprint IN ({marks})",
                (self.conversation_id, *chunk)))
        return found

    def after(self, seq: int, limit: int) -> list[tuple[int, str]]:
        """The ``limit`` rows after ``seq`` as ``(seq, fingerprint)``, oldest first."""
        rows = self.db.execute(
            "SELECT seq, fingerprint FROM messages WHERE conversation_id=? AND seq>? ORDER BY seq LIMIT ?",
            (self.conversation_id, seq, limit),
        ).fetchall()
        return [(int(r[0]), str(r[1])) for r in rows]

    def once(self, fingerprints: Sequence[str]) -> set[str]:
        """Which of these fingerprints the conversation holds exactly once.

        Alignment takes such a message as proof of where the host's list meets the store: it can
        be only that row. One query; two index seeks per fingerprint (its first and last seq),
        so the cost does not grow with how often a short reply like "ok" was stored.
        """
        found: set[str] = set()
        for start in range(0, len(fingerprints), 500):
            chunk = json.dumps(list(fingerprints[start:start + 500]))
            found.update(str(r[0]) for r in self.db.execute(
                "SELECT value FROM json_each(?) WHERE "
                "(SELECT min(seq) FROM messages WHERE conversation_id=? AND fingerprint=value) = "
                "(SELECT max(seq) FROM messages WHERE conversation_id=? AND fingerprint=value)",
                (chunk, self.conversation_id, self.conversation_id)))
        return found

    def window(self, seq: int, size: int) -> list[str]:
        """Fingerprints of the ``size`` messages ending at ``seq``, oldest first."""
        rows = self.db.execute(
            "SELECT fingerprint FROM messages WHERE conversation_id=? AND seq BETWEEN ? AND ? ORDER BY seq",
            (self.conversation_id, seq - size + 1, seq),
        ).fetchall()
        return [r[0] for r in rows]


class Checkpointer:
    """Copies the WAL into the database file on a thread of its own.

    SQLite's automatic checkpoint runs inside the COMMIT that crosses its threshold, so one
    turn in a few hundred paid for copying every page the others wrote (40-60 ms at 100k
    messages, more as the history grows and its index pages spread). A PASSIVE checkpoint on
    a second connection copies the same pages without ever blocking the writer or a reader,
    and never waits (the busy handler is not used). The thread and its connection start on
    the first request and end with :meth:`stop`.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self._wake = threading.Event()
        self._stopping = False
        self._thread: threading.Thread | None = None
        self.checkpoints = 0

    def request(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._stopping = False
            self._thread = threading.Thread(target=self._run, name="hermes-lcm-checkpoint", daemon=True)
            self._thread.start()
        self._wake.set()

    def _run(self) -> None:
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        try:
            while True:
                self._wake.wait()
                self._wake.clear()
                if self._stopping:
                    return
                with contextlib.suppress(sqlite3.Error):  # a failed checkpoint leaves the WAL as it was
                    conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                    self.checkpoints += 1
        finally:
            conn.close()

    def stop(self) -> None:
        self._stopping = True
        self._wake.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)


class Store:
    """A database file opened for this process. Use :func:`open_store`."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.lock = threading.RLock()
        self.checkpointer = Checkpointer(path) if path != ":memory:" else None
        self._commits = 0
        if path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        self.conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None,
                                    check_same_thread=False)
        self.conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        _retry_locked(self._open)

    def _open(self) -> None:
        self._check_identity()
        # Switching a new file to WAL takes an exclusive lock without waiting on the busy
        # handler, so a second process opening the same new file at once can see "locked".
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=NORMAL")
        self.conn.execute("PRAGMA cache_size=-32768")  # 32 MiB: index and FTS pages stay hot
        self.conn.execute(f"PRAGMA wal_autocheckpoint={WAL_AUTOCHECKPOINT_PAGES}")
        self.conn.execute("PRAGMA foreign_keys=ON")
        self._migrate()
        self._set_columns()

    def _set_columns(self) -> None:
        version = self.schema_version()
        self.message_columns = message_columns(version)
        self.message_columns_m = message_columns(version, "m")

    # -- schema -----------------------------------------------------------

    def _tables(self) -> set[str]:
        rows = self.conn.execute("SELECT name FROM sqlite_master WHERE type='table'").fetchall()
        return {r[0] for r in rows}

    def _check_identity(self) -> None:
        tables = self._tables()
        if not tables:
            return
        if "meta" not in tables:
            raise ForeignDatabase(f"{self.path} holds tables not written by {APP_ID}: {sorted(tables)[:8]}")
        rows = dict(self.conn.execute("SELECT key, value FROM meta").fetchall())
        if rows.get("app") != APP_ID:
            raise ForeignDatabase(f"{self.path} belongs to {rows.get('app')!r}, not {APP_ID}")
        version = int(rows.get("schema_version", "0"))
        if version > SCHEMA_VERSION:
            raise NewerSchema(f"{self.path} has schema {version}; this hermes-lcm knows up to {SCHEMA_VERSION}")

    def schema_version(self) -> int:
        if "meta" not in self._tables():
            return 0
        row = self.conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        return int(row[0]) if row else 0

    def _migrate(self) -> None:
        with self.write():
            current = self.schema_version()
            for version in range(current + 1, SCHEMA_VERSION + 1):
                for statement in _split_sql(_MIGRATIONS[version]):
                    self.conn.execute(statement)
                self.conn.execute(
                    "INSERT INTO meta(key, value) VALUES ('app', ?), ('schema_version', ?) "
                    "ON CONFLICT(key) DO UPDATE SET value=excluded.value",
                    (APP_ID, str(version)),
                )

    # -- transactions -----------------------------------------------------

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """One ``BEGIN IMMEDIATE`` transaction; nested calls join the outer one."""
        with self.lock:
            if self.conn.in_transaction:
                yield self.conn
                return
            try:
                self.conn.execute("BEGIN IMMEDIATE")
                yield self.conn
                self.conn.execute("COMMIT")
            except BaseException as exc:
                self._abandon()
                failed = write_failure(exc)
                if failed is not None and failed is not exc:
                    raise failed from exc
                raise
            self._committed()

    def _committed(self) -> None:
        self._commits += 1
        if self.checkpointer is not None and self._commits % CHECKPOINT_EVERY_COMMITS == 0:
            self.checkpointer.request()

    def _abandon(self) -> None:
        """End a failed transaction. SQLite may already have rolled it back (SQLITE_FULL, I/O
        errors), and a failed COMMIT leaves it open: never let the next write join it."""
        if self.conn.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                self.conn.execute("ROLLBACK")

    @contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        with self.lock:
            yield self.conn

    def close(self) -> None:
        if self.checkpointer is not None:
            self.checkpointer.stop()
        with self.lock:
            self.conn.close()

    # -- conversations and sessions ----------------------------------------

    def ensure_conversation(self, key: str) -> int:
        with self.write() as db:
            db.execute("INSERT OR IGNORE INTO conversations(key, created_at) VALUES (?, ?)", (key, time.time()))
            return int(db.execute("SELECT id FROM conversations WHERE key=?", (key,)).fetchone()[0])

    def conversation(self, conversation_id: int) -> ConversationState:
        with self.read() as db:
            row = db.execute(
                "SELECT id, key, frontier_seq, last_seq FROM conversations WHERE id=?", (conversation_id,)
            ).fetchone()
        if row is None:
            raise KeyError(conversation_id)
        return ConversationState(*row)

    def conversation_by_key(self, key: str) -> ConversationState | None:
        with self.read() as db:
            row = db.execute("SELECT id, key, frontier_seq, last_seq FROM conversations WHERE key=?",
                             (key,)).fetchone()
        return ConversationState(*row) if row else None

    def upsert_session(self, session_id: str, conversation_id: int, *, platform: str = "", mode: str = "normal",
                       parent_session_id: str | None = None, reason: str | None = None) -> None:
        with self.write() as db:
            db.execute(
                "INSERT INTO sessions(id, conversation_id, platform, mode, started_at, parent_session_id, reason) "
                "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT(id) DO UPDATE SET ended_at=NULL",
                (session_id, conversation_id, platform, mode, time.time(), parent_session_id, reason),
            )

    def session(self, session_id: str) -> SessionInfo | None:
        with self.read() as db:
            row = db.execute(
                "SELECT id, conversation_id, platform, mode, started_at, parent_session_id FROM sessions WHERE id=?",
                (session_id,),
            ).fetchone()
        return SessionInfo(*row) if row else None

    def end_session(self, session_id: str) -> None:
        with self.write() as db:
            db.execute("UPDATE sessions SET ended_at=? WHERE id=?", (time.time(), session_id))

    # -- messages -------------------------------------------------------------

    def append(self, conversation_id: int, session_id: str, source: str,
               select: Callable[[StoredPrints], Sequence[MessageIn]]) -> list[int]:
        """Store the records ``select`` picks as new; returns their ids.

        ``select`` runs inside the write lock with a view of the conversation's
        stored fingerprints, so concurrent writers serialize on the decision.
        """
        with self.write() as db:
            fresh = select(StoredPrints(db, conversation_id))
            return _insert_messages(db, conversation_id, session_id, source or "unknown", fresh)

    def probe(self, conversation_id: int, select: Callable[[StoredPrints], Sequence[MessageIn]]) -> list[MessageIn]:
        """What ``select`` would store now, without writing: reads work while writes fail."""
        with self.read() as db:
            return list(select(StoredPrints(db, conversation_id)))

    def messages_after(self, conversation_id: int, seq: int, limit: int = -1) -> list[StoredMessage]:
        with self.read() as db:
            rows = db.execute(
                f"SELECT {self.message_columns} FROM messages WHERE conversation_id=? AND seq>? ORDER BY seq LIMIT ?",
                (conversation_id, seq, limit),
            ).fetchall()
        return [row_to_message(r) for r in rows]

    def messages_newest(self, conversation_id: int, after_seq: int, limit: int,
                        upto: int | None = None) -> list[StoredMessage]:
        """The newest ``limit`` messages after ``after_seq`` (and at most ``upto``), oldest first."""
        with self.read() as db:
            rows = db.execute(
                f"SELECT {self.message_columns} FROM messages WHERE conversation_id=? AND seq>? AND seq<=? "
                "ORDER BY seq DESC LIMIT ?",
                (conversation_id, after_seq, _upto(upto), limit),
            ).fetchall()
        return [row_to_message(r) for r in reversed(rows)]

    def message_ids_newest(self, conversation_id: int, after_seq: int, limit: int,
                           upto: int | None = None) -> list[int]:
        """Ids of :meth:`messages_newest`'s rows, oldest first: the index alone answers it, so a
        caller holding most rows already reads only the new ones."""
        with self.read() as db:
            rows = db.execute(
                "SELECT id FROM messages WHERE conversation_id=? AND seq>? AND seq<=? ORDER BY seq DESC LIMIT ?",
                (conversation_id, after_seq, _upto(upto), limit),
            ).fetchall()
        return [r[0] for r in reversed(rows)]

    def raw_tokens(self, conversation_id: int, after_seq: int, upto: int | None = None) -> int:
        """Tokens of the messages after ``after_seq`` and at most ``upto`` (the raw part of the context)."""
        with self.read() as db:
            row = db.execute("SELECT coalesce(sum(tokens), 0) FROM messages WHERE conversation_id=? AND seq>? "
                             "AND seq<=?", (conversation_id, after_seq, _upto(upto))).fetchone()
        return int(row[0])

    def messages_between(self, conversation_id: int, first_seq: int, last_seq: int) -> list[StoredMessage]:
        with self.read() as db:
            rows = db.execute(
                f"SELECT {self.message_columns} FROM messages WHERE conversation_id=? AND seq BETWEEN ? AND ? "
                "ORDER BY seq",
                (conversation_id, first_seq, last_seq),
            ).fetchall()
        return [row_to_message(r) for r in rows]

    def message(self, message_id: int) -> StoredMessage | None:
        with self.read() as db:
            row = db.execute(f"SELECT {self.message_columns} FROM messages WHERE id=?", (message_id,)).fetchone()
        return row_to_message(row) if row else None

    def messages_by_ids(self, ids: Sequence[int]) -> list[StoredMessage]:
        if not ids:
            return []
        rows: list[Any] = []
        with self.read() as db:
            for start in range(0, len(ids), 500):
                chunk = tuple(ids[start:start + 500])
                marks = ",".join("?" * len(chunk))
                rows += db.execute(f"SELECT {self.message_columns} FROM messages WHERE id IN ({marks})",
                                   chunk).fetchall()
        rows.sort(key=lambda r: (r[1], r[2]))  # (conversation_id, seq): store order
        return [row_to_message(r) for r in rows]

    def session_messages(self, session_id: str, after_id: int, limit: int) -> list[StoredMessage]:
        with self.read() as db:
            rows = db.execute(
                f"SELECT {self.message_columns} FROM messages WHERE session_id=? AND id>? ORDER BY id LIMIT ?",
                (session_id, after_id, limit),
            ).fetchall()
        return [row_to_message(r) for r in rows]

    def last_fingerprint(self, conversation_id: int) -> str | None:
        with self.read() as db:
            row = db.execute("SELECT fingerprint FROM messages WHERE conversation_id=? ORDER BY seq DESC LIMIT 1",
                             (conversation_id,)).fetchone()
        return str(row[0]) if row else None

    def newest_request(self, conversation_id: int, upto: int | None = None) -> StoredMessage | None:
        """The newest user message a person sent at or before seq ``upto``: host scaffolding
        (``synthetic``) is skipped."""
        with self.read() as db:
            row = db.execute(f"SELECT {self.message_columns} FROM messages WHERE conversation_id=? AND seq<=? "
                             "AND role='user' AND synthetic IS NULL ORDER BY seq DESC LIMIT 1",
                             (conversation_id, _upto(upto))).fetchone()
        return row_to_message(row) if row else None

    def secret(self, name: str, size: int = 32) -> bytes:
        """A random key kept in ``meta`` (created on first use; every process reads the same one)."""
        key = f"secret:{name}"
        with self.write() as db:
            db.execute("INSERT OR IGNORE INTO meta(key, value) VALUES (?, ?)", (key, os.urandom(size).hex()))
            return bytes.fromhex(db.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()[0])

    def newest_message(self, conversation_id: int, role: str | None = None,
                       upto: int | None = None) -> StoredMessage | None:
        """The newest message (of ``role``) at or before seq ``upto``."""
        where, args = ("AND role=?", (conversation_id, _upto(upto), role)) if role else ("", (conversation_id,
                                                                                               _upto(upto)))
        with self.read() as db:
            row = db.execute(f"SELECT {self.message_columns} FROM messages WHERE conversation_id=? AND seq<=? "
                             f"{where} ORDER BY seq DESC LIMIT 1", args).fetchone()
        return row_to_message(row) if row else None

    def message_count(self, conversation_id: int | None = None) -> int:
        with self.read() as db:
            if conversation_id is None:
                return int(db.execute("SELECT count(*) FROM messages").fetchone()[0])
            return int(db.execute("SELECT count(*) FROM messages WHERE conversation_id=?",
                                  (conversation_id,)).fetchone()[0])

    # -- full-text search ----------------------------------------------------

    def search_messages(self, match: str, conversation_id: int | None, limit: int) -> list[tuple[StoredMessage, float]]:
        """Raw messages matching an FTS5 ``match`` expression, best bm25 first."""
        scope = "AND m.conversation_id=?" if conversation_id is not None else ""
        args: tuple[object, ...] = (match, conversation_id, limit) if conversation_id is not None else (match, limit)
        cols = self.message_columns_m
        with self.read() as db:
            rows = db.execute(
                f"SELECT {cols}, bm25(messages_fts) AS score FROM messages_fts "
                "JOIN messages m ON m.id=messages_fts.rowid "
                f"WHERE messages_fts MATCH ? {scope} ORDER BY score LIMIT ?",
                args,
            ).fetchall()
        return [(row_to_message(r[:-1]), float(r[-1])) for r in rows]

    # -- events (errors and notable no-ops for status/doctor) ----------------

    def record_event(self, level: str, kind: str, detail: str, conversation_id: int | None = None) -> None:
        with self.write() as db:
            db.execute("INSERT INTO events(at, level, kind, conversation_id, detail) VALUES (?, ?, ?, ?, ?)",
                       (time.time(), level, kind, conversation_id, detail[:4000]))
            db.execute("DELETE FROM events WHERE id <= (SELECT max(id) FROM events) - 1000")

    def recent_events(self, limit: int = 20) -> list[tuple[float, str, str, str]]:
        with self.read() as db:
            rows = db.execute("SELECT at, level, kind, detail FROM events ORDER BY id DESC LIMIT ?",
                              (limit,)).fetchall()
        return [(float(r[0]), str(r[1]), str(r[2]), str(r[3])) for r in rows]

    # -- operator surface (maintenance.py, cli.py, lcmimport.py) -----------------
    # Read-only opening, inventory pages, FTS checks and the narrow repair/cleanup
    # writes. Every write re-checks its condition inside its own transaction.

    @classmethod
    def open_readonly(cls, path: str | os.PathLike[str]) -> Store:
        """A query-only connection: no migration, no WAL switch, never a write."""
        store = cls.__new__(cls)
        store.path = str(Path(path).expanduser().resolve())
        store.lock = threading.RLock()
        store.checkpointer, store._commits = None, 0  # never writes, so never checkpoints
        if not Path(store.path).is_file():
            raise StoreError(f"no database at {store.path}")
        store.conn = sqlite3.connect(f"file:{quote(store.path)}?mode=ro", uri=True, timeout=BUSY_TIMEOUT_MS / 1000,
                                     isolation_level=None, check_same_thread=False)
        store.conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        store.conn.execute("PRAGMA query_only=ON")
        store._check_identity()
        if store.schema_version() == 0:
            store.conn.close()
            raise StoreError(f"{store.path} is not an {APP_ID} database (no tables)")
        store._set_columns()
        return store

    @property
    def readonly(self) -> bool:
        with self.lock:
            return bool(self.conn.execute("PRAGMA query_only").fetchone()[0])

    def backup_into(self, target: sqlite3.Connection) -> None:
        """Copy the whole database with SQLite's online backup API, in one step.

        One step holds one read transaction, so the copy is a consistent snapshot
        even while another process keeps writing (WAL readers never block writers).
        """
        with self.lock:
            self.conn.backup(target, pages=-1)

    def table_counts(self) -> dict[str, int]:
        with self.read() as db:
            return {t: int(db.execute(f"SELECT count(*) FROM {t}").fetchone()[0])
                    for t in ("conversations", "sessions", "messages", "summaries", "edges", "context_items",
                              "events")}

    def database_facts(self) -> dict[str, Any]:
        with self.read() as db:
            facts: dict[str, Any] = {p: db.execute(f"PRAGMA {p}").fetchone()[0]
                                     for p in ("page_size", "page_count", "freelist_count", "journal_mode")}
            facts["quick_check"] = [r[0] for r in db.execute("PRAGMA quick_check(20)").fetchall()]
            facts["schema_version"] = self.schema_version()
            try:
                sizes = db.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name").fetchall()
                facts["bytes_by_table"] = {str(n): int(b) for n, b in sizes}
            except sqlite3.DatabaseError:
                facts["bytes_by_table"] = None
        return facts

    def conversations_page(self, after_id: int, limit: int) -> list[dict[str, Any]]:
        with self.read() as db:
            rows = db.execute(
                "SELECT c.id, c.key, c.created_at, c.frontier_seq, c.last_seq, "
                "(SELECT count(*) FROM messages m WHERE m.conversation_id=c.id), "
                "(SELECT count(*) FROM summaries s WHERE s.conversation_id=c.id), "
                "(SELECT count(*) FROM sessions s WHERE s.conversation_id=c.id), "
                "(SELECT created_at FROM messages m WHERE m.conversation_id=c.id ORDER BY seq LIMIT 1), "
                "(SELECT created_at FROM messages m WHERE m.conversation_id=c.id ORDER BY seq DESC LIMIT 1) "
                "FROM conversations c WHERE c.id>? ORDER BY c.id LIMIT ?",
                (after_id, limit),
            ).fetchall()
        keys = ("id", "key", "created_at", "frontier_seq", "last_seq", "messages", "summaries", "sessions",
                "first_message_at", "last_message_at")
        return [dict(zip(keys, r, strict=True)) for r in rows]

    def sessions_page(self, conversation_id: int | None, after_rowid: int, limit: int) -> list[dict[str, Any]]:
        scope, args = ("AND s.conversation_id=?", (after_rowid, conversation_id, limit)) \
            if conversation_id is not None else ("", (after_rowid, limit))
        with self.read() as db:
            rows = db.execute(
                "SELECT s.rowid, s.id, s.conversation_id, s.platform, s.mode, s.started_at, s.ended_at, "
                "s.parent_session_id, s.reason, (SELECT count(*) FROM messages m WHERE m.session_id=s.id) "
                f"FROM sessions s WHERE s.rowid>? {scope} ORDER BY s.rowid LIMIT ?",
                args,
            ).fetchall()
        keys = ("rowid", "id", "conversation_id", "platform", "mode", "started_at", "ended_at", "parent_session_id",
                "reason", "messages")
        return [dict(zip(keys, r, strict=True)) for r in rows]

    def messages_tail(self, conversation_id: int, limit: int) -> list[StoredMessage]:
        """The newest ``limit`` messages of a conversation, oldest first."""
        with self.read() as db:
            rows = db.execute(
                f"SELECT {self.message_columns} FROM messages WHERE conversation_id=? ORDER BY seq DESC LIMIT ?",
                (conversation_id, limit),
            ).fetchall()
        return [row_to_message(r) for r in reversed(rows)]

    def retention_rows(self, cutoffs: Sequence[float]) -> list[dict[str, Any]]:
        """Per conversation: messages, bytes, tokens, time span, and counts older than each cutoff."""
        older = ", ".join("sum(m.created_at < ?)" for _ in cutoffs)
        with self.read() as db:
            rows = db.execute(
                "SELECT m.conversation_id, c.key, count(*), "
                "sum(length(CAST(m.content AS BLOB)) + coalesce(length(CAST(m.parts AS BLOB)), 0) "
                "+ coalesce(length(CAST(m.tool_calls AS BLOB)), 0)), sum(m.tokens), min(m.created_at), "
                f"max(m.created_at){', ' + older if cutoffs else ''} "
                "FROM messages m JOIN conversations c ON c.id=m.conversation_id GROUP BY m.conversation_id",
                tuple(cutoffs),
            ).fetchall()
            nodes = dict(db.execute(
                "SELECT conversation_id, count(*) || ',' || sum(length(CAST(content AS BLOB))) FROM summaries "
                "GROUP BY conversation_id").fetchall())
        out = []
        for r in rows:
            count, size = (str(nodes.get(r[0]) or "0,0")).split(",")
            out.append({"conversation_id": r[0], "key": r[1], "messages": r[2], "message_bytes": r[3] or 0,
                        "message_tokens": r[4] or 0, "first_at": r[5], "last_at": r[6],
                        "older_than": [int(v or 0) for v in r[7:]], "summaries": int(count),
                        "summary_bytes": int(size or 0)})
        return out

    # -- FTS health and repair ----------------------------------------------------

    FTS_TABLES: tuple[tuple[str, str], ...] = (("messages_fts", "messages"), ("summaries_fts", "summaries"))

    def _fts_content(self, table: str) -> str:
        return dict(self.FTS_TABLES)[table]

    def fts_counts(self, table: str) -> dict[str, Any]:
        """Structural, read-only: indexed rows against content rows, both ways."""
        content = self._fts_content(table)
        with self.read() as db:
            missing = db.execute(f"SELECT c.id FROM {content} c WHERE NOT EXISTS (SELECT 1 FROM {table}_docsize d "
                                 "WHERE d.id=c.id) ORDER BY c.id LIMIT 1000").fetchall()
            stale = db.execute(f"SELECT d.id FROM {table}_docsize d WHERE NOT EXISTS (SELECT 1 FROM {content} c "
                               "WHERE c.id=d.id) ORDER BY d.id LIMIT 1000").fetchall()
            return {"content_rows": int(db.execute(f"SELECT count(*) FROM {content}").fetchone()[0]),
                    "indexed_rows": int(db.execute(f"SELECT count(*) FROM {table}_docsize").fetchone()[0]),
                    "missing_ids": [int(r[0]) for r in missing], "stale_ids": [int(r[0]) for r in stale]}

    def fts_sample(self, table: str, count: int) -> list[tuple[int, str]]:
        """Up to ``count`` content rows spread evenly over the id range."""
        content = self._fts_content(table)
        with self.read() as db:
            low, high = db.execute(f"SELECT min(id), max(id) FROM {content}").fetchone()
            if low is None:
                return []
            step = max(1, (high - low) // max(1, count - 1))
            rows = [db.execute(f"SELECT id, content FROM {content} WHERE id>=? ORDER BY id LIMIT 1",
                               (start,)).fetchone() for start in range(low, high + 1, step)][:count]
        return [(int(r[0]), str(r[1])) for r in rows if r is not None]

    def fts_finds(self, table: str, rowid: int, phrase: str) -> bool:
        with self.read() as db:
            return db.execute(f"SELECT 1 FROM {table} WHERE {table} MATCH ? AND rowid=?",
                              (phrase, rowid)).fetchone() is not None

    def fts_integrity(self, table: str) -> str | None:
        """FTS5's own integrity-check against the content table; None when sound.

        It must run as a write statement, so it runs inside a transaction that is
        always rolled back: nothing is changed. Read-only connections cannot run it.
        """
        if self.readonly:
            raise StoreError("the FTS integrity-check needs a writable connection")
        with self.lock:
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                self.conn.execute(f"INSERT INTO {table}({table}, rank) VALUES('integrity-check', 1)")
                return None
            except sqlite3.DatabaseError as exc:
                return str(exc)
            finally:
                self.conn.execute("ROLLBACK")

    def fts_rebuild(self, table: str) -> None:
        """Rebuild one external-content index from its content table."""
        with self.write() as db:
            db.execute(f"INSERT INTO {table}({table}) VALUES('rebuild')")

    def _trigger_sql(self) -> dict[str, str]:
        """The newest CREATE TRIGGER statement of each trigger the migrations define."""
        found: dict[str, str] = {}
        for version in sorted(_MIGRATIONS):
            for statement in _split_sql(_MIGRATIONS[version]):
                words = statement.split()
                if words[:2] == ["CREATE", "TRIGGER"]:
                    found[words[2]] = statement
        return found

    def missing_triggers(self) -> list[str]:
        with self.read() as db:
            present = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='trigger'").fetchall()}
        return sorted(set(self._trigger_sql()) - present)

    def restore_triggers(self, names: Sequence[str]) -> list[str]:
        """Recreate the named triggers that are still missing; returns those created."""
        wanted = self._trigger_sql()
        with self.write() as db:
            present = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='trigger'").fetchall()}
            created = [n for n in names if n in wanted and n not in present]
            for name in created:
                db.execute(wanted[name])
        return created

    # -- narrow cleanups ------------------------------------------------------------

    def blank_source_ids(self, limit: int = 1000) -> tuple[int, list[int]]:
        with self.read() as db:
            total = int(db.execute("SELECT count(*) FROM messages WHERE trim(source)=''").fetchone()[0])
            ids = [int(r[0]) for r in db.execute("SELECT id FROM messages WHERE trim(source)='' ORDER BY id LIMIT ?",
                                                 (limit,)).fetchall()]
        return total, ids

    def normalize_blank_sources(self) -> int:
        with self.write() as db:
            return db.execute("UPDATE messages SET source='unknown' WHERE trim(source)=''").rowcount

    _EMPTY_SESSION = ("NOT EXISTS (SELECT 1 FROM messages m WHERE m.session_id=s.id) "
                      "AND NOT EXISTS (SELECT 1 FROM summaries n WHERE n.session_id=s.id)")

    def empty_sessions(self, started_before: float, limit: int = 10000) -> list[dict[str, Any]]:
        """Lifecycle rows of sessions that stored no message and no summary."""
        with self.read() as db:
            rows = db.execute(
                "SELECT s.id, s.conversation_id, s.platform, s.started_at FROM sessions s "
                f"WHERE s.started_at < ? AND {self._EMPTY_SESSION} ORDER BY s.started_at LIMIT ?",
                (started_before, limit),
            ).fetchall()
        return [{"id": r[0], "conversation_id": r[1], "platform": r[2], "started_at": r[3]} for r in rows]

    def delete_empty_sessions(self, session_ids: Sequence[str]) -> dict[str, int]:
        """Delete those sessions if still empty, then conversations left with nothing at all."""
        marks = ",".join("?" * len(session_ids))
        with self.write() as db:
            sessions = db.execute(f"DELETE FROM sessions AS s WHERE s.id IN ({marks}) AND {self._EMPTY_SESSION}",
                                  tuple(session_ids)).rowcount if session_ids else 0
            conversations = db.execute(
                "DELETE FROM conversations AS c "
                "WHERE NOT EXISTS (SELECT 1 FROM sessions s WHERE s.conversation_id=c.id) "
                "AND NOT EXISTS (SELECT 1 FROM messages m WHERE m.conversation_id=c.id) "
                "AND NOT EXISTS (SELECT 1 FROM summaries n WHERE n.conversation_id=c.id)").rowcount
        return {"sessions": sessions, "conversations": conversations}

    def all_sessions(self) -> list[tuple[str, int, str]]:
        with self.read() as db:
            return [(str(r[0]), int(r[1]), str(r[2])) for r in
                    db.execute("SELECT id, conversation_id, platform FROM sessions ORDER BY rowid").fetchall()]

    def delete_conversations(self, conversation_ids: Sequence[int]) -> dict[str, int]:
        """Remove whole conversations: messages, nodes, edges, context, sessions. Lineage
        stays closed because no edge ever crosses a conversation."""
        if not conversation_ids:
            return {}
        marks = ",".join("?" * len(conversation_ids))
        ids = tuple(conversation_ids)
        nodes = f"SELECT id FROM summaries WHERE conversation_id IN ({marks})"
        counts: dict[str, int] = {}
        with self.write() as db:
            counts["edges"] = db.execute(f"DELETE FROM edges WHERE parent_id IN ({nodes})", ids).rowcount
            for table in ("context_items", "summaries", "messages", "sessions"):
                counts[table] = db.execute(f"DELETE FROM {table} WHERE conversation_id IN ({marks})", ids).rowcount
            counts["conversations"] = db.execute(f"DELETE FROM conversations WHERE id IN ({marks})", ids).rowcount
        return counts

    def advance_frontier(self, conversation_id: int, seq: int) -> bool:
        """Move the frontier forward to ``seq`` (never back, never past the last message)."""
        with self.write() as db:
            return db.execute("UPDATE conversations SET frontier_seq=? WHERE id=? AND frontier_seq<? AND ?<=last_seq",
                              (seq, conversation_id, seq, seq)).rowcount == 1

    # -- imports ------------------------------------------------------------------------

    def append_imported(self, conversation_id: int, session_id: str, source: str,
                        records: Sequence[MessageIn]) -> tuple[list[int], int]:
        """Append import records whose fingerprint (their provenance id) the conversation
        does not hold yet, in one transaction; returns (new ids, skipped as existing)."""
        with self.write() as db:
            known = {r[0] for r in db.execute("SELECT fingerprint FROM messages WHERE conversation_id=?",
                                              (conversation_id,)).fetchall()}
            fresh = [m for m in records if m.fingerprint not in known]
            ids = _insert_messages(db, conversation_id, session_id, source, fresh)
        return ids, len(records) - len(fresh)

    def fingerprint_ids(self, conversation_id: int) -> dict[str, int]:
        """fingerprint -> message id for a conversation (imports map provenance to rows)."""
        with self.read() as db:
            return {str(r[0]): int(r[1]) for r in db.execute(
                "SELECT fingerprint, id FROM messages WHERE conversation_id=?", (conversation_id,)).fetchall()}

    # -- retrieval for the lcm_* tools (retrieval.py): scope and filters in SQL, before LIMIT ------

    @staticmethod
    def _message_filters(filters: dict[str, Any]) -> tuple[str, list[Any]]:
        """``AND ...`` clauses for conversation/session/role/source/time/keyset/exclusion filters."""
        clauses = (("conversation_id", "m.conversation_id=?"), ("session_id", "m.session_id=?"), ("role", "m.role=?"),
                   ("source", "coalesce(nullif(trim(m.source), ''), 'unknown')=?"), ("since", "m.created_at>=?"),
                   ("until", "m.created_at<?"), ("before_id", "m.id<?"))
        sql, args = "", []
        for key, clause in clauses:
            if filters.get(key) is not None:
                sql += " AND " + clause
                args.append(filters[key])
        if filters.get("exclude_ids"):
            sql += " AND m.id NOT IN (SELECT value FROM json_each(?))"
            args.append("[" + ",".join(str(int(i)) for i in filters["exclude_ids"]) + "]")
        if filters.get("skip_own_tools"):
            sql += " AND " + Store._NOT_OWN_TOOLS
        return sql, args

    # LCM's own tool traffic (an lcm_* call echoing the query, an lcm_* result echoing old hits) is
    # never what a search looks for; the rows stay readable through lcm_load_session / lcm_expand.
    _NOT_OWN_TOOLS = ("NOT (coalesce(m.tool_name, '') LIKE 'lcm\\_%' ESCAPE '\\' OR (m.content = '' AND "
                      "coalesce(m.tool_calls, '') LIKE '%\"name\": \"lcm\\_%' ESCAPE '\\'))")

    def message_id_bounds(self, conversation_id: int | None = None,
                          session_id: str | None = None) -> tuple[int, int]:
        """First and last message id of a session, a conversation (ids grow with seq) or the whole
        store, so an FTS query can seek to that rowid range instead of walking every match.
        An empty scope gives the empty range (0, -1)."""
        key: Any
        if session_id is not None:
            where, key, order = "WHERE session_id=?", (session_id,), "id"
        elif conversation_id is not None:
            where, key, order = "WHERE conversation_id=?", (conversation_id,), "seq"
        else:
            where, key, order = "", (), "id"
        with self.read() as db:
            low = db.execute(f"SELECT id FROM messages {where} ORDER BY {order} LIMIT 1", key).fetchone()
            high = db.execute(f"SELECT id FROM messages {where} ORDER BY {order} DESC LIMIT 1", key).fetchone()
        return (int(low[0]), int(high[0])) if low and high else (0, -1)

    def fts_term_counts(self, kind: str, matches: Sequence[str], bounds: tuple[int, int] | None,
                        cap: int) -> list[int]:
        """Per FTS5 expression, how many rows in the rowid range match it, counted up to ``cap``
        (cheap: at most ``cap`` rowids are read per expression)."""
        table = {"messages": "messages_fts", "summaries": "summaries_fts"}[kind]
        low, high = bounds if bounds is not None else (-(2**62), 2**62)
        with self.read() as db:
            return [int(db.execute(f"SELECT count(*) FROM (SELECT 1 FROM {table} WHERE {table} MATCH ? "
                                   "AND rowid BETWEEN ? AND ? LIMIT ?)", (match, low, high, cap)).fetchone()[0])
                    for match in matches]

    # The text of a hit is its content, then its tool calls (both are indexed), cut to a size.
    _HIT_COLUMNS = ("m.id, m.conversation_id, m.seq, m.session_id, m.role, m.source, m.created_at, m.tool_name, "
                    "substr(m.content || coalesce(char(10) || m.tool_calls, ''), 1, ?), length(m.content)")

    def message_hits(self, match: str, *, order: str, limit: int, bounds: tuple[int, int] | None,
                     text_chars: int, **filters: Any) -> list[tuple[Any, ...]]:
        """Messages matching ``match``: ``order`` "rank" (bm25, best first) or "recent" (newest first,
        no ranking cost). Rows: the ``_HIT_COLUMNS`` (text cut to ``text_chars``) and the bm25 score.

        The inner query ranks rowids only (joining messages just for the filters, if any), so the
        row text is read for the ``limit`` winners, not for every match. For "rank", skipping LCM's
        own tool traffic is left to the outer query (a few rows fewer, no join per match).
        """
        rank = order == "rank"
        skip_after = rank and bool(filters.get("skip_own_tools"))
        where, args = self._message_filters({**filters, "skip_own_tools": filters.get("skip_own_tools")
                                             and not skip_after})
        low, high = bounds if bounds is not None else (-(2**62), 2**62)
        score, sort = ("bm25(messages_fts)", "score") if rank else ("0.0", "messages_fts.rowid DESC")
        join = "JOIN messages m ON m.id=messages_fts.rowid" if where else ""
        outer = f"WHERE {self._NOT_OWN_TOOLS}" if skip_after else ""
        with self.read() as db:
            return db.execute(
                f"SELECT {self._HIT_COLUMNS}, t.score FROM (SELECT messages_fts.rowid AS id, {score} AS score "
                f"FROM messages_fts {join} WHERE messages_fts MATCH ? AND messages_fts.rowid BETWEEN ? AND ? {where} "
                f"ORDER BY {sort} LIMIT ?) AS t JOIN messages m ON m.id=t.id {outer} "
                f"ORDER BY {'t.score, m.id DESC' if rank else 'm.id DESC'}",
                (text_chars, match, low, high, *args, limit),
            ).fetchall()

    def messages_at(self, conversation_id: int, seqs: Sequence[int], text_chars: int,
                    **filters: Any) -> list[tuple[Any, ...]]:
        """Rows (``_HIT_COLUMNS``) at these seqs of one conversation that pass the filters."""
        where, args = self._message_filters(filters)
        with self.read() as db:
            return db.execute(
                f"SELECT {self._HIT_COLUMNS} FROM messages m WHERE m.conversation_id=? "
                f"AND m.seq IN (SELECT value FROM json_each(?)) {where} ORDER BY m.seq",
                (text_chars, conversation_id, "[" + ",".join(str(int(s)) for s in seqs) + "]", *args),
            ).fetchall()

    def scratch_fts(self, docs: Sequence[tuple[int, str]], matches: Sequence[str], snippet_match: str | None = None,
                    snippet_tokens: int = 24) -> tuple[list[set[int]], dict[int, str]]:
        """Evaluate expressions over a few candidate texts with the same tokenizer as the real index.

        Which candidates each expression matches (term coverage for reranking) and highlighted
        snippets, from a private in-memory FTS5 table: the cost follows the candidates, not the store.
        """
        with self.lock:
            scratch = getattr(self, "_scratch", None)
            if scratch is None:
                scratch = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
                scratch.execute("CREATE VIRTUAL TABLE scratch USING fts5(content, tokenize='porter unicode61')")
                self._scratch = scratch
            scratch.execute("BEGIN")
            try:
                scratch.executemany("INSERT INTO scratch(rowid, content) VALUES (?, ?)", docs)
                sets = [{int(r[0]) for r in scratch.execute("SELECT rowid FROM scratch WHERE scratch MATCH ?",
                                                            (match,))} for match in matches]
                snippets: dict[int, str] = {}
                if snippet_match:
                    snippets = {int(r[0]): str(r[1]) for r in scratch.execute(
                        "SELECT rowid, snippet(scratch, 0, '«', '»', '…', ?) FROM scratch WHERE scratch MATCH ?",
                        (snippet_tokens, snippet_match))}
            finally:
                scratch.execute("ROLLBACK")
        return sets, snippets

    def message_ids_mentioning(self, token: str, conversation_id: int | None, limit: int = 50) -> list[int]:
        """Messages whose text, structured content or tool calls contain ``token`` (a payload ref):
        the index first, then a scan of the structured columns, which the index does not cover."""
        scope, args = ("AND m.conversation_id=?", [conversation_id]) if conversation_id is not None else ("", [])
        with self.read() as db:
            rows = db.execute(
                "SELECT m.id FROM messages_fts JOIN messages m ON m.id=messages_fts.rowid "
                f"WHERE messages_fts MATCH ? {scope} ORDER BY m.id LIMIT ?",
                ('"' + token.replace('"', '""') + '"', *args, limit)).fetchall()
            if not rows:
                rows = db.execute(
                    f"SELECT m.id FROM messages m WHERE 1 {scope} AND (instr(coalesce(m.parts, ''), ?) > 0 "
                    "OR instr(coalesce(m.tool_calls, ''), ?) > 0) ORDER BY m.id LIMIT ?",
                    (*args, token, token, limit)).fetchall()
        return [int(r[0]) for r in rows]

    def messages_in_period(self, conversation_id: int | None, since: float, until: float, cap: int = 1000) -> int:
        """How many messages (up to ``cap``) were stored in [since, until)."""
        scope, args = ("conversation_id=? AND", [conversation_id]) if conversation_id is not None else ("", [])
        with self.read() as db:
            return int(db.execute(f"SELECT count(*) FROM (SELECT 1 FROM messages WHERE {scope} created_at>=? "
                                  "AND created_at<? LIMIT ?)", (*args, since, until, cap)).fetchone()[0])

    def session_facts(self, session_id: str) -> dict[str, Any] | None:
        """A session's lifecycle row with its message count and id range."""
        with self.read() as db:
            row = db.execute(
                "SELECT s.id, s.conversation_id, s.platform, s.mode, s.started_at, s.ended_at, s.parent_session_id, "
                "(SELECT count(*) FROM messages m WHERE m.session_id=s.id), "
                "(SELECT min(id) FROM messages m WHERE m.session_id=s.id), "
                "(SELECT max(id) FROM messages m WHERE m.session_id=s.id) FROM sessions s WHERE s.id=?",
                (session_id,)).fetchone()
        keys = ("session_id", "conversation_id", "platform", "mode", "started_at", "ended_at", "parent_session_id",
                "messages", "first_store_id", "last_store_id")
        return dict(zip(keys, row, strict=True)) if row else None


def _upto(seq: int | None) -> int:
    """An inclusive upper seq bound; None: no bound."""
    return 2**62 if seq is None else seq


# Most rows per INSERT statement (fewer when the SQLite build allows fewer bound parameters).
_INSERT_BATCH_ROWS = 2000
_MESSAGE_INSERT_PARAMS = 16


def _insert_messages(db: sqlite3.Connection, conversation_id: int, session_id: str, source: str,
                     records: Sequence[MessageIn]) -> list[int]:
    """Append records after the conversation's last seq, in the caller's transaction.

    Rows go in as multi-row INSERT statements, not one statement per row: the FTS5 trigger
    flushes the index's pending terms at every statement, and each flush does incremental merge
    work that re-reads any large segment, so per-row statements after one huge row (a turn with
    100k tool calls) cost minutes; a few statements per call cost milliseconds.
    """
    if not records:
        return []
    last_seq = int(db.execute("SELECT last_seq FROM conversations WHERE id=?", (conversation_id,)).fetchone()[0])
    now = time.time()
    rows = [(conversation_id, last_seq + offset, session_id, m.role, m.content, m.parts, m.tool_calls,
             m.tool_call_id, m.tool_name, source, m.host_ts, m.host_ts or now, m.tokens, m.fingerprint,
             m.synthetic, m.extra)
            for offset, m in enumerate(records, start=1)]
    per_statement = max(1, min(_INSERT_BATCH_ROWS,
                               db.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER) // _MESSAGE_INSERT_PARAMS))
    for start in range(0, len(rows), per_statement):
        batch = rows[start:start + per_statement]
        db.execute(
            "INSERT INTO messages(conversation_id, seq, session_id, role, content, parts, tool_calls, tool_call_id, "
            "tool_name, source, host_ts, created_at, tokens, fingerprint, synthetic, extra) VALUES "
            + ",".join(["(" + ", ".join(["?"] * _MESSAGE_INSERT_PARAMS) + ")"] * len(batch)),
            [value for row in batch for value in row],
        )
    db.execute("UPDATE conversations SET last_seq=? WHERE id=?", (last_seq + len(records), conversation_id))
    ids = db.execute("SELECT id FROM messages WHERE conversation_id=? AND seq>? ORDER BY seq",
                     (conversation_id, last_seq)).fetchall()
    return [int(r[0]) for r in ids]


def _retry_locked(step: Callable[[], None]) -> None:
    """Run ``step``, retrying while another process holds a lock the busy handler skips."""
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    delay = 0.01
    while True:
        try:
            step()
            return
        except sqlite3.OperationalError as exc:
            if ("locked" not in str(exc) and "busy" not in str(exc)) or time.monotonic() > deadline:
                raise
            time.sleep(delay)
            delay = min(0.25, delay * 2)


def _split_sql(script: str) -> list[str]:
    """Split a migration into statements, keeping trigger bodies whole."""
    statements, current = [], []
    for line in script.strip().splitlines():
        current.append(line)
        joined = "\n".join(current).strip()
        if joined.endswith(";") and sqlite3.complete_statement(joined):
            statements.append(joined)
            current = []
    return statements


_stores: dict[tuple[int, str], Store] = {}
_stores_lock = threading.Lock()


def open_store(path: str | os.PathLike[str]) -> Store:
    """The process's one connection to ``path`` (opened on first use)."""
    resolved = str(Path(path).expanduser().resolve()) if str(path) != ":memory:" else ":memory:"
    key = (os.getpid(), resolved)
    with _stores_lock:
        store = _stores.get(key)
        if store is None:
            store = Store(resolved)
            _stores[key] = store
        return store


def close_all() -> None:
    """Close every connection this process opened (tests, shutdown)."""
    with _stores_lock:
        for key, store in list(_stores.items()):
            if key[0] == os.getpid():
                store.close()
            del _stores[key]

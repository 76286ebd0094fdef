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

import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from .records import ConversationState, MessageIn, SessionInfo, StoredMessage

APP_ID = "hermes-lcm"
SCHEMA_VERSION = 1
BUSY_TIMEOUT_MS = 15000

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
CREATE INDEX messages_fingerprint ON messages(conversation_id, fingerprint);
CREATE INDEX messages_session ON messages(session_id, id);
CREATE VIRTUAL TABLE messages_fts USING fts5(
  content, content='messages', content_rowid='id', tokenize='porter unicode61'
);
CREATE TRIGGER messages_ai AFTER INSERT ON messages BEGIN
  INSERT INTO messages_fts(rowid, content) VALUES (new.id, new.content);
END;
CREATE TRIGGER messages_ad AFTER DELETE ON messages BEGIN
  INSERT INTO messages_fts(messages_fts, rowid, content) VALUES ('delete', old.id, old.content);
END;
CREATE TRIGGER messages_au AFTER UPDATE OF content ON messages BEGIN
  INSERT INTO messages_fts(messages_fts, rowid, content) VALUES ('delete', old.id, old.content);
  INSERT INTO messages_fts(rowid, content) VALUES (new.id, new.content);
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
);
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
}


class StoreError(Exception):
    """The database cannot be used as an hermes-lcm store."""


class ForeignDatabase(StoreError):
    """The file holds tables this program did not create (e.g. another LCM)."""


class NewerSchema(StoreError):
    """The file was written by a newer hermes-lcm; we refuse to touch it."""


MESSAGE_COLUMNS = (
    "id, conversation_id, seq, session_id, role, content, parts, tool_calls, tool_call_id, "
    "tool_name, source, created_at, tokens"
)


def row_to_message(row: sqlite3.Row) -> StoredMessage:
    return StoredMessage(*row)


class StoredPrints:
    """Read access to one conversation's message fingerprints, for alignment."""

    def __init__(self, db: sqlite3.Connection, conversation_id: int) -> None:
        self.db, self.conversation_id = db, conversation_id

    def tail(self, limit: int) -> list[str]:
        """The newest ``limit`` fingerprints, oldest first."""
        rows = self.db.execute(
            "SELECT fingerprint FROM messages WHERE conversation_id=? ORDER BY seq DESC LIMIT ?",
            (self.conversation_id, limit),
        ).fetchall()
        return [r[0] for r in reversed(rows)]

    def seqs(self, fingerprint: str, limit: int) -> list[int]:
        """Where a fingerprint occurs, newest first."""
        rows = self.db.execute(
            "SELECT seq FROM messages WHERE conversation_id=? AND fingerprint=? ORDER BY seq DESC LIMIT ?",
            (self.conversation_id, fingerprint, limit),
        ).fetchall()
        return [int(r[0]) for r in rows]

    def window(self, seq: int, size: int) -> list[str]:
        """Fingerprints of the ``size`` messages ending at ``seq``, oldest first."""
        rows = self.db.execute(
            "SELECT fingerprint FROM messages WHERE conversation_id=? AND seq BETWEEN ? AND ? ORDER BY seq",
            (self.conversation_id, seq - size + 1, seq),
        ).fetchall()
        return [r[0] for r in rows]


class Store:
    """A database file opened for this process. Use :func:`open_store`."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.lock = threading.RLock()
        if path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        self.conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None,
                                    check_same_thread=False)
        self.conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        self._check_identity()
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=NORMAL")
        self.conn.execute("PRAGMA foreign_keys=ON")
        self._migrate()

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
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                yield self.conn
            except BaseException:
                self.conn.execute("ROLLBACK")
                raise
            self.conn.execute("COMMIT")

    @contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        with self.lock:
            yield self.conn

    def close(self) -> None:
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
            if not fresh:
                return []
            last_seq = int(db.execute("SELECT last_seq FROM conversations WHERE id=?",
                                      (conversation_id,)).fetchone()[0])
            now = time.time()
            ids = []
            for offset, m in enumerate(fresh, start=1):
                cur = db.execute(
                    "INSERT INTO messages(conversation_id, seq, session_id, role, content, parts, tool_calls, "
                    "tool_call_id, tool_name, source, host_ts, created_at, tokens, fingerprint) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (conversation_id, last_seq + offset, session_id, m.role, m.content, m.parts, m.tool_calls,
                     m.tool_call_id, m.tool_name, source or "unknown", m.host_ts, m.host_ts or now, m.tokens,
                     m.fingerprint),
                )
                ids.append(int(cur.lastrowid or 0))
            db.execute("UPDATE conversations SET last_seq=? WHERE id=?", (last_seq + len(fresh), conversation_id))
            return ids

    def messages_after(self, conversation_id: int, seq: int, limit: int = -1) -> list[StoredMessage]:
        with self.read() as db:
            rows = db.execute(
                f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE conversation_id=? AND seq>? ORDER BY seq LIMIT ?",
                (conversation_id, seq, limit),
            ).fetchall()
        return [row_to_message(r) for r in rows]

    def messages_between(self, conversation_id: int, first_seq: int, last_seq: int) -> list[StoredMessage]:
        with self.read() as db:
            rows = db.execute(
                f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE conversation_id=? AND seq BETWEEN ? AND ? "
                "ORDER BY seq",
                (conversation_id, first_seq, last_seq),
            ).fetchall()
        return [row_to_message(r) for r in rows]

    def message(self, message_id: int) -> StoredMessage | None:
        with self.read() as db:
            row = db.execute(f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE id=?", (message_id,)).fetchone()
        return row_to_message(row) if row else None

    def messages_by_ids(self, ids: Sequence[int]) -> list[StoredMessage]:
        if not ids:
            return []
        marks = ",".join("?" * len(ids))
        with self.read() as db:
            rows = db.execute(f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE id IN ({marks}) ORDER BY seq",
                              tuple(ids)).fetchall()
        return [row_to_message(r) for r in rows]

    def session_messages(self, session_id: str, after_id: int, limit: int) -> list[StoredMessage]:
        with self.read() as db:
            rows = db.execute(
                f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE session_id=? AND id>? ORDER BY id LIMIT ?",
                (session_id, after_id, limit),
            ).fetchall()
        return [row_to_message(r) for r in rows]

    def newest_message(self, conversation_id: int, role: str | None = None) -> StoredMessage | None:
        where, args = ("AND role=?", (conversation_id, role)) if role else ("", (conversation_id,))
        with self.read() as db:
            row = db.execute(f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE conversation_id=? {where} "
                             "ORDER BY seq DESC LIMIT 1", args).fetchone()
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
        cols = ", ".join("m." + c.strip() for c in MESSAGE_COLUMNS.split(","))
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

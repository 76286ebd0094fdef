"""The SQLite connection: one per database file and process, WAL mode, ``BEGIN IMMEDIATE``
for every write, the identity check and migrations on open, and SQLite errors mapped to
the data layer's own error types.

Writes are serialized by SQLite's write lock, so two processes replaying the same history
serialize and the second finds the first one's rows. The WAL is copied back into the
database file by a :class:`Checkpointer` thread, so no host turn pays for a checkpoint.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Self
from urllib.parse import quote

from ..base import private
from ..base.jobs import BackgroundJob
from . import schema
from .errors import StoreError, StoreFault, WriteFailed
from .rows import message_columns, pack_fingerprint

BUSY_TIMEOUT_MS = 15000
# The WAL is copied back into the database file by a thread of its own every this many commits
# (a turn commits about 20 pages), so no host turn pays for a checkpoint (bench/ingest_growth.py).
CHECKPOINT_EVERY_COMMITS = 100
# The writer checkpoints by itself only if the background checkpoints fall this far behind (pages).
WAL_AUTOCHECKPOINT_PAGES = 10000

# SQLite result codes (primary name prefixes) that mean "this write cannot happen now",
# each with the label status and doctor show.
_WRITE_FAILURES = (
    ("SQLITE_FULL", "disk full"),
    ("SQLITE_IOERR", "I/O error"),
    ("SQLITE_READONLY", "read-only"),
    ("SQLITE_BUSY", "locked"),
    ("SQLITE_LOCKED", "locked"),
    ("SQLITE_CANTOPEN", "cannot open"),
)


# Compaction slots of this process, per (connection, conversation id): see compaction_slot.
_slots: dict[tuple[int, int], threading.Lock] = {}
_slots_lock = threading.Lock()


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


@contextmanager
def faults_mapped() -> Iterator[None]:
    """Raise any SQLite error of the block as a :class:`StoreFault`."""
    try:
        yield
    except sqlite3.Error as exc:
        raise StoreFault(str(exc)) from exc


class Checkpointer(BackgroundJob):
    """Copies the WAL into the database file on a thread of its own.

    SQLite's automatic checkpoint runs inside the COMMIT that crosses its threshold, so one
    turn in a few hundred paid for copying every page the others wrote (40-60 ms at 100k
    messages, more as the history grows and its index pages spread). A PASSIVE checkpoint on
    a second connection copies the same pages without ever blocking the writer or a reader,
    and never waits (the busy handler is not used).
    """

    name = "hermes-lcm-checkpoint"

    def __init__(self, path: str) -> None:
        super().__init__()
        self.path = path
        self.checkpoints = 0
        self._conn: sqlite3.Connection | None = None

    def setup(self) -> None:
        self._conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)

    def step(self) -> None:
        assert self._conn is not None
        with contextlib.suppress(sqlite3.Error):  # a failed checkpoint leaves the WAL as it was
            self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
            self.checkpoints += 1

    def teardown(self) -> None:
        if self._conn is not None:
            self._conn.close()


def _retry_locked(step: Callable[[], None]) -> None:
    """Run ``step``, retrying while another process holds a lock the busy handler skips."""
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    delay = 0.01
    while True:
        try:
            step()
            return
        except (sqlite3.OperationalError, StoreFault) as exc:
            if ("locked" not in str(exc) and "busy" not in str(exc)) or time.monotonic() > deadline:
                raise
            time.sleep(delay)
            delay = min(0.25, delay * 2)


class SqliteConnection:
    """A database file opened for this process: the connection and its transactions.

    The query mixins (messages, conversations, summaries, operator) build on this.
    """

    path: str
    lock: threading.RLock
    conn: sqlite3.Connection
    checkpointer: Checkpointer | None
    message_columns: str
    message_columns_m: str
    # How a fingerprint is stored: packed bytes from schema 4 here; text where a backend's column is text.
    pack_fingerprint: Callable[[str], str | bytes] = staticmethod(pack_fingerprint)

    def __init__(self, path: str) -> None:
        self.path = path
        self.lock = threading.RLock()
        self.checkpointer = Checkpointer(path) if path != ":memory:" else None
        self._commits = 0
        if path != ":memory:":
            # The database holds whole conversations: 0600 from its first byte, under any umask
            # (SQLite gives the -wal, -shm and -journal files the database file's mode).
            private.make_dir(Path(path).parent)
            with contextlib.suppress(OSError):  # cannot create it: SQLite reports why, as before
                private.create_empty(path)
        self.conn = sqlite3.connect(
            path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False
        )
        self.conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        _retry_locked(self._open)
        if path != ":memory:":
            for name in (path, f"{path}-wal", f"{path}-shm"):  # files an older version left 0644
                private.restrict(name)

    def _open(self) -> None:
        schema.check_identity(self.conn, self.path)
        # Switching a new file to WAL takes an exclusive lock without waiting on the busy
        # handler, so a second process opening the same new file at once can see "locked".
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=NORMAL")
        self.conn.execute("PRAGMA cache_size=-32768")  # 32 MiB: index and FTS pages stay hot
        self.conn.execute(f"PRAGMA wal_autocheckpoint={WAL_AUTOCHECKPOINT_PAGES}")
        self.conn.execute("PRAGMA foreign_keys=ON")
        with self.write() as db:
            schema.migrate(db)
        self._set_columns()

    @classmethod
    def open_readonly(cls, path: str | Path) -> Self:
        """A query-only connection: no migration, no WAL switch, never a write."""
        store = cls.__new__(cls)
        store.path = str(Path(path).expanduser().resolve())
        store.lock = threading.RLock()
        store.checkpointer, store._commits = None, 0  # never writes, so never checkpoints
        if not Path(store.path).is_file():
            raise StoreError(f"no database at {store.path}")
        store.conn = sqlite3.connect(
            f"file:{quote(store.path)}?mode=ro",
            uri=True,
            timeout=BUSY_TIMEOUT_MS / 1000,
            isolation_level=None,
            check_same_thread=False,
        )
        try:
            store.conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
            schema.check_identity(store.conn, store.path)
            if schema.schema_version(store.conn) == 0:
                raise StoreError(f"{store.path} is not an {schema.APP_ID} database (no tables)")
            schema.shadow_older(
                store.conn
            )  # an older file answers the newest schema's SQL (the compact keys)
            store.conn.execute("PRAGMA query_only=ON")
            store._set_columns()
        except sqlite3.DatabaseError as exc:  # not a database at all (a text file, /etc/passwd)
            store.conn.close()
            raise StoreError(f"{store.path} is not a SQLite database ({exc})") from exc
        except BaseException:
            store.conn.close()
            raise
        return store

    def _set_columns(self) -> None:
        version = self.schema_version()
        self.message_columns = message_columns(version)
        self.message_columns_m = message_columns(version, "m")

    def schema_version(self) -> int:
        with self.read() as db:
            return schema.schema_version(db)

    # -- transactions -----------------------------------------------------

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """One ``BEGIN IMMEDIATE`` transaction; nested calls join the outer one.

        A failure rolls the whole transaction back and leaves as :class:`WriteFailed`
        (the database cannot be written now) or :class:`StoreFault` (any other SQLite error).
        """
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
                if failed is None and isinstance(exc, sqlite3.Error):
                    raise StoreFault(str(exc)) from exc
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
    def compaction_slot(self, conversation_id: int) -> Iterator[bool]:
        """A per-conversation lock within this process, never waited for (``Store.compaction_slot``).

        Process-local on purpose: the engines that share a SQLite file are the processes of one
        machine, whose compactions already serialize on the file's write lock and publish only
        when nothing changed (compaction/passes.py), so a cross-process lock would only add a lock file
        a killed process could leave behind. Within a process it spares a second engine on the
        same conversation a summarizer call whose result would be dropped.
        """
        with _slots_lock:
            slot = _slots.setdefault((id(self), conversation_id), threading.Lock())
        held = slot.acquire(blocking=False)
        try:
            yield held
        finally:
            if held:
                slot.release()

    @contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        """The connection for reading; a SQLite error leaves as :class:`StoreFault`
        (inside a write transaction the write's own failure handling applies)."""
        with self.lock:
            if self.conn.in_transaction:
                yield self.conn
                return
            with faults_mapped():
                yield self.conn

    def read_many(self, statements: Sequence[tuple[str, Sequence[Any]]]) -> list[list[Any]]:
        """Each statement's rows, the statements run in order on one connection."""
        with self.read() as db:
            return [db.execute(sql, tuple(args)).fetchall() for sql, args in statements]

    @property
    def readonly(self) -> bool:
        with self.read() as db:
            return bool(db.execute("PRAGMA query_only").fetchone()[0])

    def close(self) -> None:
        if self.checkpointer is not None:
            self.checkpointer.stop()
        with self.lock:
            self.conn.close()

    def checkpoint_now(self, wait_s: float = 2.0) -> bool:
        """Copy the whole WAL into the database file and empty it, so the file alone holds every
        row (a copy of lcm.db made after the host exits is complete). For a clean shutdown: waits
        at most ``wait_s`` for a write under way, never raises, and leaves the connection open
        (a thread of the host may still read through it while the interpreter exits)."""
        if not self.lock.acquire(timeout=wait_s):
            return False
        try:
            if self.conn.in_transaction:
                return False
            row = self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            return bool(row is not None and row[0] == 0)
        except sqlite3.Error:
            return False
        finally:
            self.lock.release()

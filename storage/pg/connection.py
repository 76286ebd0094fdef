"""The PostgreSQL connection: a pool per database URL and process, one transaction per
``write()`` under the database's write lock, and psycopg's errors mapped to the data layer's.

The shared query mixins were written against SQLite's ``BEGIN IMMEDIATE``: a write transaction
reads what it needs (a conversation's last seq, which rows are already stored) and decides
while no other writer can change it. :meth:`PgConnection.write` gives them the same guarantee
across hosts with a transaction-scoped advisory lock taken first thing, so every machine that
shares the database serializes its writes exactly as processes sharing a SQLite file do; UNIQUE
constraints stay as the second line. Readers never wait (MVCC), and a compaction's summarizer
call runs outside any transaction, so a lock is held only for the milliseconds of a write.

A nested ``read()`` or ``write()`` on the same thread joins the open transaction (as a SQLite
connection does), through a thread-local binding of the pooled connection.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Self, cast

from ..connection import BUSY_TIMEOUT_MS, Checkpointer
from ..errors import StoreError, StoreFault, WriteFailed
from ..rows import message_columns
from . import codec, prepared, redacted, schema, secrets
from .dialect import translate
from .statistics import CHECK_EVERY_COMMITS, Statistics

# pg_advisory_xact_lock keys: (namespace, key). The namespace is ours ("lcm\0" as an int32).
LOCK_NAMESPACE = 0x6C636D00
WRITE_LOCK = 1
# Session advisory locks (namespace, conversation id mod 2^31) for compaction: a namespace of their
# own, since session and transaction advisory locks share one key space with WRITE_LOCK.
COMPACTION_NAMESPACE = 0x6C636D01
POOL_MAX = 4
CONNECT_TIMEOUT_S = 10
# After a connection broke, a checkout waits OUTAGE_WAIT_S, not CONNECT_TIMEOUT_S (a server that is
# up gives the pool a new connection in milliseconds); once that wait found none, checkouts within
# OUTAGE_QUIET_S fail at once, until a connection comes again (the pool keeps reconnecting in the
# background meanwhile). A turn during an outage is then not held for the connect timeout by each
# of its statements (several a turn, 10 s each).
OUTAGE_QUIET_S = 2.0
OUTAGE_WAIT_S = 1.0
# The session's plan cache mode (see _configure), and the one PgDb.fetchone_generic runs under.
CUSTOM_PLANS = "SET plan_cache_mode = force_custom_plan"
GENERIC_PLANS = "SET plan_cache_mode = force_generic_plan"
# Inside a write transaction: a generic plan until its COMMIT or ROLLBACK, nothing to set back.
GENERIC_PLANS_LOCAL = "SET LOCAL plan_cache_mode = force_generic_plan"
# SQLSTATE classes and codes that mean "this write cannot happen now", with the labels status shows.
_WRITE_FAILURES = (
    ("53100", "disk full"),
    ("53", "out of resources"),
    ("25006", "read-only"),
    ("08", "cannot connect"),
    ("57P", "server shutting down"),
    ("55P03", "locked"),
    ("40P01", "deadlock"),
    ("40001", "serialization failure"),
)

# BEGIN and the write lock in one message to the server (no parameters, so psycopg sends it as a
# simple query, which may hold several statements): a round trip less per write transaction.
_BEGIN_LOCKED = f"BEGIN; SELECT pg_advisory_xact_lock({LOCK_NAMESPACE}, {WRITE_LOCK})"


class StatementCount:
    """Statements this process sent to PostgreSQL servers, every pooled connection counted
    (statements sent in one simple query are one round trip, counted once).

    Each is a network round trip, so the count is what a host turn's latency on a remote server
    is made of; tests/test_pg_roundtrips.py asserts a turn's count so a change that adds round
    trips cannot pass unnoticed (a count, not a clock: the machine's load cannot flake it).
    ``prepared``: of those, the PREPAREs of :meth:`PgDb.call_prepared` (once per statement and
    pooled connection).
    """

    sent = 0
    prepared = 0


def _counting_cursor() -> type:
    """psycopg's cursor, counting each ``execute`` and ``executemany`` in :class:`StatementCount`."""
    global _COUNTING
    if _COUNTING is None:
        import psycopg

        class CountingCursor(psycopg.Cursor):
            def execute(self, *args: Any, **kwargs: Any) -> Any:
                StatementCount.sent += 1
                return super().execute(*args, **kwargs)

            def executemany(self, *args: Any, **kwargs: Any) -> Any:
                StatementCount.sent += 1
                return super().executemany(*args, **kwargs)

        _COUNTING = CountingCursor
    return _COUNTING


_COUNTING: type | None = None

# Column types for PgDb.insert_rows (the tables of schema.py it serves).
_COLUMN_TYPES = {
    "messages": {
        "conversation_id": "bigint",
        "seq": "bigint",
        "session_key": "bigint",
        "role": "text",
        "content": "text",
        "parts": "text",
        "tool_calls": "text",
        "tool_call_id": "text",
        "tool_name": "text",
        "source": "text",
        "host_ts": "float8",
        "created_at": "float8",
        "tokens": "bigint",
        "fingerprint": "text",
        "synthetic": "text",
        "extra": "text",
    }
}


def _psycopg() -> Any:
    try:
        import psycopg
        import psycopg_pool
    except (
        ImportError
    ) as exc:  # the optional extra is not installed: an outage to fix, not a foreign database
        raise WriteFailed(
            "cannot connect",
            "a postgresql:// database needs the 'postgres' extra: "
            "pip install 'hermes-lcm[postgres]' (psycopg 3 and psycopg_pool)",
        ) from exc
    return psycopg, psycopg_pool


def write_failure(exc: BaseException) -> WriteFailed | None:
    """``exc`` as a :class:`WriteFailed` when it says the database cannot be written now."""
    if isinstance(exc, WriteFailed):
        return exc
    code = str(getattr(exc, "sqlstate", "") or "")
    for prefix, reason in _WRITE_FAILURES:
        if code.startswith(prefix):
            return WriteFailed(reason, secrets.scrub(str(exc)).strip())
    if type(exc).__name__ in ("OperationalError", "PoolTimeout"):
        return WriteFailed("cannot connect", secrets.scrub(str(exc)).strip())
    return None


def _as_sqlite_error(exc: Exception) -> sqlite3.Error:
    """The shared mixins catch sqlite3's types (``IntegrityError`` for a duplicate, ``Error`` for
    the rest): a PostgreSQL error reaches them as the matching one, its message kept."""
    text = secrets.scrub(f"{exc} (SQLSTATE {getattr(exc, 'sqlstate', '')})".strip())
    if type(exc).__name__ in (
        "UniqueViolation",
        "IntegrityError",
        "ForeignKeyViolation",
        "CheckViolation",
        "NotNullViolation",
        "RaiseException",
    ):
        return sqlite3.IntegrityError(text)
    return sqlite3.OperationalError(text)


class PgCursor:
    """What the mixins use of a sqlite3 cursor: fetchone, fetchall, iteration, rowcount."""

    def __init__(self, cursor: Any) -> None:
        self._cursor = cursor
        self.rowcount = cursor.rowcount
        self.lastrowid: int | None = None

    def fetchone(self) -> Any:
        return self._cursor.fetchone() if self._cursor.description else None

    def fetchall(self) -> list[Any]:
        return self._cursor.fetchall() if self._cursor.description else []

    def __iter__(self) -> Iterator[Any]:
        return iter(self.fetchall())


class PgDb:
    """A pooled connection speaking the mixins' SQLite spelling (``dialect.translate``)."""

    _escape: Any = None  # libpq's literal quoting for this connection, made on first use

    def __init__(self, conn: Any) -> None:
        self.raw = conn
        # Set by PgConnection.write for its body: the rows of its ``first`` read, and whether this
        # write began the transaction (only then may the body's last statement carry the COMMIT).
        self.first_rows: list[Any] | None = None
        self.outermost = False

    @property
    def in_transaction(self) -> bool:
        return bool(self.raw.info.transaction_status != 0)  # 0: IDLE

    def getlimit(self, _category: int) -> int:
        """SQLite's bound-parameter limit, asked by batch inserts: PostgreSQL allows 65,535."""
        return 32767

    def execute(self, sql: str, params: Sequence[Any] = ()) -> PgCursor:
        sql = translate(sql)
        with _sqlite_errors():
            cur = self.raw.execute(sql, tuple(params))
        found = PgCursor(cur)
        if sql.endswith(" RETURNING id"):
            row = cur.fetchone()
            found.lastrowid = int(row[0]) if row else None
        return found

    def execute_named(self, sql: str, params: dict[str, Any]) -> list[Any]:
        """PostgreSQL's own SQL (``%(name)s`` placeholders, not translated): its rows, errors as sqlite3's."""
        with _sqlite_errors():
            cur = self.raw.execute(sql, params)
            return cur.fetchall() if cur.description else []

    def insert_rows(
        self, table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]
    ) -> None:
        """``rows`` into ``table`` as one ``INSERT ... SELECT FROM unnest(arrays)``: a parameter per
        column, not per value. The multi-row VALUES statement SQLite gets cost psycopg a parse of a
        32,000-placeholder string per 2,000 rows (a third of an import's time, cProfile) and the
        server a plan of it; the arrays go as they are. Types are the columns' own (``schema``)."""
        if not rows:
            return
        casts = ", ".join(f"%s::{_COLUMN_TYPES[table][c]}[]" for c in columns)
        with _sqlite_errors():
            self.raw.execute(
                f"INSERT INTO {table}({', '.join(columns)}) SELECT * FROM unnest({casts})",
                [list(column) for column in zip(*rows, strict=True)],
            )

    def finish_with(self, sql: str, params: dict[str, Any]) -> list[Any]:
        """``execute_named``, for the last statement of the outermost write: the statement and the
        COMMIT go to the server together, as one simple query, a round trip less per write. A
        failure leaves the transaction open and aborted, for the write to roll back and report.
        Not prepared: a statement the session lost could not be sent again in a transaction the
        failure aborted (:meth:`run_prepared` re-sends only what it began)."""
        if not self.outermost:
            return self.execute_named(sql, params)
        with _sqlite_errors():
            cur = self.raw.execute(f"{self._literal(sql, params)}; COMMIT", prepare=False)
            return cur.fetchall() if cur.description else []

    def fetchone_generic(self, sql: str, params: Sequence[Any]) -> Any:
        """``execute(sql, params).fetchone()`` under a generic plan, for a statement whose plan
        does not depend on its values: the session plans every statement for its values
        (:data:`CUSTOM_PLANS`, for the searches), which a statement run every turn pays again each
        time. The mode is set before it and back after it in the same simple query (one round
        trip, one statement counted); the three are one implicit transaction, so if the
        statement fails the first SET is rolled back with it and the session stays on custom plans."""
        with _sqlite_errors():
            return self.run_prepared(
                translate(sql), params, before=[GENERIC_PLANS], after=[CUSTOM_PLANS]
            ).fetchone()

    def run_prepared(
        self,
        sql: str,
        params: Sequence[Any] | dict[str, Any],
        before: Sequence[str] = (),
        after: Sequence[str] = (),
    ) -> Any:
        """``before``, ``sql`` (prepared on this connection, :meth:`call_prepared`) and ``after``
        as ONE simple query: one round trip, and psycopg's Python work for one statement where a
        pipeline of the same costs it four (0.44 ms against 0.23 ms for BEGIN, the lock, SELECT 1
        and COMMIT). The psycopg cursor, at ``sql``'s result.

        psycopg deallocates every prepared statement of a session once it has prepared one of its
        own and sees a ROLLBACK or a DROP; a statement lost so is prepared again and the query
        sent again, once, when the query began its own transaction or ran in none (inside the
        caller's transaction the failure aborted it: the caller's error handling applies)."""
        psycopg, _ = _psycopg()
        own = not self.in_transaction
        for attempt in range(2):
            call = self.call_prepared(sql, params)
            try:
                cur = self.raw.execute("; ".join([*before, call, *after]), prepare=False)
                break
            except psycopg.errors.InvalidSqlStatementName:
                if attempt or not own:
                    raise
                prepared.forget(self.raw)
                if self.in_transaction:
                    self.raw.execute("ROLLBACK", prepare=False)
        for _ in before:
            cur.nextset()
        return cur

    def call_prepared(self, sql: str, params: Sequence[Any] | dict[str, Any]) -> str:
        """``EXECUTE`` of ``sql`` with ``params`` written in as literals (``prepared.literals``, or
        psycopg's client-side quoting for other types; ``codec``'s escape applies), so that it can ride
        in one simple query with other statements; the statement is prepared on this connection
        first if it is not yet (a round trip, once per connection). Prepared, the server parses
        it once per connection, and under a generic plan plans it once."""
        name, body, order = prepared.form(sql)
        done = prepared.names_on(self.raw)
        if name not in done:
            psycopg, _ = _psycopg()
            # Not rolled back with a transaction: one prepared by a call that failed later exists.
            with contextlib.suppress(psycopg.errors.DuplicatePreparedStatement):
                StatementCount.prepared += 1
                self.raw.execute(f"PREPARE {name} AS {body}", prepare=False)
            done.add(name)
        values = prepared.ordered(order, params)
        if not values:
            return f"EXECUTE {name}"
        if self._escape is None:
            from psycopg.pq import Escaping

            self._escape = Escaping(self.raw.pgconn).escape_literal
        try:
            return f"EXECUTE {name}({prepared.literals(values, self._escape)})"
        except (prepared.NotPlain, UnicodeEncodeError):  # any other value: psycopg's quoting
            return self._literal(f"EXECUTE {name}({', '.join(['%s'] * len(values))})", values)

    def _literal(self, sql: str, params: Sequence[Any] | dict[str, Any]) -> str:
        """``sql`` with ``params`` written in by psycopg's client-side quoting."""
        psycopg, _ = _psycopg()
        return str(psycopg.ClientCursor(self.raw).mogrify(sql, params))

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        with _sqlite_errors(), self.raw.cursor() as cur:
            cur.executemany(translate(sql), [tuple(r) for r in rows])


@contextmanager
def _sqlite_errors() -> Iterator[None]:
    """psycopg's errors as sqlite3's inside a statement's call: the shared mixins catch
    ``sqlite3.IntegrityError`` and ``OperationalError``, whichever backend raised them."""
    try:
        yield
    except Exception as exc:
        if _is_psycopg_error(exc):
            raise _as_sqlite_error(exc) from exc
        raise


def _is_psycopg_error(exc: BaseException) -> bool:
    return type(exc).__module__.startswith("psycopg")


class PgConnection:
    """A PostgreSQL database opened for this process: its pool and its transactions.

    ``path`` is the URL without its password (what operators see); ``url`` keeps it.
    """

    path: str
    url: str
    lock: threading.RLock
    checkpointer: Checkpointer | None = None  # SQLite's WAL copier: PostgreSQL has none
    statistics: Statistics | None = None  # the planner's statistics kept fresh (writable stores)
    message_columns: str
    message_columns_m: str

    def __init__(self, url: str, *, readonly: bool = False) -> None:
        _, psycopg_pool = _psycopg()
        from psycopg.conninfo import conninfo_to_dict

        self.url, self.path = url, redacted(url)
        # Before anything can log it: libpq's errors quote the token of a URL it cannot parse, and
        # psycopg_pool logs each failed connection attempt (secrets.py).
        secrets.remember(url)
        secrets.guard_loggers()
        try:
            conninfo_to_dict(url)
        except Exception as exc:  # noqa: BLE001 - libpq cannot parse it: it never connects, say so now (no pool retries)
            raise WriteFailed(
                "cannot connect", f"{self.path}: {secrets.scrub(str(exc)).strip()}"
            ) from None
        self.lock = threading.RLock()
        self._local = threading.local()
        self._readonly = readonly
        self._commits = 0
        # When the server was last found unreachable (monotonic; None: it answers), see _checkout.
        self._unreachable_at: float | None = None
        self._broken = False  # a connection broke since the last checkout that got one
        try:
            self.pool = psycopg_pool.ConnectionPool(
                url,
                min_size=1,
                max_size=POOL_MAX,
                open=True,
                timeout=CONNECT_TIMEOUT_S,
                kwargs={"autocommit": True, "connect_timeout": CONNECT_TIMEOUT_S},
                configure=self._configure,
                name="hermes-lcm",
            )
            self.pool.wait(timeout=CONNECT_TIMEOUT_S)
        except Exception as exc:
            # Not a StoreError (pgsecrel): that says the database refuses us for good (another
            # program's, a newer layout), and the engine then trims its prompt as for an ignored
            # session, dropping messages nothing stored. A server that is down is an outage: the
            # engine keeps the host's list whole and tries again after its back-off.
            raise WriteFailed(
                "cannot connect", f"{self.path}: {secrets.scrub(str(exc)).strip()}"
            ) from exc
        try:
            with self.read() as db:
                schema.check_server(cast(PgDb, db).raw.info.server_version, self.path)
                schema.check_identity(cast(PgDb, db), self.path)
            if readonly:
                if self.schema_version() == 0:
                    raise StoreError(f"{self.path} is not an {schema.APP_ID} database (no tables)")
            else:
                with self.write() as db:
                    schema.migrate(cast(PgDb, db))
                self.statistics = Statistics(self.pool)
                self.statistics.request()  # a database imported or grown elsewhere: look once now
            self._set_columns()
        except BaseException:
            if self.statistics is not None:
                self.statistics.stop()
            self.pool.close()
            raise

    @staticmethod
    def _configure(conn: Any) -> None:
        """Each pooled connection: numeric results as float (SQLite hands the mixins floats and
        ints, never Decimal), text that may hold NUL (``codec``), and our session settings."""
        from psycopg.types.numeric import FloatLoader

        conn.adapters.register_loader("numeric", FloatLoader)
        codec.register(conn)
        conn.cursor_factory = _counting_cursor()
        conn.execute("SET statement_timeout = 0")
        # A write waits for the write lock at most as long as SQLite's busy timeout (then
        # WriteFailed("locked")), unless the server or the URL set a lock_timeout of its own: a host
        # stuck inside a transaction on another machine must never hang this one (pgsecrel).
        if conn.execute("SELECT current_setting('lock_timeout')").fetchone()[0] in ("0", None):
            conn.execute(f"SET lock_timeout = {int(BUSY_TIMEOUT_MS)}")
        # psycopg prepares a statement run 5 times, and after 5 more the server may switch it to a
        # generic plan, chosen without the parameters: for a full-text search that plan cannot tell
        # a rare term from a common one and scans (lcm_grep went from 40 ms to 400 ms at 2k rows
        # after its 20th call; bench/pg_compare.py). Plans are cheap next to such a mistake.
        conn.execute(CUSTOM_PLANS)

    @classmethod
    def open_readonly(cls, path: str | Path) -> Self:
        return cls(str(path), readonly=True)

    def _set_columns(self) -> None:
        self.message_columns = message_columns(schema.SCHEMA_VERSION)
        self.message_columns_m = message_columns(schema.SCHEMA_VERSION, "m")

    def schema_version(self) -> int:
        with self.read() as db:
            return schema.schema_version(cast(PgDb, db))

    # -- transactions -----------------------------------------------------

    @contextmanager
    def _bound(self) -> Iterator[PgDb]:
        """The connection this thread's open transaction uses, or one from the pool."""
        bound: PgDb | None = getattr(self._local, "db", None)
        if bound is not None:
            yield bound
            return
        conn_cm, conn = self._checkout()
        db = PgDb(conn)
        self._local.db = db
        try:
            yield db
        except BaseException as exc:
            if _disconnected(exc):
                self._broken = True
            raise
        finally:
            self._local.db = None
            conn_cm.__exit__(None, None, None)

    def _checkout(self) -> tuple[Any, Any]:
        """A pooled connection (its context manager and the connection), waiting less once a
        connection broke or the server was found unreachable (:data:`OUTAGE_WAIT_S`,
        :data:`OUTAGE_QUIET_S`); WriteFailed when none comes."""
        since = self._unreachable_at
        if since is not None and time.monotonic() - since < OUTAGE_QUIET_S:
            raise WriteFailed(
                "cannot connect",
                f"{self.path}: the server was unreachable {time.monotonic() - since:.1f} s ago "
                f"(tried again {OUTAGE_QUIET_S:g} s after)",
            )
        outage = self._broken or since is not None
        try:
            conn_cm = self.pool.connection(timeout=OUTAGE_WAIT_S if outage else CONNECT_TIMEOUT_S)
            conn = conn_cm.__enter__()
        except Exception as exc:
            self._unreachable_at = time.monotonic()
            raise WriteFailed(
                "cannot connect", f"{self.path}: {secrets.scrub(str(exc)).strip()}"
            ) from exc
        self._unreachable_at, self._broken = None, False
        return conn_cm, conn

    @contextmanager
    def write(self, first: str | None = None) -> Iterator[sqlite3.Connection]:
        """One transaction under the database's write lock; nested calls join the outer one.

        ``first``: a read without parameters (only values this code wrote into it) that the body
        needs before it decides; it goes with BEGIN and the lock in one message to the server, so
        it runs under the lock, and its rows wait in the body's ``db.first_rows``. The body may end
        the transaction itself with :meth:`PgDb.finish_with`.

        A failure rolls the whole transaction back and leaves as :class:`WriteFailed` (the
        database cannot be written now) or :class:`StoreFault` (any other error).
        """
        if self._readonly:
            raise WriteFailed("read-only", f"{self.path} was opened read-only")
        with self._bound() as db:
            if db.in_transaction:
                outer = db.first_rows, db.outermost
                try:
                    if first is not None:
                        with _sqlite_errors():
                            db.first_rows = db.raw.execute(first, prepare=False).fetchall()
                    db.outermost = False  # an inner body never ends the outer transaction
                    yield cast(sqlite3.Connection, db)
                finally:
                    db.first_rows, db.outermost = outer
                return
            try:
                with self._undone_on_error(db):
                    # One round trip: simple protocol, several statements (BEGIN, the lock, ``first``).
                    cur = db.raw.execute(
                        _BEGIN_LOCKED if first is None else f"{_BEGIN_LOCKED}; {first}",
                        prepare=False,
                    )
                    if first is not None:
                        cur.nextset()  # BEGIN's result, then the lock's, then the read's
                        cur.nextset()
                        db.first_rows = cur.fetchall()
                    db.outermost = True
                    yield cast(
                        sqlite3.Connection, db
                    )  # the mixins' subset of a sqlite3 connection (PgDb)
                    if db.in_transaction:
                        db.raw.execute("COMMIT")
            finally:
                db.first_rows, db.outermost = None, False
            self._committed()

    def write_alone(self, sql: str, params: dict[str, Any]) -> list[Any] | None:
        """``sql`` (PostgreSQL's own SQL) as a whole write transaction in ONE round trip: BEGIN,
        the write lock, the statement and COMMIT in one simple query; its rows. For a write whose
        decision was made before the lock and that checks in its own SQL that it still holds.
        None, with nothing sent, inside an open transaction (the caller writes within it).
        Errors leave as :meth:`write`'s do, the transaction rolled back."""
        if self._readonly:
            raise WriteFailed("read-only", f"{self.path} was opened read-only")
        with self._bound() as db:
            if db.in_transaction:
                return None
            with self._undone_on_error(db), _sqlite_errors():
                # BEGIN, the lock, a generic plan for the statement (the turn's insert: its plan
                # does not depend on its values) and COMMIT, with it in one simple query.
                begin = [*_BEGIN_LOCKED.split("; "), GENERIC_PLANS_LOCAL]
                cur = db.run_prepared(sql, params, before=begin, after=["COMMIT"])
                rows = cur.fetchall() if cur.description else []
        self._committed()
        return rows

    @contextmanager
    def _undone_on_error(self, db: PgDb) -> Iterator[None]:
        """A failure inside rolls the transaction back and leaves as the data layer's error."""
        try:
            yield
        except BaseException as exc:
            self._rollback(db)
            mapped = _mapped(exc)
            if mapped is exc:
                raise
            raise mapped from exc

    def _committed(self) -> None:
        """Count a commit: every ``CHECK_EVERY_COMMITS`` the statistics job looks at the tables."""
        self._commits += 1
        if self.statistics is not None and self._commits % CHECK_EVERY_COMMITS == 0:
            self.statistics.request()

    @staticmethod
    def _rollback(db: PgDb) -> None:
        if db.in_transaction:
            with contextlib.suppress(Exception):  # a broken connection: the pool discards it
                db.raw.execute("ROLLBACK")
        # psycopg deallocates the session's prepared statements on a ROLLBACK once it has its own:
        # they are prepared again on next use (PgDb.call_prepared).
        prepared.forget(db.raw)

    @contextmanager
    def outside(self) -> Iterator[Any]:
        """A pooled connection outside any transaction and without the write lock, for the one
        statement PostgreSQL refuses inside a transaction (``CREATE INDEX CONCURRENTLY``: writes go on
        while it runs); its errors leave as the data layer's, as :meth:`write`'s do."""
        if self._readonly:
            raise WriteFailed("read-only", f"{self.path} was opened read-only")
        try:
            with self.pool.connection() as conn:
                yield conn
        except BaseException as exc:
            mapped = _mapped(exc)
            if mapped is exc:
                raise
            raise mapped from exc

    @contextmanager
    def compaction_slot(self, conversation_id: int) -> Iterator[bool]:
        """Compact ``conversation_id`` only if no other process on any host is (``Store.compaction_slot``).

        A session advisory lock on a pooled connection of its own, held for the whole pass (the
        summarizer runs outside any transaction, so no transaction could hold it): ``False`` at
        once when another session holds it. The server frees it when that session ends, so a
        killed process or a restarted server never leaves a conversation locked.
        """
        if self._readonly:
            raise WriteFailed("read-only", f"{self.path} was opened read-only")
        conn_cm, conn = self._checkout()
        try:
            held = bool(
                conn.execute(
                    "SELECT pg_try_advisory_lock(%s, (%s %% 2147483648)::int)",
                    (COMPACTION_NAMESPACE, conversation_id),
                ).fetchone()[0]
            )
        except Exception as exc:
            conn_cm.__exit__(None, None, None)
            raise _mapped(exc) from exc
        try:
            yield held
        finally:
            if held:  # a broken connection lost the lock with its session; the pool discards it
                with contextlib.suppress(Exception):
                    conn.execute(
                        "SELECT pg_advisory_unlock(%s, (%s %% 2147483648)::int)",
                        (COMPACTION_NAMESPACE, conversation_id),
                    )
            conn_cm.__exit__(None, None, None)

    @contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        """A connection for reading; an error leaves as :class:`StoreFault` (inside a write
        transaction the write's own failure handling applies)."""
        with self._bound() as db:
            if db.in_transaction:
                yield cast(sqlite3.Connection, db)
                return
            try:
                yield cast(sqlite3.Connection, db)
            except Exception as exc:
                mapped = _mapped(exc)
                if mapped is exc:
                    raise
                raise mapped from exc

    @property
    def readonly(self) -> bool:
        return self._readonly

    def close(self) -> None:
        if self.statistics is not None:
            self.statistics.stop()
        self.pool.close()

    def checkpoint_now(self, wait_s: float = 2.0) -> bool:
        """Nothing to merge: a server keeps its own write-ahead log (a SQLite file's is beside it)."""
        return True


def _disconnected(exc: BaseException) -> bool:
    """Does ``exc`` say the server cannot be reached (as the data layer's error or the driver's)?"""
    mapped = _mapped(exc) if not isinstance(exc, WriteFailed) else exc
    return isinstance(mapped, WriteFailed) and mapped.reason == "cannot connect"


def _mapped(exc: BaseException) -> BaseException:
    """The data layer's error for ``exc`` (itself when it is already one, or not a database error)."""
    if isinstance(exc, (StoreFault, StoreError)):
        return exc
    cause = exc.__cause__ if isinstance(exc, sqlite3.Error) and exc.__cause__ is not None else exc
    failed = write_failure(cause)
    if failed is not None:
        return failed
    if isinstance(exc, sqlite3.Error) or _is_psycopg_error(exc):
        return StoreFault(secrets.scrub(str(exc)).strip())
    return exc

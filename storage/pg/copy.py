"""The SQL of ``lcm migrate-to-postgres``: a hermes-lcm SQLite file copied into a PostgreSQL schema.

Rows keep their ids (a ``store_id`` in a summary's text, a search cursor, an edge all stay
valid), so the copy inserts the ids itself and resets the identity sequences afterwards. Each
batch is one PostgreSQL transaction that also records, in ``meta``, the last source key it
copied (``migrate:cursor:<table>``): a killed run leaves either a whole batch and its cursor or
neither, and the next run continues after the cursor, so nothing is copied twice. The source is
read through its own read-only store connection (an older schema's TEMP views included).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, cast

from ..errors import ForeignDatabase
from ..rows import unpack_fingerprint
from ..schema import APP_ID

MARK = "migrate:"
SOURCE_KEY, DONE_KEY, CURSOR_KEY = "migrate:source", "migrate:done", "migrate:cursor:"
IDENTITIES = ("conversations", "session_keys", "messages", "summaries", "events")
_SKIPPED_COLUMNS = {"tsv", "rid"}  # generated on PostgreSQL
# A schema-2 file has no owner column: the value migration 3 would give it.
_OWNER_OF_KEY = (
    "CASE WHEN substr(key, 1, 8)='session:' OR substr(key, 1, 7)='import:' "
    "THEN 'local' ELSE 'chat:' || key END"
)


@dataclass(frozen=True)
class Table:
    """One table to copy, in foreign-key order; ``key``: the source columns batches are ordered by."""

    name: str
    key: tuple[str, ...]


TABLES = (
    Table("conversations", ("id",)),
    Table("sessions", ("rowid",)),
    Table("session_keys", ("id",)),
    Table("messages", ("id",)),
    Table("payload_refs", ("message_id", "ref")),
    Table("payload_ref_aliases", ("old_ref",)),
    Table("summaries", ("id",)),
    Table("edges", ("parent_id", "child_kind", "child_id")),
    Table("context_items", ("conversation_id", "ord")),
    Table("events", ("id",)),
)
CHECKSUMMED = ("messages", "summaries")
# The optional families' tables: derived from the rows (rebuilt by lcm embed/rollups/assertions), not on
# PostgreSQL yet, so they are listed, not copied.
OPTIONAL = (
    "vector_models",
    "vectors",
    "vector_epoch",
    "rollups",
    "rollup_cursor",
    "assertions",
    "assertion_cursor",
)


@dataclass(frozen=True)
class TargetState:
    """What the URL's schema holds: ``empty`` (no tables), ``foreign``, ``fresh`` (ours, no rows),
    ``partial`` (a migration started), ``migrated`` (one finished), ``in use`` (ours, written by engines)."""

    state: str
    source: str | None = None
    detail: str = ""


def probe(url: str) -> TargetState:
    """The target's state, read with a plain connection (nothing is created or written). The URL's
    passwords are remembered first: libpq's error for a URL it cannot parse quotes them (secrets.py)."""
    import psycopg

    from . import secrets

    secrets.remember(url)
    secrets.guard_loggers()
    with psycopg.connect(url, autocommit=True, connect_timeout=10) as conn:
        tables = {
            r[0]
            for r in conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
            ).fetchall()
        }
        if not tables:
            return TargetState("empty")
        if "meta" not in tables:
            return TargetState(
                "foreign", detail=f"holds tables not written by {APP_ID}: {sorted(tables)[:8]}"
            )
        meta: dict[str, str] = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        if meta.get("app") != APP_ID:
            return TargetState("foreign", detail=f"belongs to {meta.get('app')!r}, not {APP_ID}")
        source = meta.get(SOURCE_KEY)
        if source is not None:
            return TargetState("migrated" if DONE_KEY in meta else "partial", source)
        rows = conn.execute(
            "SELECT (SELECT count(*) FROM conversations) + (SELECT count(*) FROM messages)"
        ).fetchone()
        return TargetState("fresh" if rows and rows[0] == 0 else "in use")


def check_not_foreign(state: TargetState, where: str) -> None:
    if state.state == "foreign":
        raise ForeignDatabase(f"{where} {state.detail}")


def _columns(con: sqlite3.Connection, table: str) -> list[str]:
    return [str(r[1]) for r in con.execute(f"PRAGMA table_info({table})")]


def _pg_columns(db: Any, table: str) -> list[str]:
    rows = db.raw.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() "
        "AND table_name = %s ORDER BY ordinal_position",
        (table,),
    ).fetchall()
    return [str(r[0]) for r in rows if r[0] not in _SKIPPED_COLUMNS]


def _source_tables(con: sqlite3.Connection) -> set[str]:
    rows = con.execute(
        "SELECT name FROM sqlite_master WHERE type IN ('table', 'view') UNION "
        "SELECT name FROM sqlite_temp_master WHERE type IN ('table', 'view')"
    ).fetchall()
    return {str(r[0]) for r in rows}


def source_tables(source: Any) -> set[str]:
    with source.read() as con:
        return _source_tables(con)


def optional_counts(source: Any) -> dict[str, int]:
    """Rows of the optional families' tables the source has (they are not copied)."""
    with source.read() as con:
        have = _source_tables(con)
        return {
            t: int(con.execute(f"SELECT count(*) FROM {t}").fetchone()[0])
            for t in OPTIONAL
            if t in have
        }


def source_counts(source: Any) -> dict[str, int]:
    """Rows per table of the source (the tables it has)."""
    with source.read() as con:
        have = _source_tables(con)
        return {
            t.name: int(con.execute(f"SELECT count(*) FROM {t.name}").fetchone()[0])
            for t in TABLES
            if t.name in have
        }


def source_meta(source: Any) -> dict[str, str]:
    """The meta rows that move: the secrets (redaction, summary block, cursors) and marks."""
    with source.read() as con:
        rows = con.execute(
            "SELECT key, value FROM meta WHERE key NOT IN ('app', 'schema_version') "
            "AND substr(key, 1, 8) <> ?",
            (MARK,),
        ).fetchall()
    return {str(k): str(v) for k, v in rows}


def message_ids(source: Any) -> list[int]:
    with source.read() as con:
        return [int(r[0]) for r in con.execute("SELECT id FROM messages ORDER BY id").fetchall()]


def target_counts(target: Any) -> dict[str, int]:
    with target.read() as db:
        return {
            t.name: int(db.raw.execute(f"SELECT count(*) FROM {t.name}").fetchone()[0])
            for t in TABLES
        }


def write_meta(target: Any, values: dict[str, str]) -> None:
    """Source values win: a secret the target made on its own first open must not outlive the move."""
    with target.write() as db:
        db.raw.cursor().executemany(
            "INSERT INTO meta(key, value) VALUES (%s, %s) ON CONFLICT(key) DO UPDATE "
            "SET value = excluded.value",
            list(values.items()),
        )


def cursor_of(db: Any, table: str) -> list[Any] | None:
    row = db.raw.execute("SELECT value FROM meta WHERE key = %s", (CURSOR_KEY + table,)).fetchone()
    return cast(list[Any], json.loads(row[0])) if row else None


@dataclass(frozen=True)
class Plan:
    """How one table is read from the source and written to the target."""

    table: Table
    select: str
    insert: str
    fingerprint_at: int | None


def plan_table(con: sqlite3.Connection, db: Any, table: Table) -> Plan:
    """The columns both sides have (an older source lacks some: PostgreSQL's defaults fill them)."""
    have = set(_columns(con, table.name))
    picked, exprs = [], []
    for column in _pg_columns(db, table.name):
        if column in have:
            picked.append(column)
            exprs.append(column)
        elif table.name == "conversations" and column == "owner":
            picked.append(column)
            exprs.append(_OWNER_OF_KEY)
    key = ", ".join(table.key)
    where = (
        f"WHERE ({key}) > ({', '.join('?' * len(table.key))}) "
        if len(table.key) > 1
        else f"WHERE {key} > ? "
    )
    select = f"SELECT {', '.join(exprs)}, {key} FROM {table.name} {where}ORDER BY {key} LIMIT ?"
    marks = ", ".join(["%s"] * len(picked))
    insert = (
        f"INSERT INTO {table.name}({', '.join(picked)}) VALUES ({marks}) ON CONFLICT DO NOTHING"
    )
    return Plan(
        table, select, insert, picked.index("fingerprint") if "fingerprint" in picked else None
    )


def _start(table: Table) -> list[Any]:
    return [-(1 << 63)] * len(table.key)


def copy_table(
    source: Any, target: Any, table: Table, batch: int, tick: Callable[[int], None]
) -> int:
    """Copy ``table`` after its cursor in batches of ``batch`` rows, one transaction each."""
    copied = 0
    with target.read() as db, source.read() as con:
        plan = plan_table(con, db, table)
    while True:
        with target.write() as db:
            after = cursor_of(db, table.name) or _start(table)
            with source.read() as con:
                rows = con.execute(plan.select, (*after, batch)).fetchall()
            if not rows:
                return copied
            width = len(table.key)
            values = [_target_row(r[:-width], plan.fingerprint_at) for r in rows]
            db.raw.cursor().executemany(plan.insert, values)
            last = list(rows[-1][-width:])
            db.raw.execute(
                "INSERT INTO meta(key, value) VALUES (%s, %s) ON CONFLICT(key) DO UPDATE "
                "SET value = excluded.value",
                (CURSOR_KEY + table.name, json.dumps(last)),
            )
        copied += len(rows)
        tick(len(rows))


def _target_row(row: Sequence[Any], fingerprint_at: int | None) -> tuple[Any, ...]:
    values = list(row)
    if fingerprint_at is not None:
        values[fingerprint_at] = unpack_fingerprint(values[fingerprint_at])
    return tuple(values)


def reset_sequences(target: Any) -> None:
    """Identity columns continue after the copied ids (the rows were inserted with theirs)."""
    with target.write() as db:
        for table in IDENTITIES:
            db.raw.execute(
                f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
                f"coalesce((SELECT max(id) FROM {table}), 0) + 1, false)"
            )


def _checksum_rows(rows: Iterator[Sequence[Any]], fingerprint_at: int | None) -> str:
    digest = hashlib.sha256()
    for row in rows:
        digest.update(repr(_target_row(row, fingerprint_at)).encode("utf-8", "surrogatepass"))
    return digest.hexdigest()


def checksums(source: Any, target: Any, chunk: int = 5000) -> dict[str, tuple[str, str]]:
    """(source, target) content checksums of every message and summary, ordered by id."""
    out: dict[str, tuple[str, str]] = {}
    for name in CHECKSUMMED:
        table = next(t for t in TABLES if t.name == name)
        with target.read() as db, source.read() as con:
            plan = plan_table(con, db, table)
            columns = plan.insert[plan.insert.index("(") + 1 : plan.insert.index(")")]
            have = set(_columns(con, name))
            src_exprs = ", ".join(c if c in have else "NULL" for c in columns.split(", "))

            def src_rows(
                con: sqlite3.Connection = con, exprs: str = src_exprs, name: str = name
            ) -> Iterator[Any]:
                after = -(1 << 63)
                while rows := con.execute(
                    f"SELECT {exprs}, id FROM {name} WHERE id > ? ORDER BY id LIMIT ?",
                    (after, chunk),
                ).fetchall():
                    after = rows[-1][-1]
                    yield from (r[:-1] for r in rows)

            def pg_rows(db: Any = db, columns: str = columns, name: str = name) -> Iterator[Any]:
                after = -(1 << 63)
                while rows := db.raw.execute(
                    f"SELECT {columns}, id FROM {name} WHERE id > %s ORDER BY id LIMIT %s",
                    (after, chunk),
                ).fetchall():
                    after = rows[-1][-1]
                    yield from (r[:-1] for r in rows)

            at = plan.fingerprint_at
            out[name] = (_checksum_rows(src_rows(), at), _checksum_rows(pg_rows(), at))
    return out

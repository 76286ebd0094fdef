"""Optional families' tables (vectors, rollups, assertions): created only when a family is turned
on, so a database whose owner never enabled one has none of its tables and pays nothing."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager


@contextmanager
def savepoint(db: sqlite3.Connection, name: str) -> Iterator[None]:
    """A step of a write undone alone when the database refuses it, the error still raised: on
    PostgreSQL any failed statement aborts the whole transaction (every later statement fails), so
    a step that may be refused (a trigger, a full disk, a missing extension) runs inside one; SQLite
    behaves the same with it."""
    db.execute(f"SAVEPOINT {name}")
    try:
        yield
    except sqlite3.Error:
        db.execute(f"ROLLBACK TO SAVEPOINT {name}")
        db.execute(f"RELEASE SAVEPOINT {name}")
        raise
    db.execute(f"RELEASE SAVEPOINT {name}")


def has_tables(db: sqlite3.Connection, names: Iterable[str]) -> bool:
    """Whether every table of ``names`` exists (a family's tables come and go together)."""
    wanted = set(names)
    marks = ",".join("?" * len(wanted))
    found = {
        r[0]
        for r in db.execute(
            f"SELECT name FROM sqlite_master WHERE type='table' AND name IN ({marks})",
            tuple(wanted),
        )
    }
    return found == wanted


def create_tables(
    db: sqlite3.Connection, tables_sql: str, triggers: Mapping[str, str] | None = None
) -> None:
    """Run a family's ``CREATE TABLE IF NOT EXISTS`` script and create its triggers when missing."""
    for statement in tables_sql.strip().split(";"):
        if statement.strip():
            db.execute(statement)
    for name, body in (triggers or {}).items():
        db.execute(f"CREATE TRIGGER IF NOT EXISTS {name} {body}")

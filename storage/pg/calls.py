"""A message's ``tool_calls`` text read as a JSON array in SQL, on every PostgreSQL we support.

The column is text, and not every row holds JSON: an import keeps what the source had, and a
truncated or hand-edited row may start like an array and stop halfway. SQLite asks
``json_valid()`` first; PostgreSQL has no such test before 16 (``IS JSON``, ``pg_input_is_valid``),
and a cast of invalid text raises, aborting the whole statement. So the SQL guards each cast with
a regular expression (the text starts with ``[``: a valid JSON text that does is an array) and
leaves out the rows known not to parse, by id. Those are found only when a statement fails on one
(a data exception, SQLSTATE class 22): :meth:`UnparsableCalls.json_safe` then asks the server
itself which rows fail the cast, halving id ranges (a handful of range scans per bad row), keeps
their ids for this store, and runs the statement again. A database whose rows all parse pays
nothing but the regular expression, and no plpgsql or temporary function is needed (a role
without TEMP rights, a standby, PostgreSQL 12 all answer the same).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from typing import Any, TypeVar, cast

T = TypeVar("T")

ARRAY_START = r"'^[[:space:]]*\['"


def as_json_array(column: str, id_column: str, excluded: Sequence[int], kind: str = "jsonb") -> str:
    """SQL: ``column`` as a JSON array (``kind``: json or jsonb), ``'[]'`` for any text that is not
    one; rows in ``excluded`` (ids known not to parse) are never cast. The CASE is what keeps the
    cast from running on other text: PostgreSQL evaluates a branch only when its condition holds."""
    skip = (
        f" AND {id_column} NOT IN ({', '.join(str(int(i)) for i in excluded)})" if excluded else ""
    )
    return f"CASE WHEN {column} ~ {ARRAY_START}{skip} THEN {column}::{kind} ELSE '[]'::{kind} END"


def is_data_error(exc: BaseException | None) -> bool:
    """Whether ``exc`` (or an error it was raised from) is PostgreSQL's data exception: a text
    that does not parse as JSON (22P02), an escape jsonb cannot hold (22P05)."""
    seen = 0
    while exc is not None and seen < 8:
        if str(getattr(exc, "sqlstate", "") or "").startswith("22"):
            return True
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return False


def unparsable_rows(read: Callable[[], Any]) -> tuple[int, ...]:
    """Ids of ``messages`` rows whose ``tool_calls`` starts like an array and fails ``::jsonb`` (a
    json-only escape too, so both casts are safe), the server deciding; ``read``: the store's."""
    with read() as db:
        low, high = db.execute(
            f"SELECT min(id) - 1, max(id) FROM messages WHERE tool_calls ~ {ARRAY_START}"
        ).fetchone()
    if low is None:
        return ()
    bad: list[int] = []
    ranges = [(int(low), int(high))]
    while ranges:
        low, high = ranges.pop()
        if _parses(read, low, high):
            continue
        if high - low == 1:
            bad.append(high)
            continue
        middle = (low + high) // 2
        ranges += [(middle, high), (low, middle)]
    return tuple(sorted(bad))


def _parses(read: Callable[[], Any], low: int, high: int) -> bool:
    """Whether every row with ``low < id <= high`` that looks like an array casts. In a savepoint
    of its own when the caller has a transaction open: a failed statement must not abort it."""
    with read() as db:
        try:
            with cast(Any, db).raw.transaction():
                db.execute(
                    f"SELECT count(jsonb_typeof(tool_calls::jsonb)) FROM messages WHERE id > ? AND id <= ? "
                    f"AND tool_calls ~ {ARRAY_START}",
                    (low, high),
                ).fetchone()
        except sqlite3.Error as exc:
            if not is_data_error(exc):
                raise
            return False
    return True


class UnparsableCalls:
    """The store's ids of ``tool_calls`` rows that do not parse, and the retry that finds them."""

    _bad_calls: tuple[int, ...] = ()

    def json_safe(self, run: Callable[[], T]) -> T:
        """``run()``; when it fails on a row that does not parse, find every such row (kept for the
        store's life: they stay left out) and run it again."""
        try:
            return run()
        except Exception as exc:
            if not is_data_error(exc):
                raise
        self._bad_calls = unparsable_rows(cast(Any, self).read)
        return run()

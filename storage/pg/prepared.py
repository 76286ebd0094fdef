"""Statements prepared by name on a pooled connection, and their parameters written as literals.

A turn's statements run as one simple query with their BEGIN, lock and COMMIT (one round trip,
one statement of psycopg's work), so they cannot be bound as the extended protocol binds: each is
PREPAREd once per connection and sent as ``EXECUTE name(literal, ...)``. This module turns a
statement in psycopg's placeholders into its PREPARE form, keeps which names each connection has,
and writes the values a turn's statements take; ``PgDb.call_prepared`` and ``run_prepared``
(``connection``) send them.
"""

from __future__ import annotations

import functools
import hashlib
import re
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from . import codec

# psycopg's placeholders: a literal percent, a positional parameter, a named one.
_PLACEHOLDER = re.compile(r"%%|%s|%\((\w+)\)s")
# Per pooled connection (one server session): the names of the statements prepared on it.
# Forgotten with the connection.
_PREPARED: weakref.WeakKeyDictionary[Any, set[str]] = weakref.WeakKeyDictionary()


class NotPlain(Exception):
    """A parameter :func:`literals` leaves to psycopg's own quoting."""


@functools.lru_cache(maxsize=32)
def form(sql: str) -> tuple[str, str, tuple[str, ...] | int]:
    """``sql`` (psycopg's placeholders) for a PREPARE: its name, made from its text so that two
    texts never share one; its body with the server's ``$n``; its parameters' order (the names in
    order of first use, or the number of positional ones)."""
    names: list[str] = []
    count = 0

    def number(match: re.Match[str]) -> str:
        nonlocal count
        if match.group(0) == "%%":
            return "%"
        if match.group(1) is None:
            count += 1
            return f"${count}"
        if match.group(1) not in names:
            names.append(match.group(1))
        return f"${names.index(match.group(1)) + 1}"

    body = _PLACEHOLDER.sub(number, sql)
    if names and count:
        raise ValueError("a statement mixes named and positional parameters")
    name = "lcm_" + hashlib.sha1(sql.encode()).hexdigest()[:16]
    return name, body, tuple(names) if names else count


def ordered(order: tuple[str, ...] | int, params: Sequence[Any] | Mapping[str, Any]) -> list[Any]:
    """``params`` in the order of the statement's ``$n``."""
    if isinstance(order, tuple):
        assert isinstance(params, Mapping)
        return [params[k] for k in order]
    return list(params)


def names_on(conn: Any) -> set[str]:
    """The statements prepared on ``conn`` (a set the caller adds to)."""
    return _PREPARED.setdefault(conn, set())


def forget(conn: Any) -> None:
    """``conn`` lost its prepared statements (the server deallocated them)."""
    _PREPARED.pop(conn, None)


def literals(values: Sequence[Any], escape: Callable[[bytes], bytes]) -> str:
    """Parameters of the types a turn's statements take (None, int, str, a list of ints) as SQL,
    comma-separated: psycopg's quoting of a dozen values, a list among them, cost 0.12 ms a call,
    more than a third of the assembly's own server time. Strings go through ``escape`` (libpq's
    ``PQescapeLiteral``) after ``codec``'s NUL escape, as the connection's dumper does. NotPlain
    (or UnicodeEncodeError) for any other value."""
    out = []
    for value in values:
        kind = type(value)
        if value is None:
            out.append("NULL")
        elif kind is int:
            out.append(str(value))
        elif kind is str:
            out.append(bytes(escape(codec.encode(value).encode())).decode())
        elif kind is list and all(type(v) is int for v in value):
            out.append("'{" + ",".join(map(str, value)) + "}'")
        else:
            raise NotPlain
    return ", ".join(out)

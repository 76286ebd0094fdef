"""Text holding NUL characters, on a server whose ``text`` type cannot store them.

A host may hand us any Unicode string, and a tool's output can carry ``\\x00``; SQLite stores
it, PostgreSQL refuses it ("text fields cannot contain NUL"). Nothing may be lost, so every
string parameter is escaped on its way in and every ``text`` value unescaped on its way out,
by psycopg dumpers and loaders registered on each pooled connection: ``\\x01`` becomes
``\\x01\\x01`` and ``\\x00`` becomes ``\\x01\\x30`` (``"0"``), only in a string holding one of the
two, so the common string is checked once at C speed and passed through untouched.
Equality on encoded values is equality on the originals (the escape is one-to-one).
"""

from __future__ import annotations

from typing import Any

import regex

ESC = "\x01"
_ESCAPED = regex.compile("\x01(.)", regex.DOTALL)


def encode(text: str) -> str:
    if "\x00" not in text and ESC not in text:
        return text
    return text.replace(ESC, ESC + ESC).replace("\x00", ESC + "0")


def decode(text: str) -> str:
    if ESC not in text:
        return text
    return _ESCAPED.sub(lambda m: "\x00" if m.group(1) == "0" else m.group(1), text)


def register(conn: Any) -> None:
    """Install the escape on one psycopg connection (parameters of type str, results of type text)."""
    from psycopg.types.string import StrDumperUnknown, TextLoader

    class NulSafeDumper(StrDumperUnknown):
        def dump(self, obj: str) -> Any:
            return super().dump(encode(obj))

    class NulSafeLoader(TextLoader):
        def load(self, data: Any) -> Any:
            return decode(str(super().load(data)))

    conn.adapters.register_dumper(str, NulSafeDumper)
    conn.adapters.register_loader("text", NulSafeLoader)

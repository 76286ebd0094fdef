"""How rows become records: the column lists the queries select and the row -> record mapping."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..base.records import StoredMessage, SummaryNode

_BASE_MESSAGE_COLUMNS = (
    "id, conversation_id, seq, session_id, role, content, parts, tool_calls, tool_call_id, "
    "tool_name, source, created_at, tokens"
)

# Schema 4 keeps a message's session as an integer key (``session_keys``); it reads back as the text id.
SESSION_OF = "(SELECT k.name FROM session_keys k WHERE k.id={alias}session_key)"

# SQL: the message (``{alias}``: "m." or "") belongs to the session whose text id is bound to ``?``.
SESSION_IS = "{alias}session_key=(SELECT k.id FROM session_keys k WHERE k.name=?)"

# Edge child kinds: schema 4 stores 0/1, older files 'message'/'summary'. SQL names a kind by both
# values (``e.child_kind IN (0, 'message')``), so one query reads either file (the CLI reads an
# unmigrated file read-only); an integer column never equals the text and the text never the integer.
KIND_NAME = "CASE {col} WHEN 0 THEN 'message' WHEN 1 THEN 'summary' ELSE {col} END"
KIND_VALUE = {"message": 0, "summary": 1}

_HEX = frozenset("0123456789abcdef")


def pack_fingerprint(fingerprint: str) -> str | bytes:
    """How a fingerprint is stored from schema 4: a message's identity hash (16 lowercase hex digits,
    ``normalize.fingerprint_of``) as its 8 bytes, an import's ``import:`` + 32 hex digits as 16
    bytes; any other text as is. One-to-one, so equality of stored values is equality of
    fingerprints; :func:`unpack_fingerprint` gives back the exact text."""
    if len(fingerprint) == 16 and _HEX.issuperset(fingerprint):
        return bytes.fromhex(fingerprint)
    if (
        len(fingerprint) == 39
        and fingerprint.startswith("import:")
        and _HEX.issuperset(fingerprint[7:])
    ):
        return bytes.fromhex(fingerprint[7:])
    return fingerprint


def unpack_fingerprint(value: str | bytes) -> str:
    """The fingerprint text of a stored value (either schema's form)."""
    if isinstance(value, bytes):
        return value.hex() if len(value) == 8 else "import:" + value.hex()
    return str(value)


NODE_COLUMNS = (
    "id, conversation_id, session_id, depth, content, tokens, first_seq, last_seq, earliest_at, latest_at, "
    "source_tokens, level, route, created_at"
)


def qualified(columns: str, alias: str) -> str:
    """``"id, seq"`` -> ``"m.id, m.seq"`` for joins."""
    return ", ".join(f"{alias}.{c.strip()}" for c in columns.split(","))


NODE_COLUMNS_S = qualified(NODE_COLUMNS, "s")


def message_columns(version: int, alias: str = "") -> str:
    """The columns a :class:`StoredMessage` is read from under schema ``version``.

    A read-only connection never migrates, so a schema-1 file (no ``extra``)
    reads NULL in its place and the operator tools keep working on it.
    """
    base = qualified(_BASE_MESSAGE_COLUMNS, alias) if alias else _BASE_MESSAGE_COLUMNS
    if version >= 4:
        base = base.replace(
            f"{alias + '.' if alias else ''}session_id",
            SESSION_OF.format(alias=alias + "." if alias else "messages."),
            1,
        )
    if version >= 2:
        return f"{base}, {alias + '.' if alias else ''}extra"
    return f"{base}, NULL"


def row_to_message(row: Sequence[Any]) -> StoredMessage:
    return StoredMessage(*row)


def row_to_node(row: Sequence[Any]) -> SummaryNode:
    return SummaryNode(*row)


def seq_bound(seq: int | None) -> int:
    """An inclusive upper seq bound; None: no bound."""
    return 2**62 if seq is None else seq


def id_list(ids: Sequence[int]) -> str:
    """Integer ids as a JSON array, for ``IN (SELECT value FROM json_each(?))``."""
    return "[" + ",".join(str(int(i)) for i in ids) + "]"


def conversation_scope(
    column: str, conversation_id: int | None, conversation_ids: Sequence[int] | None
) -> tuple[str, list[Any]]:
    """`` AND ...`` clauses and their arguments keeping ``column`` to one conversation and/or a list
    of them (an owner's reach); neither given: no clause (the whole store)."""
    sql, args = "", list[Any]()
    if conversation_id is not None:
        sql += f" AND {column}=?"
        args.append(conversation_id)
    if conversation_ids is not None:
        sql += f" AND {column} IN (SELECT value FROM json_each(?))"
        args.append(id_list(conversation_ids))
    return sql, args


# A stored message's or summary's text changes in place only by an operator's rewrite (scrub,
# payload rekey, backfill), and rows leave only by an operator's delete. Each such transaction bumps
# this counter, which every assembly reads with the conversation's row (a process that built prompt
# items from the old text drops them) and every search with its scope (what it learnt of the indexes
# in an earlier search, such as which words are common, holds only while the counter stands).
REWRITES_KEY = "rewrites"
# The counter as a scalar subquery (0 before any rewrite): read beside whatever a reader needs.
REWRITES_VALUE = (
    f"coalesce((SELECT CAST(value AS INTEGER) FROM meta WHERE key='{REWRITES_KEY}'), 0)"
)
BUMP_REWRITES = (
    f"INSERT INTO meta(key, value) VALUES ('{REWRITES_KEY}', '1') ON CONFLICT(key) DO UPDATE "
    "SET value = CAST(CAST(meta.value AS INTEGER) + 1 AS TEXT)"
)

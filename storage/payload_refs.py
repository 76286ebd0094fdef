"""Grants: which stored rows may open which payload (schema 5, ``payload_refs``), and the old refs
of a migrated database (``payload_ref_aliases``).

A payload file is shared by every owner whose rows name it (the same content is one file), so
naming a ref can never be what opens it: a user may type any placeholder, a tool may print any
stub. A grant is written only by the engine, for the row it kept the payload for, in the same
transaction as that row (:func:`insert_grants`, called by both backends' ``insert_messages``);
a reader asks for a grant in its own reach (:meth:`PayloadRefQueries.payload_grant`). A grant goes
with its row (``ON DELETE CASCADE``). The SQL is the subset both backends share.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping, Sequence
from typing import Any

from ..base.payloads import KIND_OUTPUT
from ..base.records import MessageIn, PayloadGrant, PayloadRef, StoredMessage
from .connection import SqliteConnection
from .rows import row_to_message, unpack_fingerprint

_BATCH = 200  # grants per INSERT statement (4 parameters each)
# Where a row may name a ref in our own text forms (payloads.MENTION): the columns the migration reads.
_NEEDLES = ("'[lcm-'", "'externalized_ref='")
_COLUMNS = (
    "m.content",
    "coalesce(m.parts, '')",
    "coalesce(m.tool_calls, '')",
    "coalesce(m.extra, '')",
)


def insert_grants(db: sqlite3.Connection, rows: Sequence[tuple[int, PayloadRef]]) -> None:
    """Store ``(message id, payload)`` grants in the caller's transaction (a repeat is one grant)."""
    for start in range(0, len(rows), _BATCH):
        batch = rows[start : start + _BATCH]
        db.execute(
            "INSERT OR IGNORE INTO payload_refs(ref, message_id, kind, mime) VALUES "
            + ", ".join(["(?, ?, ?, ?)"] * len(batch)),
            [v for message_id, p in batch for v in (p.ref, message_id, p.kind, p.mime)],
        )


def record_grants(db: sqlite3.Connection, ids: Sequence[int], records: Sequence[MessageIn]) -> None:
    """The grants of freshly inserted rows: ``ids[i]`` is the row of ``records[i]``."""
    rows = [
        (message_id, p)
        for message_id, record in zip(ids, records, strict=True)
        for p in record.payload_refs
    ]
    if rows:
        insert_grants(db, rows)


class PayloadRefQueries(SqliteConnection):
    """Grants read and written, and the old refs' aliases (payload_rekey.py writes those)."""

    def grant_payloads(self, grants: Sequence[tuple[int, PayloadRef]]) -> None:
        """Grant each ``(message id, payload)``; joins the caller's ``write()`` (a backfill or a
        rewrite grants in the transaction that wrote the row's new text)."""
        if grants:
            with self.write() as db:
                insert_grants(db, list(grants))

    def revoke_payloads(self, message_id: int, refs: Sequence[str]) -> None:
        """Withdraw the row's grants of ``refs`` (its text no longer holds them)."""
        if refs:
            with self.write() as db:
                db.execute(
                    f"DELETE FROM payload_refs WHERE message_id=? AND ref IN ({', '.join('?' * len(refs))})",
                    (message_id, *refs),
                )

    def _grants(
        self, where: str, args: Sequence[Any], conversation_ids: Sequence[int] | None, tail: str
    ) -> list[PayloadGrant]:
        """Grants matching ``where`` whose row is in reach (None: any conversation's, shared
        memory; an empty reach has none), ordered and limited by ``tail``."""
        if conversation_ids is not None and not conversation_ids:
            return []
        sql = (
            "SELECT g.ref, g.message_id, m.conversation_id, g.kind, g.mime FROM payload_refs g "
            f"JOIN messages m ON m.id = g.message_id WHERE {where}"
        )
        params = list(args)
        if conversation_ids is not None:
            sql += " AND m.conversation_id IN (SELECT value FROM json_each(?))"
            params.append(_json_list(int(c) for c in conversation_ids))
        with self.read() as db:
            rows = db.execute(f"{sql} {tail}", params).fetchall()
        return [PayloadGrant(str(r[0]), int(r[1]), int(r[2]), str(r[3]), str(r[4])) for r in rows]

    def payload_grant(
        self, ref: str, conversation_ids: Sequence[int] | None
    ) -> PayloadGrant | None:
        """The first grant of ``ref`` to a row of ``conversation_ids`` (None: of any conversation,
        shared memory); None when no row in reach was given it."""
        found = self._grants("g.ref = ?", [ref], conversation_ids, "ORDER BY g.message_id LIMIT 1")
        return found[0] if found else None

    def output_grants(
        self, conversation_ids: Sequence[int] | None, limit: int
    ) -> list[PayloadGrant]:
        """The large tool outputs externalized for rows of ``conversation_ids`` (None: of any
        conversation, shared memory), newest first (what ``lcm_grep content_scope=externalized``
        scans)."""
        return self._grants(
            "g.kind = ?",
            [KIND_OUTPUT],
            conversation_ids,
            f"ORDER BY g.message_id DESC LIMIT {max(0, int(limit))}",
        )

    def granted_refs(self, message_ids: Sequence[int]) -> dict[int, set[str]]:
        """The refs each of these rows was granted (rows without any are left out)."""
        found: dict[int, set[str]] = {}
        if not message_ids:
            return found
        with self.read() as db:
            for start in range(0, len(message_ids), 500):
                chunk = _json_list(int(i) for i in message_ids[start : start + 500])
                for message_id, ref in db.execute(
                    "SELECT message_id, ref FROM payload_refs WHERE message_id IN "
                    "(SELECT value FROM json_each(?))",
                    (chunk,),
                ).fetchall():
                    found.setdefault(int(message_id), set()).add(str(ref))
        return found

    def ref_aliases(self) -> dict[str, str]:
        """old ref -> new ref of a migrated database (empty for one that never held old refs)."""
        with self.read() as db:
            return {
                str(r[0]): str(r[1])
                for r in db.execute("SELECT old_ref, new_ref FROM payload_ref_aliases")
            }

    def put_ref_aliases(self, aliases: Mapping[str, str]) -> None:
        """Record old -> new refs (a repeat keeps the first: an old ref names one content)."""
        pairs = sorted(aliases.items())
        if not pairs:
            return
        with self.write() as db:
            for start in range(0, len(pairs), _BATCH):
                batch = pairs[start : start + _BATCH]
                db.execute(
                    "INSERT OR IGNORE INTO payload_ref_aliases(old_ref, new_ref) VALUES "
                    + ", ".join(["(?, ?)"] * len(batch)),
                    [v for pair in batch for v in pair],
                )

    def ref_rows_after(self, after_id: int, limit: int) -> list[tuple[StoredMessage, str, str]]:
        """``(message, fingerprint, owner)`` of the ``limit`` rows after ``after_id`` (id order) whose
        text may name a ref: the rows the migration of old refs rewrites and grants."""
        where = " OR ".join(f"instr({c}, {n}) > 0" for c in _COLUMNS for n in _NEEDLES)
        with self.read() as db:
            rows = db.execute(
                f"SELECT {self.message_columns_m}, m.fingerprint, c.owner FROM messages m "
                f"JOIN conversations c ON c.id = m.conversation_id WHERE m.id > ? AND ({where}) "
                "ORDER BY m.id LIMIT ?",
                (after_id, limit),
            ).fetchall()
        return [(row_to_message(r[:-2]), unpack_fingerprint(r[-2]), str(r[-1])) for r in rows]


def _json_list(values: Any) -> str:
    """Integer ids as a JSON array bound as one parameter (``json_each``; dialect.py spells it for
    PostgreSQL)."""
    return json.dumps([int(v) for v in values])

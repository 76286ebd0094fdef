"""The queries of ``lcm redact`` (scrub.py): stored rows read in id order, rewritten in place, and
what keeps the old bytes from surviving the rewrite (secure_delete, FTS merge, VACUUM, checkpoint).

Every read and update here joins the caller's write transaction (``store.write()``), so a batch is
read and rewritten under one lock: a concurrent ingest waits, and a batch is all old or all new.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from typing import Any

from .connection import SqliteConnection, faults_mapped
from .prepared import forget_prepared
from .rows import BUMP_REWRITES, row_to_message, unpack_fingerprint

# The text columns of the rows ``lcm redact`` rewrites besides messages (table -> column).
TEXT_TABLES: dict[str, str] = {"summaries": "content", "events": "detail"}
_CHECKPOINT_TRIES = 20


class RewriteQueries(SqliteConnection):
    """Reads by id range and in-place rewrites of stored text (``lcm redact``)."""

    def message_rows_after(self, after_id: int, limit: int) -> list[tuple[Any, str]]:
        """``(StoredMessage, fingerprint)`` of the ``limit`` messages after ``after_id``, id order."""
        with self.read() as db:
            rows = db.execute(
                f"SELECT {self.message_columns}, fingerprint FROM messages WHERE id > ? "
                "ORDER BY id LIMIT ?",
                (after_id, limit),
            ).fetchall()
        return [
            (row_to_message(r[:-1]), unpack_fingerprint(r[-1])) for r in rows
        ]  # schema 4: stored packed

    def text_rows_after(self, table: str, after_id: int, limit: int) -> list[tuple[int, str]]:
        """``(id, text)`` of the ``limit`` rows of a text table (summaries, events) after ``after_id``."""
        column = TEXT_TABLES[table]
        with self.read() as db:
            rows = db.execute(
                f"SELECT id, {column} FROM {table} WHERE id > ? ORDER BY id LIMIT ?",
                (after_id, limit),
            ).fetchall()
        return [(int(r[0]), str(r[1])) for r in rows]

    def rewrite_message(self, message_id: int, fields: dict[str, Any]) -> None:
        """Set a message's content, parts, tool_calls, extra, tokens and fingerprint (the FTS row
        follows by the UPDATE trigger)."""
        with self.write() as db:
            forget_prepared(db, "SELECT conversation_id FROM messages WHERE id=?", (message_id,))
            db.execute(BUMP_REWRITES)
            db.execute(
                "UPDATE messages SET content=?, parts=?, tool_calls=?, extra=?, tokens=?, fingerprint=? "
                "WHERE id=?",
                (
                    fields["content"],
                    fields["parts"],
                    fields["tool_calls"],
                    fields["extra"],
                    fields["tokens"],
                    self.pack_fingerprint(fields["fingerprint"]),
                    message_id,
                ),
            )

    def rewrite_text(self, table: str, row_id: int, text: str) -> None:
        """Set one summary's or event's text; a summary's FTS row is deleted and inserted again
        (summaries_fts has no UPDATE trigger)."""
        column = TEXT_TABLES[table]
        with self.write() as db:
            if table == "summaries":
                forget_prepared(db, "SELECT conversation_id FROM summaries WHERE id=?", (row_id,))
                old = db.execute("SELECT content FROM summaries WHERE id=?", (row_id,)).fetchone()
                if old is None:
                    return
                db.execute(BUMP_REWRITES)  # a process holding the summary reads it again
                db.execute(
                    "INSERT INTO summaries_fts(summaries_fts, rowid, content) VALUES ('delete', ?, ?)",
                    (row_id, old[0]),
                )
            db.execute(f"UPDATE {table} SET {column}=? WHERE id=?", (text, row_id))
            if table == "summaries":
                db.execute(
                    "INSERT INTO summaries_fts(rowid, content) VALUES (?, ?)", (row_id, text)
                )

    def refs_in_use(self, needles: Sequence[str]) -> set[str]:
        """Which of these texts some message's content still holds (payload refs still in use)."""
        found = set()
        with self.read() as db:
            for needle in needles:
                if (
                    db.execute(
                        "SELECT 1 FROM messages WHERE instr(content, ?) > 0 LIMIT 1", (needle,)
                    ).fetchone()
                    is not None
                ):
                    found.add(needle)
        return found

    def secure_delete(self, on: bool) -> bool:
        """Turn SQLite's secure_delete on or off for this connection (freed bytes are zeroed);
        returns the previous setting."""
        with self.lock, faults_mapped():
            before = bool(self.conn.execute("PRAGMA secure_delete").fetchone()[0])
            self.conn.execute(f"PRAGMA secure_delete={1 if on else 0}")
            return before

    def fts_optimize(self) -> None:
        """Merge every FTS index into one segment: an index keeps a deleted row's terms in its old
        segments until they are merged, so the words of a rewritten text would otherwise stay."""
        with self.write() as db:
            for table in ("messages_fts", "summaries_fts"):
                db.execute(f"INSERT INTO {table}({table}) VALUES('optimize')")

    def vacuum_and_truncate(self) -> dict[str, Any]:
        """VACUUM (no free page keeps old bytes), then a TRUNCATE checkpoint (the WAL, which held
        the old and the rewritten pages, is emptied). A reader that holds the WAL open makes the
        checkpoint busy: retried, and reported."""
        with self.lock, faults_mapped():
            self.conn.execute("VACUUM")
            result: tuple[int, int, int] = (1, -1, -1)
            for _ in range(_CHECKPOINT_TRIES):
                row = self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
                result = (int(row[0]), int(row[1]), int(row[2]))
                if result[0] == 0:
                    break
                try:
                    self.conn.execute("SELECT 1").fetchone()
                except sqlite3.Error:
                    break
                time.sleep(0.1)
        return {"busy": bool(result[0]), "wal_frames": result[1], "checkpointed": result[2]}

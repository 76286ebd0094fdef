"""Summaries prepared ahead of compaction, in SQLite (compaction/prepare.py makes and uses them).

A prepared summary is what a compaction pass would write, made between turns: its text, the
key of exactly what it was made from (the sources' labels and text, the depth, the focus, the
settings), and the span it covers. It is not a node: nothing reads this table but the compactor,
so it never enters a prompt and no tool finds it. A compaction whose pass computes the same key
writes it as a node and deletes the row in the one transaction that publishes it; a key that no
longer comes up (a rewrite, a redaction, other settings) is never used and is dropped by
:meth:`PreparedQueries.drop_stale_prepared`, :meth:`PreparedQueries.drop_prepared_for` (after
a rewrite or redaction) or its age.

Like the rollup tables, created the first time a preparer runs (``ensure_prepared_tables``): a
database whose owner keeps compaction inline has none of it.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from typing import Any

from ..base.records import PreparedSummary
from .connection import SqliteConnection
from .sidecar import create_tables, has_tables

PREPARED_TABLES = ("prepared_summaries",)

PREPARED_SQL = """
CREATE TABLE IF NOT EXISTS prepared_summaries(
  id INTEGER PRIMARY KEY,
  conversation_id INTEGER NOT NULL,
  key TEXT NOT NULL,
  depth INTEGER NOT NULL,
  first_seq INTEGER NOT NULL,
  last_seq INTEGER NOT NULL,
  target_tokens INTEGER NOT NULL,
  content TEXT NOT NULL,
  tokens INTEGER NOT NULL,
  level TEXT NOT NULL,
  route TEXT NOT NULL,
  created_at REAL NOT NULL,
  UNIQUE(conversation_id, key)
);
"""

_COLUMNS = (
    "id, conversation_id, key, depth, first_seq, last_seq, target_tokens, content, tokens, level, "
    "route, created_at"
)


def _prepared(row: Sequence[Any]) -> PreparedSummary:
    return PreparedSummary(
        id=int(row[0]),
        conversation_id=int(row[1]),
        key=str(row[2]),
        depth=int(row[3]),
        first_seq=int(row[4]),
        last_seq=int(row[5]),
        target_tokens=int(row[6]),
        content=str(row[7]),
        tokens=int(row[8]),
        level=str(row[9]),
        route=str(row[10]),
        created_at=float(row[11]),
    )


def forget_prepared(db: sqlite3.Connection, conversations: str, args: Sequence[Any]) -> None:
    """Inside a write that changes stored text: drop the prepared summaries of the conversations
    ``conversations`` (a subquery) selects. Their text may quote what was rewritten or redacted,
    and a summary of rows that changed is never published anyway."""
    if has_tables(db, PREPARED_TABLES):
        db.execute(
            f"DELETE FROM prepared_summaries WHERE conversation_id IN ({conversations})",
            tuple(args),
        )


class PreparedQueries(SqliteConnection):
    """The prepared summaries: kept, looked up by key, taken by a publication, dropped."""

    def _has_prepared(self, db: sqlite3.Connection) -> bool:
        return has_tables(db, PREPARED_TABLES)

    def ensure_prepared_tables(self) -> None:
        """Create the table when missing; a no-op afterwards."""
        with self.write() as db:
            create_tables(db, PREPARED_SQL)

    def keep_prepared(self, summary: PreparedSummary) -> bool:
        """Store one prepared summary; False when that key is kept already (another preparer made
        it first: the first one stands, so a publication never sees two)."""
        with self.write() as db:
            cursor = db.execute(
                "INSERT INTO prepared_summaries(conversation_id, key, depth, first_seq, last_seq, "
                "target_tokens, content, tokens, level, route, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT(conversation_id, key) DO NOTHING",
                (
                    summary.conversation_id,
                    summary.key,
                    summary.depth,
                    summary.first_seq,
                    summary.last_seq,
                    summary.target_tokens,
                    summary.content,
                    summary.tokens,
                    summary.level,
                    summary.route,
                    summary.created_at or time.time(),
                ),
            )
            return int(cursor.rowcount) > 0

    def prepared_summary(self, conversation_id: int, key: str) -> PreparedSummary | None:
        with self.read() as db:
            if not self._has_prepared(db):
                return None
            row = db.execute(
                f"SELECT {_COLUMNS} FROM prepared_summaries WHERE conversation_id=? AND key=?",
                (conversation_id, key),
            ).fetchone()
            return _prepared(row) if row else None

    def take_prepared(self, prepared_id: int) -> bool:
        """Delete the row a publication used; inside the publication's transaction, so the node and
        the row's removal commit together (False: it was taken or dropped meanwhile)."""
        with self.write() as db:
            if not self._has_prepared(db):
                return False
            return (
                db.execute("DELETE FROM prepared_summaries WHERE id=?", (prepared_id,)).rowcount > 0
            )

    def prepared_summaries(self, conversation_id: int) -> list[PreparedSummary]:
        """A conversation's prepared summaries, oldest span first (status, the view, tests)."""
        with self.read() as db:
            if not self._has_prepared(db):
                return []
            return [
                _prepared(r)
                for r in db.execute(
                    f"SELECT {_COLUMNS} FROM prepared_summaries WHERE conversation_id=? "
                    "ORDER BY first_seq, depth, id",
                    (conversation_id,),
                )
            ]

    def drop_stale_prepared(self, conversation_id: int, frontier_seq: int) -> int:
        """Drop leaves the frontier has passed: their rows are summarized into the DAG already,
        and compaction never summarizes a row behind the frontier again."""
        with self.write() as db:
            if not self._has_prepared(db):
                return 0
            return int(
                db.execute(
                    "DELETE FROM prepared_summaries WHERE conversation_id=? AND depth=0 "
                    "AND first_seq<=?",
                    (conversation_id, frontier_seq),
                ).rowcount
            )

    def drop_prepared_for(
        self, conversation_ids: Sequence[int] | None = None, older_than: float | None = None
    ) -> int:
        """Drop the prepared summaries of ``conversation_ids`` (every conversation: None), or only
        those made before ``older_than``: after a rewrite or redaction of their sources (their
        text may quote what was redacted) and for age."""
        where: list[str] = []
        args: list[Any] = []
        if conversation_ids is not None:
            if not conversation_ids:
                return 0
            where.append(f"conversation_id IN ({','.join('?' * len(conversation_ids))})")
            args.extend(conversation_ids)
        if older_than is not None:
            where.append("created_at<?")
            args.append(older_than)
        with self.write() as db:
            if not self._has_prepared(db):
                return 0
            sql = "DELETE FROM prepared_summaries" + (
                f" WHERE {' AND '.join(where)}" if where else ""
            )
            return int(db.execute(sql, args).rowcount)

    def prepared_counts(self) -> dict[int, tuple[int, int]]:
        """Per conversation: how many summaries wait prepared, and their tokens."""
        with self.read() as db:
            if not self._has_prepared(db):
                return {}
            return {
                int(r[0]): (int(r[1]), int(r[2]))
                for r in db.execute(
                    "SELECT conversation_id, count(*), coalesce(sum(tokens), 0) "
                    "FROM prepared_summaries GROUP BY conversation_id"
                )
            }

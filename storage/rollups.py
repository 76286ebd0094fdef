"""Temporal rollups in SQLite (rollups.py builds them): created only when turned on.

Like the vector tables, these are not part of the migrations: a database whose owner never set
LCM_TEMPORAL_ROLLUPS_ENABLED has none of them, and ``ensure_rollup_tables`` creates them the
first time the rollup service starts.

* ``rollups``: one row per (conversation, kind, period start, time zone). ``status`` is
  ``stale`` (to build: new or changed sources), ``building``, ``ready`` or ``failed`` (the error
  kept, retried later). ``generation`` grows with every stale mark: a build publishes only when
  the generation it read is still current, so a late message during a build is not lost.
* ``rollup_cursor``: the newest message id and summary id already turned into stale marks.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Sequence
from typing import Any

from ..base.records import Rollup, StoredMessage, SummaryNode
from .connection import SqliteConnection
from .errors import StoreFault
from .rows import NODE_COLUMNS, row_to_message, row_to_node
from .sidecar import create_tables, has_tables

ROLLUP_TABLES = ("rollups", "rollup_cursor")
KIND_ORDER = "CASE kind WHEN 'day' THEN 0 WHEN 'week' THEN 1 ELSE 2 END"

_TABLES = """
CREATE TABLE IF NOT EXISTS rollups(
  id INTEGER PRIMARY KEY,
  conversation_id INTEGER NOT NULL,
  kind TEXT NOT NULL CHECK (kind IN ('day', 'week', 'month')),
  period_start TEXT NOT NULL,
  tz TEXT NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('ready', 'stale', 'building', 'failed')),
  content TEXT NOT NULL DEFAULT '',
  tokens INTEGER NOT NULL DEFAULT 0,
  source_ids TEXT NOT NULL DEFAULT '[]',
  built_at REAL,
  error TEXT NOT NULL DEFAULT '',
  attempts INTEGER NOT NULL DEFAULT 0,
  generation INTEGER NOT NULL DEFAULT 0,
  updated_at REAL NOT NULL,
  UNIQUE(conversation_id, kind, period_start, tz)
);
CREATE INDEX IF NOT EXISTS rollups_status ON rollups(status, updated_at);
CREATE TABLE IF NOT EXISTS rollup_cursor(
  id INTEGER PRIMARY KEY CHECK (id = 1),
  message_after INTEGER NOT NULL,
  summary_after INTEGER NOT NULL
);
INSERT OR IGNORE INTO rollup_cursor(id, message_after, summary_after) VALUES (1, 0, 0);
"""

_COLUMNS = (
    "id, conversation_id, kind, period_start, tz, status, content, tokens, source_ids, built_at, error, "
    "attempts, generation, updated_at"
)


def _rollup(row: Sequence[Any]) -> Rollup:
    return Rollup(
        int(row[0]),
        int(row[1]),
        str(row[2]),
        str(row[3]),
        str(row[4]),
        str(row[5]),
        str(row[6]),
        int(row[7]),
        tuple(int(i) for i in json.loads(row[8] or "[]")),
        row[9],
        str(row[10]),
        int(row[11]),
        int(row[12]),
        float(row[13]),
    )


class RollupQueries(SqliteConnection):
    """The rollup rows, their stale marks and the sources of a day."""

    def _has_rollups(self, db: sqlite3.Connection) -> bool:
        return has_tables(db, ROLLUP_TABLES)

    def ensure_rollup_tables(self) -> None:
        """Create the rollup tables when missing; a no-op afterwards."""
        with self.write() as db:
            create_tables(db, _TABLES)

    def has_rollup_tables(self) -> bool:
        with self.read() as db:
            return self._has_rollups(db)

    def rollup_cursor(self) -> tuple[int, int]:
        """``(message id, summary id)`` already turned into stale marks ((0, 0) without the tables)."""
        with self.read() as db:
            if not self._has_rollups(db):
                return 0, 0
            row = db.execute(
                "SELECT message_after, summary_after FROM rollup_cursor WHERE id=1"
            ).fetchone()
            return (int(row[0]), int(row[1])) if row else (0, 0)

    def rollup_changes(
        self, message_after: int, summary_after: int, limit: int
    ) -> tuple[list[tuple[int, int, float]], list[tuple[int, int, float, float, int]]]:
        """New rows since the cursor: messages ``(id, conversation, time)`` and summaries
        ``(id, conversation, earliest, latest, depth)``, ascending, at most ``limit`` of each."""
        with self.read() as db:
            messages = [
                (int(r[0]), int(r[1]), float(r[2]))
                for r in db.execute(
                    "SELECT id, conversation_id, created_at FROM messages WHERE id>? ORDER BY id LIMIT ?",
                    (message_after, limit),
                )
            ]
            nodes = [
                (int(r[0]), int(r[1]), float(r[2]), float(r[3]), int(r[4]))
                for r in db.execute(
                    "SELECT id, conversation_id, earliest_at, latest_at, depth FROM summaries WHERE id>? "
                    "ORDER BY id LIMIT ?",
                    (summary_after, limit),
                )
            ]
        return messages, nodes

    def mark_rollups_stale(
        self, periods: Sequence[tuple[int, str, str, str]], cursor: tuple[int, int] | None = None
    ) -> int:
        """Mark ``(conversation, kind, start, tz)`` periods stale (creating them), and move the
        cursor, in one transaction. Returns how many periods were marked."""
        now = time.time()
        with self.write() as db:
            if not self._has_rollups(db):
                raise StoreFault(
                    "rollup tables are missing (LCM_TEMPORAL_ROLLUPS_ENABLED was never on)"
                )
            for conversation_id, kind, start, tz in periods:
                db.execute(
                    "INSERT INTO rollups(conversation_id, kind, period_start, tz, status, updated_at) "
                    "VALUES (?, ?, ?, ?, 'stale', ?) ON CONFLICT(conversation_id, kind, period_start, tz) DO UPDATE "
                    "SET status='stale', generation=rollups.generation+1, attempts=0, error='', "
                    "updated_at=excluded.updated_at",
                    (conversation_id, kind, start, tz, now),
                )
            if cursor is not None:
                db.execute(
                    "UPDATE rollup_cursor SET message_after=max(message_after, ?), "
                    "summary_after=max(summary_after, ?) WHERE id=1",
                    cursor,
                )
        return len(periods)

    def rollups_to_build(self, limit: int, retry_before: float) -> list[Rollup]:
        """Stale periods, and failed ones last tried before ``retry_before``: days first, oldest first."""
        with self.read() as db:
            if not self._has_rollups(db):
                return []
            return [
                _rollup(r)
                for r in db.execute(
                    f"SELECT {_COLUMNS} FROM rollups WHERE status IN ('stale', 'building') "
                    "OR (status='failed' AND updated_at<?) "
                    f"ORDER BY {KIND_ORDER}, period_start, id LIMIT ?",
                    (retry_before, limit),
                )
            ]

    def rollups_in(
        self, conversation_ids: Sequence[int], kind: str, tz: str, first: str, last: str
    ) -> list[Rollup]:
        """The rows of ``kind`` whose start lies in [first, last] (ISO dates), oldest first."""
        if not conversation_ids:
            return []
        with self.read() as db:
            if not self._has_rollups(db):
                return []
            marks = ",".join("?" * len(conversation_ids))
            return [
                _rollup(r)
                for r in db.execute(
                    f"SELECT {_COLUMNS} FROM rollups WHERE conversation_id IN ({marks}) AND kind=? AND tz=? "
                    "AND period_start BETWEEN ? AND ? ORDER BY period_start, conversation_id",
                    (*conversation_ids, kind, tz, first, last),
                )
            ]

    def finish_rollup(
        self,
        rollup_id: int,
        generation: int,
        status: str,
        *,
        content: str = "",
        tokens: int = 0,
        source_ids: Sequence[int] = (),
        error: str = "",
    ) -> bool:
        """Publish a build's outcome unless the period was marked stale again meanwhile."""
        now = time.time()
        with self.write() as db:
            if status == "ready":
                cur = db.execute(
                    "UPDATE rollups SET status='ready', content=?, tokens=?, source_ids=?, built_at=?, error='', "
                    "updated_at=? WHERE id=? AND generation=?",
                    (
                        content,
                        tokens,
                        json.dumps(list(source_ids)),
                        now,
                        now,
                        rollup_id,
                        generation,
                    ),
                )
            else:
                cur = db.execute(
                    "UPDATE rollups SET status=?, error=?, attempts=attempts+1, updated_at=? "
                    "WHERE id=? AND generation=?",
                    (status, error, now, rollup_id, generation),
                )
            return cur.rowcount > 0

    def drop_rollup(self, rollup_id: int, generation: int) -> bool:
        """Forget a period that has nothing in it (unless marked stale again meanwhile)."""
        with self.write() as db:
            return (
                db.execute(
                    "DELETE FROM rollups WHERE id=? AND generation=?", (rollup_id, generation)
                ).rowcount
                > 0
            )

    def restale_rollups(self, kinds: Sequence[str], start: str | None) -> int:
        """Mark existing rows of ``kinds`` (all periods, or those starting at ``start``) stale."""
        if not kinds:
            return 0
        with self.write() as db:
            if not self._has_rollups(db):
                return 0
            marks = ",".join("?" * len(kinds))
            where, args = f"kind IN ({marks})", list(kinds)
            if start is not None:
                where += " AND period_start=?"
                args.append(start)
            return db.execute(
                f"UPDATE rollups SET status='stale', generation=generation+1, attempts=0, error='', "
                f"updated_at=? WHERE {where}",
                (time.time(), *args),
            ).rowcount

    def rollup_stats(self) -> dict[str, Any]:
        """Counts by kind and status, the oldest stale row's time, the newest failure's error."""
        with self.read() as db:
            if not self._has_rollups(db):
                return {"tables": False}
            counts: dict[str, dict[str, int]] = {}
            for kind, status, count in db.execute(
                "SELECT kind, status, count(*) FROM rollups GROUP BY 1, 2"
            ):
                counts.setdefault(kind, {})[status] = int(count)
            oldest = db.execute(
                "SELECT min(updated_at) FROM rollups WHERE status='stale'"
            ).fetchone()[0]
            failed = db.execute(
                "SELECT kind, period_start, tz, error FROM rollups WHERE status='failed' "
                "ORDER BY updated_at DESC LIMIT 1"
            ).fetchone()
        return {
            "tables": True,
            "counts": counts,
            "oldest_stale_at": oldest,
            "last_failure": list(failed) if failed else None,
        }

    def leaf_message_times(self, node_ids: Sequence[int]) -> list[tuple[int, float]]:
        """``(conversation, time)`` of the messages under these leaf summaries (their days)."""
        if not node_ids:
            return []
        with self.read() as db:
            marks = ",".join("?" * len(node_ids))
            return [
                (int(r[0]), float(r[1]))
                for r in db.execute(
                    f"SELECT m.conversation_id, m.created_at FROM edges e JOIN messages m ON m.id=e.child_id "
                    f"WHERE e.parent_id IN ({marks}) AND e.child_kind IN (0, 'message')",
                    list(node_ids),
                )
            ]

    def leaves_within(
        self, conversation_id: int, since: float, until: float, limit: int
    ) -> list[SummaryNode]:
        """Leaf summaries whose whole time span lies in [since, until), oldest first."""
        with self.read() as db:
            return [
                row_to_node(r)
                for r in db.execute(
                    f"SELECT {NODE_COLUMNS} FROM summaries WHERE conversation_id=? AND depth=0 AND earliest_at>=? "
                    "AND latest_at<? ORDER BY earliest_at, id LIMIT ?",
                    (conversation_id, since, until, limit),
                )
            ]

    def messages_outside_leaves(
        self, conversation_id: int, since: float, until: float, limit: int
    ) -> list[StoredMessage]:
        """A conversation's messages timed in [since, until) that no leaf lying wholly in that span
        summarizes (not summarized yet, or under a leaf that spans other days too), oldest first."""
        with self.read() as db:
            return [
                row_to_message(r)
                for r in db.execute(
                    f"SELECT {self.message_columns_m} FROM messages m WHERE m.conversation_id=? AND m.created_at>=? "
                    "AND m.created_at<? AND NOT EXISTS (SELECT 1 FROM edges e JOIN summaries s ON s.id=e.parent_id "
                    "WHERE e.child_kind IN (0, 'message') AND e.child_id=m.id AND s.depth=0 AND s.earliest_at>=? "
                    "AND s.latest_at<?) ORDER BY m.created_at, m.seq LIMIT ?",
                    (conversation_id, since, until, since, until, limit),
                )
            ]

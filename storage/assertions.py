"""The assertion sidecar in SQLite: typed facts, each citing the exact span of a stored message.

Like the vector tables, these are not part of the schema migrations: a database whose owner never
turned ``LCM_ASSERTIONS_ENABLED`` on has none of them, and ``ensure_assertion_tables`` creates
them, with their triggers, the first time they are needed.

* ``assertions``: one fact (subject, kind, value, unit, the time it holds from) and its citation:
  the message's id (``store_id``), a character span of its content and the quote at that span.
  A ``BEFORE INSERT`` trigger refuses a row whose quote is not the message's text at that span,
  so a citation can never be invented; ``AFTER DELETE``/``AFTER UPDATE OF content`` triggers on
  ``messages`` drop a row's assertions with it (``lcm redact``, cleanups): an assertion never
  outlives, or disagrees with, the text it quotes.
* ``assertion_cursor``: the last message id the extraction job read (rebuild resets it).
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from typing import Any

from .connection import SqliteConnection
from .errors import StoreFault
from .message_search import MessageSearch
from .rows import id_list
from .sidecar import create_tables, has_tables, savepoint

ASSERTION_TABLES = ("assertions", "assertion_cursor")
KINDS = ("event", "quantity", "state", "preference", "commitment")
EXTRACTORS = ("rules", "llm")

_TABLES = f"""
CREATE TABLE IF NOT EXISTS assertions(
  id INTEGER PRIMARY KEY,
  conversation_id INTEGER NOT NULL,
  store_id INTEGER NOT NULL,
  subject TEXT NOT NULL CHECK (subject = lower(subject) AND length(subject) BETWEEN 1 AND 200),
  kind TEXT NOT NULL CHECK (kind IN ({", ".join(repr(k) for k in KINDS)})),
  value TEXT NOT NULL CHECK (length(value) BETWEEN 1 AND 500),
  unit TEXT NOT NULL DEFAULT '',
  valid_from REAL NOT NULL,
  date_text TEXT NOT NULL DEFAULT '',
  span_start INTEGER NOT NULL CHECK (span_start >= 0),
  span_end INTEGER NOT NULL,
  quote TEXT NOT NULL,
  extractor TEXT NOT NULL CHECK (extractor IN ({", ".join(repr(e) for e in EXTRACTORS)})),
  created_at REAL NOT NULL,
  CHECK (span_end > span_start AND span_end - span_start = length(quote)),
  UNIQUE(store_id, kind, subject, span_start, span_end, extractor)
);
CREATE INDEX IF NOT EXISTS assertions_subject ON assertions(subject, valid_from);
CREATE INDEX IF NOT EXISTS assertions_conversation ON assertions(conversation_id, valid_from);
CREATE TABLE IF NOT EXISTS assertion_cursor(
  id INTEGER PRIMARY KEY CHECK (id = 1),
  after_id INTEGER NOT NULL
);
INSERT OR IGNORE INTO assertion_cursor(id, after_id) VALUES (1, 0);
"""

_TRIGGERS = {
    "assertions_quote_bi": "BEFORE INSERT ON assertions WHEN coalesce((SELECT substr(m.content, new.span_start + 1, "
    "new.span_end - new.span_start) FROM messages m WHERE m.id = new.store_id "
    "AND m.conversation_id = new.conversation_id), char(0)) IS NOT new.quote "
    "BEGIN SELECT RAISE(ABORT, 'assertion quote is not its source text'); END",
    "assertions_message_ad": "AFTER DELETE ON messages BEGIN DELETE FROM assertions WHERE store_id = old.id; END",
    "assertions_message_au": "AFTER UPDATE OF content ON messages BEGIN "
    "DELETE FROM assertions WHERE store_id = old.id; END",
}
_COLUMNS = (
    "id, conversation_id, store_id, subject, kind, value, unit, valid_from, date_text, span_start, span_end, "
    "quote, extractor, created_at"
)


def _row(found: Sequence[Any]) -> dict[str, Any]:
    return dict(zip(_COLUMNS.split(", "), found, strict=True))


class AssertionQueries(SqliteConnection):
    """The ``AssertionStore`` protocol (store.py) over SQLite."""

    def _has_assertions(self, db: sqlite3.Connection) -> bool:
        return has_tables(db, ASSERTION_TABLES)

    def ensure_assertion_tables(self) -> None:
        """Create the sidecar's tables and triggers when missing; a no-op afterwards."""
        with self.write() as db:
            create_tables(db, _TABLES, _TRIGGERS)

    def has_assertion_tables(self) -> bool:
        with self.read() as db:
            return self._has_assertions(db)

    def assertion_sources(self, after_id: int, limit: int, max_chars: int) -> list[dict[str, Any]]:
        """User and assistant messages above ``after_id`` (ascending, up to ``limit``) with their
        time (the host's when it gave one) and content cut to ``max_chars``; LCM's own tool
        traffic is left out, as search does."""
        with self.read() as db:
            found = db.execute(
                "SELECT m.id, m.conversation_id, m.role, coalesce(m.host_ts, m.created_at), "
                "substr(m.content, 1, ?) FROM messages m WHERE m.id > ? AND m.role IN ('user', 'assistant') "
                f"AND {MessageSearch._NOT_OWN_TOOLS} ORDER BY m.id LIMIT ?",
                (max_chars, after_id, limit),
            ).fetchall()
        return [
            {
                "id": int(r[0]),
                "conversation_id": int(r[1]),
                "role": str(r[2]),
                "at": float(r[3]),
                "text": str(r[4]),
            }
            for r in found
        ]

    def last_message_id(self) -> int:
        with self.read() as db:
            return int(db.execute("SELECT coalesce(max(id), 0) FROM messages").fetchone()[0])

    def assertion_cursor(self) -> int:
        with self.read() as db:
            if not self._has_assertions(db):
                return 0
            return int(
                db.execute("SELECT after_id FROM assertion_cursor WHERE id = 1").fetchone()[0]
            )

    def put_assertions(self, rows: Sequence[dict[str, Any]], cursor: int | None = None) -> int:
        """Insert facts (a duplicate, or one whose source row is gone or whose quote no longer
        matches, is skipped) and move the cursor, in one transaction; returns how many were new."""
        now = time.time()
        added = 0
        with self.write() as db:
            if not self._has_assertions(db):
                raise StoreFault(
                    "the assertion tables are absent: LCM_ASSERTIONS_ENABLED was never on here"
                )
            for row in rows:
                try:  # a refused fact (the quote trigger, a check) is undone alone, never stored
                    with savepoint(db, "lcm_assertion"):
                        cur = db.execute(
                            "INSERT INTO assertions(conversation_id, store_id, subject, kind, value, unit, valid_from, "
                            "date_text, span_start, span_end, quote, extractor, created_at) "
                            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                            (
                                row["conversation_id"],
                                row["store_id"],
                                row["subject"],
                                row["kind"],
                                row["value"],
                                row.get("unit", ""),
                                row["valid_from"],
                                row.get("date_text", ""),
                                row["span_start"],
                                row["span_end"],
                                row["quote"],
                                row.get("extractor", "rules"),
                                now,
                            ),
                        )
                    added += max(cur.rowcount, 0)
                except sqlite3.IntegrityError:
                    continue
            if cursor is not None:
                db.execute("UPDATE assertion_cursor SET after_id = ? WHERE id = 1", (int(cursor),))
        return added

    def clear_assertions(self, extractor: str | None = None) -> int:
        """Drop every assertion (or one extractor's) and reset the cursor: a rebuild starts over."""
        with self.write() as db:
            if not self._has_assertions(db):
                return 0
            cur = db.execute(
                "DELETE FROM assertions WHERE ? IS NULL OR extractor = ?", (extractor, extractor)
            )
            db.execute("UPDATE assertion_cursor SET after_id = 0 WHERE id = 1")
            return int(cur.rowcount)

    def assertions_for(
        self,
        conversation_ids: Sequence[int] | None,
        subject: str,
        kind: str,
        before: float | None,
        limit: int,
    ) -> list[dict[str, Any]]:
        """Facts whose subject contains ``subject`` (lower-cased; "" = any), of ``kind`` ("" = any),
        holding from before ``before`` (None = any time), newest first; only in ``conversation_ids``
        (None = every conversation). No tables: nothing."""
        with self.read() as db:
            if not self._has_assertions(db):
                return []
            found = db.execute(
                f"SELECT {_COLUMNS} FROM assertions WHERE (? IS NULL OR conversation_id IN "
                "(SELECT value FROM json_each(?))) AND (? = '' OR instr(subject, ?) > 0) AND (? = '' OR kind = ?) "
                "AND (? IS NULL OR valid_from <= ?) ORDER BY valid_from DESC, store_id DESC, id DESC LIMIT ?",
                (
                    None if conversation_ids is None else 1,
                    id_list(conversation_ids or ()),
                    subject,
                    subject,
                    kind,
                    kind,
                    before,
                    before,
                    limit,
                ),
            ).fetchall()
        return [_row(r) for r in found]

    def assertion_stats(self) -> dict[str, Any]:
        """Counts by kind and extractor, and the cursor; ``{}`` when the sidecar was never on."""
        with self.read() as db:
            if not self._has_assertions(db):
                return {}
            kinds = dict(
                db.execute("SELECT kind, count(*) FROM assertions GROUP BY kind").fetchall()
            )
            extractors = dict(
                db.execute(
                    "SELECT extractor, count(*) FROM assertions GROUP BY extractor"
                ).fetchall()
            )
            cursor = db.execute("SELECT after_id FROM assertion_cursor WHERE id = 1").fetchone()[0]
        return {
            "total": sum(kinds.values()),
            "by_kind": kinds,
            "by_extractor": extractors,
            "cursor": int(cursor),
        }

"""``lcm redact`` on PostgreSQL: what keeps a rewritten text's old bytes from surviving is the
server's, not ours. The ``tsv`` vectors are generated columns (an UPDATE recomputes them: there is
no FTS segment holding old terms to merge), and old row versions are reclaimed by (auto)VACUUM;
SQLite's ``secure_delete``, FTS5 ``optimize`` and ``VACUUM`` + WAL checkpoint have no equivalent
to run from a client inside the fleet's transactions.
"""

from __future__ import annotations

from typing import Any

from ..prepared import forget_prepared
from ..rewrite import TEXT_TABLES, RewriteQueries
from ..rows import BUMP_REWRITES


class PgRewriteQueries(RewriteQueries):
    """:class:`RewriteQueries` without SQLite's FTS bookkeeping and file-level scrubbing."""

    def rewrite_text(self, table: str, row_id: int, text: str) -> None:
        """Set one summary's or event's text (a summary's vector follows: it is a generated column)."""
        column = TEXT_TABLES[table]
        with self.write() as db:
            if table == "summaries":
                forget_prepared(db, "SELECT conversation_id FROM summaries WHERE id=?", (row_id,))
                db.execute(BUMP_REWRITES)  # a process holding the summary reads it again
            db.execute(f"UPDATE {table} SET {column}=? WHERE id=?", (text, row_id))

    def secure_delete(self, on: bool) -> bool:
        """No such setting on a server: returns False (it was off) and changes nothing."""
        return False

    def fts_optimize(self) -> None:
        """Nothing to merge: each vector is recomputed by the UPDATE that rewrote its text."""

    def vacuum_and_truncate(self) -> dict[str, Any]:
        """Old row versions are the server's to reclaim: ``VACUUM`` cannot run inside a transaction or
        by a non-owner, and autovacuum does it. Reported, so the redact summary says so."""
        return {
            "busy": False,
            "wal_frames": -1,
            "checkpointed": -1,
            "note": "PostgreSQL: old row versions are removed by (auto)VACUUM; run VACUUM (FULL) on "
            "messages, summaries, events to reclaim them now, and rotate WAL archives/backups",
        }

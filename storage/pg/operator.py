"""The operator's queries on PostgreSQL: what ``lcm status``, ``doctor`` and ``lcm view`` read
where SQLite answers with PRAGMAs, ``dbstat``, ``sqlite_master`` and FTS5's own commands.

Sizes come from ``pg_database_size`` / ``pg_total_relation_size`` (the server's accounting, in
constant time); the full-text "index" is the generated ``tsv`` column and its GIN index, so its
health means: each sampled row's ``tsv`` equals ``lcm_tsv`` of its text now (a changed text search
configuration or function leaves stale vectors), the GIN index is valid (``pg_index.indisvalid``:
a failed ``CREATE INDEX CONCURRENTLY`` leaves one that is never used), and the functions and the
``lcm`` configuration the columns are computed with exist in the schema.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..operator import OperatorQueries
from .calls import UnparsableCalls, as_json_array
from .fulltext import to_tsquery_text

# FTS "table" (the names doctor reports, as on SQLite) -> (content table, the text its tsv is computed from).
_FTS: dict[str, tuple[str, str]] = {
    "messages_fts": ("messages", "content || ' ' || coalesce(tool_calls, '')"),
    "summaries_fts": ("summaries", "content"),
}
FUNCTIONS = ("instr", "lcm_fold", "lcm_words", "lcm_tsv", "lcm_tsv_large", "lcm_tsq")
INTEGRITY_SAMPLE = 2000


class PgOperatorQueries(OperatorQueries, UnparsableCalls):
    """:class:`OperatorQueries` with the SQLite-only methods answered by the server's catalogs."""

    def _call_exists(self) -> str:
        """PostgreSQL 12+: the calls' JSON guarded by ``calls.as_json_array`` (no ``IS JSON``, which is 16's)."""
        calls = as_json_array("a.tool_calls", "a.id", self._bad_calls)
        return (
            f"EXISTS (SELECT 1 FROM messages a, jsonb_array_elements({calls}) j "
            "WHERE a.conversation_id=t.conversation_id AND a.role='assistant' AND a.seq < t.seq "
            "AND j.value->>'id'=t.tool_call_id)"
        )

    def tool_link_counts(self, limit: int = 10) -> dict[str, Any]:
        """As on SQLite; a row whose calls do not parse counts as calling nothing (``calls.py``)."""
        return self.json_safe(lambda: super(PgOperatorQueries, self).tool_link_counts(limit))

    def database_header(self) -> dict[str, Any]:
        """Layout versions, server version and the bytes this schema's tables hold (page counts in
        the server's block size, so ``lcm view`` computes the same bytes as for a file)."""
        with self.read() as db:
            meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
            block, version, database, name = db.execute(
                "SELECT current_setting('block_size')::bigint, current_setting('server_version'), "
                "pg_database_size(current_database()), current_schema()"
            ).fetchone()
            schema_bytes = db.execute(
                "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
                "WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r'"
            ).fetchone()[0]
        return {
            "schema_version": int(meta.get("schema_version", 0)),
            "pg_schema": int(meta.get("pg_schema", 0)),
            "journal_mode": "postgresql",
            "server_version": str(version),
            "page_size": int(block),
            "page_count": int(schema_bytes) // int(block),
            "freelist_count": 0,
            "schema_bytes": int(schema_bytes),
            "database_bytes": int(database),
            "schema_name": str(name),
        }

    def database_sizes(self) -> dict[str, Any]:
        facts = self.database_header()
        with self.read() as db:
            rows = db.execute(
                "SELECT c.relname, pg_total_relation_size(c.oid) FROM pg_class c "
                "WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r' ORDER BY 1"
            ).fetchall()
        facts["bytes_by_table"] = {str(n): int(b) for n, b in rows}
        return facts

    def database_facts(self) -> dict[str, Any]:
        """Sizes plus the server's own soundness facts: every index of the schema valid and ready."""
        facts = self.database_sizes()
        with self.read() as db:
            broken = [
                str(r[0])
                for r in db.execute(
                    "SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
                    "WHERE c.relnamespace = current_schema()::regnamespace AND NOT (i.indisvalid AND i.indisready) "
                    "ORDER BY 1"
                ).fetchall()
            ]
        facts["quick_check"] = ["ok"] if not broken else [f"invalid index {n}" for n in broken]
        return facts

    _SESSION_ROW = "rid"  # OperatorQueries.sessions_page / all_sessions page by it

    # -- full text: the generated tsv column and its GIN index --------------------------------

    def fts_counts(self, table: str) -> dict[str, Any]:
        """Rows without a vector (none, unless the column was altered) against content rows."""
        content, _text = _FTS[table]
        with self.read() as db:
            total, indexed = db.execute(f"SELECT count(*), count(tsv) FROM {content}").fetchone()
            missing = db.execute(
                f"SELECT id FROM {content} WHERE tsv IS NULL ORDER BY id LIMIT 1000"
            ).fetchall()
        return {
            "content_rows": int(total),
            "indexed_rows": int(indexed),
            "missing_ids": [int(r[0]) for r in missing],
            "stale_ids": [],
        }

    def fts_finds(self, table: str, rowid: int, phrase: str) -> bool:
        """Whether the vector of that row matches ``phrase`` (False when the schema cannot answer: a
        function is missing, which :meth:`missing_triggers` reports)."""
        content, _text = _FTS[table]
        with self.read() as db:
            try:
                return (
                    db.execute(
                        f"SELECT 1 FROM {content} WHERE id=? AND tsv @@ lcm_tsq(?)",
                        (rowid, to_tsquery_text(phrase)),
                    ).fetchone()
                    is not None
                )
            except sqlite3.Error:
                return False

    def fts_integrity(self, table: str) -> str | None:
        """Read-only on PostgreSQL: sampled rows whose stored vector differs from ``lcm_tsv`` of their
        text now, and the GIN index's validity; None when both are sound."""
        content, text = _FTS[table]
        with self.read() as db:
            stale = [
                int(r[0])
                for r in db.execute(
                    f"SELECT id FROM (SELECT id, tsv, {text} AS body FROM {content} ORDER BY id DESC LIMIT ?) s "
                    "WHERE tsv IS DISTINCT FROM lcm_tsv(body) ORDER BY id LIMIT 20",
                    (INTEGRITY_SAMPLE,),
                ).fetchall()
            ]
            index = db.execute(
                "SELECT i.indisvalid AND i.indisready FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
                "WHERE c.relname = ? AND c.relnamespace = current_schema()::regnamespace",
                (f"{content}_tsv",),
            ).fetchone()
        problems = []
        if stale:
            problems.append(f"stale vectors in rows {stale}")
        if index is None or not index[0]:
            problems.append(f"GIN index {content}_tsv {'missing' if index is None else 'invalid'}")
        return "; ".join(problems) or None

    def fts_rebuild(self, table: str) -> None:
        """Recompute every vector (an UPDATE recomputes a generated column) and rebuild the GIN index."""
        content, _text = _FTS[table]
        with self.write() as db:
            db.execute(f"UPDATE {content} SET content=content")
            db.execute(f"REINDEX INDEX {content}_tsv")

    def missing_triggers(self) -> list[str]:
        """What the vectors are computed with and is absent: our SQL functions and the ``lcm`` text
        search configuration (PostgreSQL keeps the index by the generated column, not by triggers)."""
        with self.read() as db:
            present = {
                str(r[0])
                for r in db.execute(
                    "SELECT proname FROM pg_proc WHERE pronamespace = current_schema()::regnamespace"
                ).fetchall()
            }
            config = db.execute(
                "SELECT 1 FROM pg_ts_config WHERE cfgname='lcm' "
                "AND cfgnamespace = current_schema()::regnamespace"
            ).fetchone()
        missing = [f"function {name}" for name in FUNCTIONS if name not in present]
        return missing + ([] if config else ["text search configuration lcm"])

    def restore_triggers(self, names: Sequence[str]) -> list[str]:
        """Nothing is recreated in place: a schema missing its functions is restored from a dump."""
        return []

    def backup_to(
        self, target: Path, progress: Callable[[int, int | None], None] | None = None
    ) -> None:
        raise NotImplementedError(
            "a PostgreSQL database is backed up with pg_dump (maintenance.pg_dump_backup)"
        )

"""Embedding vectors in SQLite: one blob per (model, kind, item), created only when turned on.

The tables are not part of the schema migrations: a database whose owner never enabled
embeddings has none of them (and pays nothing), and ``ensure_vector_tables`` creates them, with
their triggers, the first time they are needed. ``vectors.py`` makes and reads the blobs.

* ``vector_models``: one row per (name, dim, dtype). A changed model, dimension or storage
  dtype is a new id, so vectors of different models never mix in one search.
* ``vectors``: ``kind`` is ``'m'`` (a message) or ``'s'`` (a summary), ``item_id`` its row id.
  ``UNIQUE(model_id, kind, item_id)`` serves the upsert, the per-model load (a range of the
  index), the ``unembedded`` probe, and the triggers' deletes (``model_id IN (...)`` seeks).
  The table keeps its rowid: a float32 blob at dim 384 is 1,536 bytes, larger than what a
  WITHOUT ROWID (index) page holds locally, so it would spill to overflow pages.
* Triggers drop a row's vectors when the row is deleted (``lcm doctor`` cleanups, conversation
  deletes) or its text changes (``lcm redact``, ``lcm backfill-outputs``): a vector never
  outlives, or disagrees with, the text it was computed from. The changed row is then
  ``unembedded`` again.
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
from .sidecar import create_tables, has_tables

KINDS = ("m", "s")
VECTOR_TABLES = ("vector_models", "vectors")

_TABLES = """
CREATE TABLE IF NOT EXISTS vector_models(
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  dim INTEGER NOT NULL CHECK (dim > 0),
  dtype TEXT NOT NULL CHECK (dtype IN ('float32', 'int8')),
  created_at REAL NOT NULL,
  UNIQUE(name, dim, dtype)
);
CREATE TABLE IF NOT EXISTS vectors(
  model_id INTEGER NOT NULL REFERENCES vector_models(id),
  kind TEXT NOT NULL CHECK (kind IN ('m', 's')),
  item_id INTEGER NOT NULL,
  scale REAL NOT NULL,
  vec BLOB NOT NULL,
  UNIQUE(model_id, kind, item_id)
);
CREATE TABLE IF NOT EXISTS vector_epoch(
  id INTEGER PRIMARY KEY CHECK (id = 1),
  drops INTEGER NOT NULL
);
INSERT OR IGNORE INTO vector_epoch(id, drops) VALUES (1, 0);
"""

_DROP = "DELETE FROM vectors WHERE model_id IN (SELECT id FROM vector_models) AND kind='{kind}' AND item_id=old.id;"
_TRIGGERS = {
    "vectors_message_ad": f"AFTER DELETE ON messages BEGIN {_DROP.format(kind='m')} END",
    "vectors_message_au": f"AFTER UPDATE OF content, tool_calls ON messages BEGIN {_DROP.format(kind='m')} END",
    "vectors_summary_ad": f"AFTER DELETE ON summaries BEGIN {_DROP.format(kind='s')} END",
    "vectors_summary_au": f"AFTER UPDATE OF content ON summaries BEGIN {_DROP.format(kind='s')} END",
    # Every dropped vector counts: a row edited and re-embedded between two reads of a cached index
    # leaves count and newest id as they were, so the count of drops is what tells it changed.
    "vectors_drop_count": "AFTER DELETE ON vectors BEGIN UPDATE vector_epoch SET drops = drops + 1 WHERE id = 1; END",
}

# What a message is embedded as: its text, then each tool call's name and arguments (the words a
# search matches in ``tool_calls``, without the JSON around them).
_CALLS = (
    "(SELECT group_concat(coalesce(json_extract(c.value, '$.function.name'), '') || ' ' || "
    "coalesce(json_extract(c.value, '$.function.arguments'), ''), char(10)) FROM json_each(CASE WHEN "
    "json_valid(m.tool_calls) AND json_type(m.tool_calls)='array' THEN m.tool_calls ELSE '[]' END) c)"
)
_MESSAGE_TEXT = f"trim(m.content || char(10) || coalesce({_CALLS}, ''), ' ' || char(9, 10, 13))"


def unembedded_sql(kind: str, probe: bool = True) -> str:
    """The query behind ``unembedded`` (arguments: after_id, model_id, limit); a test checks its plan.
    Without ``probe`` (no vector tables yet) every row qualifies and the model_id argument is unused."""
    missing = (
        f"NOT EXISTS (SELECT 1 FROM vectors v WHERE v.model_id=? AND v.kind='{kind}' AND v.item_id=m.id)"
        if probe
        else "? IS NOT NULL"
    )
    if kind == "m":
        return (
            f"SELECT m.id, {_MESSAGE_TEXT} AS text FROM messages m WHERE m.id>? AND {missing} AND "
            f"{MessageSearch._NOT_OWN_TOOLS} AND text != '' ORDER BY m.id LIMIT ?"
        )
    return (
        f"SELECT m.id, trim(m.content) AS text FROM summaries m WHERE m.id>? AND {missing} "
        "AND text != '' ORDER BY m.id LIMIT ?"
    )


def _kind(kind: str) -> str:
    if kind not in KINDS:
        raise StoreFault(f"vector kind must be one of {KINDS}, not {kind!r}")
    return kind


class VectorQueries(SqliteConnection):
    """The ``VectorStore`` protocol (store.py) over SQLite."""

    def _has_vectors(self, db: sqlite3.Connection) -> bool:
        return has_tables(db, VECTOR_TABLES)

    def _has_epoch(self, db: sqlite3.Connection) -> bool:
        """A database whose vector tables predate the drop count has none until the next warmup."""
        return (
            db.execute(
                "SELECT 1 FROM sqlite_master WHERE type='table' AND name='vector_epoch'"
            ).fetchone()
            is not None
        )

    def _need_vectors(self, db: sqlite3.Connection) -> None:
        if not self._has_vectors(db):
            raise StoreFault(
                "the vector tables are absent: embeddings were never enabled on this database "
                "(ensure_vector_tables creates them)"
            )

    def ensure_vector_tables(self) -> None:
        """Create the vector tables and their triggers when missing; a no-op afterwards."""
        with self.write() as db:
            create_tables(db, _TABLES, _TRIGGERS)

    def vector_knn_native(self) -> bool:
        """Whether :meth:`nearest_vectors` searches in SQL: never on SQLite (the in-memory index does)."""
        return False

    def nearest_vectors(
        self, model_id: int, kind: str, query: Any, k: int, allowed: Sequence[int] | None = None
    ) -> list[tuple[int, float]]:
        """SQLite has no vector column to search: the caller uses ``vectors.VectorIndex``."""
        raise StoreFault(
            "nearest neighbours in SQL need pgvector; SQLite searches the in-memory index"
        )

    def build_vector_indexes(self) -> list[str]:
        """Nothing to build on SQLite: its index is made in memory from the blobs when searched."""
        return []

    def has_vector_tables(self) -> bool:
        """Whether embeddings were ever enabled here (the tables exist)."""
        with self.read() as db:
            return self._has_vectors(db)

    def vector_model(self, name: str, dim: int, dtype: str) -> int:
        """The id of ``(name, dim, dtype)``, created the first time it is asked for."""
        with self.write() as db:
            self._need_vectors(db)
            db.execute(
                "INSERT INTO vector_models(name, dim, dtype, created_at) VALUES (?, ?, ?, ?) "
                "ON CONFLICT(name, dim, dtype) DO NOTHING",
                (name, int(dim), dtype, time.time()),
            )
            row = db.execute(
                "SELECT id FROM vector_models WHERE name=? AND dim=? AND dtype=?",
                (name, int(dim), dtype),
            ).fetchone()
        return int(row[0])

    def put_vectors(
        self, model_id: int, kind: str, rows: Sequence[tuple[int, bytes, float]]
    ) -> int:
        """Store or replace vectors of one model; rows whose item no longer exists are skipped
        (it was deleted while its text was being embedded: the trigger cannot catch that)."""
        table = "messages" if _kind(kind) == "m" else "summaries"
        if not rows:
            return 0
        with self.write() as db:
            self._need_vectors(db)
            before = db.total_changes
            db.executemany(
                f"INSERT INTO vectors(model_id, kind, item_id, scale, vec) SELECT ?, ?, ?, ?, ? "
                f"WHERE EXISTS (SELECT 1 FROM {table} WHERE id=?) "
                "ON CONFLICT(model_id, kind, item_id) DO UPDATE SET scale=excluded.scale, vec=excluded.vec",
                [
                    (model_id, kind, int(item), float(scale), bytes(blob), int(item))
                    for item, blob, scale in rows
                ],
            )
            return db.total_changes - before

    def load_vectors(
        self,
        model_id: int,
        kind: str,
        conversation_ids: Sequence[int] | None = None,
        after_id: int = 0,
    ) -> tuple[list[int], list[bytes], list[float]]:
        """Every vector of one model and kind, ascending by item id (above ``after_id``: what a
        cached index lacks), optionally only those of some conversations (found through the rows'
        own conversation index). No tables: nothing."""
        table = "messages" if _kind(kind) == "m" else "summaries"
        with self.read() as db:
            if not self._has_vectors(db):
                return [], [], []
            if conversation_ids is None:
                found = db.execute(
                    "SELECT item_id, vec, scale FROM vectors WHERE model_id=? AND kind=? "
                    "AND item_id>? ORDER BY item_id",
                    (model_id, kind, after_id),
                ).fetchall()
            else:
                found = db.execute(
                    f"SELECT v.item_id, v.vec, v.scale FROM {table} r JOIN vectors v ON v.model_id=? AND "
                    "v.kind=? AND v.item_id=r.id WHERE r.conversation_id IN (SELECT value FROM json_each(?)) AND "
                    "v.item_id>? ORDER BY v.item_id",
                    (model_id, kind, id_list(conversation_ids), after_id),
                ).fetchall()
        return (
            [int(r[0]) for r in found],
            [bytes(r[1]) for r in found],
            [float(r[2]) for r in found],
        )

    def unembedded(
        self, model_id: int, kind: str, after_id: int, limit: int
    ) -> list[tuple[int, str]]:
        """``(id, text)`` of up to ``limit`` messages or summaries after ``after_id`` that have no
        vector of ``model_id``, ascending. It walks the rows by their primary key from ``after_id``
        and probes the vectors' index for each, so a backfill that passes its last id back reads
        each row once over the whole run. Messages leave out LCM's own tool traffic, as search does,
        and rows with no text."""
        with self.read() as db:
            self._need_vectors(db)
            sql = unembedded_sql(_kind(kind))
            return [
                (int(r[0]), str(r[1]))
                for r in db.execute(sql, (after_id, model_id, limit)).fetchall()
            ]

    def vector_version(self, model_id: int, kind: str) -> tuple[int, int, int]:
        """``(count, newest item id, vectors ever dropped)`` of one model's vectors of a kind: a
        cached index is current while this is unchanged (a range count over the unique index: no
        row is read). New rows only raise the first two; a drop (then a re-embed) the third."""
        with self.read() as db:
            if not self._has_vectors(db):
                return 0, 0, 0
            row = db.execute(
                "SELECT count(*), coalesce(max(item_id), 0) FROM vectors WHERE model_id=? AND kind=?",
                (model_id, _kind(kind)),
            ).fetchone()
            drops = (
                db.execute("SELECT drops FROM vector_epoch WHERE id = 1").fetchone()
                if self._has_epoch(db)
                else None
            )
        return int(row[0]), int(row[1]), int(drops[0]) if drops else 0

    def embedding_backlog(self, model_id: int | None, max_chars: int) -> tuple[int, int]:
        """How many rows have no vector of ``model_id`` (every row when None, or with no tables
        yet) and their text's characters, each cut at ``max_chars``: the dry run's estimate."""
        rows = chars = 0
        with self.read() as db:
            probe = model_id is not None and self._has_vectors(db)
            for kind in KINDS:
                sql = unembedded_sql(kind, probe)
                found = db.execute(
                    f"SELECT count(*), coalesce(sum(min(length(text), ?)), 0) FROM ({sql})",
                    (max_chars, 0, model_id or 0, -1),
                ).fetchone()
                rows, chars = rows + int(found[0]), chars + int(found[1])
        return rows, chars

    @staticmethod
    def _model_stats(db: sqlite3.Connection) -> list[dict[str, Any]]:
        """Per model: its dim and dtype, rows by kind and blob bytes (``length`` of a blob or bytea is
        its bytes on both backends)."""
        models: list[dict[str, Any]] = []
        for model_id, name, dim, dtype in db.execute(
            "SELECT id, name, dim, dtype FROM vector_models ORDER BY id"
        ):
            counts = dict(
                db.execute(
                    "SELECT kind, count(*) FROM vectors WHERE model_id=? GROUP BY kind", (model_id,)
                ).fetchall()
            )
            blob = db.execute(
                "SELECT coalesce(sum(length(vec)), 0) FROM vectors WHERE model_id=?", (model_id,)
            ).fetchone()[0]
            models.append(
                {
                    "id": model_id,
                    "name": name,
                    "dim": dim,
                    "dtype": dtype,
                    "messages": counts.get("m", 0),
                    "summaries": counts.get("s", 0),
                    "blob_bytes": int(blob),
                }
            )
        return models

    def vector_stats(self) -> dict[str, Any]:
        """Per model: its dim and dtype, rows by kind, and the blob bytes; ``{}`` when never enabled.
        ``table_bytes`` (the vectors table and its index, from dbstat when SQLite has it) is for
        the whole table, all models together."""
        with self.read() as db:
            if not self._has_vectors(db):
                return {}
            models = self._model_stats(db)
            try:
                table_bytes = db.execute(
                    "SELECT coalesce(sum(pgsize), 0) FROM dbstat WHERE name='vectors' OR "
                    "name LIKE 'sqlite_autoindex_vectors_%'"
                ).fetchone()[0]
            except sqlite3.OperationalError:
                table_bytes = None
        return {"models": models, "table_bytes": table_bytes}

"""Reading an LCM-X database (also published as a Hermes plugin named ``hermes-lcm``), read-only.

LCM-X shares our default path (``$HERMES_HOME/lcm.db``), so its file is what our engine finds
after a switch. Only its *foreign* schema is queried here; importers/lcmx_source.py maps what
comes back (plain dicts, one per row) onto our records. Its core schema is versioned by
``metadata.schema_version`` (0: written before the ladder, no stamp; 2..5 by its
``run_versioned_migrations``); columns added along the way are probed, never assumed.

The two writers at the end run on *our* target's connection inside the importer's transaction:
rows appended as they are (a repeated "ok" is a second row, not a duplicate), and the meta rows
that record what was imported.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from ..base.records import MessageIn
from .claw import readonly_uri
from .connection import faults_mapped
from .errors import StoreError
from .messages import insert_messages
from .schema import is_ours, tables
from .sqlite import SqliteStore

# Every core version LCM-X's migrations name (db_bootstrap.run_versioned_migrations: 0/1 before
# the ladder, 2 FTS triggers, 3 lifecycle table, 4 lifecycle debt columns, 5 messages.conversation_id).
SUPPORTED_VERSIONS = frozenset({0, 1, 2, 3, 4, 5})
CORE_TABLES = frozenset({"messages", "summary_nodes"})
_MESSAGE_OPTIONAL = (
    "source",
    "conversation_id",
    "tool_call_id",
    "tool_calls",
    "tool_name",
    "token_estimate",
    "pinned",
    "observed_at",
    "ingested_at",
)
_NODE_OPTIONAL = (
    "token_count",
    "source_token_count",
    "earliest_at",
    "latest_at",
    "expand_hint",
    "created_at",
)
_LIFECYCLE = (
    "conversation_id",
    "current_session_id",
    "last_finalized_session_id",
    "current_frontier_store_id",
    "last_finalized_frontier_store_id",
    "last_finalized_at",
    "last_rollover_at",
    "last_reset_at",
)
BATCH = 5000


class LcmxError(StoreError):
    """The file is an LCM-X database this build cannot read (an unknown schema version)."""


def lcmx_version(path: str | Path) -> int | None:
    """LCM-X's ``schema_version`` when ``path`` is an LCM-X database, else None (ours, empty,
    another program's, unreadable). Opens read-only: the file is never written."""
    if not Path(path).is_file():
        return None
    try:
        con = sqlite3.connect(readonly_uri(path), uri=True)
    except sqlite3.Error:
        return None
    try:
        found = tables(con)
        if is_ours(con, found):
            return None
        if not found >= CORE_TABLES or "conversations" in found:
            return None
        cols = {r[1] for r in con.execute("PRAGMA table_info(summary_nodes)").fetchall()}
        if not {"source_ids", "source_type", "depth", "summary"} <= cols:
            return None
        if "metadata" not in found:
            return 0
        row = con.execute("SELECT value FROM metadata WHERE key='schema_version'").fetchone()
    except sqlite3.DatabaseError:
        return None
    finally:
        con.close()
    try:
        return int(str(row[0])) if row and row[0] is not None else 0
    except ValueError:
        return -1


def check_version(path: str | Path) -> int:
    """The LCM-X version of ``path``; :class:`LcmxError` when it is not one we can read."""
    version = lcmx_version(path)
    if version is None:
        raise LcmxError(f"{path} is not an LCM-X database")
    if version not in SUPPORTED_VERSIONS:
        raise LcmxError(
            f"{path} is an LCM-X database with schema_version {version}; this hermes-lcm reads "
            f"LCM-X versions {min(SUPPORTED_VERSIONS)}-{max(SUPPORTED_VERSIONS)} only: upgrade "
            "hermes-lcm, or open it once with a matching LCM-X build"
        )
    return version


def snapshot(source: str | Path, target: str | Path) -> None:
    """A consistent copy of ``source`` (its WAL included) at ``target``, by SQLite's backup API;
    ``source`` is opened read-only."""
    with faults_mapped():
        src = sqlite3.connect(readonly_uri(source), uri=True)
        dst = sqlite3.connect(str(target))
        try:
            src.backup(dst)
            dst.execute("PRAGMA journal_mode=DELETE")
            dst.commit()
        finally:
            dst.close()
            src.close()


class LcmxDatabase:
    """An LCM-X database opened read-only; rows come back as dicts with every optional column
    present (None where this version has none)."""

    def __init__(self, path: str | Path) -> None:
        self.version = check_version(path)
        with faults_mapped():
            self.con = sqlite3.connect(readonly_uri(path), uri=True)
            self.con.row_factory = sqlite3.Row
            self.tables = tables(self.con)

    def _columns(self, table: str) -> set[str]:
        with faults_mapped():
            return {r[1] for r in self.con.execute(f"PRAGMA table_info({table})").fetchall()}

    def _select(self, table: str, required: Sequence[str], optional: Sequence[str]) -> str:
        have = self._columns(table)
        return ", ".join([*required, *((c if c in have else f"NULL AS {c}") for c in optional)])

    def counts(self) -> dict[str, int]:
        """messages, summary nodes, lineage links (distinct per node), lifecycle rows."""
        with faults_mapped():
            out = {
                t: int(self.con.execute(f"SELECT count(*) FROM {t}").fetchone()[0])
                for t in ("messages", "summary_nodes")
            }
            links = 0
            for (raw,) in self.con.execute("SELECT source_ids FROM summary_nodes"):
                links += len(set(parse_ids(raw)))
            out["links"] = links
            out["lifecycle"] = (
                int(self.con.execute("SELECT count(*) FROM lcm_lifecycle_state").fetchone()[0])
                if "lcm_lifecycle_state" in self.tables
                else 0
            )
        return out

    def messages(self) -> Iterator[dict[str, Any]]:
        """Every message in store order (batched reads)."""
        cols = self._select(
            "messages",
            ("store_id", "session_id", "role", "content", "timestamp"),
            _MESSAGE_OPTIONAL,
        )
        after = 0
        while True:
            with faults_mapped():
                rows = [
                    dict(r)
                    for r in self.con.execute(
                        f"SELECT {cols} FROM messages WHERE store_id>? ORDER BY store_id LIMIT ?",
                        (after, BATCH),
                    )
                ]
            if not rows:
                return
            yield from rows
            after = int(rows[-1]["store_id"])

    def nodes(self) -> list[dict[str, Any]]:
        """Every summary node in id order, ``source_ids`` parsed to a list of ints."""
        cols = self._select(
            "summary_nodes",
            ("node_id", "session_id", "depth", "summary", "source_ids", "source_type"),
            _NODE_OPTIONAL,
        )
        with faults_mapped():
            rows = [
                dict(r)
                for r in self.con.execute(f"SELECT {cols} FROM summary_nodes ORDER BY node_id")
            ]
        for row in rows:
            row["source_ids"] = parse_ids(row["source_ids"])
        return rows

    def lifecycle(self) -> list[dict[str, Any]]:
        """LCM-X's per-conversation lifecycle rows (version 3 on), else none."""
        if "lcm_lifecycle_state" not in self.tables:
            return []
        cols = self._select("lcm_lifecycle_state", ("conversation_id",), _LIFECYCLE[1:])
        with faults_mapped():
            return [dict(r) for r in self.con.execute(f"SELECT {cols} FROM lcm_lifecycle_state")]

    def close(self) -> None:
        self.con.close()


def parse_ids(raw: Any) -> list[int]:
    """LCM-X's ``source_ids`` JSON array as ints (a malformed value: none)."""
    try:
        value = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        return []
    return (
        [
            int(v)
            for v in value
            if isinstance(v, int | float) or (isinstance(v, str) and v.isdigit())
        ]
        if isinstance(value, list)
        else []
    )


# -- writers on our target, inside the importer's transaction ---------------------------------------


def append_rows(
    db: object, conversation_id: int, session_id: str, source: str, records: Sequence[MessageIn]
) -> list[int]:
    """Append ``records`` as they are (no fingerprint dedupe: imported history repeats itself)."""
    assert isinstance(db, sqlite3.Connection)
    return insert_messages(db, conversation_id, session_id, source, records)


def put_meta(db: object, key: str, value: Any) -> None:
    assert isinstance(db, sqlite3.Connection)
    db.execute(
        "INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value=excluded.value",
        (key, json.dumps(value, sort_keys=True)),
    )


def get_meta(db: object, key: str) -> Any:
    assert isinstance(db, sqlite3.Connection)
    row = db.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
    return json.loads(row[0]) if row else None


def read_marks(path: str | Path, prefix: str) -> set[str]:
    """The keys after ``prefix`` of our target's meta rows, read-only (the dry run's view)."""
    with faults_mapped():
        con = sqlite3.connect(readonly_uri(path), uri=True)
        try:
            rows = con.execute(
                "SELECT key FROM meta WHERE substr(key, 1, ?)=?", (len(prefix), prefix)
            ).fetchall()
        finally:
            con.close()
    return {str(r[0])[len(prefix) :] for r in rows}


def read_conversation_keys(path: str | Path) -> set[str]:
    """The conversation keys of our target, read-only (the dry run's view)."""
    with faults_mapped():
        con = sqlite3.connect(readonly_uri(path), uri=True)
        try:
            rows = con.execute("SELECT key FROM conversations").fetchall()
        finally:
            con.close()
    return {str(r[0]) for r in rows}


def seal(path: str | Path) -> None:
    """Fold the WAL into the file and leave it in rollback mode, so the file alone is the database
    (a rename moves all of it) until the engine opens it and turns WAL back on."""
    with faults_mapped():
        con = sqlite3.connect(str(path))
        try:
            con.execute("PRAGMA journal_mode=DELETE")
        finally:
            con.close()


def private_store(path: str | Path) -> SqliteStore:
    """A connection of its own to a database being built (not the process's shared one: it is
    closed and the file renamed before any engine opens it)."""
    return SqliteStore(str(Path(path).expanduser().resolve()))

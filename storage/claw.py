"""Reading a lossless-claw database (OpenClaw's LCM) for the importer, read-only.

Only the *foreign* lossless-claw schema is queried here; importers/claw_sqlite.py maps what it
returns (plain dicts, one per row) onto our records. Column sets vary by version, so
optional columns are probed rather than assumed.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import quote

from . import schema
from .connection import faults_mapped

LCL_TABLES = frozenset(
    {"conversations", "messages", "summaries", "summary_messages", "summary_parents"}
)


class SourceUnreadable(Exception):
    """The source file cannot be read whole (missing, not a file, damaged); one line for the operator."""


def readonly_uri(path: str | Path, immutable: bool = False) -> str:
    """``mode=ro`` normally; ``immutable=1`` too when SQLite could not create its -shm/-wal beside the
    file (a read-only directory) - a read-only open of a WAL database otherwise fails as "not a database"."""
    suffix = "&immutable=1" if immutable else ""
    return f"file:{quote(str(Path(path).expanduser().resolve()))}?mode=ro{suffix}"


def _needs_immutable(path: Path) -> bool:
    """True when a read-only open would need to create the -shm (WAL mode) but the directory is not writable."""
    return not os.access(path.parent, os.W_OK)


class ReadableCopy:
    """A source database as something SQLite can read without writing beside it.

    A WAL source in a read-only directory: SQLite would need to create its -shm, so the open fails.
    With no -wal file, ``immutable=1`` reads the main file correctly. With a -wal file, immutable
    would ignore the committed-but-not-checkpointed rows in it, so the db and its -wal are copied
    into a private temp directory and the copy is read (SQLite replays the WAL there)."""

    def __init__(self, path: Path, always_copy: bool = False) -> None:
        self.source = path
        self.tmp: str | None = None
        self.path, self.immutable = path, False
        if not _needs_immutable(path):
            return
        wal = path.with_name(path.name + "-wal")
        if always_copy or (wal.exists() and wal.stat().st_size > 0):
            self.tmp = tempfile.mkdtemp(prefix="lcm-claw-src-")
            copy = Path(self.tmp) / path.name
            shutil.copyfile(path, copy)
            if wal.exists():
                shutil.copyfile(wal, copy.with_name(copy.name + "-wal"))
            self.path = copy
        else:
            self.immutable = True

    def uri(self) -> str:
        return readonly_uri(self.path, self.immutable)

    def cleanup(self) -> None:
        if self.tmp is not None:
            shutil.rmtree(self.tmp, ignore_errors=True)
            self.tmp = None


def check_source(path: Path) -> None:
    """Refuse, before anything is written, a source that is missing, not a file, or damaged.

    ``PRAGMA quick_check`` reads every page (b-tree structure, page content); a damaged data page
    is caught here instead of as a traceback halfway through an import."""
    if not path.exists():
        raise SourceUnreadable(f"source {path} does not exist")
    if not path.is_file():
        raise SourceUnreadable(f"source {path} is not a regular file")
    copy = ReadableCopy(path)
    try:
        con = sqlite3.connect(copy.uri(), uri=True)
        try:
            rows = [r[0] for r in con.execute("PRAGMA quick_check").fetchall()]
        finally:
            con.close()
    except sqlite3.DatabaseError as exc:
        raise SourceUnreadable(
            f"source {path} is damaged or not a SQLite database ({exc}); nothing imported"
        ) from exc
    finally:
        copy.cleanup()
    if rows != ["ok"]:
        raise SourceUnreadable(
            f"source {path} is damaged (integrity check: {rows[0]}); nothing imported"
        )


def detect_source(path: str | Path) -> str | None:
    """'hermes-lcm', 'lossless-claw', 'unknown' for another SQLite file, None if unreadable."""
    copy = ReadableCopy(Path(path).expanduser())
    try:
        con = sqlite3.connect(copy.uri(), uri=True)
    except sqlite3.Error:
        copy.cleanup()
        return None
    try:
        tables = schema.tables(con)
        if schema.is_ours(con, tables):
            return "hermes-lcm"
    except sqlite3.DatabaseError:
        return None
    finally:
        con.close()
        copy.cleanup()
    return "lossless-claw" if tables >= LCL_TABLES else "unknown"


class ClawDatabase:
    """A lossless-claw ``lcm.db`` opened read-only; rows come back as dicts."""

    def __init__(self, path: Path) -> None:
        self.copy = ReadableCopy(path)
        with faults_mapped():
            self.con = sqlite3.connect(self.copy.uri(), uri=True)
        self.con.row_factory = sqlite3.Row
        self._part_cols: set[str] | None = None

    def _rows(self, sql: str, args: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
        with faults_mapped():
            return [dict(r) for r in self.con.execute(sql, args).fetchall()]

    def _column(self, sql: str, args: tuple[Any, ...]) -> list[Any]:
        with faults_mapped():
            return [r[0] for r in self.con.execute(sql, args).fetchall()]

    def columns(self, table: str) -> set[str]:
        with faults_mapped():
            return {r[1] for r in self.con.execute(f"PRAGMA table_info({table})").fetchall()}

    def has_message_parts(self) -> bool:
        with faults_mapped():
            return "message_parts" in schema.tables(self.con)

    def conversations(self) -> list[dict[str, Any]]:
        """conversation_id, session_id, session_key (None where the version has no such column)."""
        key_col = "session_key" if "session_key" in self.columns("conversations") else "NULL"
        return self._rows(
            f"SELECT conversation_id, session_id, {key_col} AS session_key FROM conversations "
            "ORDER BY conversation_id"
        )

    def messages(self, conversation_id: int) -> list[dict[str, Any]]:
        """message_id, seq, role, content, created_at, in conversation order."""
        return self._rows(
            "SELECT message_id, seq, role, content, created_at FROM messages "
            "WHERE conversation_id=? ORDER BY seq, message_id",
            (conversation_id,),
        )

    def tool_parts(self, message_id: int) -> list[dict[str, Any]]:
        """part_type, tool_call_id, tool_name, tool_input of a message's parts that carry a tool link.

        lossless-claw stores an assistant's call as ``part_type='tool'`` but a tool *result* as
        ``part_type='text'`` with ``tool_call_id`` set; older rows from its string-content path keep
        the id only in the part's metadata JSON (its own migration backfills from there), so the
        metadata is read as a fallback."""
        if self._part_cols is None:
            self._part_cols = self.columns("message_parts")
        meta = "metadata" in self._part_cols

        def meta_or(column: str, key: str) -> str:
            return (
                f"COALESCE({column}, CASE WHEN json_valid(metadata) THEN json_extract(metadata, '$.{key}') END)"
                if meta
                else column
            )

        call_id, name = meta_or("tool_call_id", "toolCallId"), meta_or("tool_name", "toolName")
        return self._rows(
            f"SELECT part_type, {call_id} AS tool_call_id, {name} AS tool_name, tool_input "
            "FROM message_parts WHERE message_id=? "
            f"AND (part_type='tool' OR {call_id} IS NOT NULL) ORDER BY ordinal",
            (message_id,),
        )

    def reasoning_texts(self, message_id: int) -> list[str]:
        """The text of a message's ``reasoning`` parts (thinking blocks), in order; empty ones left out."""
        return [
            t
            for t in self._column(
                "SELECT text_content FROM message_parts WHERE message_id=? "
                "AND part_type='reasoning' ORDER BY ordinal",
                (message_id,),
            )
            if isinstance(t, str) and t.strip()
        ]

    def part_types(self, message_id: int) -> list[str]:
        """The ``part_type`` of each of a message's parts, in order (for the per-type tally)."""
        return [
            str(t)
            for t in self._column(
                "SELECT part_type FROM message_parts WHERE message_id=? ORDER BY ordinal",
                (message_id,),
            )
        ]

    def other_parts(self, message_id: int, known: frozenset[str]) -> list[dict[str, Any]]:
        """Every column of a message's parts whose type is not in ``known`` (patch, file, subtask,
        step_*, snapshot, retry, agent, ...), in order: the importer keeps them on the message."""
        marks = ",".join("?" * len(known))
        return self._rows(
            f"SELECT * FROM message_parts WHERE message_id=? AND part_type NOT IN ({marks}) "
            "ORDER BY ordinal",
            (message_id, *sorted(known)),
        )

    def summaries(self, conversation_id: int) -> list[dict[str, Any]]:
        """summary_id, kind, depth, content, token_count, earliest_at, latest_at (absent columns: None)."""
        cols = self.columns("summaries")
        pick = {
            c: (c if c in cols else "NULL")
            for c in ("depth", "token_count", "earliest_at", "latest_at")
        }
        return self._rows(
            f"SELECT summary_id, kind, {pick['depth']} AS depth, content, {pick['token_count']} AS token_count, "
            f"{pick['earliest_at']} AS earliest_at, {pick['latest_at']} AS latest_at FROM summaries "
            "WHERE conversation_id=? ORDER BY created_at, summary_id",
            (conversation_id,),
        )

    def summary_message_ids(self, summary_id: str) -> list[Any]:
        return self._column(
            "SELECT message_id FROM summary_messages WHERE summary_id=? ORDER BY ordinal",
            (summary_id,),
        )

    def summary_parent_ids(self, summary_id: str) -> list[Any]:
        """lossless-claw names the summaries a condensed node was made from its "parents"."""
        return self._column(
            "SELECT parent_summary_id FROM summary_parents WHERE summary_id=? ORDER BY ordinal",
            (summary_id,),
        )

    def close(self) -> None:
        self.con.close()
        self.copy.cleanup()

"""Reading a lossless-claw database (OpenClaw's LCM) for the importer, read-only.

Only the *foreign* lossless-claw schema is queried here; claw_import.py maps what it
returns (plain dicts, one per row) onto our records. Column sets vary by version, so
optional columns are probed rather than assumed.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any
from urllib.parse import quote

from .connection import faults_mapped
from .schema import APP_ID

LCL_TABLES = frozenset({"conversations", "messages", "summaries", "summary_messages", "summary_parents"})


def readonly_uri(path: str | Path) -> str:
    return f"file:{quote(str(Path(path).expanduser().resolve()))}?mode=ro"


def detect_source(path: str | Path) -> str | None:
    """'hermes-lcm', 'lossless-claw', 'unknown' for another SQLite file, None if unreadable."""
    try:
        con = sqlite3.connect(readonly_uri(path), uri=True)
    except sqlite3.Error:
        return None
    try:
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'").fetchall()}
        if "meta" in tables and con.execute("SELECT value FROM meta WHERE key='app'").fetchone() == (APP_ID,):
            return "hermes-lcm"
    except sqlite3.DatabaseError:
        return None
    finally:
        con.close()
    return "lossless-claw" if tables >= LCL_TABLES else "unknown"


class ClawDatabase:
    """A lossless-claw ``lcm.db`` opened read-only; rows come back as dicts."""

    def __init__(self, path: Path) -> None:
        with faults_mapped():
            self.con = sqlite3.connect(readonly_uri(path), uri=True)
        self.con.row_factory = sqlite3.Row

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
        return "message_parts" in self._column("SELECT name FROM sqlite_master WHERE type='table'", ())

    def conversations(self) -> list[dict[str, Any]]:
        """conversation_id, session_id, session_key (None where the version has no such column)."""
        key_col = "session_key" if "session_key" in self.columns("conversations") else "NULL"
        return self._rows(f"SELECT conversation_id, session_id, {key_col} AS session_key FROM conversations "
                          "ORDER BY conversation_id")

    def messages(self, conversation_id: int) -> list[dict[str, Any]]:
        """message_id, seq, role, content, created_at, in conversation order."""
        return self._rows("SELECT message_id, seq, role, content, created_at FROM messages "
                          "WHERE conversation_id=? ORDER BY seq, message_id", (conversation_id,))

    def tool_parts(self, message_id: int) -> list[dict[str, Any]]:
        """tool_call_id, tool_name, tool_input of a message's tool parts, in order."""
        return self._rows("SELECT tool_call_id, tool_name, tool_input FROM message_parts "
                          "WHERE message_id=? AND part_type='tool' ORDER BY ordinal", (message_id,))

    def summaries(self, conversation_id: int) -> list[dict[str, Any]]:
        """summary_id, kind, depth, content, token_count, earliest_at, latest_at (absent columns: None)."""
        cols = self.columns("summaries")
        pick = {c: (c if c in cols else "NULL") for c in ("depth", "token_count", "earliest_at", "latest_at")}
        return self._rows(
            f"SELECT summary_id, kind, {pick['depth']} AS depth, content, {pick['token_count']} AS token_count, "
            f"{pick['earliest_at']} AS earliest_at, {pick['latest_at']} AS latest_at FROM summaries "
            "WHERE conversation_id=? ORDER BY created_at, summary_id", (conversation_id,))

    def summary_message_ids(self, summary_id: str) -> list[Any]:
        return self._column("SELECT message_id FROM summary_messages WHERE summary_id=? ORDER BY ordinal",
                            (summary_id,))

    def summary_parent_ids(self, summary_id: str) -> list[Any]:
        """lossless-claw names the summaries a condensed node was made from its "parents"."""
        return self._column("SELECT parent_summary_id FROM summary_parents WHERE summary_id=? ORDER BY ordinal",
                            (summary_id,))

    def close(self) -> None:
        self.con.close()

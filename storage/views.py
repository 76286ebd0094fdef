"""Read-only queries for ``lcm view``: a conversation's whole DAG, its compaction record, growth by month.

The page is written from a snapshot: each query reads once, in id or seq order, so a conversation
of 100k messages is read in a few large pages rather than one query per node.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ..base.redact import redact
from .connection import SqliteConnection


class ViewQueries(SqliteConnection):
    _MONTH = "strftime('%Y-%m', created_at, 'unixepoch')"  # the UTC month of a unix time (PgStore: to_char)

    def conversation_edges(self, conversation_id: int) -> list[tuple[int, str, int]]:
        """(parent id, child kind, child id) of every edge under the conversation's nodes, in order."""
        with self.read() as db:
            rows = db.execute(
                "SELECT e.parent_id, CASE e.child_kind WHEN 0 THEN 'message' ELSE 'summary' END, e.child_id "  # 0/1
                "FROM edges e JOIN summaries s ON s.id=e.parent_id "
                "WHERE s.conversation_id=? ORDER BY e.parent_id, e.ord",
                (conversation_id,),
            ).fetchall()
        return [(int(p), str(k), int(c)) for p, k, c in rows]

    def view_message_rows(
        self, conversation_id: int, after_seq: int, limit: int
    ) -> list[tuple[Any, ...]]:
        """(seq, id, role, created_at, tokens, tool_name, session_id, content, tool_calls) after ``after_seq``:
        plain tuples, since the page reads every message of a conversation and needs no record."""
        with self.read() as db:
            return db.execute(
                "SELECT seq, id, role, created_at, tokens, coalesce(tool_name, ''), "
                "(SELECT k.name FROM session_keys k WHERE k.id=session_key), content, tool_calls "  # schema 4
                "FROM messages WHERE conversation_id=? AND seq>? ORDER BY seq LIMIT ?",
                (conversation_id, after_seq, limit),
            ).fetchall()

    def events_of(
        self, kind: str, conversation_id: int | None, limit: int = 10_000
    ) -> list[dict[str, Any]]:
        """Events of one kind (oldest first); a JSON detail comes back parsed, any other detail redacted."""
        with self.read() as db:
            rows = db.execute(
                "SELECT at, level, detail FROM (SELECT id, at, level, detail FROM events WHERE kind=? AND "
                "(? IS NULL OR conversation_id=?) ORDER BY id DESC LIMIT ?) ORDER BY id",
                (kind, conversation_id, conversation_id, limit),
            ).fetchall()
        out = []
        for at, level, detail in rows:
            try:
                parsed: Any = json.loads(detail)
            except ValueError:
                parsed = redact(str(detail))
            out.append({"at": float(at), "level": str(level), "detail": parsed})
        return out

    def latest_conversation(self) -> int | None:
        """The conversation with the newest message (the one a person most likely wants to see)."""
        with self.read() as db:
            row = db.execute(
                "SELECT conversation_id FROM messages ORDER BY id DESC LIMIT 1"
            ).fetchone()
            if row is None:
                row = db.execute("SELECT max(id) FROM conversations").fetchone()
        return None if row is None or row[0] is None else int(row[0])

    def monthly_growth(self, conversation_ids: Sequence[int] | None = None) -> list[dict[str, Any]]:
        """Per calendar month (UTC) of arrival: messages and summaries added, and their stored text bytes;
        of ``conversation_ids`` only when given (a gateway user sees their own growth, not the file's)."""
        month = self._MONTH
        args: tuple[int, ...]
        where, args = "", ()
        if conversation_ids is not None:
            where = f"WHERE conversation_id IN ({','.join('?' * len(conversation_ids)) or 'NULL'})"
            args = tuple(int(c) for c in conversation_ids)
        with self.read() as db:
            messages = db.execute(
                f"SELECT {month}, count(*), sum(length(CAST(content AS BLOB)) "
                "+ coalesce(length(CAST(parts AS BLOB)), 0) + coalesce(length(CAST(tool_calls AS BLOB)), 0)), "
                f"sum(tokens) FROM messages {where} GROUP BY 1",
                args,
            ).fetchall()
            summaries = db.execute(
                f"SELECT {month}, count(*), sum(length(CAST(content AS BLOB))) FROM summaries {where} GROUP BY 1",
                args,
            ).fetchall()
        out: dict[str, dict[str, Any]] = {}
        for m, n, size, tokens in messages:
            out[str(m)] = {
                "month": str(m),
                "messages": int(n),
                "message_bytes": int(size or 0),
                "message_tokens": int(tokens or 0),
                "summaries": 0,
                "summary_bytes": 0,
            }
        for m, n, size in summaries:
            row = out.setdefault(
                str(m), {"month": str(m), "messages": 0, "message_bytes": 0, "message_tokens": 0}
            )
            row.update(summaries=int(n), summary_bytes=int(size or 0))
        return [out[k] for k in sorted(out)]

"""Conversations, their sessions, the event log status and doctor read, and per-store secrets."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from typing import Any

from ..base.records import ConversationState, SessionInfo
from ..base.redact import clip, redact
from ..base.stats import CACHE_FIELDS, add_cache_counts, no_cache_counts
from .connection import SqliteConnection

# The integer key (schema 4) of the session ``s`` (a ``sessions`` row) in ``messages.session_key``.
_KEY_OF_S = "(SELECT k.id FROM session_keys k WHERE k.name=s.id)"


class ConversationQueries(SqliteConnection):
    """Conversations and sessions (lifecycle rows), events, secrets kept in ``meta``."""

    def ensure_conversation(self, key: str, owner: str = "local") -> int:
        """The conversation of ``key``, created for ``owner`` when new (an existing one keeps its owner)."""
        with self.write() as db:
            db.execute(
                "INSERT OR IGNORE INTO conversations(key, created_at, owner) VALUES (?, ?, ?)",
                (key, time.time(), owner),
            )
            return int(db.execute("SELECT id FROM conversations WHERE key=?", (key,)).fetchone()[0])

    def conversation_owner(self, conversation_id: int) -> str | None:
        """Who owns the conversation (None: no such conversation)."""
        with self.read() as db:
            row = db.execute(
                "SELECT owner FROM conversations WHERE id=?", (conversation_id,)
            ).fetchone()
        return str(row[0]) if row else None

    def owner_conversations(self, owner: str) -> list[int]:
        """Every conversation of ``owner``, oldest first."""
        with self.read() as db:
            return [
                int(r[0])
                for r in db.execute(
                    "SELECT id FROM conversations WHERE owner=? ORDER BY id", (owner,)
                )
            ]

    def conversation(self, conversation_id: int) -> ConversationState:
        with self.read() as db:
            row = db.execute(
                "SELECT id, key, frontier_seq, last_seq FROM conversations WHERE id=?",
                (conversation_id,),
            ).fetchone()
        if row is None:
            raise KeyError(conversation_id)
        return ConversationState(*row)

    def conversation_by_key(self, key: str) -> ConversationState | None:
        with self.read() as db:
            row = db.execute(
                "SELECT id, key, frontier_seq, last_seq FROM conversations WHERE key=?", (key,)
            ).fetchone()
        return ConversationState(*row) if row else None

    def advance_frontier(self, conversation_id: int, seq: int) -> bool:
        """Move the frontier forward to ``seq`` (never back, never past the last message)."""
        with self.write() as db:
            return (
                db.execute(
                    "UPDATE conversations SET frontier_seq=? WHERE id=? AND frontier_seq<? AND ?<=last_seq",
                    (seq, conversation_id, seq, seq),
                ).rowcount
                == 1
            )

    def upsert_session(
        self,
        session_id: str,
        conversation_id: int,
        *,
        platform: str = "",
        mode: str = "normal",
        parent_session_id: str | None = None,
        reason: str | None = None,
    ) -> None:
        with self.write() as db:
            db.execute(
                "INSERT INTO sessions(id, conversation_id, platform, mode, started_at, parent_session_id, reason) "
                "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT(id) DO UPDATE SET ended_at=NULL",
                (
                    session_id,
                    conversation_id,
                    platform,
                    mode,
                    time.time(),
                    parent_session_id,
                    reason,
                ),
            )

    def session(self, session_id: str) -> SessionInfo | None:
        with self.read() as db:
            row = db.execute(
                "SELECT id, conversation_id, platform, mode, started_at, parent_session_id FROM sessions WHERE id=?",
                (session_id,),
            ).fetchone()
        return SessionInfo(*row) if row else None

    def subagent_links(self, conversation_id: int, limit: int = 50) -> dict[str, Any]:
        """A stored subagent conversation's parent (its session and that session's conversation), and
        the subagent conversations linked to this one (LCM_SUBAGENT_SESSIONS=store)."""
        with self.read() as db:
            parent = db.execute(
                "SELECT s.parent_session_id, p.conversation_id FROM sessions s LEFT JOIN sessions p "
                "ON p.id=s.parent_session_id WHERE s.conversation_id=? AND s.reason='subagent' "
                "AND s.parent_session_id IS NOT NULL ORDER BY s.started_at LIMIT 1",
                (conversation_id,),
            ).fetchone()
            children = db.execute(
                "SELECT s.id, s.conversation_id FROM sessions s JOIN sessions p ON p.id=s.parent_session_id "
                "WHERE p.conversation_id=? AND s.reason='subagent' AND s.conversation_id<>? "
                "ORDER BY s.started_at LIMIT ?",
                (conversation_id, conversation_id, limit),
            ).fetchall()
        out: dict[str, Any] = {}
        if parent is not None:
            out["linked_parent"] = {"session_id": parent[0], "conversation_id": parent[1]}
        if children:
            out["subagents"] = [{"session_id": r[0], "conversation_id": r[1]} for r in children]
        return out

    def end_session(self, session_id: str) -> None:
        with self.write() as db:
            db.execute("UPDATE sessions SET ended_at=? WHERE id=?", (time.time(), session_id))

    def session_facts(self, session_id: str) -> dict[str, Any] | None:
        """A session's lifecycle row with its message count and id range."""
        with self.read() as db:
            row = db.execute(
                "SELECT s.id, s.conversation_id, s.platform, s.mode, s.started_at, s.ended_at, s.parent_session_id, "
                f"(SELECT count(*) FROM messages m WHERE m.session_key={_KEY_OF_S}), "
                f"(SELECT min(id) FROM messages m WHERE m.session_key={_KEY_OF_S}), "
                f"(SELECT max(id) FROM messages m WHERE m.session_key={_KEY_OF_S}) FROM sessions s WHERE s.id=?",
                (session_id,),
            ).fetchone()
        keys = (
            "session_id",
            "conversation_id",
            "platform",
            "mode",
            "started_at",
            "ended_at",
            "parent_session_id",
            "messages",
            "first_store_id",
            "last_store_id",
        )
        return dict(zip(keys, row, strict=True)) if row else None

    def secret(self, name: str, size: int = 32) -> bytes:
        """A random key kept in ``meta`` (created on first use; every process reads the same one)."""
        key = f"secret:{name}"
        with self.write() as db:
            db.execute(
                "INSERT OR IGNORE INTO meta(key, value) VALUES (?, ?)",
                (key, os.urandom(size).hex()),
            )
            return bytes.fromhex(
                db.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()[0]
            )

    def mark(self, name: str) -> None:
        """Remember for good that ``name`` happened to this database (an ingest step was used)."""
        with self.write() as db:
            db.execute("INSERT OR IGNORE INTO meta(key, value) VALUES (?, '1')", (f"mark:{name}",))

    def marked(self, name: str) -> bool:
        with self.read() as db:
            return (
                db.execute("SELECT 1 FROM meta WHERE key=?", (f"mark:{name}",)).fetchone()
                is not None
            )

    def add_cache_usage(
        self, conversation_id: int, counts: Mapping[str, Mapping[str, int]]
    ) -> None:
        """Replies' input tokens and the provider's prompt-cache counts (``base.stats`` buckets:
        all replies, and those right after a compaction), added to the conversation's totals."""
        key = f"cache_usage:{conversation_id}"
        with self.write() as db:
            row = db.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
            totals = add_cache_counts(_cache_totals(row[0] if row else None), counts)
            db.execute(
                "INSERT INTO meta(key, value) VALUES (?, ?) "
                "ON CONFLICT(key) DO UPDATE SET value=excluded.value",
                (key, json.dumps(totals)),
            )

    def cache_usage(self, conversation_id: int | None = None) -> dict[str, dict[str, int]]:
        """The prompt-cache totals of one conversation, or of all of them summed."""
        with self.read() as db:
            if conversation_id is not None:
                rows = db.execute(
                    "SELECT value FROM meta WHERE key=?", (f"cache_usage:{conversation_id}",)
                ).fetchall()
            else:
                rows = db.execute(
                    "SELECT value FROM meta WHERE substr(key, 1, 12)='cache_usage:'"
                ).fetchall()
        totals = no_cache_counts()
        for (value,) in rows:
            add_cache_counts(totals, _cache_totals(value))
        return totals

    def record_event(
        self, level: str, kind: str, detail: str, conversation_id: int | None = None
    ) -> None:
        with self.write() as db:
            db.execute(
                "INSERT INTO events(at, level, kind, conversation_id, detail) VALUES (?, ?, ?, ?, ?)",
                (time.time(), level, kind, conversation_id, clip(detail, 4000)),
            )
            db.execute("DELETE FROM events WHERE id <= (SELECT max(id) FROM events) - 1000")

    def recent_events(self, limit: int = 20) -> list[tuple[float, str, str, str]]:
        with self.read() as db:
            rows = db.execute(
                "SELECT at, level, kind, detail FROM events ORDER BY id DESC LIMIT ?", (limit,)
            ).fetchall()
        # redacted on the way out too: events an older version stored may hold a credential
        return [(float(r[0]), str(r[1]), str(r[2]), redact(str(r[3]))) for r in rows]


def _cache_totals(value: str | None) -> dict[str, dict[str, int]]:
    """Stored totals (JSON) as counts; anything unreadable counts as none yet."""
    totals = no_cache_counts()
    try:
        stored = json.loads(value) if value else {}
    except ValueError:
        stored = {}
    for part, bucket in totals.items():
        found = stored.get(part) if isinstance(stored, dict) else None
        for name in CACHE_FIELDS:
            raw = found.get(name) if isinstance(found, dict) else 0
            bucket[name] = int(raw) if isinstance(raw, int) and raw >= 0 else 0
    return totals

"""Source fixtures for the importer, built from the formats' published definitions.

lossless-claw SQLite (github.com/Martian-Engineering/lossless-claw):
  * ``src/db/migration.ts`` (``runLcmMigrations``): tables ``conversations`` (conversation_id,
    session_id, session_key, active, archived_at, title, bootstrapped_at, created_at, updated_at),
    ``messages`` (message_id, conversation_id, seq, role CHECK IN system/user/assistant/tool,
    content, token_count, created_at as SQLite ``datetime('now')`` text, UNIQUE(conversation_id,
    seq)), ``summaries`` (summary_id TEXT, conversation_id, kind CHECK IN leaf/condensed, depth,
    content, token_count, earliest_at, latest_at, descendant_count, descendant_token_count,
    source_message_token_count, created_at, file_ids, model), ``message_parts`` (part_id,
    message_id, session_id, part_type CHECK IN text/reasoning/tool/..., ordinal, text_content,
    tool_call_id, tool_name, tool_input, tool_output, ..., metadata), ``summary_messages``
    (summary_id, message_id, ordinal), ``summary_parents`` (summary_id, parent_summary_id,
    ordinal), ``context_items``, and the FTS5 tables ``messages_fts(content)`` and
    ``summaries_fts(summary_id UNINDEXED, content)``.
  * ``src/store/summary-store.ts`` (``getSummaryParents``): ``summary_parents.parent_summary_id``
    names a *source* summary that was compacted into ``summary_id`` (historical naming).
  * ``src/message-content.ts`` (``toDbRole``, ``buildMessageParts``): ``toolResult`` messages are
    stored with role ``tool``; tool calls and results live in ``message_parts`` rows of
    ``part_type='tool'`` carrying ``tool_call_id``, ``tool_name``, ``tool_input`` (JSON).

OpenClaw session JSONL (github.com/openclaw/openclaw):
  * ``docs/reference/session-management-compaction.md`` ("Transcript structure"): first line is
    the session header ``{"type": "session", "id", "cwd", "timestamp", "parentSession"?}``;
    then entries with ``id`` + ``parentId`` forming a tree; ``message`` entries hold
    user / assistant / toolResult messages; other types (``custom``, ``compaction``,
    ``model_change``, ...) do not.
  * Message shapes (the pi-ai types OpenClaw persists, as seen in openclaw's own session test
    fixtures): user ``content`` is a string or ``[{type: text|image}]`` (image: ``data``
    base64 + ``mimeType``); assistant ``content`` is ``[{type: text}, {type: thinking},
    {type: toolCall, id, name, arguments}]``; ``{role: "toolResult", toolCallId, toolName,
    content: [{type: text}], isError, timestamp}``; ``timestamp`` is Unix milliseconds.
  * lossless-claw ``src/transcript.ts`` (``readLeafPathMessages``) imports the leaf path: from
    the last entry back to the root through ``parentId``.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

LOSSLESS_CLAW_DDL = """
CREATE TABLE conversations (
  conversation_id INTEGER PRIMARY KEY AUTOINCREMENT,
  session_id TEXT NOT NULL,
  session_key TEXT,
  active INTEGER NOT NULL DEFAULT 1,
  archived_at TEXT,
  title TEXT,
  bootstrapped_at TEXT,
  created_at TEXT NOT NULL DEFAULT (datetime('now')),
  updated_at TEXT NOT NULL DEFAULT (datetime('now'))
);
CREATE TABLE messages (
  message_id INTEGER PRIMARY KEY AUTOINCREMENT,
  conversation_id INTEGER NOT NULL REFERENCES conversations(conversation_id) ON DELETE CASCADE,
  seq INTEGER NOT NULL,
  role TEXT NOT NULL CHECK (role IN ('system', 'user', 'assistant', 'tool')),
  content TEXT NOT NULL,
  token_count INTEGER NOT NULL,
  created_at TEXT NOT NULL DEFAULT (datetime('now')),
  UNIQUE (conversation_id, seq)
);
CREATE TABLE summaries (
  summary_id TEXT PRIMARY KEY,
  conversation_id INTEGER NOT NULL REFERENCES conversations(conversation_id) ON DELETE CASCADE,
  kind TEXT NOT NULL CHECK (kind IN ('leaf', 'condensed')),
  depth INTEGER NOT NULL DEFAULT 0,
  content TEXT NOT NULL,
  token_count INTEGER NOT NULL,
  earliest_at TEXT,
  latest_at TEXT,
  descendant_count INTEGER NOT NULL DEFAULT 0,
  descendant_token_count INTEGER NOT NULL DEFAULT 0,
  source_message_token_count INTEGER NOT NULL DEFAULT 0,
  created_at TEXT NOT NULL DEFAULT (datetime('now')),
  file_ids TEXT NOT NULL DEFAULT '[]',
  model TEXT NOT NULL DEFAULT 'unknown'
);
CREATE TABLE message_parts (
  part_id TEXT PRIMARY KEY,
  message_id INTEGER NOT NULL REFERENCES messages(message_id) ON DELETE CASCADE,
  session_id TEXT NOT NULL,
  part_type TEXT NOT NULL CHECK (part_type IN ('text', 'reasoning', 'tool', 'patch', 'file', 'subtask',
    'compaction', 'step_start', 'step_finish', 'snapshot', 'agent', 'retry')),
  ordinal INTEGER NOT NULL,
  text_content TEXT,
  is_ignored INTEGER,
  is_synthetic INTEGER,
  tool_call_id TEXT,
  tool_name TEXT,
  tool_status TEXT,
  tool_input TEXT,
  tool_output TEXT,
  tool_error TEXT,
  tool_title TEXT,
  metadata TEXT,
  UNIQUE (message_id, ordinal)
);
CREATE TABLE summary_messages (
  summary_id TEXT NOT NULL REFERENCES summaries(summary_id) ON DELETE CASCADE,
  message_id INTEGER NOT NULL REFERENCES messages(message_id) ON DELETE RESTRICT,
  ordinal INTEGER NOT NULL,
  PRIMARY KEY (summary_id, message_id)
);
CREATE TABLE summary_parents (
  summary_id TEXT NOT NULL REFERENCES summaries(summary_id) ON DELETE CASCADE,
  parent_summary_id TEXT NOT NULL REFERENCES summaries(summary_id) ON DELETE RESTRICT,
  ordinal INTEGER NOT NULL,
  PRIMARY KEY (summary_id, parent_summary_id)
);
CREATE TABLE context_items (
  conversation_id INTEGER NOT NULL REFERENCES conversations(conversation_id) ON DELETE CASCADE,
  ordinal INTEGER NOT NULL,
  item_type TEXT NOT NULL CHECK (item_type IN ('message', 'summary')),
  message_id INTEGER REFERENCES messages(message_id) ON DELETE RESTRICT,
  summary_id TEXT REFERENCES summaries(summary_id) ON DELETE RESTRICT,
  created_at TEXT NOT NULL DEFAULT (datetime('now')),
  PRIMARY KEY (conversation_id, ordinal)
);
CREATE INDEX messages_conv_seq_idx ON messages (conversation_id, seq);
CREATE VIRTUAL TABLE messages_fts USING fts5(content, tokenize='porter unicode61');
CREATE VIRTUAL TABLE summaries_fts USING fts5(summary_id UNINDEXED, content, tokenize='porter unicode61');
"""


class LosslessClawDb:
    """Writes rows the way lossless-claw's stores do (messages + parts + FTS, summaries + links)."""

    def __init__(self, path: Path, *, strict: bool = True) -> None:
        self.path = path
        self.con = sqlite3.connect(path, isolation_level=None)
        fresh = not self.con.execute("SELECT 1 FROM sqlite_master WHERE name='messages'").fetchone()
        if fresh:
            self.con.executescript(LOSSLESS_CLAW_DDL)
        self.con.execute(f"PRAGMA foreign_keys={'ON' if strict else 'OFF'}")
        if not strict:  # legacy / damaged rows a strict writer could not have made
            self.con.execute("PRAGMA ignore_check_constraints=ON")

    def conversation(self, session_id: str, session_key: str | None, *, active: int = 1) -> int:
        cur = self.con.execute(
            "INSERT INTO conversations(session_id, session_key, active) VALUES (?, ?, ?)",
            (session_id, session_key, active),
        )
        return int(cur.lastrowid or 0)

    def message(
        self,
        conversation_id: int,
        role: str,
        content: Any,
        *,
        created_at: str = "2026-01-05 10:00:00",
        tool: dict[str, Any] | None = None,
        session_id: str = "sess",
    ) -> int:
        seq = self.con.execute(
            "SELECT coalesce(max(seq), 0) + 1 FROM messages WHERE conversation_id=?",
            (conversation_id,),
        ).fetchone()[0]
        cur = self.con.execute(
            "INSERT INTO messages(conversation_id, seq, role, content, token_count, created_at) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (conversation_id, seq, role, content, len(str(content)) // 4 + 1, created_at),
        )
        message_id = int(cur.lastrowid or 0)
        if isinstance(content, str):
            self.con.execute(
                "INSERT INTO messages_fts(rowid, content) VALUES (?, ?)", (message_id, content)
            )
        if tool is not None:
            self.con.execute(
                "INSERT INTO message_parts(part_id, message_id, session_id, part_type, ordinal, tool_call_id, "
                "tool_name, tool_input, tool_output, metadata) VALUES (?, ?, ?, 'tool', 0, ?, ?, ?, ?, ?)",
                (
                    f"part-{message_id}",
                    message_id,
                    session_id,
                    tool.get("id"),
                    tool.get("name"),
                    tool.get("input"),
                    tool.get("output"),
                    json.dumps({"originalRole": "toolResult" if role == "tool" else role}),
                ),
            )
        elif isinstance(content, str):
            self.con.execute(
                "INSERT INTO message_parts(part_id, message_id, session_id, part_type, ordinal, text_content) "
                "VALUES (?, ?, ?, 'text', 0, ?)",
                (f"part-{message_id}", message_id, session_id, content),
            )
        return message_id

    def summary(
        self,
        summary_id: str,
        conversation_id: int,
        kind: str,
        content: str,
        *,
        depth: int = 0,
        messages: tuple[int, ...] = (),
        sources: tuple[str, ...] = (),
        earliest_at: str | None = "2026-01-05T10:00:00.000Z",
        latest_at: str | None = "2026-01-05T10:05:00.000Z",
    ) -> None:
        self.con.execute(
            "INSERT INTO summaries(summary_id, conversation_id, kind, depth, content, token_count, earliest_at, "
            "latest_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                summary_id,
                conversation_id,
                kind,
                depth,
                content,
                len(content) // 4 + 1,
                earliest_at,
                latest_at,
            ),
        )
        self.con.execute(
            "INSERT INTO summaries_fts(summary_id, content) VALUES (?, ?)", (summary_id, content)
        )
        for ordinal, message_id in enumerate(messages):
            self.con.execute(
                "INSERT INTO summary_messages(summary_id, message_id, ordinal) VALUES (?, ?, ?)",
                (summary_id, message_id, ordinal),
            )
        for ordinal, source in enumerate(sources):  # lossless-claw calls the sources "parents"
            self.con.execute(
                "INSERT INTO summary_parents(summary_id, parent_summary_id, ordinal) VALUES (?, ?, ?)",
                (summary_id, source, ordinal),
            )

    def context(self, conversation_id: int, summary_id: str) -> None:
        self.con.execute(
            "INSERT INTO context_items(conversation_id, ordinal, item_type, summary_id) "
            "VALUES (?, 0, 'summary', ?)",
            (conversation_id, summary_id),
        )

    def close(self) -> None:
        self.con.close()


def build_lossless_claw(path: Path) -> dict[str, Any]:
    """Two conversations: a tool loop, an empty row, a system row, a summary DAG (two leaves
    condensed into one node), and an archived conversation with one leaf."""
    db = LosslessClawDb(path)
    main = db.conversation("sess-main", "agent:main:main")
    m1 = db.message(main, "user", "Please set up the reverse proxy on port 8443")
    m2 = db.message(
        main,
        "assistant",
        "",
        tool={"id": "call_1", "name": "exec", "input": '{"command": "ss -ltn"}'},
    )
    m3 = db.message(
        main,
        "tool",
        "LISTEN 0 4096 0.0.0.0:8443",
        tool={"id": "call_1", "name": "exec", "output": '"LISTEN 0 4096 0.0.0.0:8443"'},
    )
    m4 = db.message(main, "assistant", "The proxy now listens on 8443.")
    db.message(main, "user", "")
    db.message(main, "system", "delivery-mirror: message delivered")
    m7 = db.message(
        main, "user", "Set the cache TTL to 300 seconds", created_at="2026-01-06 09:00:00"
    )
    m8 = db.message(
        main, "assistant", "Done: cache TTL is 300 s.", created_at="2026-01-06 09:00:05"
    )
    db.summary(
        "sum_leaf_a",
        main,
        "leaf",
        "Proxy set up on port 8443 (checked with ss).",
        messages=(m1, m2, m3, m4),
    )
    db.summary(
        "sum_leaf_b",
        main,
        "leaf",
        "Cache TTL set to 300 seconds.",
        messages=(m7, m8),
        earliest_at=None,
        latest_at=None,
    )
    db.summary(
        "sum_condensed",
        main,
        "condensed",
        "Infra session: proxy 8443, cache TTL 300 s.",
        depth=1,
        sources=("sum_leaf_a", "sum_leaf_b"),
    )
    db.context(main, "sum_condensed")
    old = db.conversation("sess-old", "agent:main:main", active=0)
    o1 = db.message(
        old, "user", "Old question about the zebra migration", created_at="2025-12-01 08:00:00"
    )
    o2 = db.message(
        old, "assistant", "The zebra migration finished.", created_at="2025-12-01 08:00:09"
    )
    db.summary("sum_old", old, "leaf", "Zebra migration finished.", messages=(o1, o2))
    db.close()
    return {
        "messages": 10,
        "eligible": 8,
        "empty": 1,
        "system": 1,
        "summaries": 4,
        "conversations": {"main": main, "old": old},
    }


def build_lossless_claw_malformed(path: Path) -> None:
    """Rows a strict writer could not have made: bad role, BLOB content, unreadable dates,
    non-JSON tool input, summaries with missing sources, a cycle, a bad kind."""
    db = LosslessClawDb(path, strict=False)
    conv = db.conversation("sess-bad", None)
    good = db.message(conv, "user", "A perfectly fine question about llamas")
    db.message(conv, "narrator", "a role lossless-claw never writes")
    db.con.execute(
        "INSERT INTO messages(conversation_id, seq, role, content, token_count) VALUES (?, 99, 'user', "
        "X'00ff10', 1)",
        (conv,),
    )
    db.message(conv, "assistant", "Llamas are fine.", created_at="yesterday-ish")
    db.message(
        conv, "assistant", "", tool={"id": "call_x", "name": "exec", "input": "ls -la (not json)"}
    )
    db.summary("sum_ok", conv, "leaf", "Llamas discussed.", messages=(good,))
    db.summary(
        "sum_ghost", conv, "leaf", "Points at a message that does not exist.", messages=(424242,)
    )
    db.summary("sum_p", conv, "condensed", "cycle one", depth=1, sources=("sum_q",))
    db.summary("sum_q", conv, "condensed", "cycle two", depth=1, sources=("sum_p",))
    db.summary("sum_weird", conv, "sideways", "not a kind lossless-claw writes", messages=(good,))
    db.summary(
        "sum_orphan_parent",
        conv,
        "condensed",
        "condenses a missing node",
        depth=1,
        sources=("sum_nope",),
    )
    db.close()


# -- OpenClaw JSONL ------------------------------------------------------------------------------

T0 = 1767600000000  # 2026-01-05T08:00:00Z in Unix ms


def _entry(entry_id: str, parent: str | None, message: dict[str, Any], ms: int) -> dict[str, Any]:
    return {
        "type": "message",
        "id": entry_id,
        "parentId": parent,
        "timestamp": f"2026-01-05T08:00:{(ms - T0) // 1000:02d}.000Z",
        "message": {**message, "timestamp": ms},
    }


def openclaw_session(directory: Path, session_id: str = "sess-aaa") -> Path:
    """A clean transcript tree: header, model change, a tool loop, an image, and one abandoned
    branch (a regenerated reply) that is not on the path to the last entry."""
    png = "iVBORw0KGgo" + "A" * 3000
    entries = [
        {
            "type": "session",
            "version": 3,
            "id": session_id,
            "timestamp": "2026-01-05T08:00:00.000Z",
            "cwd": "/home/user/work",
        },
        {
            "type": "model_change",
            "id": "e0",
            "parentId": None,
            "timestamp": "2026-01-05T08:00:00.000Z",
            "provider": "anthropic",
            "modelId": "claude-x",
        },
        _entry(
            "e1",
            "e0",
            {"role": "user", "content": "Which port does the staging gateway use?"},
            T0 + 1000,
        ),
        _entry(
            "e2",
            "e1",
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "look it up"},
                    {"type": "text", "text": "Let me check the config."},
                    {
                        "type": "toolCall",
                        "id": "call_a",
                        "name": "read",
                        "arguments": {"path": "gateway.yaml"},
                    },
                ],
                "stopReason": "toolUse",
            },
            T0 + 2000,
        ),
        _entry(
            "e3",
            "e2",
            {
                "role": "toolResult",
                "toolCallId": "call_a",
                "toolName": "read",
                "content": [{"type": "text", "text": "port: 9443\nhost: staging"}],
                "isError": False,
            },
            T0 + 3000,
        ),
        _entry(
            "e4x",
            "e3",
            {"role": "assistant", "content": [{"type": "text", "text": "ABANDONED draft reply"}]},
            T0 + 4000,
        ),
        _entry(
            "e4",
            "e3",
            {
                "role": "assistant",
                "content": [{"type": "text", "text": "The gateway uses port 9443."}],
            },
            T0 + 5000,
        ),
        _entry(
            "e5",
            "e4",
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Here is a screenshot"},
                    {"type": "image", "data": png, "mimeType": "image/png"},
                ],
            },
            T0 + 6000,
        ),
        {
            "type": "custom",
            "id": "e6",
            "parentId": "e5",
            "timestamp": "2026-01-05T08:00:07.000Z",
            "customType": "note",
            "data": {"x": 1},
        },
        _entry(
            "e7",
            "e6",
            {"role": "assistant", "content": [{"type": "text", "text": "Screenshot received."}]},
            T0 + 8000,
        ),
    ]
    path = directory / f"{session_id}.jsonl"
    path.write_text("\n".join(json.dumps(e) for e in entries) + "\n", encoding="utf-8")
    return path


def openclaw_messy_session(directory: Path, session_id: str = "sess-messy") -> Path:
    """Broken lines and unsupported messages among valid ones (entries without ids: file order)."""
    lines = [
        json.dumps(
            {
                "type": "session",
                "version": 3,
                "id": session_id,
                "timestamp": "2026-01-05T09:00:00.000Z",
                "cwd": "/tmp",
            }
        ),
        json.dumps(
            {
                "type": "message",
                "message": {"role": "user", "content": "messy but valid question", "timestamp": T0},
            }
        ),
        "{this is not json",
        json.dumps([1, 2, 3]),
        json.dumps({"type": "message", "message": {"content": "no role here"}}),
        json.dumps(
            {
                "type": "message",
                "message": {
                    "role": "toolResult",
                    "content": [{"type": "text", "text": "no call id"}],
                },
            }
        ),
        json.dumps(
            {"type": "message", "message": {"role": "user", "content": {"weird": "object content"}}}
        ),
        json.dumps(
            {
                "type": "message",
                "message": {"role": "bashExecution", "command": "ls", "output": "a b"},
            }
        ),
        json.dumps(
            {
                "type": "message",
                "message": {
                    "role": "assistant",
                    "content": [{"type": "thinking", "thinking": "only thoughts"}],
                },
            }
        ),
        "",
        json.dumps(
            {
                "type": "message",
                "message": {
                    "role": "assistant",
                    "content": "messy but valid answer",
                    "timestamp": T0 + 500,
                },
            }
        ),
    ]
    path = directory / f"{session_id}.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path

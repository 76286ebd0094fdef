"""The lossless-claw SQLite source: its ``lcm.db`` read into source conversations.

Raw messages with their ``message_parts`` (tool calls and links, reasoning, and every other part
type carried by ``claw_parts``), and with ``include_summaries`` the summary DAG with its lineage
(leaf summaries link messages, condensed ones the summaries they were made from). Every row that
cannot be imported is counted and warned about in the report, so the reconciliation balances.

No SQL here: the peer's schema is read through ``store.ClawDatabase`` (storage/claw.py).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..storage.claw import SourceUnreadable, check_source
from ..store import LCL_TABLES, ClawDatabase, StoreError, detect_source
from .claw_parts import CORE_PART_TYPES, carry
from .claw_report import (
    ImportFailure,
    Report,
    SourceConversation,
    SourceMessage,
    SourceSummary,
    source_time,
)

IMPORT_ROLES = {"user", "assistant", "tool"}
LCL_ROLES = {"system", "user", "assistant", "tool"}  # lossless-claw's messages.role CHECK


class LosslessClawReader:
    """Maps a lossless-claw ``lcm.db`` (read-only, through ``store.ClawDatabase``) onto source
    conversations, counting and warning about every row it cannot import."""

    def __init__(self, path: Path, report: Report) -> None:
        self.path, self.report = path, report
        try:
            check_source(path)
        except SourceUnreadable as exc:
            raise ImportFailure(str(exc)) from exc
        if detect_source(path) != "lossless-claw":
            raise ImportFailure(
                f"{path} is not a lossless-claw database (needs tables {sorted(LCL_TABLES)})"
            )
        self.db = ClawDatabase(path)

    def read_all(self, include_summaries: bool) -> list[SourceConversation]:
        """Every row this import will use, read before the target is touched: a source that fails
        part-way (a damaged page the quick check missed) refuses the whole import, one line."""
        try:
            return list(self.conversations(include_summaries))
        except StoreError as exc:
            raise ImportFailure(
                f"source {self.path} could not be read whole ({exc}); nothing imported"
            ) from exc

    def conversations(self, include_summaries: bool) -> Iterator[SourceConversation]:
        rows = self.db.conversations()
        has_parts = self.db.has_message_parts()
        for row in rows:
            cid, session = row["conversation_id"], str(row["session_id"] or "")
            label = row["session_key"] or session or str(cid)
            conv = SourceConversation(
                key=f"lossless-claw:{cid}:{label}",
                session_id=f"lossless-claw:{cid}:{session or 'unknown'}",
                parent_session_id=None,
            )
            conv.messages = list(self._messages(cid, has_parts))
            if include_summaries:
                conv.summaries = self._summaries(cid)
            yield conv

    def _messages(self, conversation_id: int, has_parts: bool) -> Iterator[SourceMessage]:
        for row in self.db.messages(conversation_id):
            self.report.scanned += 1
            mid = row["message_id"]
            role, content = row["role"], row["content"]
            types = Counter(self.db.part_types(mid)) if has_parts else Counter()
            if role not in LCL_ROLES or not isinstance(content, str) or role not in IMPORT_ROLES:
                self.report.tally(self.report.parts_reported, types)
            if role not in LCL_ROLES or not isinstance(content, str):
                self.report.invalid_rows += 1
                self.report.warn(
                    f"lossless-claw message {mid}: invalid role {role!r} or non-text content; skipped"
                )
                continue
            if role not in IMPORT_ROLES:
                self.report.skipped_unsupported += 1
                self.report.warn(f"lossless-claw message {mid}: role {role!r} is not imported")
                continue
            message: dict[str, Any] = {"role": role, "content": content}
            dropped: Counter[str] = Counter()
            extra = None
            if has_parts:
                dropped["tool"] = self._tool_fields(mid, role, message, types["tool"])
                thinking = self.db.reasoning_texts(mid) if role == "assistant" else []
                if thinking:  # kept as the host's reasoning field, as for JSONL thinking blocks
                    message["reasoning_content"] = "\n".join(thinking)
                    self.report.thinking_kept += 1
                dropped["reasoning"] = types["reasoning"] - len(thinking)
                # patch, file, subtask, step_*, snapshot, retry, agent: appended to the content
                extra = carry(message, self.db.other_parts(mid, CORE_PART_TYPES))
                for kind, n in (+dropped).items():
                    self.report.warn(
                        f"lossless-claw message {mid}: {n} {kind} part(s) without usable "
                        "content (no text, call id or input) not imported"
                    )
            ts = source_time(row["created_at"])
            if ts is None:
                self.report.warn(
                    f"lossless-claw message {mid}: unreadable created_at {row['created_at']!r}"
                )
            yield SourceMessage(f"message:{mid}", message, ts, types - dropped, +dropped, extra)

    def _tool_fields(
        self, message_id: int, role: str, message: dict[str, Any], tool_parts: int
    ) -> int:
        """Sets the tool link / calls; returns how many of the message's ``tool`` parts it could not use."""
        parts = self.db.tool_parts(message_id)
        if role == "tool":
            first = next((p for p in parts if p["tool_call_id"]), None)
            if first is not None:
                message["tool_call_id"] = str(first["tool_call_id"])
                if first["tool_name"]:
                    message["name"] = str(first["tool_name"])
            return 0
        calls = []
        for p in parts:
            if (
                role != "assistant"
                or p["part_type"] != "tool"
                or not p["tool_call_id"]
                or p["tool_input"] is None
            ):
                continue
            arguments = (
                p["tool_input"] if isinstance(p["tool_input"], str) else json.dumps(p["tool_input"])
            )
            try:
                json.loads(arguments)
            except ValueError:
                self.report.warn(
                    f"lossless-claw message {message_id}: tool call {p['tool_call_id']} has "
                    "non-JSON input; kept as text"
                )
                arguments = json.dumps({"raw": arguments})
            calls.append(
                {
                    "id": str(p["tool_call_id"]),
                    "type": "function",
                    "function": {
                        "name": str(p["tool_name"] or "unknown_tool"),
                        "arguments": arguments,
                    },
                }
            )
        if calls:
            message["tool_calls"] = calls
        return tool_parts - len(calls)

    def _summaries(self, conversation_id: int) -> list[SourceSummary]:
        rows = self.db.summaries(conversation_id)
        out = []
        for row in rows:
            self.report.summaries["scanned"] += 1
            sid = str(row["summary_id"])
            if not isinstance(row["content"], str) or row["kind"] not in ("leaf", "condensed"):
                self.report.summaries["invalid"] += 1
                self.report.warn(f"lossless-claw summary {sid}: bad kind/content; skipped")
                continue
            node = SourceSummary(
                sid,
                row["kind"],
                int(row["depth"] or 0),
                row["content"],
                int(row["token_count"] or 0),
                source_time(row["earliest_at"]),
                source_time(row["latest_at"]),
            )
            node.message_ids = [f"message:{m}" for m in self.db.summary_message_ids(sid)]
            # lossless-claw names the summaries a condensed node was made from its "parents".
            node.child_ids = [str(p) for p in self.db.summary_parent_ids(sid)]
            out.append(node)
        return out

    def close(self) -> None:
        self.db.close()

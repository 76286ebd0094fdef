"""Plain immutable records passed between the store and the services.

Services never see cursors or rows: the store turns rows into these, so the
compaction, assembly and tool code can be tested with hand-built values.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class PayloadRef:
    """A payload the engine itself kept for a row (payloads.PayloadGuard.collecting): the grant
    that lets the row's owner read it. ``kind`` is "output" (a large tool output) or "payload"."""

    ref: str
    kind: str
    mime: str


@dataclass(frozen=True)
class PayloadGrant:
    """A stored grant: the row whose owner may read payload ``ref``, and what the payload is."""

    ref: str
    message_id: int
    conversation_id: int
    kind: str
    mime: str


@dataclass(frozen=True)
class MessageIn:
    """A host message made ready for storage by ``ingest.normalize``."""

    role: str
    content: str
    parts: str | None
    tool_calls: str | None
    tool_call_id: str | None
    tool_name: str | None
    host_ts: float | None
    tokens: int
    fingerprint: str
    # Why the host made this message itself (scaffold.classify), None for a real one.
    synthetic: str | None = None
    # JSON object of the host's other public fields (see ``normalize.extra_fields``); None: none.
    extra: str | None = None
    # The payloads the ingest kept for this row, stored as its grants in the same transaction.
    payload_refs: tuple[PayloadRef, ...] = ()


# Keys a stored message's columns give back; ``extra`` never overrides them.
CORE_KEYS = frozenset({"role", "content", "tool_calls", "tool_call_id"})
# Host fields that restate the content or the tool calls in another shape; a provider
# adapter replays them instead of ``content``, so they go when either is rewritten.
CONTENT_SHADOWS = ("api_content", "anthropic_content_blocks", "codex_message_items")


def without_shadows(message: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``message`` that no longer claims the content it had: for a message whose
    content or tool calls the assembler rewrote (cut, image replaced, unanswered call removed)."""
    return {k: v for k, v in message.items() if k not in CONTENT_SHADOWS}


@dataclass(frozen=True)
class StoredMessage:
    id: int
    conversation_id: int
    seq: int
    session_id: str
    role: str
    content: str
    parts: str | None
    tool_calls: str | None
    tool_call_id: str | None
    tool_name: str | None
    source: str
    created_at: float
    tokens: int
    extra: str | None = None

    def to_host(self, extra: bool = True) -> dict[str, Any]:
        """The message as the host gave it: the provider fields, byte-identical to what was
        stored, plus (``extra``) the host's other public fields (reasoning, provider replay items)."""
        message: dict[str, Any] = {"role": self.role}
        message["content"] = json.loads(self.parts) if self.parts is not None else self.content
        if self.tool_calls:
            message["tool_calls"] = json.loads(self.tool_calls)
        if self.tool_call_id:
            message["tool_call_id"] = self.tool_call_id
        if self.role == "tool" and self.tool_name:
            message["name"] = self.tool_name
        for key, value in (self.extra_fields() if extra else {}).items():
            if key not in CORE_KEYS:
                message[key] = value
        return message

    def extra_fields(self) -> dict[str, Any]:
        """The stored extra fields; an unreadable value reads as none (never raises)."""
        if not self.extra:
            return {}
        try:
            fields = json.loads(self.extra)
        except ValueError:
            return {}
        return fields if isinstance(fields, dict) else {}

    @property
    def call_ids(self) -> tuple[str, ...]:
        """Ids of the tool calls this (assistant) message makes."""
        if not self.tool_calls:
            return ()
        try:
            calls = json.loads(self.tool_calls)
        except ValueError:
            return ()
        return tuple(str(c.get("id")) for c in calls if isinstance(c, dict) and c.get("id"))


@dataclass(frozen=True)
class SummaryNode:
    id: int
    conversation_id: int
    session_id: str
    depth: int
    content: str
    tokens: int
    first_seq: int
    last_seq: int
    earliest_at: float
    latest_at: float
    source_tokens: int
    level: str
    route: str
    created_at: float

    @property
    def node_id(self) -> str:
        return node_label(self.id)


@dataclass(frozen=True)
class NewNode:
    """A summary node about to be written: its text and what it was made from."""

    conversation_id: int
    session_id: str
    depth: int
    content: str
    tokens: int
    first_seq: int
    last_seq: int
    earliest_at: float
    latest_at: float
    source_tokens: int
    level: str
    route: str
    message_ids: tuple[int, ...] = ()
    child_ids: tuple[int, ...] = ()

    @classmethod
    def over_messages(
        cls,
        messages: Sequence[StoredMessage],
        *,
        earliest_at: float | None = None,
        latest_at: float | None = None,
        source_tokens: int | None = None,
        **fields: Any,
    ) -> NewNode:
        """A leaf over ``messages``: its seq span, time range and source size follow from them, so
        compaction and the importers derive them alike; a time or size the source gave wins."""
        return cls(
            depth=0,
            first_seq=min(m.seq for m in messages),
            last_seq=max(m.seq for m in messages),
            earliest_at=min(m.created_at for m in messages) if earliest_at is None else earliest_at,
            latest_at=max(m.created_at for m in messages) if latest_at is None else latest_at,
            source_tokens=sum(m.tokens for m in messages)
            if source_tokens is None
            else source_tokens,
            message_ids=tuple(m.id for m in messages),
            **fields,
        )

    @classmethod
    def over_nodes(
        cls,
        children: Sequence[SummaryNode],
        *,
        depth: int | None = None,
        earliest_at: float | None = None,
        latest_at: float | None = None,
        source_tokens: int | None = None,
        **fields: Any,
    ) -> NewNode:
        """A condensed node over ``children``: one level above the deepest unless ``depth`` says
        more; span, time range and source size (the children's tokens) follow from them."""
        return cls(
            depth=max(c.depth for c in children) + 1 if depth is None else depth,
            first_seq=min(c.first_seq for c in children),
            last_seq=max(c.last_seq for c in children),
            earliest_at=min(c.earliest_at for c in children)
            if earliest_at is None
            else earliest_at,
            latest_at=max(c.latest_at for c in children) if latest_at is None else latest_at,
            source_tokens=sum(c.tokens for c in children)
            if source_tokens is None
            else source_tokens,
            child_ids=tuple(c.id for c in children),
            **fields,
        )


@dataclass(frozen=True)
class ConversationState:
    id: int
    key: str
    frontier_seq: int
    last_seq: int


@dataclass(frozen=True)
class PromptReads:
    """What one assembly reads of a conversation (``Store.prompt_reads``), from one snapshot
    where the backend has them."""

    state: ConversationState
    ids: list[int]  # the newest raw rows after the frontier (at most the window), oldest first
    rows: list[StoredMessage]  # those of them stored after the caller's ``newer_than``, whole
    node_ids: list[int]  # the context summaries' ids, in prompt order
    nodes: list[SummaryNode]  # those of them the caller does not hold (a backend may send all)
    request: StoredMessage | None  # the newest request a person sent (at or before ``upto``)
    rewrites: int = 0  # the database's rewrite counter: stored text changed in place when it moves


@dataclass(frozen=True)
class SessionInfo:
    id: str
    conversation_id: int
    platform: str
    mode: str
    started_at: float
    parent_session_id: str | None


def node_label(summary_id: int) -> str:
    """The id the model sees and passes back to tools (``S12``)."""
    return f"S{summary_id}"


def parse_node_label(label: str | int) -> int:
    text = str(label).strip()
    if text[:1] in ("S", "s"):
        text = text[1:]
    if not text.isdigit():
        raise ValueError(f"not a summary node id: {label!r}")
    return int(text)


@dataclass(frozen=True)
class PreparedSummary:
    """A summary made ahead of the compaction that will want it (compaction/prepare.py), not yet a
    node: ``key`` names exactly what it was made from, ``first_seq..last_seq`` what it covers."""

    conversation_id: int
    key: str
    depth: int
    first_seq: int
    last_seq: int
    target_tokens: int
    content: str
    tokens: int
    level: str
    route: str
    created_at: float = 0.0
    id: int = 0


@dataclass(frozen=True)
class Rollup:
    """One temporal rollup row (rollups.py): a conversation's day, week or month in a time zone.

    ``start`` is the period's first day (ISO date; a week starts on Monday, a month on the 1st);
    ``generation`` grows each time the period is marked stale, so a build that finishes after a
    newer mark does not publish over it.
    """

    id: int
    conversation_id: int
    kind: str  # day | week | month
    start: str
    tz: str
    status: str  # ready | stale | building | failed
    content: str
    tokens: int
    source_ids: tuple[int, ...]
    built_at: float | None
    error: str
    attempts: int
    generation: int
    updated_at: float

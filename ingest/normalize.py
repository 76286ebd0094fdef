"""Which host messages are stored, and how a message's parts are written down and identified.

A host list mixes the host's own messages with our summary block (alone, or with a user message
the host merged into it) and messages that are not worth a row (system, malformed). Of what is
stored, the content and tool calls become text and exact JSON, and the fingerprint that alignment
matches on is hashed from those parts. Fingerprints are stored in databases: what is hashed here
must never change, or the stored history of every existing conversation stops aligning.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..base.records import CORE_KEYS
from ..base.scaffold import (
    BLOCK_KEY,
    RECALL_MARKER,
    BlockSeal,
    is_own_block,
    own_block_rest,
    without_recall,
)
from ..base.tokens import content_text

# ``parts`` value that restores a ``None`` content exactly.
NULL_CONTENT = "null"

# (searchable content, exact parts JSON, tool calls JSON) of one message after the ingest steps.
Prepared = tuple[str, str | None, str | None]


@dataclass(frozen=True)
class Draft:
    """A host message's provider-visible parts on their way to a record: the content (a string,
    a list of parts or None) and its public tool calls (None when it has none). Each ingest step
    takes one and returns one (see ingest.Step)."""

    content: Any
    tool_calls: Any
    # The message's role (a step may treat a tool result differently); never part of the fingerprint,
    # which takes the role from the host message itself (fingerprint_of).
    role: str | None = None
    # The tool a tool result answers (the host's ``name``): our own lcm_* answers are never
    # externalized. Like the role, never part of the fingerprint.
    tool: str | None = None


def is_synthetic(message: Mapping[str, Any], seal: BlockSeal | None = None) -> bool:
    """Our own summary block coming back (keyed or sealed); never content that merely looks like one."""
    return is_own_block(message, seal)


def host_view(
    message: Mapping[str, Any], seal: BlockSeal | None = None
) -> Mapping[str, Any] | None:
    """The message as the host's own: None for our summary block, the host's text alone for a
    block the host merged a following user message into, else the message itself."""
    rest = own_block_rest(message, seal)
    if rest is None:
        return _without_recall(message, seal)
    if not rest:
        return None
    return {**{k: v for k, v in message.items() if k != BLOCK_KEY}, "content": rest}


def _without_recall(message: Mapping[str, Any], seal: BlockSeal | None) -> Mapping[str, Any]:
    """A user message without our proactive-recall block (proactive.py): the host appends it to
    the API copy it keeps as ``api_content`` (or a host may merge it into the content). Recalled
    history is never stored as the user's words; a copy left equal to the content goes."""
    if seal is None or message.get("role") != "user":
        return message
    content, api = message.get("content"), message.get("api_content")
    marked_content = isinstance(content, str) and RECALL_MARKER in content
    marked_api = isinstance(api, str) and RECALL_MARKER in api
    if not marked_content and not marked_api:
        return message
    recall = seal.recall()
    out = dict(message)
    if marked_content:
        out["content"] = without_recall(str(content), recall)
    if marked_api:
        out["api_content"] = without_recall(str(api), recall)
        if out["api_content"] == out.get("content"):
            del out["api_content"]
    return out


def is_storable(message: Any, seal: BlockSeal | None = None) -> bool:
    """A host message worth storing: a mapping with a role, not system, not only our own block."""
    return (
        isinstance(message, Mapping)
        and isinstance(message.get("role"), str)
        and message["role"] != "system"
        and host_view(message, seal) is not None
    )


def storable(messages: Sequence[Any], seal: BlockSeal | None = None) -> list[Mapping[str, Any]]:
    """The storable messages, each as the host's own (see :func:`host_view`)."""
    views = (host_view(m, seal) if is_storable(m, seal) else None for m in messages)
    return [v for v in views if v is not None]


def last_storable(
    messages: Sequence[Any], end: int | None = None, seal: BlockSeal | None = None
) -> int | None:
    """Index of the newest storable message before ``end``; scans back only as far as needed."""
    index = len(messages) if end is None else end
    while index > 0:
        index -= 1
        if is_storable(messages[index], seal):
            return index
    return None


def dump(value: Any) -> str:
    """JSON that always encodes: lone surrogates are escaped rather than lost."""
    try:
        text = json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return json.dumps(value, ensure_ascii=True, sort_keys=True, default=str)


def public(value: Any) -> Any:
    """Drop the host's private ``_keys`` from dicts inside tool calls."""
    if isinstance(value, list):
        return [public(v) for v in value]
    if isinstance(value, dict):
        return {k: public(v) for k, v in value.items() if not str(k).startswith("_")}
    return value


def safe_text(text: str) -> str:
    """``text`` as valid UTF-8: lone surrogates become ``?`` (the exact text is kept as JSON)."""
    try:
        text.encode("utf-8")
        return text  # the common case: no copy of a 50 MB string
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")


def draft_of(
    content: Any, tool_calls: Any, role: str | None = None, tool: str | None = None
) -> Draft:
    """The parts the ingest steps work on: the host's content, and its tool calls without the
    host's private ``_keys`` (None when there are none), the role and the tool's name."""
    return Draft(content, public(tool_calls) if tool_calls else None, role, tool)


def written(draft: Draft) -> Prepared:
    """The parts as stored: (searchable text, JSON of the exact content when it is not a plain
    UTF-8 string, JSON of the tool calls)."""
    raw = draft.content
    parts: str | None
    if raw is None:
        content, parts = "", NULL_CONTENT
    elif isinstance(raw, str):
        content = safe_text(raw)
        parts = None if content == raw else json.dumps(raw, ensure_ascii=True)
    else:
        content, parts = safe_text(content_text(raw)), dump(raw)
    return content, parts, None if draft.tool_calls is None else dump(draft.tool_calls)


def fingerprint_of(message: Mapping[str, Any], identity: Prepared) -> str:
    """Identity of a message's provider-visible parts (``identity``: its parts as written, with
    every payload as its placeholder); ``None`` and ``""`` content are one. Stored with every row:
    any change to what is hashed breaks the alignment of existing databases."""
    content, parts, tool_calls = identity
    key = [
        message.get("role"),
        parts if parts not in (None, NULL_CONTENT) else content,
        tool_calls,
        message.get("tool_call_id") or None,
    ]
    return hashlib.blake2b(dump(key).encode("utf-8"), digest_size=8).hexdigest()


def extra_fields(
    message: Mapping[str, Any], scrub: Callable[[Any], Any] | None = None
) -> str | None:
    """JSON of the host's other public fields, stored so the message comes back whole.

    Everything except the columns (role, content, tool calls, the call id; a tool
    result's ``name``) and the host's private ``_keys``: reasoning_content,
    reasoning_details, codex_reasoning_items, anthropic_content_blocks, reasoning,
    finish_reason, api_content, ... The host strips what a provider must not see
    before sending, as it does for the built-in compressor's kept messages. Not part
    of the fingerprint: the host may reload a message without some of them.
    """
    role = message.get("role")
    fields = {
        key: value
        for key, value in message.items()
        if isinstance(key, str)
        and not key.startswith("_")
        and key not in CORE_KEYS
        and not (key == "name" and role == "tool")
    }
    if not fields:
        return None
    if scrub is not None:  # the same redaction as the content (reasoning text may quote a key)
        fields = scrub(fields)
    try:
        return dump(fields)
    except (
        TypeError,
        ValueError,
    ):  # mixed key types, cycles: keep what can be kept, never fail ingest
        return dump({key: str(value) for key, value in fields.items()})

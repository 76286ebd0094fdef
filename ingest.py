"""From host messages to storable records, and which of them are new.

The host hands over overlapping copies of the same history many times a turn
(hooks, tool calls, compress, session end; in API/gateway mode the whole
history every turn). Which messages are new is decided by alignment, not by
position: the incoming list is matched against the conversation's stored tail
by message fingerprint, and only what follows the match is stored. Positional
cursors are what gave the reference systems their duplicate rows.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .patterns import MessagePatterns
from .payloads import PayloadGuard
from .records import MessageIn
from .tokens import content_text, count_message

# Our own summary messages start with this; they are never ingested back.
SYNTHETIC_MARKER = "[lcm:context"
SYNTHETIC_KEY = "_lcm_synthetic"
REPLAY_ROLES = frozenset({"user", "assistant", "tool"})
# Consecutive agreeing messages that confirm an alignment anchor.
WINDOW = 8
SHORT_TAIL = 64
LONG_TAIL = 5000


class MalformedMessage(ValueError):
    """A host message that cannot be stored (not a mapping, no role)."""


def is_synthetic(message: Mapping[str, Any]) -> bool:
    if message.get(SYNTHETIC_KEY):
        return True
    content = message.get("content")
    return isinstance(content, str) and content.startswith(SYNTHETIC_MARKER)


def storable(messages: Sequence[Any]) -> list[Mapping[str, Any]]:
    """The host messages worth storing: mappings with a role, not system, not ours."""
    out = []
    for m in messages:
        if isinstance(m, Mapping) and isinstance(m.get("role"), str) and m["role"] != "system" \
                and not is_synthetic(m):
            out.append(m)
    return out


def _dump(value: Any) -> str:
    """JSON that always encodes: lone surrogates are escaped rather than lost."""
    try:
        text = json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return json.dumps(value, ensure_ascii=True, sort_keys=True, default=str)


def _public(value: Any) -> Any:
    """Drop the host's private ``_keys`` from dicts inside tool calls."""
    if isinstance(value, list):
        return [_public(v) for v in value]
    if isinstance(value, dict):
        return {k: _public(v) for k, v in value.items() if not str(k).startswith("_")}
    return value


def _safe_text(text: str) -> str:
    return text.encode("utf-8", "replace").decode("utf-8")


class Normalizer:
    """Turns host messages into records; the payload guard runs first, always."""

    def __init__(self, guard: PayloadGuard, ignore: MessagePatterns | None = None) -> None:
        self.guard = guard
        self.ignore = ignore
        self.ignored_count = 0

    def _content(self, raw: Any) -> tuple[str, str | None]:
        """(searchable text, JSON of the exact content when it is not a plain UTF-8 string)."""
        if raw is None:
            return "", None
        if isinstance(raw, str):
            guarded = self.guard.guard_text(raw)
            safe = _safe_text(guarded)
            return safe, (None if safe == guarded else json.dumps(guarded, ensure_ascii=True))
        guarded_value = self.guard.guard_value(raw)
        return _safe_text(content_text(guarded_value)), _dump(guarded_value)

    def _tool_calls(self, raw: Any) -> str | None:
        if not raw:
            return None
        return _dump(self.guard.guard_value(_public(raw)))

    def fingerprint(self, message: Mapping[str, Any]) -> str:
        content, parts = self._content(message.get("content"))
        key = [message.get("role"), parts if parts is not None else content,
               self._tool_calls(message.get("tool_calls")), message.get("tool_call_id") or None]
        return hashlib.blake2b(_dump(key).encode("utf-8"), digest_size=16).hexdigest()

    def fingerprint_if_kept(self, message: Mapping[str, Any]) -> str | None:
        """The fingerprint, or None for a message an ignore pattern drops."""
        if self.ignore is not None and self.ignore.compiled:
            text = content_text(message.get("content"))
            if self.ignore.matches([text]):
                self.ignored_count += 1
                return None
        return self.fingerprint(message)

    def normalize(self, message: Mapping[str, Any], fingerprint: str | None = None) -> MessageIn:
        if not isinstance(message, Mapping) or not isinstance(message.get("role"), str):
            raise MalformedMessage("a message must be a mapping with a string 'role'")
        content, parts = self._content(message.get("content"))
        tool_calls = self._tool_calls(message.get("tool_calls"))
        name = message.get("name") or message.get("tool_name")
        host_ts = message.get("timestamp")
        return MessageIn(
            role=message["role"],
            content=content,
            parts=parts,
            tool_calls=tool_calls,
            tool_call_id=str(message["tool_call_id"]) if message.get("tool_call_id") else None,
            tool_name=str(name) if name else None,
            host_ts=float(host_ts) if isinstance(host_ts, int | float) else None,
            tokens=count_message({"content": content, "tool_calls": tool_calls}),
            fingerprint=fingerprint or self.fingerprint(message),
        )


class _FromEnd:
    """The incoming messages that are kept, newest first, as ``(index, fingerprint)``.

    Computed lazily: a usual turn fingerprints only the few newest messages, so
    the cost does not grow with the length of the history the host re-sends.
    Messages matching an ignore pattern are skipped here, before alignment.
    """

    def __init__(self, messages: Sequence[Mapping[str, Any]], normalizer: Normalizer) -> None:
        self.messages, self.normalizer = messages, normalizer
        self.kept: list[tuple[int, str]] = []
        self.next_index = len(messages) - 1

    def get(self, rank: int) -> tuple[int, str] | None:
        while len(self.kept) <= rank and self.next_index >= 0:
            index = self.next_index
            self.next_index -= 1
            fingerprint = self.normalizer.fingerprint_if_kept(self.messages[index])
            if fingerprint is not None:
                self.kept.append((index, fingerprint))
        return self.kept[rank] if rank < len(self.kept) else None

    def cached(self, index: int) -> str | None:
        for i, fp in self.kept:
            if i == index:
                return fp
        return None


def _agrees(incoming: _FromEnd, rank: int, tail: Sequence[str], j: int, minimum: int) -> bool:
    """Do the messages before incoming[rank] and tail[j] match, for up to WINDOW-1 pairs?"""
    matched = 0
    for k in range(1, WINDOW):
        before = incoming.get(rank + k)
        if before is None or j - k < 0:
            break
        if before[1] != tail[j - k]:
            return False
        matched += 1
    return matched >= minimum


def new_start(incoming: _FromEnd, tail: Sequence[str]) -> int:
    """Index of the first incoming message not already stored.

    First choice: the latest incoming message equal to the newest stored one,
    confirmed by up to ``WINDOW`` preceding messages. Else the latest incoming
    message equal to any stored tail message with at least one agreeing
    predecessor (the host dropped some of our newest rows). Else nothing in
    the incoming list is stored yet.
    """
    if not tail:
        return 0
    last = len(tail) - 1
    rank = 0
    while (item := incoming.get(rank)) is not None:
        if item[1] == tail[last] and _agrees(incoming, rank, tail, last, 0):
            return item[0] + 1
        rank += 1
    latest = {fp: j for j, fp in enumerate(tail)}
    rank = 0
    while (item := incoming.get(rank)) is not None:
        j = latest.get(item[1])
        if j is not None and _agrees(incoming, rank, tail, j, 1):
            return item[0] + 1
        rank += 1
    return 0


def plan_new(normalizer: Normalizer, messages: Sequence[Mapping[str, Any]],
             fresh_start: bool = False) -> Callable[[Callable[[int], list[str]]], list[MessageIn]]:
    """A selector for :meth:`Store.append`: given a tail loader, the new records.

    The short tail answers the usual turn; a longer one is read only when the
    host's list does not meet our newest rows (a rollback or a large batch).
    """
    candidates = storable(messages)

    def select(load_tail: Callable[[int], list[str]]) -> list[MessageIn]:
        incoming = _FromEnd(candidates, normalizer)
        start = 0
        if not fresh_start:
            tail = load_tail(SHORT_TAIL)
            start = new_start(incoming, tail)
            if start == 0 and len(tail) == SHORT_TAIL:
                start = new_start(incoming, load_tail(min(LONG_TAIL, len(candidates) + SHORT_TAIL)))
        records = []
        for index in range(start, len(candidates)):
            fingerprint = incoming.cached(index) or normalizer.fingerprint_if_kept(candidates[index])
            if fingerprint is not None:
                records.append(normalizer.normalize(candidates[index], fingerprint))
        return records

    return select

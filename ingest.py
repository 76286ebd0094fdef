"""From host messages to storable records: the ingest pipeline.

Each host message the alignment (align.py) finds new goes through one short pipeline:

    host message -> its host view and public parts (normalize.py) -> the steps, in order -> record

A step takes the message's parts (a :class:`~.normalize.Draft`) and returns them changed. Today the
only step is the payload guard (inline base64 goes to files); steps that redact secrets or move large
tool outputs out belong before it, so the guard's placeholders stay the last word on what is stored.
The message's fingerprint is hashed from the parts the steps return (normalize.fingerprint_of), with
every payload as its placeholder, so a message is the same message whether or not its file was written.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from .normalize import (
    Draft,
    Prepared,
    draft_of,
    extra_fields,
    fingerprint_of,
    host_view,
    safe_text,
    written,
)
from .patterns import MessagePatterns
from .payloads import PayloadGuard
from .records import MessageIn
from .scaffold import BlockSeal, classify
from .tokens import MESSAGE_OVERHEAD_TOKENS, content_text, count_tokens

# Messages whose prepared form is remembered between fingerprinting and storing.
MEMO_SIZE = 4096
# A message with a text content at least this long keeps its prepared form and fingerprint across
# host calls while its content is the very same (immutable) string object: the host re-sends it on
# every hook, tool call and compress, and each fresh preparation of 50 MB costs seconds.
LARGE_CHARS = 1_000_000
LARGE_MEMO_SIZE = 2


class MalformedMessage(ValueError):
    """A host message that cannot be stored (not a mapping, no role)."""


class Step(Protocol):
    """One step of the ingest pipeline: a message's parts in, its parts as they go on out.

    A step must be deterministic for the same input while its side effects succeed (the
    fingerprint is computed from its output), and must leave ``None`` tool calls None."""

    def __call__(self, draft: Draft) -> Draft: ...


class PayloadStep:
    """The payload guard as a step: each inline payload becomes its placeholder (payloads.py)."""

    def __init__(self, guard: PayloadGuard) -> None:
        self.guard = guard

    def __call__(self, draft: Draft) -> Draft:
        content = draft.content
        if isinstance(content, str):
            content = self.guard.guard_text(content)
        elif content is not None:
            content = self.guard.guard_value(content)
        tool_calls = None if draft.tool_calls is None else self.guard.guard_value(draft.tool_calls)
        return Draft(content, tool_calls)


def _identity_fields(message: Mapping[str, Any]) -> tuple[Any, Any]:
    return message.get("role"), message.get("tool_call_id")


@dataclass
class _Large:
    """A large text message's prepared form and fingerprint, valid while the host's dict still
    holds the same content string (strings are immutable: any edit is a new object), no tool
    calls, and the same role and tool_call_id (the other parts of the fingerprint)."""

    message: Mapping[str, Any]
    content: str
    fields: tuple[Any, Any]
    prepared: tuple[Prepared, Prepared]  # (to store, identity), as Normalizer._prepared gives them
    fingerprint: str | None = None

    def matches(self, message: Mapping[str, Any]) -> bool:
        return (message is self.message and message.get("content") is self.content
                and not message.get("tool_calls") and _identity_fields(message) == self.fields)


class Normalizer:
    """Turns host messages into records by running the ingest steps; the payload guard runs last, always."""

    def __init__(self, guard: PayloadGuard, ignore: MessagePatterns | None = None,
                 seal: BlockSeal | None = None, steps: Sequence[Step] = ()) -> None:
        self.guard = guard
        # ``steps`` run first, in order, then the payload guard (see the module docstring).
        self.steps: tuple[Step, ...] = (*steps, PayloadStep(guard))
        self.ignore = ignore
        self.seal = seal  # recognises our own summary blocks in what the host hands back
        self.ignored_count = 0
        self._memo: dict[int, tuple[Mapping[str, Any], Prepared, Prepared]] = {}
        self._prints: dict[int, tuple[Mapping[str, Any], str]] = {}
        self._large: dict[int, _Large] = {}

    def _prepared(self, message: Mapping[str, Any]) -> tuple[Prepared, Prepared]:
        """((content, parts, tool_calls) to store, the same as the message's identity) after
        the steps; computed once per message object while it is aligned and stored
        (once for good for a large text).

        The two differ only when a payload file could not be written: the payload is then
        stored inline, but the identity keeps the placeholder, so the message is recognised
        whether it comes back inline or with the placeholder once the write works.
        """
        hit = self._memo.get(id(message))
        if hit is not None and hit[0] is message:
            return hit[1], hit[2]
        large = self._large_hit(message)
        if large is not None:
            return large.prepared
        failures = self.guard.failures
        stored = self._prepare(message)
        identity = stored
        if self.guard.failures != failures:
            with self.guard.placeholders_only():
                identity = self._prepare(message)
        if len(self._memo) >= MEMO_SIZE:
            self._memo.clear()
        self._memo[id(message)] = (message, stored, identity)
        if identity is stored:  # a payload write that failed is retried on the next call
            self._remember_large(message, (stored, identity))
        return stored, identity

    def _prepare(self, message: Mapping[str, Any]) -> Prepared:
        draft = draft_of(self.view(message).get("content"), message.get("tool_calls"))
        for step in self.steps:
            draft = step(draft)
        return written(draft)

    def view(self, message: Mapping[str, Any]) -> Mapping[str, Any]:
        """What of ``message`` is the host's (our merged summary block left out)."""
        return host_view(message, self.seal) or message

    def _large_hit(self, message: Mapping[str, Any]) -> _Large | None:
        entry = self._large.get(id(message))
        return entry if entry is not None and entry.matches(message) else None

    def _remember_large(self, message: Mapping[str, Any], prepared: tuple[Prepared, Prepared]) -> None:
        text = message.get("content")
        if isinstance(text, str) and len(text) >= LARGE_CHARS and not message.get("tool_calls"):
            if len(self._large) >= LARGE_MEMO_SIZE:
                self._large.pop(next(iter(self._large)))
            self._large[id(message)] = _Large(message, text, _identity_fields(message), prepared)

    def forget(self) -> None:
        """Drop the memo (it holds references to host messages)."""
        self._memo.clear()
        self._prints.clear()

    def fingerprint(self, message: Mapping[str, Any]) -> str:
        """Identity of a message's provider-visible parts; ``None`` and ``""`` content are one.

        Remembered with the prepared form: one ingest asks for the newest message's
        fingerprint several times, and for a 50 MB message each costs a JSON dump and a hash.
        """
        hit = self._prints.get(id(message))
        if hit is not None and hit[0] is message:
            return hit[1]
        large = self._large_hit(message)
        if large is not None and large.fingerprint is not None:
            return large.fingerprint
        fingerprint = fingerprint_of(message, self._prepared(message)[1])
        if len(self._prints) >= MEMO_SIZE:
            self._prints.clear()
        self._prints[id(message)] = (message, fingerprint)
        if (large := self._large_hit(message)) is not None:
            large.fingerprint = fingerprint
        return fingerprint

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
        content, parts, tool_calls = self._prepared(message)[0]
        name = message.get("name") or message.get("tool_name")
        host_ts = message.get("timestamp")
        return MessageIn(
            role=safe_text(message["role"]),
            content=content,
            parts=parts,
            tool_calls=tool_calls,
            tool_call_id=safe_text(str(message["tool_call_id"])) if message.get("tool_call_id") else None,
            tool_name=safe_text(str(name)) if name else None,
            host_ts=float(host_ts) if isinstance(host_ts, int | float) else None,
            tokens=MESSAGE_OVERHEAD_TOKENS + count_tokens(content) + count_tokens(tool_calls or ""),
            fingerprint=fingerprint or self.fingerprint(message),
            synthetic=classify(self.view(message)),
            extra=extra_fields(message),
        )


"""From host messages to storable records: the ingest pipeline.

Each host message the alignment (align.py) finds new goes through one short pipeline:

    host message -> its host view and public parts (normalize.py) -> the steps, in order -> record

A step takes the message's parts (a :class:`~.normalize.Draft`) and returns them changed. The payload
guard (inline base64 goes to files) is always the last step; the optional steps (secrets redacted,
large tool outputs moved to files) run before it, so the guard's placeholders stay the last word on
what is stored. The message's fingerprint is hashed from the parts the steps return
(normalize.fingerprint_of), with every payload as its placeholder, so a message is the same message
whether or not its file was written.

Turning an optional step on or off changes the form a message is stored in, and so its fingerprint:
the host's copy of a message stored before the change would no longer be recognised, and stored
again. So a message the optional steps change also has *alternate* fingerprints (its form without
them; with them, when they are off now but were used on this database), and alignment takes the
one the store holds (:meth:`Normalizer.alternates`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

from ..base.patterns import MessagePatterns
from ..base.payloads import PayloadGuard
from ..base.records import MessageIn, PayloadRef
from ..base.scaffold import BlockSeal, classify
from ..base.sensitive import Policy, Redactor
from ..base.times import message_time
from ..base.tokens import MESSAGE_OVERHEAD_TOKENS, content_text, count_tokens
from ..store import Store, ref_key
from .hostlist import HostList
from .normalize import (
    Draft,
    Prepared,
    draft_of,
    dump,
    extra_fields,
    fingerprint_of,
    host_view,
    safe_text,
    written,
)

# Messages whose prepared form is remembered between fingerprinting and storing. Cleared after
# every selection (:meth:`Normalizer.forget`); it must hold a whole bulk batch (an importer's or a
# host's 10,000-message list), else alignment's backward walk evicts the oldest before the records
# are built forwards and every message is prepared and fingerprinted twice.
MEMO_SIZE = 1 << 16
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
    fingerprint is computed from its output), a fixed point (its output given again comes back
    unchanged: the prompt we build from stored rows is fingerprinted too), must return the very
    ``draft`` it was given when it changes nothing, and must leave ``None`` tool calls None."""

    def __call__(self, draft: Draft) -> Draft: ...


class RedactStep:
    """Secrets out of the content and the tool calls (sensitive.py), before any other step sees them:
    a large output's payload file gets the redacted text too."""

    def __init__(self, redactor: Redactor) -> None:
        self.redactor = redactor

    def __call__(self, draft: Draft) -> Draft:
        content = self.redactor.redact_value(draft.content)
        calls = None if draft.tool_calls is None else self._calls(draft.tool_calls)
        if content is draft.content and calls is draft.tool_calls:
            return draft
        return replace(draft, content=content, tool_calls=calls)

    def _calls(self, calls: Any) -> Any:
        """Each call's arguments redacted as JSON (they must stay a JSON object for the provider),
        every other string as text; the very same list when nothing changed."""
        if not isinstance(calls, list):
            return self.redactor.redact_value(calls)
        out = [self._call(call) for call in calls]
        return calls if all(a is b for a, b in zip(out, calls, strict=True)) else out

    def _call(self, call: Any) -> Any:
        function = call.get("function") if isinstance(call, Mapping) else None
        arguments = function.get("arguments") if isinstance(function, Mapping) else None
        if not isinstance(arguments, str):
            return self.redactor.redact_value(call)
        assert isinstance(call, Mapping) and isinstance(function, Mapping)
        cleaned = self.redactor.redact_json_text(arguments)
        rest = self.redactor.redact_value({k: v for k, v in call.items() if k != "function"})
        named = self.redactor.redact_value({k: v for k, v in function.items() if k != "arguments"})
        if cleaned is arguments and _same(rest, call) and _same(named, function):
            return call
        return {**call, **rest, "function": {**function, **named, "arguments": cleaned}}


def _same(new: Mapping[str, Any], old: Mapping[str, Any]) -> bool:
    """Is every value of ``new`` the very object ``old`` holds under its key (nothing redacted)?"""
    return all(new[k] is old[k] for k in new)


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
        return replace(draft, content=content, tool_calls=tool_calls)


def import_normalizer(payload_dir: Path, store: Store, redact_patterns: str | None) -> Normalizer:
    """The normalizer an import writes with: the payload guard, and redaction when the settings
    ask for it (``redact_patterns``; None: off), keyed by the target's own keys so placeholders
    and refs match what live ingest writes there."""
    guard = PayloadGuard(payload_dir, key=ref_key(store))
    if redact_patterns is None:
        return Normalizer(guard)
    redactor = Redactor(Policy.parse(redact_patterns), store.secret("redaction"))
    store.mark("redaction")
    return Normalizer(guard, steps=[RedactStep(redactor)], redactor=redactor)


def call_arguments(tool_calls: Any) -> list[str]:
    """The argument texts of a message's tool calls (what an ignore pattern also looks at)."""
    if not isinstance(tool_calls, list):
        return []
    found = []
    for call in tool_calls:
        function = call.get("function") if isinstance(call, Mapping) else None
        arguments = function.get("arguments") if isinstance(function, Mapping) else None
        if isinstance(arguments, str):
            found.append(arguments)
        elif arguments is not None:
            found.append(dump(arguments))
    return found


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
    changed: bool = False  # an optional step changed it (Normalizer.alternates)
    kept: tuple[PayloadRef, ...] = ()  # the payloads its preparation kept (its grants)

    def matches(self, message: Mapping[str, Any]) -> bool:
        return (
            message is self.message
            and message.get("content") is self.content
            and not message.get("tool_calls")
            and _identity_fields(message) == self.fields
        )


class Normalizer:
    """Turns host messages into records by running the ingest steps; the payload guard runs last, always."""

    def __init__(
        self,
        guard: PayloadGuard,
        ignore: MessagePatterns | None = None,
        seal: BlockSeal | None = None,
        steps: Sequence[Step] = (),
        shadow: Sequence[Step] = (),
        redactor: Redactor | None = None,
    ) -> None:
        self.guard = guard
        # Also scrubs the host's other fields (reasoning text); the content goes through RedactStep.
        self.redactor = redactor
        # ``steps`` (optional) run first, in order, then the payload guard (see the module docstring).
        self.optional: tuple[Step, ...] = tuple(steps)
        self.steps: tuple[Step, ...] = (*steps, PayloadStep(guard))
        # Steps that are off now but were used on this database: run only to compute an alternate
        # fingerprint, so they must write nothing.
        self.shadow: tuple[Step, ...] = (*shadow, PayloadStep(guard)) if shadow else ()
        self._changed: dict[int, Mapping[str, Any]] = {}
        self._ignore_memo: dict[int, tuple[Mapping[str, Any], bool]] = {}
        self._alternates: dict[int, tuple[Mapping[str, Any], tuple[str, ...]]] = {}
        self.ignore = ignore
        self.seal = seal  # recognises our own summary blocks in what the host hands back
        self.ignored_count = 0
        self._memo: dict[int, tuple[Mapping[str, Any], Prepared, Prepared]] = {}
        # The payloads each prepared message's steps kept: its grants (payloads.PayloadGuard.collecting).
        self._kept: dict[int, tuple[Mapping[str, Any], tuple[PayloadRef, ...]]] = {}
        self._prints: dict[int, tuple[Mapping[str, Any], str]] = {}
        self._large: dict[int, _Large] = {}
        # The host's list of the call in progress (:meth:`reading`): views are taken from it.
        self._host: HostList | None = None
        # tool_call_id -> the tool it called, from the assistant messages prepared: a tool result
        # without its ``name`` (the OpenAI shape) is still known as one of ours, never externalized.
        self._call_tools: dict[str, str] = {}

    @contextlib.contextmanager
    def reading(self, host: HostList) -> Iterator[HostList]:
        """While the core works on ``host`` (one host call), each of its messages is viewed as the
        host's own through it, so the call normalizes every message once (hostlist.py)."""
        before, self._host = self._host, host
        try:
            yield host
        finally:
            self._host = before

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
        with self.guard.collecting() as kept:
            stored = self._prepare(message)
        identity = stored
        if self.guard.failures != failures:
            with self.guard.placeholders_only():
                identity = self._prepare(message)
        if len(self._memo) >= MEMO_SIZE:
            self._memo.clear()
            self._kept.clear()
        grants = tuple(dict.fromkeys(kept))
        self._memo[id(message)] = (message, stored, identity)
        self._kept[id(message)] = (message, grants)
        if identity is stored:  # a payload write that failed is retried on the next call
            self._remember_large(message, (stored, identity), grants)
        return stored, identity

    def _grants(self, message: Mapping[str, Any]) -> tuple[PayloadRef, ...]:
        """The payloads preparing ``message`` kept (call after :meth:`_prepared`)."""
        hit = self._kept.get(id(message))
        if hit is not None and hit[0] is message:
            return hit[1]
        large = self._large_hit(message)
        return large.kept if large is not None else ()

    def _prepare(self, message: Mapping[str, Any], steps: Sequence[Step] | None = None) -> Prepared:
        role = message.get("role")
        tool = message.get("name") or message.get("tool_name")
        if role == "assistant":
            self._learn_calls(message.get("tool_calls"))
        elif role == "tool" and not tool:
            tool = self._called_tool(message.get("tool_call_id"))
        original = draft = draft_of(
            self.view(message).get("content"),
            message.get("tool_calls"),
            role if isinstance(role, str) else None,
            tool if isinstance(tool, str) else None,
        )
        for step in self.steps if steps is None else steps:
            if step is self.steps[-1] and steps is None and draft is not original:
                self._changed[id(message)] = message  # an optional step changed it: see alternates
            draft = step(draft)
        return written(draft)

    def _learn_calls(self, calls: Any) -> None:
        for call in calls if isinstance(calls, list) else ():
            function = call.get("function") if isinstance(call, Mapping) else None
            name = function.get("name") if isinstance(function, Mapping) else None
            if isinstance(name, str) and isinstance(call.get("id"), str):
                if len(self._call_tools) >= MEMO_SIZE:
                    self._call_tools.pop(next(iter(self._call_tools)))
                self._call_tools[call["id"]] = name

    def _called_tool(self, call_id: Any) -> str | None:
        """The tool a nameless tool result answers: its call as prepared before, else as the
        host's list of this call holds it (an assistant message already stored is not prepared
        again)."""
        if not isinstance(call_id, str):
            return None
        if call_id not in self._call_tools and self._host is not None:
            for message in reversed(self._host.messages):
                if isinstance(message, Mapping) and message.get("role") == "assistant":
                    calls = message.get("tool_calls")
                    if isinstance(calls, list) and any(
                        isinstance(c, Mapping) and c.get("id") == call_id for c in calls
                    ):
                        self._learn_calls(calls)
                        break
        return self._call_tools.get(call_id)

    def stored_form(self, message: Mapping[str, Any]) -> Prepared:
        """(content, parts, tool calls) as ``message`` is stored, running the steps once (memoized)."""
        return self._prepared(message)[0]

    def alternates(self, message: Mapping[str, Any]) -> tuple[str, ...]:
        """The other fingerprints ``message`` may be stored under (see the module docstring):
        its form without the optional steps when they changed it, and its form with the shadow
        steps when those change it. Empty (and free) when no optional step is configured."""
        if not self.optional and not self.shadow:
            return ()
        hit = self._alternates.get(id(message))
        if hit is not None and hit[0] is message:
            return hit[1]
        primary = self.fingerprint(message)
        forms: list[Sequence[Step]] = []
        large = self._large_hit(message)
        if self._changed.get(id(message)) is message or (large is not None and large.changed):
            forms.append(self.steps[-1:])
        if self.shadow:
            forms.append(self.shadow)
        found: list[str] = []
        with self.guard.placeholders_only():
            for steps in forms:
                other = fingerprint_of(message, self._prepare(message, steps))
                if other != primary and other not in found:
                    found.append(other)
        if len(self._alternates) >= MEMO_SIZE:
            self._alternates.clear()
        self._alternates[id(message)] = (message, tuple(found))
        return tuple(found)

    def fingerprints(self, message: Mapping[str, Any]) -> tuple[str, ...]:
        """Every fingerprint ``message`` may be stored under, its own first."""
        return (self.fingerprint(message), *self.alternates(message))

    def scrub(self, value: Any) -> Any:
        """``value`` (a text, or a JSON-like value) redacted when redaction is on: what an import
        writes beside the messages (summaries, private fields) gets the same treatment."""
        return self.redactor.redact_value(value) if self.redactor is not None else value

    def view(self, message: Mapping[str, Any]) -> Mapping[str, Any]:
        """What of ``message`` is the host's (our merged summary block left out)."""
        known = self._host.view_of(message) if self._host is not None else None
        return known or host_view(message, self.seal) or message

    def _large_hit(self, message: Mapping[str, Any]) -> _Large | None:
        entry = self._large.get(id(message))
        return entry if entry is not None and entry.matches(message) else None

    def _remember_large(
        self,
        message: Mapping[str, Any],
        prepared: tuple[Prepared, Prepared],
        kept: tuple[PayloadRef, ...],
    ) -> None:
        text = message.get("content")
        if isinstance(text, str) and len(text) >= LARGE_CHARS and not message.get("tool_calls"):
            if len(self._large) >= LARGE_MEMO_SIZE:
                self._large.pop(next(iter(self._large)))
            changed = self._changed.get(id(message)) is message
            self._large[id(message)] = _Large(
                message, text, _identity_fields(message), prepared, changed=changed, kept=kept
            )

    def forget(self, keep: bool = False) -> None:
        """Drop the memo (it holds references to host messages); ``keep``: not yet, as the next
        chunk of the same list follows (a bulk batch stored in several transactions), and
        alignment prepared all of it once already."""
        if keep:
            return
        self._memo.clear()
        self._kept.clear()
        self._prints.clear()
        self._changed.clear()
        self._alternates.clear()
        self._ignore_memo.clear()

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

    def fingerprint_if_kept(
        self, message: Mapping[str, Any], caller: Mapping[str, Any] | None = None
    ) -> str | None:
        """The fingerprint, or None for a message an ignore pattern drops: its text or the
        arguments of one of its tool calls matches, or it is the result of such a call (``caller``:
        the assistant message a tool result answers), so no result is kept without its call."""
        if self.ignoring and (
            self._ignored(message)
            or (message.get("role") == "tool" and caller is not None and self._ignored(caller))
        ):
            self.ignored_count += 1
            return None
        return self.fingerprint(message)

    @property
    def ignoring(self) -> bool:
        """Are there message patterns to drop messages by?"""
        return self.ignore is not None and bool(self.ignore.compiled)

    def _ignored(self, message: Mapping[str, Any]) -> bool:
        assert self.ignore is not None
        hit = self._ignore_memo.get(id(message))
        if hit is not None and hit[0] is message:
            return hit[1]
        texts = [content_text(message.get("content")), *call_arguments(message.get("tool_calls"))]
        ignored = self.ignore.matches(texts)
        if len(self._ignore_memo) >= MEMO_SIZE:
            self._ignore_memo.clear()
        self._ignore_memo[id(message)] = (message, ignored)
        return ignored

    def normalize(self, message: Mapping[str, Any], fingerprint: str | None = None) -> MessageIn:
        if not isinstance(message, Mapping) or not isinstance(message.get("role"), str):
            raise MalformedMessage("a message must be a mapping with a string 'role'")
        content, parts, tool_calls = self._prepared(message)[0]
        name = message.get("name") or message.get("tool_name")
        view = self.view(message)  # once: it re-checks the message for our own block
        return MessageIn(
            role=safe_text(message["role"]),
            content=content,
            parts=parts,
            tool_calls=tool_calls,
            tool_call_id=safe_text(str(message["tool_call_id"]))
            if message.get("tool_call_id")
            else None,
            tool_name=safe_text(str(name)) if name else None,
            host_ts=message_time(message),
            tokens=MESSAGE_OVERHEAD_TOKENS + count_tokens(content) + count_tokens(tool_calls or ""),
            fingerprint=fingerprint or self.fingerprint(message),
            synthetic=classify(view),
            extra=extra_fields(
                view, self.redactor.redact_value if self.redactor is not None else None
            ),
            payload_refs=self._grants(message),
        )

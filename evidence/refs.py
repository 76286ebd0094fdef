"""Exact references to stored messages, and reading them within the caller's reach.

A ref is a stored message id with an optional character span of its text. The evidence tools
take refs from the model (``"812"``, ``812``, ``"812:10-80"``, ``"m812"``,
``{"store_id": 812, "start": 10, "end": 80}``); a malformed one gets a message saying which forms
work. Reading goes through ``Store.messages_in_reach``: a row of a conversation outside the
caller's reach is filtered out by the query itself, and its ref is reported exactly like an id
that does not exist, so another person's ids can neither be read nor probed.

Each read is bounded (limits.py): a line's dates are resolved in its first characters only, the
whole call reads a bounded total, and a line says how far it was read (``read``); ``limits_note``
is the answer's honest account of what was left unread.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .limits import (
    MAX_CALL_CHARS,
    MAX_LINE_CHARS,
    MAX_LINE_DATES,
    MAX_NOTED,
    NOTE,
    ReadingBudget,
    cut_text,
)
from .timeexpr import DateMention

if TYPE_CHECKING:
    from ..store import Store

MAX_REFS = 64
_FORMS = 'use 812, "812", "m812", "812:10-80" or {"store_id": 812, "start": 10, "end": 80}'
_TEXT_REF = re.compile(
    r"^\s*(?:m|store_id[:=]|#)?\s*(\d{1,18})\s*(?::\s*(\d{1,9})\s*-\s*(\d{1,9}))?\s*$", re.I
)
NOT_FOUND = "not found in your reach"


class RefError(ValueError):
    """A ref the caller wrote that cannot be read; the text says which forms work."""


@dataclass(frozen=True)
class Ref:
    """A stored message id, optionally narrowed to the characters [start, end) of its text."""

    store_id: int
    start: int | None = None
    end: int | None = None

    @property
    def label(self) -> str:
        return (
            str(self.store_id) if self.start is None else f"{self.store_id}:{self.start}-{self.end}"
        )

    def covers(self, other: Ref) -> bool:
        """This ref shows everything ``other`` does (same message, wider or equal span)."""
        if other.store_id != self.store_id:
            return False
        if self.start is None:
            return True
        return (
            other.start is not None
            and self.start <= other.start
            and (other.end or 0) <= (self.end or 0)
        )


@dataclass(frozen=True)
class Missing:
    """A ref that gave no line, and why (not found and out of reach read the same)."""

    ref: str
    reason: str

    def as_dict(self) -> dict[str, str]:
        return {"ref": self.ref, "reason": self.reason}


@dataclass(frozen=True)
class Line:
    """The exact text a ref points at, with where and when it was said and the dates in it
    (spans relative to ``text``, relative phrases resolved against ``at``)."""

    ref: Ref
    conversation_id: int
    session_id: str
    role: str
    at: float
    text: str
    dates: tuple[DateMention, ...]
    length: int  # characters of the whole message, so a span can be told from the whole
    read: int | None = (
        None  # characters of ``text`` read for dates (numbers, words); None: all of it
    )
    cut: str = ""  # why it was read only in part (limits.BY_*)

    @property
    def examined(self) -> str:
        """The part of ``text`` that was read: what a check may rely on."""
        return self.text if self.read is None else self.text[: self.read]

    def cut_reason(self) -> str:
        """Why this line's unread part is unknown and how to have it read ("" when read whole)."""
        if self.read is None:
            return ""
        return cut_text(
            self.ref.label,
            self.ref.store_id,
            self.ref.start or 0,
            self.read,
            len(self.text),
            self.cut,
        )


def _span(store_id: int, start: Any, end: Any, shown: str) -> Ref:
    if start is None and end is None:
        return Ref(store_id)
    if (
        isinstance(start, bool)
        or isinstance(end, bool)
        or not isinstance(start, int)
        or not isinstance(end, int)
    ):
        raise RefError(f"ref {shown}: start and end must both be integers; {_FORMS}")
    if start < 0 or end <= start:
        raise RefError(f"ref {shown}: the span needs 0 <= start < end; {_FORMS}")
    return Ref(store_id, start, end)


def parse_ref(value: object) -> Ref:
    """One ref in any accepted form; RefError (a ValueError) with the forms otherwise."""
    shown = repr(value)[:60]
    if isinstance(value, Ref):
        return value
    if isinstance(value, bool):
        raise RefError(f"ref {shown} is not a store id; {_FORMS}")
    if isinstance(value, int):
        if value <= 0:
            raise RefError(f"ref {shown}: a store id is a positive integer; {_FORMS}")
        return Ref(value)
    if isinstance(value, float) and value.is_integer():
        return parse_ref(int(value))
    if isinstance(value, str):
        match = _TEXT_REF.match(value)
        if not match or int(match.group(1)) <= 0:
            raise RefError(f"ref {shown} is not a store id; {_FORMS}")
        start = int(match.group(2)) if match.group(2) is not None else None
        end = int(match.group(3)) if match.group(3) is not None else None
        return _span(int(match.group(1)), start, end, shown)
    if isinstance(value, dict):
        raw_id = value.get("store_id", value.get("id"))
        if raw_id is None or isinstance(raw_id, dict):
            raise RefError(f"ref {shown} has no store_id; {_FORMS}")
        base = parse_ref(raw_id)
        if base.start is not None:
            return base
        return _span(base.store_id, value.get("start"), value.get("end"), shown)
    raise RefError(f"ref {shown} is a {type(value).__name__}; {_FORMS}")


def _items(values: object) -> list[object]:
    if values is None or values == "":
        return []
    if isinstance(values, str) and ("," in values or " " in values.strip()):
        return [v for v in re.split(r"[,\s]+", values) if v]
    if isinstance(values, list | tuple):
        return list(values)
    return [values]


def parse_refs(values: object) -> list[Ref]:
    """Refs in order, repeats dropped; the first bad one raises RefError naming it."""
    refs, bad = read_refs(values)
    if bad:
        raise RefError(bad[0].reason)
    return refs


def read_refs(values: object) -> tuple[list[Ref], list[Missing]]:
    """Lenient parsing for a pack: the good refs, and each bad one as a ``Missing`` entry."""
    items = _items(values)
    if len(items) > MAX_REFS:
        raise RefError(f"at most {MAX_REFS} refs per call; got {len(items)}")
    refs: list[Ref] = []
    bad: list[Missing] = []
    for item in items:
        try:
            ref = parse_ref(item)
        except RefError as exc:
            bad.append(Missing(repr(item)[:60], str(exc)))
            continue
        if ref not in refs:
            refs.append(ref)
    return refs, bad


def message_text(content: str, tool_calls: str | None) -> str:
    """What a stored row says: its text, or its tool calls when it has no text."""
    return content if content or not tool_calls else tool_calls


def hydrate_all(
    store: Store,
    refs: Sequence[Ref],
    reach: Sequence[int] | None,
    tz: str = "",
    work: ReadingBudget | None = None,
) -> tuple[list[Line], list[Missing]]:
    """The lines of ``refs`` readable within ``reach`` (conversation ids; None = the whole store),
    in the order of ``refs``, and the refs that gave none. ``work`` is the call's reading budget
    (a fresh one when None), so every read is bounded; a ref read before in the call is reused."""
    work = ReadingBudget() if work is None else work
    rows = {m.id: m for m in store.messages_in_reach(sorted({r.store_id for r in refs}), reach)}
    lines: list[Line] = []
    missing: list[Missing] = []
    for ref in refs:
        row = rows.get(ref.store_id)
        if row is None:
            missing.append(Missing(ref.label, NOT_FOUND))
            continue
        whole = message_text(row.content, row.tool_calls)
        if ref.start is not None and ref.start >= len(whole):
            missing.append(
                Missing(ref.label, f"span starts beyond the message ({len(whole)} characters)")
            )
            continue
        shown_ref = (
            ref
            if ref.start is None
            else Ref(ref.store_id, ref.start, min(ref.end or 0, len(whole)))
        )
        key = (shown_ref, row.conversation_id, tz)
        known = work.lines.get(key)
        if isinstance(known, Line):
            lines.append(known)
            continue
        text = whole if ref.start is None else whole[shown_ref.start : shown_ref.end]
        scan = work.scan(text, row.created_at, tz)
        line = Line(
            shown_ref,
            row.conversation_id,
            row.session_id,
            row.role,
            row.created_at,
            text,
            scan.dates,
            len(whole),
            scan.read,
            scan.by,
        )
        work.lines[key] = line
        lines.append(line)
    return lines, missing


def limits_note(lines: Iterable[Line], **extra: Any) -> dict[str, Any] | None:
    """The ``limits`` of an answer: each line read only in part (how far, of how much, and why),
    with ``extra`` (what else a limit cut); None when nothing was cut."""
    cut = list({line.ref.label: line for line in lines if line.read is not None}.values())
    extra = {k: v for k, v in extra.items() if v}
    if not cut and not extra:
        return None
    note: dict[str, Any] = {
        "lines_cut": len(cut),
        "lines": [
            {
                "ref": line.ref.label,
                "read_chars": line.read,
                "chars": len(line.text),
                "by": line.cut,
            }
            for line in cut[:MAX_NOTED]
        ],
    }
    note.update(extra)
    note["max"] = {
        "line_chars": MAX_LINE_CHARS,
        "call_chars": MAX_CALL_CHARS,
        "line_dates": MAX_LINE_DATES,
    }
    note["note"] = NOTE
    return note


def hydrate(
    store: Store, refs: Sequence[Ref], reach: Sequence[int] | None, tz: str = ""
) -> list[Line]:
    """The lines of ``refs`` within ``reach``; refs beyond it give no line (see ``hydrate_all``)."""
    return hydrate_all(store, refs, reach, tz)[0]


def dedupe(lines: Iterable[Line]) -> list[Line]:
    """Lines without repeats: a ref another line covers (same message, wider span) is dropped."""
    kept: list[Line] = []
    for line in lines:
        if any(other.ref.covers(line.ref) for other in kept):
            continue
        kept = [other for other in kept if not line.ref.covers(other.ref)]
        kept.append(line)
    return kept

"""The evidence pack: the exact lines a set of refs points at, bounded, with their times.

A pack carries no prose of ours: each line is the stored text (or the cited span of it) with
its store id, session, role, ISO time and the dates it mentions resolved against that time.
Lines are deduplicated (a span inside a cited whole message goes), ordered by time, and cut
to ``budget_tokens`` (counted as the model will see them, with tokens.py); a line that does not
fit whole is cut at the end and its span says exactly which characters are shown. Refs that
gave nothing are listed under ``missing``; refs cut for the budget under ``omitted``.

With a question, ``sufficiency`` says which of its needs (a date, a number, each named entity)
the lines cover. It is a coverage check that fails closed, not a proof the answer is there.

The work is bounded (limits.py): a line's dates are resolved in its read part only (a line item
whose text goes past it says ``read_chars``, and the pack's ``limits`` names it), and a line
far longer than the budget could hold is cut before its tokens are counted.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from ..base.tokens import count_tokens
from .limits import MAX_CHARS_PER_TOKEN, ReadingBudget
from .refs import Line, Missing, Ref, dedupe, hydrate_all, limits_note, read_refs

if TYPE_CHECKING:
    from ..store import Store

DEFAULT_BUDGET = 1500
MIN_BUDGET, MAX_BUDGET = 100, 8000
_MIN_CUT_TOKENS = 24

_DATE_NEED = re.compile(
    r"\b(when|what (?:date|day|year|month|time)|which (?:date|day|year|month)|how long|"
    r"since when|how (?:many|much) (?:days|weeks|months|years)|before or after|first|last time)\b",
    re.I,
)
_NUMBER_NEED = re.compile(
    r"\b(how (?:many|much|old|far|long)|what (?:number|amount|price|age)|count|total|sum)\b", re.I
)
_NUMBER = re.compile(
    r"(?<![\w.])\d[\d,]*(?:\.\d+)?|\b(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|"
    r"twelve|twenty|thirty|forty|fifty|hundred|thousand|dozen)\b",
    re.I,
)
_QUOTED = re.compile(r"\"([^\"]{2,60})\"|'([^']{2,60})'")
_NAME = re.compile(r"\b([A-Z][\w'-]*(?:\s+[A-Z][\w'-]*)*)")
_NOT_NAMES = frozenset(
    (
        "what when where which who whom whose why how did does do is are was were has have had "
        "can could would should will the a an i in on at of for to and or if my your our their "
        "his her its he she they we you me them us it this that these those there then so but yes no "
        "user assistant january february march april may june july august september october november "
        "december monday tuesday wednesday thursday friday saturday sunday"
    ).split()
)


def iso(at: float) -> str:
    """An epoch time as ISO 8601 UTC (seconds)."""
    try:
        return datetime.fromtimestamp(at, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    except (OverflowError, OSError, ValueError):
        return str(at)


def line_dict(
    line: Line, text: str | None = None, end: int | None = None, session: bool = True
) -> dict[str, Any]:
    """A line as the tools show it; ``text``/``end`` when the budget cut it short. ``session``
    False leaves out the session id: the line before it, in time order, named the same one."""
    start = line.ref.start or 0
    shown = line.text if text is None else text
    item: dict[str, Any] = {
        "ref": line.ref.label,
        "store_id": line.ref.store_id,
        "role": line.role,
        **({"session_id": line.session_id} if session else {}),
        "at": iso(line.at),
        "text": shown,
    }
    if line.ref.start is not None or text is not None:
        item["span"] = [start, start + len(shown) if end is None else end]
    dates = [m.as_dict() for m in line.dates if m.end <= len(shown)]
    if dates:
        item["dates"] = dates
    if line.read is not None and len(shown) > line.read:
        item["read_chars"] = (
            line.read
        )  # dates were resolved in this many characters only (limits.py)
    if text is not None:
        item["truncated"] = True
    return item


def _tokens(item: dict[str, Any]) -> int:
    return count_tokens(json.dumps(item, ensure_ascii=False)) + 1


def _cut(line: Line, room: int, session: bool = True) -> dict[str, Any] | None:
    """The longest prefix of the line whose item fits ``room`` tokens (None: too little room).
    No prefix longer than ``room`` x MAX_CHARS_PER_TOKEN characters can fit, so the search starts
    below that: each step counts a prefix, and a 300 KB line would cost a count of 300 KB a step."""
    if room < _MIN_CUT_TOKENS:
        return None
    low, high, best = 1, min(len(line.text) - 1, room * MAX_CHARS_PER_TOKEN), None
    while low <= high:
        mid = (low + high) // 2
        item = line_dict(line, line.text[:mid], session=session)
        if _tokens(item) <= room:
            best, low = item, mid + 1
        else:
            high = mid - 1
    return best


def names(question: str) -> list[str]:
    """The named entities of a question: quoted phrases and capitalised words that are not
    question words (the first word of the question only when it is not one)."""
    found = [a or b for a, b in _QUOTED.findall(question)]
    seen = {
        f.lower() for f in found
    }  # a set: a text of a thousand names is not a million comparisons
    for match in _NAME.finditer(question):
        words = [w for w in match.group(1).split() if w.lower().strip("'s") not in _NOT_NAMES]
        phrase = " ".join(words).removesuffix("'s")
        if len(phrase) >= 2 and phrase.lower() not in seen:
            found.append(phrase)
            seen.add(phrase.lower())
    return found


def sufficiency(question: str, lines: Sequence[Line]) -> dict[str, Any]:
    """Which of the question's needs the lines cover; ``sufficient`` only when all are."""
    text = "\n".join(line.text for line in lines).lower()
    needs: dict[str, bool] = {}
    if _DATE_NEED.search(question):
        needs["date"] = any(line.dates for line in lines)
    if _NUMBER_NEED.search(question):
        needs["number"] = bool(_NUMBER.search(text))
    for name in names(question):
        needs[f"entity:{name}"] = name.lower() in text
    lacking = [need for need, covered in needs.items() if not covered]
    return {
        "needs": needs,
        "lacking": lacking,
        "sufficient": bool(lines) and not lacking,
        "note": "coverage of the question's needs by the cited lines, not proof of the answer",
    }


@dataclass(frozen=True)
class Pack:
    """The tool answer of lcm_evidence_pack (``as_dict``)."""

    lines: tuple[dict[str, Any], ...]
    missing: tuple[Missing, ...]
    omitted: tuple[str, ...]
    budget_tokens: int
    used_tokens: int
    sufficiency: dict[str, Any] | None
    hydrated: tuple[Line, ...]
    limits: dict[str, Any] | None = None  # what a work limit left unread (limits.py); None: nothing

    def as_dict(self) -> dict[str, Any]:
        answer: dict[str, Any] = {
            "lines": list(self.lines),
            "missing": [m.as_dict() for m in self.missing],
            "budget_tokens": self.budget_tokens,
            "used_tokens": self.used_tokens,
        }
        if self.omitted:
            answer["omitted"] = list(self.omitted)
            answer["omitted_hint"] = (
                "over the budget: cite these refs again (or raise budget_tokens)"
            )
        if self.sufficiency is not None:
            answer["sufficiency"] = self.sufficiency
        if self.limits is not None:
            answer["limits"] = self.limits
        return answer


def fit_lines(
    lines: Sequence[Line], budget_tokens: int, work: ReadingBudget | None = None
) -> tuple[list[dict[str, Any]], list[str], int]:
    """The line items within the budget (the first one that overflows is cut), the refs left
    out, and the tokens used. A line names its session only when the line before it is of
    another one: a pack of one session's turns would otherwise spend a sixth of its budget
    repeating one id. ``work`` keeps each whole line's count for the call: a retrieval fits the
    same lines again on every rebuild."""
    items: list[dict[str, Any]] = []
    omitted: list[str] = []
    used = 0
    memo = work.memo if work is not None else {}
    previous: str | None = None
    for line in lines:
        if omitted:
            omitted.append(line.ref.label)
            continue
        session = line.session_id != previous
        room = budget_tokens - used
        if (
            len(line.text) > room * MAX_CHARS_PER_TOKEN
        ):  # cannot fit whole: not worth counting whole
            size = room + 1
        else:
            key = ("tokens", line.ref, line.conversation_id, session)
            if key not in memo:
                memo[key] = _tokens(line_dict(line, session=session))
            size = memo[key]
        if size > room:
            cut = _cut(line, room, session)
            if cut is None:
                omitted.append(line.ref.label)
                continue
            item, size = cut, _tokens(cut)
        else:
            item = line_dict(line, session=session)
        items.append(item)
        previous = line.session_id
        used += size
    return items, omitted, used


def build_pack(
    store: Store,
    refs: object,
    reach: Sequence[int] | None,
    budget_tokens: int = DEFAULT_BUDGET,
    question: str = "",
    tz: str = "",
    work: ReadingBudget | None = None,
) -> Pack:
    """The bounded pack of ``refs`` (any accepted ref forms, or ``Ref`` values) within ``reach``;
    ``work`` is the call's reading budget (a fresh one when None: every read is bounded)."""
    budget = min(MAX_BUDGET, max(MIN_BUDGET, int(budget_tokens)))
    parsed, bad = read_refs(refs if not isinstance(refs, Ref) else [refs])
    found, missing = hydrate_all(store, parsed, reach, tz, work)
    lines = sorted(
        dedupe(found), key=lambda line: (line.at, line.ref.store_id, line.ref.start or 0)
    )
    items, omitted, used = fit_lines(lines, budget, work)
    shown = [
        replace(
            line,
            text=item["text"],
            dates=tuple(m for m in line.dates if m.end <= len(item["text"])),
        )
        for line, item in zip(lines, items, strict=False)
    ]
    verdict = sufficiency(question, shown) if question.strip() else None
    unread = [line for line in shown if line.read is not None and len(line.text) > line.read]
    return Pack(
        tuple(items),
        tuple(bad + missing),
        tuple(omitted),
        budget,
        used,
        verdict,
        tuple(lines),
        limits_note(unread),
    )

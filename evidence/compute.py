"""Deterministic computations over cited lines; they fail closed.

Each operation takes hydrated lines (refs.py) and either answers
``{"status": "ok", "result", "unit", "trace"}`` — the trace says how each operand came from which
ref — or ``{"status": "insufficient", "reason"}`` when the lines do not determine the answer:
no operand, a line with two candidate values (cite a span to pick one), a date too coarse for
the unit asked, units that do not match. Nothing is guessed and no model is asked.

Operands: a line's date is the one date phrase in it (resolved against the line's own time,
timeexpr.py), or, for ``order``/``latest`` when it names none, the time it was said. A line's
number is the one number in it with the unit word after it (or a currency sign before it).

A line read only in part (limits.py: too long, too many dates, or past the call's reading) is
no operand: what was not read might hold another date or number, so the answer is
``insufficient`` with the cut named (``limits``), never a result from half a line. A number
that does not fit a float exactly, or a run of more digits than any quantity has
(``MAX_NUMBER_RUN``), is refused the same way, so no answer carries an overflowed or inexact value.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Callable, Sequence
from datetime import UTC, date, datetime
from itertools import pairwise
from typing import Any

from .limits import MAX_NUMBER_RUN
from .refs import Line, limits_note
from .timeexpr import DAY, MONTH, WEEK, YEAR, DateMention

OPERATIONS = ("date", "date_diff", "count", "sum", "difference", "order", "latest")
Answer = dict[str, Any]

# "Not followed by more digits, through commas only": ``(?!,*\d)`` is ``(?![\d,]*\d)`` (the first
# digit ahead can only be reached through commas) without rescanning a digit run at every start.
_NUM = re.compile(
    r"(?P<cur>[$€£])?\s?(?<![\w.])(?P<num>\d{1,3}(?:,\d{3})+|\d+)(?:\.(?P<frac>\d+))?(?!,*\d)"
    r"(?:\s?(?P<unit>%|[a-zA-Z]{1,12}))?"
)
_LONG_RUN = re.compile(
    rf"(?:\d,?){{{MAX_NUMBER_RUN + 1},}}"
)  # more digits than a number, single commas aside
_UNIT_ALIASES = {
    "$": "usd",
    "dollar": "usd",
    "dollars": "usd",
    "usd": "usd",
    "bucks": "usd",
    "€": "eur",
    "euro": "eur",
    "euros": "eur",
    "eur": "eur",
    "£": "gbp",
    "pound": "gbp",
    "pounds": "gbp",
    "gbp": "gbp",
    "km": "km",
    "kilometers": "km",
    "kilometres": "km",
    "kilometer": "km",
    "mi": "mi",
    "mile": "mi",
    "miles": "mi",
    "%": "%",
    "percent": "%",
    "h": "hour",
    "hr": "hour",
    "hrs": "hour",
    "hour": "hour",
    "hours": "hour",
    "min": "minute",
    "mins": "minute",
    "minute": "minute",
    "minutes": "minute",
    "kg": "kg",
    "kilos": "kg",
    "lb": "lb",
    "lbs": "lb",
    "pounds-weight": "lb",
    "day": "day",
    "days": "day",
    "week": "week",
    "weeks": "week",
    "month": "month",
    "months": "month",
    "year": "year",
    "years": "year",
}
_DIFF_UNITS = {
    "day": "days",
    "days": "days",
    "week": "weeks",
    "weeks": "weeks",
    "month": "months",
    "months": "months",
    "year": "years",
    "years": "years",
}


def insufficient(reason: str) -> Answer:
    return {"status": "insufficient", "reason": reason}


def ok(result: Any, unit: str | None, trace: list[dict[str, Any]], **extra: Any) -> Answer:
    return {"status": "ok", "result": result, "unit": unit, "trace": trace, **extra}


def _day(at: float) -> date:
    return datetime.fromtimestamp(at, UTC).date()


def _one_date(line: Line) -> DateMention | str:
    """The line's only date (distinct by range), or why there is none to use."""
    ranges = {(m.first, m.last): m for m in line.dates}
    if not ranges:
        return f"ref {line.ref.label} names no date"
    if len(ranges) > 1:
        phrases = ", ".join(repr(m.phrase) for m in list(ranges.values())[:5]) + (
            ", ..." if len(ranges) > 5 else ""
        )
        return f"ref {line.ref.label} names {len(ranges)} dates ({phrases}); cite a span (store_id:start-end) with one"
    return next(iter(ranges.values()))


def _date_trace(line: Line, mention: DateMention) -> dict[str, Any]:
    return {
        "ref": line.ref.label,
        "phrase": mention.phrase,
        "span": [mention.start, mention.end],
        "said_at": datetime.fromtimestamp(line.at, UTC).isoformat(timespec="seconds"),
        "first": mention.first.isoformat(),
        "last": mention.last.isoformat(),
        "granularity": mention.granularity,
    }


def op_date(lines: Sequence[Line], question: str = "") -> Answer:
    if len(lines) != 1:
        return insufficient(f"date needs exactly one cited line; got {len(lines)}")
    mention = _one_date(lines[0])
    if isinstance(mention, str):
        return insufficient(mention)
    result = (
        mention.first.isoformat()
        if mention.first == mention.last
        else {"first": mention.first.isoformat(), "last": mention.last.isoformat()}
    )
    return ok(result, mention.granularity, [_date_trace(lines[0], mention)])


def months_between(a: date, b: date) -> int:
    """Whole calendar months from ``a`` to ``b`` (b >= a): a month counts once its day is reached."""
    months = (b.year - a.year) * 12 + b.month - a.month
    return months - 1 if b.day < a.day else months


def _diff_unit(question: str) -> str:
    words = re.findall(r"\b(days?|weeks?|months?|years?)\b", question.lower())
    return _DIFF_UNITS[words[0]] if words else "days"


_FINE_ENOUGH = {
    "days": (DAY,),
    "weeks": (DAY, WEEK),
    "months": (DAY, WEEK, MONTH),
    "years": (DAY, WEEK, MONTH, YEAR),
}


def op_date_diff(lines: Sequence[Line], question: str = "") -> Answer:
    """The time from the first cited date to the second, in the unit the question asks for
    (days by default); a date coarser than the unit (a month, for days) is ambiguous."""
    if len(lines) != 2:
        return insufficient(
            f"date_diff needs exactly two cited lines (one date each); got {len(lines)}"
        )
    unit = _diff_unit(question)
    mentions: list[DateMention] = []
    for line in lines:
        mention = _one_date(line)
        if isinstance(mention, str):
            return insufficient(mention)
        if mention.granularity not in _FINE_ENOUGH[unit]:
            return insufficient(
                f"ref {line.ref.label}: {mention.phrase!r} is a whole {mention.granularity}, too "
                f"coarse for a difference in {unit}"
            )
        mentions.append(mention)
    a, b = mentions[0].first, mentions[1].first
    early, late = min(a, b), max(a, b)
    if unit == "days":
        result: float = (late - early).days
    elif unit == "weeks":
        days = (late - early).days
        coarse = any(m.granularity == WEEK for m in mentions)
        result = days // 7 if coarse else round(days / 7, 2)
    elif unit == "months":
        coarse = any(m.granularity in (WEEK, MONTH) for m in mentions)
        result = (
            (late.year - early.year) * 12 + late.month - early.month
            if coarse
            else months_between(early, late)
        )
    else:
        result = (
            late.year - early.year
            if any(m.granularity != DAY for m in mentions)
            else months_between(early, late) // 12
        )
    trace = [_date_trace(line, m) for line, m in zip(lines, mentions, strict=True)]
    return ok(
        result, unit, trace, direction="second after first" if b >= a else "second before first"
    )


def _norm(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", text.casefold()).split())


def op_count(lines: Sequence[Line], question: str = "") -> Answer:
    """Distinct items: each cited line (or span) is one item; lines with the same words count once."""
    if not lines:
        return insufficient("count needs at least one cited line (one item per ref or span)")
    groups: dict[str, list[str]] = {}
    for line in lines:
        key = _norm(line.text)
        if not key:
            return insufficient(f"ref {line.ref.label} has no words to count")
        groups.setdefault(key, []).append(line.ref.label)
    trace = [{"item": key[:120], "refs": refs} for key, refs in groups.items()]
    return ok(len(groups), "items", trace)


def _numbers(line: Line) -> list[tuple[float, str | None, str]]:
    """The line's numbers with their units; the date phrases (sorted, disjoint) are skipped by
    bisection, so a line of many dates and numbers is not their product."""
    found = []
    starts = [d.start for d in line.dates]
    for m in _NUM.finditer(line.text):
        i = bisect_right(starts, m.start("num")) - 1
        if i >= 0 and m.start("num") < line.dates[i].end:
            continue  # a number inside a date phrase is a date, not a value
        value = float(m["num"].replace(",", "") + ("." + m["frac"] if m["frac"] else ""))
        word = (m["unit"] or "").lower()
        unit = _UNIT_ALIASES.get(m["cur"] or "") or _UNIT_ALIASES.get(word)
        found.append((value, unit, m[0].strip()))
    return found


def _operands(lines: Sequence[Line]) -> list[tuple[float, str | None, dict[str, Any]]] | str:
    operands = []
    for line in lines:
        run = _LONG_RUN.search(line.text)
        if run:
            digits = sum(c.isdigit() for c in run[0])
            return (
                f"ref {line.ref.label} has a number too large to compute exactly (a run of {digits} digits, "
                f"more than the {MAX_NUMBER_RUN} of any number this computes); cite a span with one number"
            )
        numbers = _numbers(line)
        if not numbers:
            return f"ref {line.ref.label} has no number"
        if len({(v, u) for v, u, _ in numbers}) > 1:
            shown = ", ".join(repr(t) for _, _, t in numbers[:5])
            return (
                f"ref {line.ref.label} has {len(numbers)} numbers ({shown}); cite a span with one"
            )
        value, unit, text = numbers[0]
        if (
            not abs(value) < MAX_EXACT
        ):  # beyond a float's exact integers (or not finite): no sum can be trusted
            return f"ref {line.ref.label} has a number too large to compute exactly ({text[:40]!r})"
        operands.append(
            (value, unit, {"ref": line.ref.label, "value": value, "unit": unit, "text": text})
        )
    units = {u for _, u, _ in operands}
    if len(units) > 1:
        return (
            "mixed units: " + ", ".join(sorted(str(u) for u in units)) + "; cite values in one unit"
        )
    return operands


MAX_EXACT = float(2**53)  # the largest magnitude below which a float holds every integer


def _clean(value: float) -> float | int:
    return int(value) if float(value).is_integer() else round(value, 6)


def op_sum(lines: Sequence[Line], question: str = "") -> Answer:
    if not lines:
        return insufficient("sum needs at least one cited line with one number")
    operands = _operands(lines)
    if isinstance(operands, str):
        return insufficient(operands)
    total = sum(v for v, _, _ in operands)
    if not abs(total) < MAX_EXACT:
        return insufficient("the sum is too large to compute exactly")
    return ok(_clean(total), operands[0][1], [t for _, _, t in operands])


def op_difference(lines: Sequence[Line], question: str = "") -> Answer:
    """The first cited value minus the second."""
    if len(lines) != 2:
        return insufficient(
            f"difference needs exactly two cited lines (one number each); got {len(lines)}"
        )
    operands = _operands(lines)
    if isinstance(operands, str):
        return insufficient(operands)
    (a, unit, ta), (b, _, tb) = operands
    return ok(_clean(a - b), unit, [ta, tb], formula="first - second")


def _when(line: Line) -> tuple[date, date, dict[str, Any]] | str:
    """When a line's event happened: its one date phrase, else the day it was said."""
    if not line.dates:
        day = _day(line.at)
        return (
            day,
            day,
            {
                "ref": line.ref.label,
                "basis": "said_at",
                "said_at": datetime.fromtimestamp(line.at, UTC).isoformat(timespec="seconds"),
            },
        )
    mention = _one_date(line)
    if isinstance(mention, str):
        return mention
    return mention.first, mention.last, {**_date_trace(line, mention), "basis": "date phrase"}


def _chronology(
    lines: Sequence[Line],
) -> list[tuple[date, date, float, Line, dict[str, Any]]] | str:
    keyed = []
    for line in lines:
        when = _when(line)
        if isinstance(when, str):
            return when
        first, last, trace = when
        keyed.append((first, last, line.at, line, trace))
    keyed.sort(key=lambda k: (k[0], k[1], k[2]))
    for (f1, l1, at1, a, t1), (f2, _l2, at2, b, t2) in pairwise(keyed):
        both_said = t1["basis"] == t2["basis"] == "said_at"
        if f2 <= l1 and not (both_said and at1 != at2):
            return (
                f"refs {a.ref.label} and {b.ref.label} cannot be ordered: their dates overlap "
                f"({f1.isoformat()}..{l1.isoformat()} and {f2.isoformat()})"
            )
    return keyed


def op_order(lines: Sequence[Line], question: str = "") -> Answer:
    """The cited lines, earliest first, by the date each names (or when it was said)."""
    if len(lines) < 2:
        return insufficient(f"order needs at least two cited lines; got {len(lines)}")
    keyed = _chronology(lines)
    if isinstance(keyed, str):
        return insufficient(keyed)
    return ok([k[3].ref.label for k in keyed], "refs, earliest first", [k[4] for k in keyed])


def op_latest(lines: Sequence[Line], question: str = "") -> Answer:
    """The newest of the cited values of one state: the line with the latest date."""
    if not lines:
        return insufficient("latest needs at least one cited line")
    keyed = _chronology(lines)
    if isinstance(keyed, str):
        return insufficient(keyed)
    newest = keyed[-1][3]
    return ok({"ref": newest.ref.label, "text": newest.text}, "line", [k[4] for k in keyed])


_OPS: dict[str, Callable[[Sequence[Line], str], Answer]] = {
    "date": op_date,
    "date_diff": op_date_diff,
    "count": op_count,
    "sum": op_sum,
    "difference": op_difference,
    "order": op_order,
    "latest": op_latest,
}


def compute(operation: str, lines: Sequence[Line], question: str = "") -> Answer:
    """Run ``operation`` over ``lines``; an unknown operation is a ValueError naming the known ones."""
    op = _OPS.get(operation.strip().lower())
    if op is None:
        raise ValueError(f"operation must be one of {', '.join(OPERATIONS)}; got {operation!r}")
    cut = [line for line in lines if line.read is not None]
    if cut:  # an unread part might hold another date or number: no operand can be trusted
        answer = insufficient(
            "; ".join(line.cut_reason() for line in cut[:3])
            + (f" (and {len(cut) - 3} more)" if len(cut) > 3 else "")
        )
        answer["limits"] = limits_note(cut)
        return answer
    return op(lines, question)

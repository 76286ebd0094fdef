"""Dates written in English text, resolved to calendar days.

A message says "last Friday" or "two weeks ago"; the evidence tools must turn that into a date
the way the writer meant it, so a relative phrase is resolved against the message's own
timestamp (the anchor), in the user's timezone when one is configured, else UTC. Absolute forms
("May 7, 2023", "7 May 2023", "2023-05-07", "May 2023", "2023") need no anchor.

Conventions (docs/guide/semantic-recall.md, Evidence tools; tested in tests/test_timeexpr.py):
weeks run Monday..Sunday; "last Friday" is the latest Friday strictly before the anchor's day
(said on a Friday it means a week earlier); "next Friday" the first one strictly after;
"this Friday" the Friday of the anchor's week; "in June" / "May 7" without a year the nearest
one not after the anchor; "last June" the nearest June before the anchor's month.

A relative mention also says what it means against the day it was said (``anchored``: "last
week" said on 2023-01-01 reads "the week before 2023-01-01"). ``first``/``last`` are the
calendar's reading of the phrase and can be narrower or wider than the speaker meant ("last
week" said on a Monday may mean the seven days before it); the anchored reading is exact, so an
answer can be given as the speaker's own words put on the calendar.

Deterministic, no network, never raises: text it cannot read yields no mention.
"""

from __future__ import annotations

import calendar
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta, tzinfo
from zoneinfo import ZoneInfo

DAY = "day"
WEEK = "week"
MONTH = "month"
YEAR = "year"


@dataclass(frozen=True)
class DateMention:
    """One date phrase found in text: its character span and the days it stands for."""

    start: int
    end: int
    phrase: str
    first: date
    last: date
    granularity: str
    relative: bool
    anchored: str | None = None  # the phrase against the day it was said (module docstring)

    def as_dict(self) -> dict[str, object]:
        item: dict[str, object] = {
            "phrase": self.phrase,
            "span": [self.start, self.end],
            "first": self.first.isoformat(),
            "last": self.last.isoformat(),
            "granularity": self.granularity,
            "relative": self.relative,
        }
        if self.anchored is not None:
            item["anchored"] = self.anchored
        return item


_MONTHS = {name.lower(): i for i, name in enumerate(calendar.month_name) if name}
_MONTHS.update({name.lower(): i for i, name in enumerate(calendar.month_abbr) if name})
_MONTHS["sept"] = 9
_WEEKDAYS = {name.lower(): i for i, name in enumerate(calendar.day_name)}
_NUMBERS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "a couple of": 2,
    "couple of": 2,
}

_MONTH = (
    r"(?P<month>"
    + "|".join(sorted((re.escape(m) for m in _MONTHS), key=len, reverse=True))
    + r")\.?"
)
_WEEKDAY = r"(?P<weekday>" + "|".join(_WEEKDAYS) + r")"
_DAYNUM = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>(?:19|20)\d\d)"
_COUNT = r"(?P<count>\d{1,3}|a couple of|couple of|an|a|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)"
_UNIT = r"(?P<unit>day|week|month|year)s?"


def _zone(tz: str) -> tzinfo:
    if not tz:
        return UTC
    try:
        return ZoneInfo(tz)
    except (ValueError, KeyError, OSError):
        return UTC


def _anchor_day(anchor: float, tz: str) -> date | None:
    try:
        if not math.isfinite(anchor):
            return None
        return datetime.fromtimestamp(anchor, _zone(tz)).date()
    except (OverflowError, OSError, ValueError, TypeError):
        return None


def _month_end(year: int, month: int) -> date:
    return date(year, month, calendar.monthrange(year, month)[1])


def _add_months(year: int, month: int, delta: int) -> tuple[int, int]:
    total = year * 12 + (month - 1) + delta
    return total // 12, total % 12 + 1


def _week(day: date) -> tuple[date, date]:
    monday = day - timedelta(days=day.weekday())
    return monday, monday + timedelta(days=6)


def _count(word: str) -> int:
    word = " ".join(word.lower().split())
    return int(word) if word.isdigit() else _NUMBERS[word]


def _shift(today: date, unit: str, count: int) -> tuple[date, date, str]:
    """The day/week/month/year ``count`` units from today (negative = ago)."""
    if unit == "day":
        day = today + timedelta(days=count)
        return day, day, DAY
    if unit == "week":
        first, last = _week(today + timedelta(weeks=count))
        return first, last, WEEK
    if unit == "month":
        year, month = _add_months(today.year, today.month, count)
        return date(year, month, 1), _month_end(year, month), MONTH
    year = today.year + count
    return date(year, 1, 1), date(year, 12, 31), YEAR


# A resolver takes the match and the anchor's day (None when the anchor is unusable) and gives
# (first, last, granularity, anchored) or None; relative resolvers need the anchor, and say what
# the phrase means against its day (``anchored``; None when first/last say it all).
Resolved = tuple[date, date, str, str | None] | None
Resolver = Callable[[re.Match[str], date | None], Resolved]


def _iso(m: re.Match[str], _today: date | None) -> Resolved:
    day = date(int(m["y"]), int(m["m"]), int(m["d"]))
    return day, day, DAY, None


def _full(m: re.Match[str], today: date | None) -> Resolved:
    month = _MONTHS[m["month"].lower()]
    if m["year"]:
        day = date(int(m["year"]), month, int(m["day"]))
    else:
        if today is None:
            return None
        day = date(today.year, month, int(m["day"]))
        if day > today:
            day = date(today.year - 1, month, int(m["day"]))
    return day, day, DAY, None


def _month_year(m: re.Match[str], _today: date | None) -> Resolved:
    year, month = int(m["year"]), _MONTHS[m["month"].lower()]
    return date(year, month, 1), _month_end(year, month), MONTH, None


def _year(m: re.Match[str], _today: date | None) -> Resolved:
    year = int(m["year"])
    return date(year, 1, 1), date(year, 12, 31), YEAR, None


_DAY_OFFSETS = {
    0: "{day}",
    -1: "the day before {day}",
    1: "the day after {day}",
    -2: "two days before {day}",
    2: "two days after {day}",
}


def _named_day(m: re.Match[str], today: date | None) -> Resolved:
    if today is None:
        return None
    word = " ".join(m[0].lower().split())
    offset = {
        "today": 0,
        "tonight": 0,
        "this morning": 0,
        "this afternoon": 0,
        "this evening": 0,
        "yesterday": -1,
        "last night": -1,
        "tomorrow": 1,
        "the day before yesterday": -2,
        "the day after tomorrow": 2,
        "the day before": -1,
        "the day after": 1,
    }[word]
    day = today + timedelta(days=offset)
    return day, day, DAY, _DAY_OFFSETS[offset].format(day=today.isoformat())


def _weekday(m: re.Match[str], today: date | None) -> Resolved:
    if today is None:
        return None
    which, target = m["which"].lower(), _WEEKDAYS[m["weekday"].lower()]
    if which == "last":
        back = (today.weekday() - target) % 7 or 7
        day = today - timedelta(days=back)
    elif which == "next":
        day = today + timedelta(days=(target - today.weekday()) % 7 or 7)
    else:
        day = _week(today)[0] + timedelta(days=target)
    name, anchor = calendar.day_name[target], today.isoformat()
    side = {"last": "before", "next": "after"}.get(which)
    said = f"the {name} {side} {anchor}" if side else f"the {name} of the week of {anchor}"
    return day, day, DAY, said


def _period(m: re.Match[str], today: date | None) -> Resolved:
    if today is None:
        return None
    which, unit = m["which"].lower(), m["unit"].lower()
    delta = {"this": 0, "last": -1, "past": -1, "before": -1, "next": 1, "after": 1}[which]
    said = f"the {unit} {('of', 'after', 'before')[delta]} {today.isoformat()}"
    if unit == "weekend":
        saturday = _week(today)[0] + timedelta(days=5 + 7 * delta)
        return saturday, saturday + timedelta(days=1), WEEK, said
    return (*_shift(today, unit, delta), said)


def _ago(m: re.Match[str], today: date | None) -> Resolved:
    if today is None:
        return None
    count, unit = _count(m["count"]), m["unit"].lower()
    sign = 1 if m[0].lower().startswith("in") else -1
    said = " ".join([*m["count"].lower().split(), unit + ("s" if count != 1 else "")])
    return (
        *_shift(today, unit, sign * count),
        f"{said} {('after', 'before')[sign < 0]} {today.isoformat()}",
    )


def _in_month(m: re.Match[str], today: date | None) -> Resolved:
    if today is None:
        return None
    month, which = _MONTHS[m["month"].lower()], m["which"].lower()
    if which == "next":
        year = today.year if month > today.month else today.year + 1
    elif which == "last":
        year = today.year if month < today.month else today.year - 1
    elif which == "this":
        year = today.year
    else:
        year = today.year if month <= today.month else today.year - 1
    return date(year, month, 1), _month_end(year, month), MONTH, None


_B = r"(?<![\w-])"
_E = r"(?![\w-])"
_PATTERNS: tuple[tuple[re.Pattern[str], Resolver, bool], ...] = tuple(
    (
        re.compile(_B + pattern + (r"(?!\d)" if resolver is _iso else _E), re.IGNORECASE),
        resolver,
        relative,
    )
    for pattern, resolver, relative in (
        (r"(?P<y>(?:19|20)\d\d)-(?P<m>[01]?\d)-(?P<d>[0-3]?\d)", _iso, False),
        (_MONTH + r"\s+" + _DAYNUM + r"(?:,?\s+" + _YEAR + r")?", _full, False),
        (
            r"(?:the\s+)?" + _DAYNUM + r"\s+(?:of\s+)?" + _MONTH + r"(?:,?\s+" + _YEAR + r")?",
            _full,
            False,
        ),
        (_MONTH + r",?\s+(?:of\s+)?" + _YEAR, _month_year, False),
        (_YEAR, _year, False),
        (
            r"the\s+day\s+(?:before\s+yesterday|after\s+tomorrow|before|after)|today|tonight|yesterday|tomorrow"
            r"|last\s+night|this\s+(?:morning|afternoon|evening)",
            _named_day,
            True,
        ),
        (r"(?P<which>last|next|this)\s+" + _WEEKDAY, _weekday, True),
        (
            r"(?:the\s+)?(?:this\s+)?(?P<which>this|last|next|past)\s+(?P<unit>week|month|year|weekend)",
            _period,
            True,
        ),
        (r"the\s+(?P<unit>week|month|year|weekend)\s+(?P<which>before|after)", _period, True),
        (_COUNT + r"\s+" + _UNIT + r"\s+ago", _ago, True),
        (r"in\s+" + _COUNT + r"\s+" + _UNIT, _ago, True),
        (
            r"(?P<which>in|during|since|by|last|next|this|early|late|mid)\s+"
            + _MONTH
            + r"(?![.,]?\s*(?:the\s+)?\d)",
            _in_month,
            True,
        ),
    )
)


def _modal_may(m: re.Match[str]) -> bool:
    """Lower-case "may" is the verb ("we may 3D-print it"), not the month."""
    return "month" in m.re.groupindex and m["month"] is not None and m["month"] == "may"


def resolve_dates(text: str, anchor: float, tz: str = "") -> list[DateMention]:
    """Every date phrase in ``text``, left to right, non-overlapping (the longest wins).

    ``anchor`` is the epoch time the text was written at; relative phrases are resolved in
    ``tz`` (an IANA name; "" or an unknown name means UTC). Never raises.
    """
    if not isinstance(text, str) or not text:
        return []
    today = _anchor_day(anchor, tz) if isinstance(anchor, int | float) else None
    found: list[tuple[int, int, int, Resolver, bool, re.Match[str]]] = []
    for rank, (pattern, resolver, relative) in enumerate(_PATTERNS):
        for m in pattern.finditer(text):
            found.append((m.start(), -(m.end() - m.start()), rank, resolver, relative, m))
    found.sort(key=lambda item: item[:3])
    mentions: list[DateMention] = []
    taken = 0
    for start, _neg, _rank, resolver, relative, m in found:
        if start < taken or _modal_may(m):
            continue
        try:
            resolved = resolver(m, today)
        except (ValueError, OverflowError, KeyError):
            resolved = None
        if resolved is None:
            continue
        first, last, granularity, anchored = resolved
        relative = relative or (resolver is _full and not m["year"])
        mentions.append(
            DateMention(start, m.end(), m[0], first, last, granularity, relative, anchored)
        )
        taken = m.end()
    return mentions

"""Times the tools accept and show: ISO dates/times or epoch seconds in, ISO UTC out, and the
natural UTC periods of ``lcm_recent`` (today, yesterday, Nd, week, month, date:YYYY-MM-DD)."""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_DAYS = re.compile(r"^(\d{1,4})\s*d(?:ays?)?$")
DAY = 86400.0


class TimeError(ValueError):
    """A time or period the caller wrote that cannot be understood; the message shows the forms."""


def _midnight(day: datetime) -> datetime:
    return day.replace(hour=0, minute=0, second=0, microsecond=0)


def parse_time(value: object, *, end: bool = False) -> float:
    """Epoch seconds (milliseconds are recognised), an ISO date or an ISO date-time.

    A bare date as an end bound means the end of that day, so ``time_to=2024-05-01`` includes it.
    Times without a zone are UTC.
    """
    if isinstance(value, bool):
        raise TimeError(f"expected a time, got {value!r}")
    if isinstance(value, int | float):
        number = float(value)
        return number / 1000.0 if number > 1e11 else number
    text = str(value).strip()
    if re.fullmatch(r"-?\d+(\.\d+)?", text):
        return parse_time(float(text), end=end)
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError as exc:
        raise TimeError(
            f"cannot read time {text!r}: use YYYY-MM-DD, YYYY-MM-DDTHH:MM[:SS][Z] or epoch seconds"
        ) from exc
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    if end and _DATE.match(text):
        moment += timedelta(days=1)
    return moment.timestamp()


@dataclass(frozen=True)
class Period:
    label: str
    since: float
    until: float


def period(text: str | None, now: float | None = None) -> Period:
    """The half-open UTC interval [since, until) a period name stands for."""
    name = (text or "today").strip().lower()
    current = datetime.fromtimestamp(time.time() if now is None else now, UTC)
    today = _midnight(current)
    end = current.timestamp() + 1
    if name == "today":
        return Period(name, today.timestamp(), end)
    if name == "yesterday":
        return Period(name, (today - timedelta(days=1)).timestamp(), today.timestamp())
    if name in ("week", "this week"):
        return Period("week", (today - timedelta(days=today.weekday())).timestamp(), end)
    if name in ("month", "this month"):
        return Period("month", today.replace(day=1).timestamp(), end)
    days = _DAYS.match(name)
    if days:
        count = max(1, int(days.group(1)))
        return Period(f"{count}d", current.timestamp() - count * DAY, end)
    day = name[5:] if name.startswith("date:") else name
    if _DATE.match(day):
        start = parse_time(day)
        return Period(f"date:{day}", start, start + DAY)
    raise TimeError(
        f"unknown period {text!r}: use today, yesterday, Nd (e.g. 7d), week, month or "
        "date:YYYY-MM-DD"
    )


_HOST_MIN = 1.0  # 1970-01-01T00:00:01Z: zero and negative times are no times
_HOST_MAX = 4102444800.0  # 2100-01-01T00:00:00Z: beyond it a clock or a parser is wrong


def host_time(value: object) -> float | None:
    """The epoch seconds of a host's ``timestamp``, or None when it gives none we can trust.

    Accepts epoch seconds (int/float; milliseconds when above 1e12, as JavaScript hosts send) and
    ISO 8601 strings (a naive one is UTC). NaN, infinities, non-positive times, times after 2100,
    booleans and unreadable strings are None: the caller then uses the ingest time. Never raises.
    """
    if value is None or isinstance(value, bool):
        return None
    try:
        if isinstance(value, int | float):
            number = float(value)
        elif isinstance(value, str) and 0 < len(value) <= 64:
            text = value.strip()
            if re.fullmatch(r"-?\d+(\.\d+)?", text):
                number = float(text)
            else:
                moment = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
                if moment.tzinfo is None:
                    moment = moment.replace(tzinfo=UTC)
                number = moment.timestamp()
        else:
            return None
    except (ValueError, OverflowError, OSError):
        return None
    if number != number or number in (float("inf"), float("-inf")):
        return None
    if number > 1e12:
        number /= 1000.0
    return number if _HOST_MIN <= number < _HOST_MAX else None


def message_time(message: Mapping[str, Any]) -> float | None:
    """The host's time of a message: its ``timestamp``, else its ``metadata``'s (see :func:`host_time`)."""
    found = host_time(message.get("timestamp"))
    if found is not None:
        return found
    metadata = message.get("metadata")
    return host_time(metadata.get("timestamp")) if isinstance(metadata, Mapping) else None

"""Times the tools accept and show: ISO dates/times or epoch seconds in, ISO UTC out, and the
natural UTC periods of ``lcm_recent`` (today, yesterday, Nd, week, month, date:YYYY-MM-DD)."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

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
        raise TimeError(f"cannot read time {text!r}: use YYYY-MM-DD, YYYY-MM-DDTHH:MM[:SS][Z] or epoch "
                        "seconds") from exc
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
    raise TimeError(f"unknown period {text!r}: use today, yesterday, Nd (e.g. 7d), week, month or "
                    "date:YYYY-MM-DD")

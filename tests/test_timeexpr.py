"""timeexpr: each phrase form, resolved against the message's own time, and random text."""

from __future__ import annotations

import itertools
from datetime import UTC, date, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hermes_lcm.evidence.timeexpr import resolve_dates


def _at(*parts: int, tz=UTC) -> float:
    return datetime(*parts, tzinfo=tz).timestamp()


FRIDAY = _at(2023, 5, 12, 15)  # Friday 12 May 2023, 15:00 UTC


def _one(text: str, anchor: float = FRIDAY, tz: str = "") -> tuple[str, str, str]:
    found = resolve_dates(text, anchor, tz)
    assert len(found) == 1, found
    m = found[0]
    assert text[m.start : m.end] == m.phrase
    return m.first.isoformat(), m.last.isoformat(), m.granularity


@pytest.mark.parametrize(
    "text,first,last,gran",
    [
        ("We met on May 7, 2023.", "2023-05-07", "2023-05-07", "day"),
        ("We met on May 7th 2023.", "2023-05-07", "2023-05-07", "day"),
        ("We met on 7 May 2023.", "2023-05-07", "2023-05-07", "day"),
        ("We met on the 7th of May, 2023.", "2023-05-07", "2023-05-07", "day"),
        ("logged 2023-05-07T10:00Z", "2023-05-07", "2023-05-07", "day"),
        ("Since Sept 2021 I work here", "2021-09-01", "2021-09-30", "month"),
        ("back in May 2023", "2023-05-01", "2023-05-31", "month"),
        ("It was 2019, I think", "2019-01-01", "2019-12-31", "year"),
    ],
)
def test_absolute_forms_need_no_anchor(text, first, last, gran):
    assert _one(text, anchor=float("nan")) == (first, last, gran)
    assert resolve_dates(text, FRIDAY)[0].relative is False


@pytest.mark.parametrize(
    "text,first,last,gran",
    [
        ("today", "2023-05-12", "2023-05-12", "day"),
        ("yesterday", "2023-05-11", "2023-05-11", "day"),
        ("tomorrow", "2023-05-13", "2023-05-13", "day"),
        ("last night", "2023-05-11", "2023-05-11", "day"),
        ("the day before yesterday", "2023-05-10", "2023-05-10", "day"),
        ("last Friday", "2023-05-05", "2023-05-05", "day"),  # said on a Friday: a week earlier
        ("last Monday", "2023-05-08", "2023-05-08", "day"),
        ("last Saturday", "2023-05-06", "2023-05-06", "day"),
        ("next Friday", "2023-05-19", "2023-05-19", "day"),
        ("this Monday", "2023-05-08", "2023-05-08", "day"),
        ("this week", "2023-05-08", "2023-05-14", "week"),
        ("last week", "2023-05-01", "2023-05-07", "week"),
        ("the week before", "2023-05-01", "2023-05-07", "week"),
        ("next week", "2023-05-15", "2023-05-21", "week"),
        ("last weekend", "2023-05-06", "2023-05-07", "week"),
        ("next month", "2023-06-01", "2023-06-30", "month"),
        ("last month", "2023-04-01", "2023-04-30", "month"),
        ("two weeks ago", "2023-04-24", "2023-04-30", "week"),
        ("3 days ago", "2023-05-09", "2023-05-09", "day"),
        ("a couple of days ago", "2023-05-10", "2023-05-10", "day"),
        ("a month ago", "2023-04-01", "2023-04-30", "month"),
        ("in 3 days", "2023-05-15", "2023-05-15", "day"),
        ("last year", "2022-01-01", "2022-12-31", "year"),
        ("in April", "2023-04-01", "2023-04-30", "month"),
        ("in May", "2023-05-01", "2023-05-31", "month"),
        ("in June", "2022-06-01", "2022-06-30", "month"),  # the nearest June not after the anchor
        ("last May", "2022-05-01", "2022-05-31", "month"),
        ("May 20", "2022-05-20", "2022-05-20", "day"),  # no year: not after the anchor
        ("May 2", "2023-05-02", "2023-05-02", "day"),
    ],
)
def test_relative_forms_resolve_against_the_anchor(text, first, last, gran):
    assert _one(f"I said {text}, right?") == (first, last, gran)
    assert resolve_dates(text, FRIDAY)[0].relative is True


@pytest.mark.parametrize(
    "text,anchored",
    [
        ("last week", "the week before 2023-05-12"),
        ("the week before", "the week before 2023-05-12"),
        ("last weekend", "the weekend before 2023-05-12"),
        ("this weekend", "the weekend of 2023-05-12"),
        ("next month", "the month after 2023-05-12"),
        ("last Friday", "the Friday before 2023-05-12"),
        ("next Monday", "the Monday after 2023-05-12"),
        ("this Monday", "the Monday of the week of 2023-05-12"),
        ("yesterday", "the day before 2023-05-12"),
        ("the day before yesterday", "two days before 2023-05-12"),
        ("tomorrow", "the day after 2023-05-12"),
        ("today", "2023-05-12"),
        ("two weeks ago", "two weeks before 2023-05-12"),
        ("a month ago", "a month before 2023-05-12"),
        ("1 day ago", "1 day before 2023-05-12"),
        ("in 3 days", "3 days after 2023-05-12"),
    ],
)
def test_a_relative_phrase_says_what_it_means_against_the_day_it_was_said(text, anchored):
    """A "last week" is a range only by the calendar's convention; against the day it was said
    it is exact, and an answer can be given in the speaker's own terms."""
    (mention,) = resolve_dates(f"I said {text}, right?", FRIDAY)
    assert mention.anchored == anchored and mention.as_dict()["anchored"] == anchored


@pytest.mark.parametrize("text", ["May 7, 2023", "2023", "in June", "May 20", "last May"])
def test_a_phrase_its_range_says_all_of_has_no_anchored_reading(text):
    (mention,) = resolve_dates(text, FRIDAY)
    assert mention.anchored is None and "anchored" not in mention.as_dict()


def test_the_anchored_reading_uses_the_day_in_the_users_timezone():
    late = _at(2023, 5, 12, 23, 30)  # Friday 23:30 UTC is Saturday in Tokyo
    assert resolve_dates("yesterday", late, "Asia/Tokyo")[0].anchored == "the day before 2023-05-13"


def test_boundaries_of_week_month_and_year():
    monday = _at(2024, 1, 1, 9)  # a Monday, first day of the year
    assert _one("yesterday", monday) == ("2023-12-31", "2023-12-31", "day")
    assert _one("last week", monday) == ("2023-12-25", "2023-12-31", "week")
    assert _one("this week", monday) == ("2024-01-01", "2024-01-07", "week")
    assert _one("last month", monday) == ("2023-12-01", "2023-12-31", "month")
    assert _one("last year", monday) == ("2023-01-01", "2023-12-31", "year")
    assert _one("last Sunday", monday) == ("2023-12-31", "2023-12-31", "day")
    sunday = _at(2023, 12, 31, 9)
    assert _one("this week", sunday) == ("2023-12-25", "2023-12-31", "week")
    assert _one("next month", sunday) == ("2024-01-01", "2024-01-31", "month")
    assert _one("tomorrow", sunday) == ("2024-01-01", "2024-01-01", "day")
    leap = _at(2024, 3, 31, 12)
    assert _one("a month ago", leap) == ("2024-02-01", "2024-02-29", "month")


def test_timezone_moves_the_day():
    late = _at(2023, 5, 12, 23, 30)  # 23:30 UTC is already Saturday in Tokyo
    assert _one("today", late) == ("2023-05-12", "2023-05-12", "day")
    assert _one("today", late, "Asia/Tokyo") == ("2023-05-13", "2023-05-13", "day")
    assert _one("today", late, "Not/A_Zone") == ("2023-05-12", "2023-05-12", "day")


def test_several_mentions_in_order_without_overlap():
    text = (
        "On 7 May 2023 I said I'd go next Friday; yesterday I went, three weeks ago I planned it."
    )
    found = resolve_dates(text, FRIDAY)
    assert [m.phrase for m in found] == [
        "7 May 2023",
        "next Friday",
        "yesterday",
        "three weeks ago",
    ]
    assert all(a.end <= b.start for a, b in itertools.pairwise(found))


def test_modal_may_and_impossible_dates_are_not_dates():
    assert resolve_dates("we may 3D print it, may 5 of them", FRIDAY) == []
    assert (
        resolve_dates("February 30, 2023", FRIDAY)[0].granularity == "year"
    )  # only the year is real
    assert resolve_dates("2023-02-30", FRIDAY) == []


def test_relative_phrases_need_a_usable_anchor():
    assert resolve_dates("yesterday", float("inf")) == []
    assert resolve_dates("yesterday and May 7, 2023", float("nan"))[0].first == date(2023, 5, 7)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [
                *"0123456789 -,.aMyJunFridlstwekoagchxT",
                "May ",
                "last ",
                "next ",
                "Friday",
                "week",
                "ago",
                "2023",
                "the ",
                "in ",
                "June",
                "days",
                "yesterday",
                "of ",
            ]
        ),
        max_size=40,
    ).map("".join),
    st.floats(allow_nan=True, allow_infinity=True) | st.floats(min_value=-2e9, max_value=4e9),
    st.sampled_from(["", "UTC", "Europe/Berlin", "Pacific/Kiritimati", "nope/zone", "../etc"]),
)
def test_random_text_never_raises_and_spans_are_valid(text, anchor, tz):
    found = resolve_dates(text, anchor, tz)
    end = 0
    for m in found:
        assert 0 <= m.start < m.end <= len(text)
        assert m.start >= end
        end = m.end
        assert text[m.start : m.end] == m.phrase
        assert m.first <= m.last
        assert m.granularity in ("day", "week", "month", "year")

"""evidence.compute date arithmetic under hypothesis: dates written in lines, read back exactly."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from hermes_lcm.evidence.compute import compute, months_between
from hermes_lcm.evidence.refs import Line, Ref
from hermes_lcm.evidence.timeexpr import resolve_dates

DAYS = st.dates(min_value=date(1990, 1, 1), max_value=date(2090, 12, 31))
FORMS = st.sampled_from(
    [
        "{d:%Y-%m-%d}",
        "{d:%B} {d.day}, {d.year}",
        "{d.day} {d:%B} {d.year}",
        "the {d.day}th of {d:%B}, {d.year}",
    ]
)


def _line(store_id: int, text: str, said: date) -> Line:
    at = datetime(said.year, said.month, said.day, 12, tzinfo=UTC).timestamp()
    return Line(Ref(store_id), 1, "s", "user", at, text, tuple(resolve_dates(text, at)), len(text))


@settings(max_examples=200, deadline=None)
@given(DAYS, DAYS, FORMS, FORMS)
def test_date_diff_in_days_is_exact(a, b, form_a, form_b):
    lines = [
        _line(1, "It happened on " + form_a.format(d=a) + ".", a + timedelta(days=3)),
        _line(2, "Then on " + form_b.format(d=b) + " it ended.", b + timedelta(days=1)),
    ]
    answer = compute("date_diff", lines, "how many days between them?")
    assert answer["status"] == "ok", answer
    assert answer["result"] == abs((b - a).days) and answer["unit"] == "days"
    assert [t["first"] for t in answer["trace"]] == [a.isoformat(), b.isoformat()]
    order = compute("order", lines)
    if a != b:
        assert order["result"] == (["1", "2"] if a < b else ["2", "1"])
    else:
        assert order["status"] == "insufficient"  # the same day in two lines: no order


@settings(max_examples=200, deadline=None)
@given(DAYS, st.integers(0, 60))
def test_relative_phrases_against_the_lines_own_time(said, back):
    text = f"{back} days ago I started." if back != 1 else "yesterday I started."
    answer = compute("date", [_line(7, text, said)])
    assert (
        answer["status"] == "ok" and answer["result"] == (said - timedelta(days=back)).isoformat()
    )


@settings(max_examples=300, deadline=None)
@given(DAYS, DAYS)
def test_months_between_agrees_with_adding_months(a, b):
    early, late = min(a, b), max(a, b)
    months = months_between(early, late)
    assert months >= 0

    def plus(d: date, n: int) -> tuple[int, int]:
        total = d.year * 12 + d.month - 1 + n
        return total // 12, total % 12 + 1

    y, m = plus(early, months)
    assert (y, m, min(early.day, 28)) <= (late.year, late.month, late.day) or early.day > 28
    y2, m2 = plus(early, months + 1)
    assert (late.year, late.month, late.day) < (y2, m2, early.day)
    weeks = compute(
        "date_diff", [_line(1, early.isoformat(), late), _line(2, late.isoformat(), late)], "weeks?"
    )
    assert weeks["result"] == round((late - early).days / 7, 2)


def test_a_number_too_large_to_add_exactly_fails_closed():
    day = date(2026, 5, 1)
    huge = "9" * 400
    answer = compute("sum", [_line(1, f"the bill was ${huge}", day), _line(2, "and $5 more", day)])
    assert answer["status"] == "insufficient" and "too large" in answer["reason"], answer
    near = compute(
        "sum",
        [
            _line(1, "paid $9,000,000,000,000,000", day),
            _line(2, "paid $9,000,000,000,000,000", day),
        ],
    )
    assert near["status"] == "insufficient", near  # each fits, the sum does not hold exactly
    assert (
        compute("sum", [_line(1, "paid $12.50", day), _line(2, "paid $7.25", day)])["result"]
        == 19.75
    )

"""Every evidence tool call does bounded work on hostile lines, and says what a limit cut.

Before, lcm_compile_evidence spent 12.7 s per claim on one line full of dates and 4.3 s per claim
on a 2,000-line access log (20 claims x 64 refs were allowed: minutes in one call), and
lcm_compute's number pattern backtracked for minutes on a long chain of comma groups. Each call
now reads at most ``MAX_LINE_CHARS`` of a cited line and ``MAX_CALL_CHARS`` over all its refs,
keeps at most ``MAX_LINE_DATES`` dates a line, compares claims against at most
``MAX_COMPARE_CHARS`` of cited text, and the answer's ``limits`` names every cut; a claim whose
evidence may lie beyond what was read is ``unchecked``, never ``supported``, and lcm_compute
fails closed on a line it did not read whole.

No clock is asserted (a shared 2-core machine flakes): the work is counted instead, as the
characters handed to date resolution (the scan that dominated) and the lines of the package's
Python executed (tests/workcount.py), both deterministic.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest

from hermes_lcm import store as store_module
from hermes_lcm.engine import LcmEngine
from hermes_lcm.evidence import assertion_rules, timeexpr
from hermes_lcm.evidence.compile import MAX_CLAIMS
from hermes_lcm.evidence.limits import (
    MAX_CALL_CHARS,
    MAX_CLAIM_CHARS,
    MAX_COMPARE_CHARS,
    MAX_LINE_CHARS,
    MAX_LINE_DATES,
    MAX_NUMBER_RUN,
    MAX_QUESTION_CHARS,
    SLACK_CHARS,
    ReadingBudget,
)
from hermes_lcm.evidence.refs import MAX_REFS

from ..evidencetest import at, engine_for, said
from ..tooltest import ok
from ..workcount import measure

T = TypeVar("T")
WHEN = at(2024, 3, 12, 9)
ON = {"LCM_ADAPTIVE_RETRIEVAL_ENABLED": "true", "LCM_PREANSWER_EVIDENCE_ENABLED": "true"}

_UNIT = (
    "2024-01-02 Jan 3 2024 03/04/2024 last Tuesday 5 March 2023 May 2022 two weeks ago yesterday "
    "the 4th of July, 2021 "
)
DATES = "zebra dates " + _UNIT * (80_000 // len(_UNIT))  # one ~80 KB line, ~6,000 date phrases
LOG = "\n".join(
    f'10.0.{i % 256}.{i % 7} - - [12/Mar/2024:10:{i % 60:02d}:{i % 60:02d} +0000] "GET /zebra/items/{i}'
    f'?page={i % 13} HTTP/1.1" 200 {1000 + i} "-" "Mozilla/5.0 (X11; Linux x86_64) 2024-03-12"'
    for i in range(2000)
)  # a 2,000-line access log, ~280 KB
DIGITS = "zebra digits " + ("1.2,3;4:5-6/7!8?9(0)" * 5000)[:100_000]  # 100k digits and punctuation
CHAIN = (
    "zebra total 1,234" + ",567" * 2500 + ",1 km"
)  # 10 KB of comma groups: minutes of backtracking before
HUGE = "The zebra bill was $" + "9" * 30 + " in total."  # a number no float holds exactly
LOG_HEAD, LOG_TAIL = LOG.splitlines()[0], LOG.splitlines()[-1]

# Work bounds of one call: about 3x the lines measured on this fixture with the limits (compile
# 165k, compute 72k, pack 80k, pre-answer 64k, retrieve 14k, extraction 90k), so a harmless
# refactor passes and a quadratic loop fails. Before the limits: 1.4 million lines and 1.6
# million characters of date resolution for compute over 64 refs, over 100 million lines for
# one claim on the dates line, 4.2 million for the extraction below.
MAX_SCANNED = MAX_CALL_CHARS + MAX_CLAIMS * MAX_CLAIM_CHARS + MAX_QUESTION_CHARS
MAX_LINES_COMPILE = 500_000
MAX_LINES_COMPUTE = 200_000
MAX_LINES_PACK = 250_000
MAX_LINES_RETRIEVE = 200_000
MAX_LINES_EXTRACT = 300_000


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LcmEngine, dict[str, int]]]:
    home = tmp_path_factory.mktemp("hostile")
    engine = engine_for(home, "s1", **ON)
    names = ("dates", "log", "digits", "chain", "huge")
    ids = said(
        engine, *[(text, WHEN + 60 * i) for i, text in enumerate((DATES, LOG, DIGITS, CHAIN, HUGE))]
    )
    # more of the same, so a retrieval finds many hostile lines, not five
    said(
        engine,
        *[
            (f"zebra copy {i} " + (LOG if i % 2 else DATES), WHEN + 3600 + 60 * i)
            for i in range(12)
        ],
    )
    yield engine, dict(zip(names, ids, strict=True))
    store_module.close_all()


def counted(call: Callable[[], T], engine: LcmEngine | None = None) -> tuple[T, int, int]:
    """Run ``call`` once; returns its result, the characters it handed to date resolution, and
    the lines of the package's Python it executed."""
    code = timeexpr.resolve_dates.__code__
    chars = [0]

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code is code:
            text = frame.f_locals.get("text")
            chars[0] += len(text) if isinstance(text, str) else 0

    previous = sys.getprofile()
    sys.setprofile(profile)
    try:
        result, work = measure(call)
    finally:
        sys.setprofile(previous)
    return result, chars[0], work.lines


def spans(store_id: int, length: int, count: int, width: int = 5000) -> list[str]:
    """``count`` distinct spans of one message, each ``width`` characters (refs a model may send)."""
    step = max(1, (length - width) // max(1, count))
    return [f"{store_id}:{i * step}-{i * step + width}" for i in range(count)]


def every_ref(ids: dict[str, int], width: int = 5000) -> list[str]:
    """``MAX_REFS`` refs: the log and the dates line whole, and 31 spans of each."""
    return [
        str(ids["dates"]),
        str(ids["log"]),
        *spans(ids["log"], len(LOG), 31, width),
        *spans(ids["dates"], len(DATES), 31, width),
    ]


def limits_of(answer: dict[str, Any]) -> dict[str, Any]:
    limits = answer.get("limits")
    assert isinstance(limits, dict) and limits.get("note"), answer.keys()
    return limits


def test_a_claim_beyond_what_was_read_is_unchecked_not_supported(hostile: Any) -> None:
    engine, ids = hostile
    log = str(ids["log"])
    answer = ok(
        engine,
        "lcm_compile_evidence",
        question="What did the zebra log say?",
        claims=[
            {"text": "The first request", "quote": LOG_HEAD, "refs": [log]},
            {"text": "The last request", "quote": LOG_TAIL, "refs": [log]},
        ],
    )
    head, tail = answer["claims"]
    assert head["status"] == "supported", head  # what was read still supports
    assert tail["status"] == "unchecked", (
        tail
    )  # the tail was never read: not "unsupported", never "supported"
    assert "read only in its first" in tail["why"] and f"e.g. {log}:" in tail["why"], (
        tail
    )  # and how to cite the rest
    assert answer["unchecked"] == 1 and answer["sufficiency"]["sufficient"] is False
    cut = limits_of(answer)["lines"]
    assert cut[0]["ref"] == log and cut[0]["read_chars"] <= MAX_LINE_CHARS < cut[0]["chars"] == len(
        LOG
    )


def test_compile_evidence_with_every_claim_and_ref_is_bounded(hostile: Any) -> None:
    engine, ids = hostile
    refs = every_ref(ids)
    assert len(refs) == MAX_REFS
    claims = [
        {
            "text": f"On 2024-01-02, Jan 3 2024 and 03/04/2024 Mozilla got item {k} for 200",
            "refs": refs,
        }
        for k in range(MAX_CLAIMS - 1)
    ] + [{"text": "The last request", "quote": LOG_TAIL, "refs": refs}]
    answer, scanned, lines = counted(
        lambda: ok(engine, "lcm_compile_evidence", question="When was item 7 got?", claims=claims)
    )
    assert scanned <= MAX_SCANNED, scanned
    assert lines <= MAX_LINES_COMPILE, lines
    statuses = [c["status"] for c in answer["claims"]]
    assert (
        set(statuses) <= {"supported", "unsupported", "unchecked"} and len(statuses) == MAX_CLAIMS
    )
    assert statuses[-1] == "unchecked"  # its quote is beyond every line's read part
    assert answer["unchecked"] >= 1 and answer["sufficiency"]["sufficient"] is False
    limits = limits_of(answer)
    assert limits["lines_cut"] >= 1 and all(
        c["read_chars"] <= MAX_LINE_CHARS for c in limits["lines"]
    )
    assert limits["compared_chars"] <= MAX_COMPARE_CHARS


def test_a_claim_too_long_to_check_is_unchecked(hostile: Any) -> None:
    engine, ids = hostile
    text = "Jan 3 2024 " * (MAX_CLAIM_CHARS // 11 + 2)
    answer = ok(
        engine,
        "lcm_compile_evidence",
        question="q",
        claims=[{"text": text, "refs": [str(ids["dates"])]}],
    )
    assert (
        answer["claims"][0]["status"] == "unchecked"
        and str(MAX_CLAIM_CHARS) in answer["claims"][0]["why"]
    )


def test_compute_fails_closed_on_lines_it_did_not_read_whole(hostile: Any) -> None:
    engine, ids = hostile

    def compute(operation: str, *refs: object) -> dict[str, Any]:
        answer = ok(engine, "lcm_compute", operation=operation, refs=[str(r) for r in refs])
        assert "Infinity" not in str(answer) and "nan" not in str(answer.get("result", "")).lower()
        return answer

    whole = compute("date", ids["dates"])
    assert whole["status"] == "insufficient" and "result" not in whole
    assert (
        "read only in its first" in whole["reason"] and f"e.g. {ids['dates']}:" in whole["reason"]
    ), whole
    assert limits_of(whole)["lines"][0]["ref"] == str(ids["dates"])
    part = compute("date", f"{ids['dates']}:12-22")  # a cited span of one date still works
    assert (part["status"], part["result"]) == ("ok", "2024-01-02")
    chain = compute("sum", ids["chain"])
    assert chain["status"] == "insufficient" and str(MAX_NUMBER_RUN) in chain["reason"], chain
    digits = compute("sum", f"{ids['digits']}:0-5000")
    assert digits["status"] == "insufficient" and "result" not in digits, digits
    huge = compute("sum", ids["huge"])
    assert huge["status"] == "insufficient" and "result" not in huge, huge


@pytest.mark.parametrize("operation", ["date", "sum", "count", "order", "latest"])
def test_compute_over_every_ref_is_bounded(hostile: Any, operation: str) -> None:
    engine, ids = hostile
    refs = every_ref(ids, 20_000)
    answer, scanned, lines = counted(
        lambda: ok(engine, "lcm_compute", operation=operation, refs=refs)
    )
    assert scanned <= MAX_SCANNED and lines <= MAX_LINES_COMPUTE, (scanned, lines)
    assert answer["status"] == "insufficient" and "result" not in answer
    assert limits_of(answer)["lines_cut"] >= 1


def test_evidence_pack_is_bounded_and_marks_what_it_did_not_read(hostile: Any) -> None:
    engine, ids = hostile
    answer, scanned, lines = counted(
        lambda: ok(
            engine,
            "lcm_evidence_pack",
            refs=every_ref(ids),
            budget_tokens=8000,
            question="When and how many zebra items?",
        )
    )
    assert scanned <= MAX_SCANNED and lines <= MAX_LINES_PACK, (scanned, lines)
    assert answer["lines"] and all(
        len(line.get("dates", [])) <= MAX_LINE_DATES for line in answer["lines"]
    )
    # Spans read last (the call's reading ran out) but shown first (the pack orders by position):
    # their shown text was not read for dates, and the pack says so.
    late = list(reversed(spans(ids["log"], len(LOG), MAX_REFS)))
    answer, scanned, lines = counted(
        lambda: ok(engine, "lcm_evidence_pack", refs=late, budget_tokens=8000)
    )
    assert scanned <= MAX_SCANNED and lines <= MAX_LINES_PACK, (scanned, lines)
    limits = limits_of(answer)
    assert limits["lines_cut"] >= 1 and {c["by"] for c in limits["lines"]} == {"call"}
    cut = [line for line in answer["lines"] if "read_chars" in line]
    assert cut and all(
        d["span"][1] <= line["read_chars"] for line in cut for d in line.get("dates", [])
    )


def test_retrieve_over_hostile_lines_is_bounded(hostile: Any) -> None:
    engine, _ids = hostile
    question = "What did the zebra log say about items in March 2024?"
    answer, scanned, lines = counted(lambda: ok(engine, "lcm_retrieve", question=question))
    assert scanned <= MAX_SCANNED and lines <= MAX_LINES_RETRIEVE, (scanned, lines)
    assert answer["status"] in ("sufficient", "insufficient") and answer["pack"]["lines"]
    if any(
        "read_chars" in line for line in answer["pack"]["lines"]
    ):  # shown past what was read: said
        assert limits_of(answer)["lines_cut"] >= 1


def test_the_pre_answer_gate_over_hostile_lines_is_bounded(hostile: Any) -> None:
    engine, _ids = hostile
    core = engine.core
    assert core is not None and core.binding.conversation_id is not None
    message = ("What did the zebra log say about items last Tuesday? " + _UNIT * 8)[:990] + "?"
    brief, scanned, lines = counted(
        lambda: core.preanswer.brief(
            message,
            conversation_id=core.binding.conversation_id,
            reach=core.reach(False),
            visible=None,
            budget_tokens=core.config.preanswer_evidence_budget_tokens,
            anchor=WHEN + 86400,
        )
    )
    assert scanned <= MAX_SCANNED and lines <= MAX_LINES_RETRIEVE, (scanned, lines)
    assert brief.need.recall and brief.block is not None and "zebra" in brief.block


def test_assertion_extraction_is_linear_in_a_dense_message(monkeypatch: pytest.MonkeyPatch) -> None:
    # The time limits off, so the count shows the algorithm's own work, not where a clock cut it.
    monkeypatch.setattr(assertion_rules, "PATTERN_TIMEOUT_S", 60.0)
    monkeypatch.setattr(assertion_rules, "MESSAGE_BUDGET_S", 600.0)
    text = ("May 1. `x`. " * 2000)[:20_000]  # ~1,700 sentences, as many dates and code spans
    found, _scanned, lines = counted(
        lambda: assertion_rules.extract(text, "user", lambda t: timeexpr.resolve_dates(t, WHEN))
    )
    assert lines <= MAX_LINES_EXTRACT, lines
    assert len(found) <= assertion_rules.MAX_PER_MESSAGE


def test_question_and_claims_are_capped(hostile: Any) -> None:
    engine, ids = hostile
    long = "When? " * (MAX_QUESTION_CHARS // 6 + 1)
    for name, args in (
        ("lcm_evidence_pack", {"refs": [str(ids["huge"])]}),
        ("lcm_compile_evidence", {"claims": [{"text": "x", "refs": [str(ids["huge"])]}]}),
        ("lcm_compute", {"operation": "count", "refs": [str(ids["huge"])]}),
    ):
        answer = engine.handle_tool_call(name, {**args, "question": long})
        assert str(MAX_QUESTION_CHARS) in answer, (name, answer[:200])


def test_a_cut_splits_no_number_and_shortens_no_date() -> None:
    filler = ("words " * MAX_LINE_CHARS)[: MAX_LINE_CHARS - 10]
    number = filler + " 12345678901234567890 and more " + "tail " * 200
    cut = ReadingBudget().scan(number, WHEN)
    assert (
        cut.read == len(filler) + 1 and cut.by == "line"
    )  # the number starting before the cut is left out whole
    # "May 7," then spaces past what was read, then the year: read on, "May 7" alone would be
    # another day; it is dropped and the cut moves before it.
    date = (
        filler[:-60]
        + " 1 June 2023 was the day we all met again; May 7,"
        + " " * (2 * SLACK_CHARS)
        + "2023 "
        + "x " * 200
    )
    assert date.index("May 7") < MAX_LINE_CHARS  # before the cut: read, unless it may run on
    cut = ReadingBudget().scan(date, WHEN)
    assert [m.phrase for m in cut.dates][-1:] == ["1 June 2023"] and cut.read is not None
    assert cut.read <= date.index("May 7")
    small = ReadingBudget(chars_left=100)
    assert small.scan("On 1 June 2023 we met.", WHEN).read is None and small.chars_left == 100 - 22
    assert small.scan("x " * 200, WHEN).by == "call" and small.chars_left <= 0

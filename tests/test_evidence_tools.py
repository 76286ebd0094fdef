"""lcm_evidence_pack, lcm_compile_evidence and lcm_compute through the host entry point, on real
SQLite and PostgreSQL: answers, fail-closed cases for each operation, bad input, another owner's rows, the cap."""

from __future__ import annotations

from pathlib import Path

import pytest

from hermes_lcm import store as store_module

from .evidencetest import at, engine_for, place, said
from .tooltest import err, ok

FRI = at(2023, 5, 12, 15)  # a Friday


pytestmark = pytest.mark.both_backends


@pytest.fixture
def home(tmp_path: Path, backend_env: dict[str, str]):
    place(tmp_path, backend_env)
    yield tmp_path
    place(tmp_path, None)
    store_module.close_all()


@pytest.fixture
def talk(home):
    engine = engine_for(home, "s1")
    ids = said(
        engine,
        ("I adopted a cat last Friday.", FRI),  # 0: 2023-05-05
        ("We moved to Lisbon on 2 June 2023.", at(2023, 6, 3, 9)),  # 1
        ("The bike cost $450.", at(2023, 6, 4, 9)),  # 2
        ("The helmet cost $75.", at(2023, 6, 4, 9, 5)),  # 3
        ("The trip was 12 km, then 30 minutes more.", at(2023, 6, 5, 9)),  # 4
        ("My favourite colour is green.", at(2023, 6, 6, 9)),  # 5
        ("Now my favourite colour is blue.", at(2023, 7, 6, 9)),  # 6
        ("Sometime in May 2023 I started running.", at(2023, 7, 7, 9)),  # 7
        ("I went there on 3 May 2023 and on 9 May 2023.", at(2023, 7, 8, 9)),  # 8
        ("It weighs 3 kg.", at(2023, 7, 9, 9)),
    )  # 9
    return engine, ids


def test_tools_work_by_default_and_hide_when_off(home):
    engine = engine_for(home, "s1")
    ids = said(engine, ("hello there", FRI))
    assert ok(engine, "lcm_evidence_pack", refs=[str(ids[0])])["lines"][0]["text"] == "hello there"
    off = engine_for(home, "s2", LCM_EVIDENCE_TOOLS_ENABLED="false")
    assert ok(off, "lcm_evidence_pack", refs=[str(ids[0])])["status"] == "disabled"


def test_compute_date_and_date_diff(talk):
    engine, ids = talk
    date = ok(engine, "lcm_compute", operation="date", refs=[str(ids[0])])
    assert date["status"] == "ok" and date["result"] == "2023-05-05"
    assert date["trace"][0]["phrase"] == "last Friday" and date["trace"][0]["ref"] == str(ids[0])
    diff = ok(
        engine,
        "lcm_compute",
        operation="date_diff",
        refs=[str(ids[0]), str(ids[1])],
        question="How many days between adopting the cat and moving?",
    )
    assert (diff["status"], diff["result"], diff["unit"]) == ("ok", 28, "days")
    weeks = ok(
        engine,
        "lcm_compute",
        operation="date_diff",
        refs=[str(ids[0]), str(ids[1])],
        question="how many weeks",
    )
    assert weeks["result"] == 4 and weeks["unit"] == "weeks"


def test_compute_fails_closed(talk):
    engine, ids = talk

    def why(operation: str, *refs: object, question: str = "") -> str:
        answer = ok(
            engine,
            "lcm_compute",
            operation=operation,
            refs=[str(r) for r in refs],
            question=question,
        )
        assert answer["status"] == "insufficient" and "result" not in answer, answer
        return str(answer["reason"])

    assert "names no date" in why("date", ids[5])
    assert "2 dates" in why("date", ids[8])  # two days: ambiguous
    assert "exactly one" in why("date", ids[0], ids[1])
    assert "too coarse" in why("date_diff", ids[7], ids[1])  # "May 2023" is a month, days asked
    assert "exactly two" in why("date_diff", ids[0])
    assert "mixed units" in why("sum", ids[2], ids[9])  # usd + kg
    assert "2 numbers" in why("sum", ids[4])  # cite a span instead
    assert "no number" in why("difference", ids[2], ids[5])
    assert "exactly two" in why("difference", ids[2])
    assert "could not be read" in why("sum", ids[2], 999999)  # a missing operand
    assert "cannot be ordered" in why(
        "order", ids[7], f"{ids[8]}:0-26"
    )  # "May 2023" holds "3 May 2023"
    assert "2 dates" in why("latest", ids[8], ids[0])
    assert "at least two" in why("order", ids[0])
    assert "no words" in why("count", f"{ids[2]}:18-19")  # "." only


def test_compute_sum_difference_count_order_latest(talk):
    engine, ids = talk
    total = ok(engine, "lcm_compute", operation="sum", refs=[str(ids[2]), str(ids[3])])
    assert (total["result"], total["unit"]) == (525, "usd")
    assert [t["ref"] for t in total["trace"]] == [str(ids[2]), str(ids[3])]
    diff = ok(engine, "lcm_compute", operation="difference", refs=[str(ids[2]), str(ids[3])])
    assert diff["result"] == 375
    span = ok(
        engine, "lcm_compute", operation="sum", refs=[f"{ids[4]}:0-18"]
    )  # "The trip was 12 km"
    assert (span["result"], span["unit"]) == (12, "km")
    count = ok(
        engine, "lcm_compute", operation="count", refs=[str(ids[5]), str(ids[6]), f"{ids[5]}:0-29"]
    )
    assert count["result"] == 2
    order = ok(
        engine, "lcm_compute", operation="order", refs=[str(ids[1]), str(ids[0]), str(ids[6])]
    )
    assert order["result"] == [str(ids[0]), str(ids[1]), str(ids[6])]
    latest = ok(
        engine,
        "lcm_compute",
        operation="latest",
        refs=[str(ids[6]), str(ids[5])],
        question="What is my favourite colour?",
    )
    assert latest["result"]["ref"] == str(ids[6]) and "blue" in latest["result"]["text"]


def test_compute_and_pack_bad_input_is_a_clear_error(talk):
    engine, ids = talk
    assert "operation must be one of" in err(
        engine, "lcm_compute", operation="median", refs=[str(ids[0])]
    )
    assert "812:10-80" in err(engine, "lcm_compute", operation="sum", refs=["twelve"])
    assert "refs is required" in err(engine, "lcm_evidence_pack", refs=[])
    assert "claims must be a list" in err(
        engine, "lcm_compile_evidence", question="q", claims="nope"
    )
    assert "at most" in err(engine, "lcm_evidence_pack", refs=[str(i) for i in range(1, 100)])


def test_compile_evidence_supports_only_exact_sources(talk):
    engine, ids = talk
    brief = ok(
        engine,
        "lcm_compile_evidence",
        question="When did I adopt the cat and where did we move?",
        claims=[
            {"text": "The user adopted a cat on 5 May 2023.", "refs": [str(ids[0])]},
            {"text": "They moved to Lisbon", "refs": [str(ids[1])], "quote": "moved to Lisbon"},
            {"text": "They moved to Porto on 2 June 2023.", "refs": [str(ids[1])]},
            {"text": "The bike cost $500.", "refs": [str(ids[2])]},
            {"text": "The cat is called Tom.", "refs": []},
            {
                "text": "Green is my favourite",
                "refs": [str(ids[5])],
                "quote": "favourite colour is red",
            },
            {"text": "The user adopted a cat.", "refs": ["999999"]},
        ],
    )
    status = [c["status"] for c in brief["claims"]]
    assert status == [
        "supported",
        "supported",
        "unsupported",
        "unsupported",
        "unsupported",
        "unsupported",
        "unsupported",
    ]
    assert "Porto" in brief["claims"][2]["why"] and "500" in brief["claims"][3]["why"]
    assert brief["claims"][6]["missing_refs"] == ["999999"]
    assert (
        brief["sufficiency"]["sufficient"] is False
        and brief["sufficiency"]["claims_supported"] == "2/7"
    )
    assert {line["store_id"] for line in brief["lines"]} == {ids[0], ids[1]}
    good = ok(
        engine,
        "lcm_compile_evidence",
        question="Where did we move?",
        claims=[{"text": "They moved to Lisbon on 2 June 2023.", "refs": [str(ids[1])]}],
    )
    assert good["sufficiency"]["sufficient"] is True


def test_another_owners_refs_are_missing_in_every_tool(home):
    victim = engine_for(home, "v1", chat="alice")
    secret = said(victim, ("alice paid $9931 on May 7, 2023 for the vault", at(2023, 5, 8)))[0]
    attacker = engine_for(home, "a1", chat="bob")
    said(attacker, ("bob says hi", at(2023, 5, 9)))
    answers = [
        ok(
            attacker,
            "lcm_evidence_pack",
            refs=[str(secret), f"{secret}:0-10", f"m{secret}"],
            question="vault?",
        ),
        ok(attacker, "lcm_compute", operation="sum", refs=[str(secret)]),
        ok(attacker, "lcm_compute", operation="date", refs=[str(secret)]),
        ok(
            attacker,
            "lcm_compile_evidence",
            question="what did alice pay?",
            claims=[{"text": "alice paid $9931", "refs": [str(secret)], "quote": "paid $9931"}],
        ),
    ]
    for answer in answers:
        text = str(answer)
        assert (
            "9931" not in text.replace("paid $9931", "")
            and "vault for" not in text
            and "2023-05-07" not in text
        )
    assert answers[1]["status"] == answers[2]["status"] == "insufficient"
    assert answers[3]["claims"][0]["status"] == "unsupported"
    shared = engine_for(home, "a2", chat="bob", LCM_SHARED_MEMORY="true")
    assert ok(shared, "lcm_compute", operation="sum", refs=[str(secret)])["result"] == 9931


def test_answers_stay_within_a_small_cap(home):
    engine = engine_for(home, "s1", LCM_TOOL_RESPONSE_MAX_CHARS="4000")
    ids = said(engine, *[(f"word{i} " * 600, FRI + i) for i in range(6)])
    pack = ok(engine, "lcm_evidence_pack", refs=[str(i) for i in ids], budget_tokens=8000)
    assert pack["lines"] and pack.get("omitted")
    latest = ok(engine, "lcm_compute", operation="latest", refs=[str(i) for i in ids])
    assert latest["status"] == "ok" and latest["result"]["truncated"] is True


def test_a_quote_does_not_carry_a_wrong_value(talk):
    engine, ids = talk
    brief = ok(
        engine,
        "lcm_compile_evidence",
        question="What did the bike cost?",
        claims=[
            {"text": "The bike cost $500.", "refs": [str(ids[2])], "quote": "The bike cost"},
            {"text": "The bike cost $450.", "refs": [str(ids[2])], "quote": "The bike cost"},
        ],
    )
    assert [c["status"] for c in brief["claims"]] == ["unsupported", "supported"]
    assert "500" in brief["claims"][0]["why"]


def test_exact_refs_from_the_transcript_tools_read_the_same_text(home):
    """include_exact_ref on lcm_load_session and lcm_expand: each message carries the ref of the
    text shown (a span when it was cut, the bare id when whole), and lcm_evidence_pack reads back
    exactly that text; without the flag no answer carries one."""
    engine = engine_for(home, "s1")
    long = "The deploy key rotates every 30 days. " * 400
    ids = said(engine, ("short line about the cat", FRI), (long, at(2023, 5, 13, 9)))
    page = ok(engine, "lcm_load_session", session_id="s1", include_exact_ref=True)
    refs = {m["store_id"]: (m["exact_ref"], m["content"]) for m in page["messages"]}
    assert refs[ids[0]][0] == str(ids[0])
    cut_ref, shown = refs[ids[1]]
    assert cut_ref == f"{ids[1]}:0-{len(shown)}" and len(shown) < len(long)
    one = ok(engine, "lcm_expand", store_id=ids[1], content_offset=100, include_exact_ref=True)
    assert one["exact_ref"] == f"{ids[1]}:100-{100 + len(one['content'])}"
    for ref, text in ((cut_ref, shown), (one["exact_ref"], one["content"])):
        line = ok(engine, "lcm_evidence_pack", refs=[ref], budget_tokens=20000)["lines"][0]
        assert line["text"] == text, ref
    whole = ok(engine, "lcm_expand", store_id=ids[0], include_exact_ref=True)
    assert whole["exact_ref"] == str(ids[0])
    plain = ok(engine, "lcm_load_session", session_id="s1")
    assert all("exact_ref" not in m for m in plain["messages"])

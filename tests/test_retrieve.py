"""lcm_retrieve (evidence/retrieve.py, handlers/evidence_retrieve.py): the bounded controller on real
engines on SQLite files and on PostgreSQL (``both_backends``): what it finds, its bounds, its
plan, its reach, and the tool's gate."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from hermes_lcm.engine import LcmEngine
from hermes_lcm.evidence import build_pack
from hermes_lcm.evidence.retrieve import MAX_CALLS, MAX_CONTEXT_TOKENS, MAX_REFS, retrieve

ON = {"LCM_ADAPTIVE_RETRIEVAL_ENABLED": "true"}
DAY = datetime(2023, 5, 8, 14, 0, tzinfo=UTC).timestamp()


def call(engine: LcmEngine, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    return json.loads(engine.handle_tool_call(tool, args))


def lines_of(answer: dict[str, Any]) -> list[str]:
    return [line["text"] for line in answer["pack"]["lines"]]


def ask(engine: LcmEngine, question: str, **options: Any) -> Any:
    """evidence.retrieve for ``question``, as the engine's own session asks it."""
    core = engine.core
    assert core is not None
    return retrieve(
        core.store,
        core.dag,
        question,
        conversation_id=core.binding.conversation_id,
        reach=core.reach(False),
        **options,
    )


def turns(texts: list[str], start: float | None = None) -> list[dict[str, Any]]:
    """Alternating user/assistant turns, a minute apart from ``start`` when given."""
    return [
        {
            "role": "user" if i % 2 == 0 else "assistant",
            "content": text,
            **({"timestamp": start + 60 * i} if start is not None else {}),
        }
        for i, text in enumerate(texts)
    ]


def seed(engine: LcmEngine) -> None:
    engine.ingest_host(
        [
            {
                "role": "user",
                "content": "Caroline: I went to the LGBTQ support group yesterday and it was powerful.",
                "timestamp": DAY,
            },
            {
                "role": "assistant",
                "content": "Melanie: That sounds wonderful, I'm proud of you!",
                "timestamp": DAY + 30,
            },
            {
                "role": "user",
                "content": "Caroline: Next I want to look into adoption agencies.",
                "timestamp": DAY + 60,
            },
            {
                "role": "assistant",
                "content": "Melanie: Which one are you thinking of?",
                "timestamp": DAY + 90,
            },
            {
                "role": "user",
                "content": "Caroline: Probably Sunrise Families, they help single parents.",
                "timestamp": DAY + 120,
            },
        ]
    )


@pytest.mark.both_backends
def test_off_keeps_the_disabled_answer(make_engine: Any) -> None:
    engine = make_engine()
    seed(engine)
    answer = call(
        engine, "lcm_retrieve", {"question": "When did Caroline go to the LGBTQ support group?"}
    )
    assert answer["status"] == "disabled" and answer["flag"] == "LCM_ADAPTIVE_RETRIEVAL_ENABLED"
    assert answer["flag_on"] is False and "enable" in answer and "pack" not in answer


@pytest.mark.both_backends
def test_finds_the_cited_line_with_its_resolved_date(make_engine: Any) -> None:
    engine = make_engine(**ON)
    seed(engine)
    answer = call(
        engine, "lcm_retrieve", {"question": "When did Caroline go to the LGBTQ support group?"}
    )
    assert answer["status"] == "sufficient", answer
    texts = lines_of(answer)
    assert any("support group yesterday" in t for t in texts)
    line = next(x for x in answer["pack"]["lines"] if "support group" in x["text"])
    assert line["at"].startswith("2023-05-08") and line["dates"][0]["first"] == "2023-05-07"
    assert answer["calls"][0]["tool"] == "lcm_grep" and len(answer["calls"]) <= MAX_CALLS
    assert "answer" not in answer and "next" in answer  # no prose: the model answers from the pack


@pytest.mark.both_backends
def test_expansion_brings_the_adjacent_answer(make_engine: Any) -> None:
    engine = make_engine(**ON)
    seed(engine)
    found = ask(
        engine, "Which adoption agency is Caroline thinking of", steps=("lcm_grep", "lcm_expand")
    )
    texts = [line["text"] for line in found.pack.as_dict()["lines"]]
    assert [c.tool for c in found.calls][-1] == "lcm_expand" or found.sufficient
    assert any("Sunrise Families" in t for t in texts), texts  # shares no word but "Caroline"


@pytest.mark.both_backends
def test_the_bounds_hold(make_engine: Any) -> None:
    engine = make_engine(**ON)
    engine.ingest_host(
        turns(
            [
                f"note {i}: the billing queue latency budget was discussed again " + "x " * 200
                for i in range(120)
            ]
        )
    )
    found = ask(engine, "What did Zed decide about the billing queue latency budget?")
    assert len(found.calls) <= MAX_CALLS and len(found.refs) <= MAX_REFS
    assert (
        found.context_tokens <= MAX_CONTEXT_TOKENS + 1000
    )  # one hit may cross the line, then it stops
    assert not found.sufficient and found.stopped in ("budget", "exhausted")
    assert found.pack.used_tokens <= 1500 and "zed" in found.missing_terms


@pytest.mark.both_backends
def test_short_turns_fill_the_budget(make_engine: Any) -> None:
    """The pack holds the longest run of the best refs that fits whole: one more would not.
    Costing each line at its text plus a guessed 60 tokens left a sixth of the budget unused
    on conversational turns (and the evidence that would have filled it out)."""
    engine = make_engine(**ON)
    engine.ingest_host(
        turns([f"turn {i}: we talked about the harbour lighthouse again" for i in range(60)], DAY)
    )
    assert engine.core is not None
    core = engine.core
    found = ask(engine, "What about the harbour lighthouse?", budget_tokens=800)
    shown = [line["store_id"] for line in found.pack.as_dict()["lines"]]
    refs = list(found.refs)
    assert len(refs) > len(shown) >= 8 and set(shown) == set(refs[: len(shown)])
    longer = build_pack(core.store, refs[: len(shown) + 1], core.reach(False), budget_tokens=800)
    assert longer.omitted  # the next best ref did not fit whole
    assert found.pack.used_tokens <= 800


@pytest.mark.both_backends
def test_a_named_period_is_searched_first(make_engine: Any) -> None:
    engine = make_engine(**ON)
    seed(engine)
    engine.ingest_host(
        [
            {
                "role": "user",
                "content": "Caroline: the support group moved online in June.",
                "timestamp": DAY + 40 * 86400,
            }
        ]
    )
    assert engine.core is not None
    core = engine.core
    found = ask(engine, "What happened at the support group on May 8, 2023?")
    assert found.calls[0].tool == "lcm_recent" and found.calls[0].args["period"] == "May 8, 2023"
    first = set(found.calls[0].refs)
    texts = {row.id: row.content for row in core.store.messages_by_ids(list(first))}
    assert texts and all("moved online" not in t for t in texts.values())


@pytest.mark.both_backends
def test_an_empty_question_and_a_long_one(make_engine: Any) -> None:
    engine = make_engine(**ON)
    seed(engine)
    assert "error" in call(engine, "lcm_retrieve", {})
    assert "error" in call(engine, "lcm_retrieve", {"question": "x " * 3000})
    answer = call(engine, "lcm_retrieve", {"question": "?!"})
    assert (
        answer["stopped"] == "nothing" and answer["pack"]["lines"] == [] and answer["calls"] == []
    )


def _owner(home: Path, session: str, user: str, where: dict[str, str]) -> LcmEngine:
    base = {"HERMES_HOME": str(home), "LCM_SUMMARY_PROVIDER": "extractive", **ON, **where}
    engine = copy.deepcopy(LcmEngine(env=base))
    engine.update_model("fake-model", 64000)
    engine.on_session_start(session, hermes_home=str(home), platform="telegram", user_id=user)
    return engine


@pytest.mark.both_backends
def test_another_owners_rows_are_never_read(tmp_path: Path, backend_env: dict[str, str]) -> None:
    """Attack: Mallory's conversation in the same database says the same words; Bob's controller
    searches every conversation in his reach and never sees hers, nor reports her ids."""
    mallory = _owner(tmp_path, "mallory-1", "mallory", backend_env)
    mallory.ingest_host(
        [
            {
                "role": "user",
                "content": "The Zanzibar vault code for the LGBTQ support group is 9911.",
            },
            {"role": "assistant", "content": "Stored: Zanzibar vault code 9911."},
        ]
    )
    bob = _owner(tmp_path, "bob-1", "bob", backend_env)
    bob.ingest_host(
        [
            {"role": "user", "content": "What is the vault code for the support group?"},
            {"role": "assistant", "content": "I do not know it."},
        ]
    )
    answer = call(
        bob, "lcm_retrieve", {"question": "What is the Zanzibar vault code for the support group?"}
    )
    assert "9911" not in json.dumps(answer) and "LGBTQ" not in json.dumps(answer)
    assert [c["tool"] for c in answer["calls"]][:2] == [
        "lcm_grep",
        "lcm_recall",
    ]  # it did look beyond
    assert mallory.core is not None
    hers = {
        row.id
        for row in mallory.core.store.messages_after(mallory.core.binding.conversation_id or 0, 0)
    }
    assert hers and not hers & {line["store_id"] for line in answer["pack"]["lines"]}
    assert not any(hers & set(c["new_refs"]) for c in answer["calls"])


def test_a_question_about_two_people_is_searched_for_each() -> None:
    from hermes_lcm.evidence.retrieve import part_queries
    from hermes_lcm.search.query import build_query

    def parts(question: str) -> list[list[str]]:
        return [[t.text for t in q.parts] for q in part_queries(question, build_query(question))]

    assert parts("What animal do both Nate and Joanna like?") == [
        ["animal", "nate", "like"],
        ["animal", "joanna", "like"],
    ]
    assert parts("Which cities has John been to?") == [["cities", "john"]]
    assert parts("Salt and Pepper, which did I buy?") == [["salt", "pepper", "buy"]]  # at the start


def test_each_persons_own_turn_reaches_the_pack(make_engine: Any) -> None:
    """The turns that name both people outnumber the page; each person's own answer still
    comes in, because each is searched for apart from the other."""
    engine = make_engine(**ON)
    both = [
        f"Nate and Joanna like to walk past the animal shelter on the long road by the river, day {i}"
        for i in range(30)
    ]
    engine.ingest_host(
        turns(
            [
                "Nate: the animal I like is a turtle",
                *both[:15],
                "Joanna: I like turtles, a calm animal",
                *both[15:],
            ],
            DAY,
        )
    )
    found = ask(engine, "What animal do both Nate and Joanna like?")
    text = " ".join(line["text"] for line in found.pack.as_dict()["lines"])
    assert "the animal I like is a turtle" in text
    assert "I like turtles, a calm animal" in text

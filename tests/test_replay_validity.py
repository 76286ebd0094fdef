"""Whatever comes in, compress returns a valid, bounded, non-empty prompt.

Malformed histories (orphan, duplicated, reordered and early tool results, malformed tool calls,
odd roles and content) and very wide tool turns (thousands of calls, long results) go through a
real engine on a real SQLite file or PostgreSQL schema (ingest, then compress) and through ``core.trim`` (the
no-store fallback). Every output must pass the strict provider check ``wire.problems``, fit the
budget the engine used, keep the newest user request (whole, or its head with the cut note),
be non-empty when anything was storable, and every storable input message must be stored.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hermes_lcm.base.tokens import count_messages
from hermes_lcm.base.wire import problems
from hermes_lcm.core import trim
from hermes_lcm.engine import LcmEngine
from hermes_lcm.prompt.assemble import build, newest_request
from hermes_lcm.prompt.blocks import Item
from hermes_lcm.prompt.budget import plan_budget
from hermes_lcm.store import close_all

from .conftest import fresh_database, new_engine
from .fuzzmsgs import is_storable, malformed_history, newest_request_text, shows, wide_history

pytestmark = pytest.mark.both_backends

PROPERTY = settings(
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.function_scoped_fixture,
        HealthCheck.data_too_large,
    ],
)


def _call(cid: Any, name: Any = "f", args: Any = "{}", **extra: Any) -> dict[str, Any]:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": args}, **extra}


def _ask(text: str = "go") -> dict[str, Any]:
    return {"role": "user", "content": text}


def _result(cid: Any, content: Any = "ok") -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": cid, "content": content}


# -- the strict check itself ---------------------------------------------------------------------


def test_the_strict_check_accepts_valid_sequences():
    good = [
        _ask(),
        {"role": "assistant", "content": None, "tool_calls": [_call("a"), _call("b")]},
        _result("b"),
        _result("a", [{"type": "text", "text": "A"}]),
        {"role": "assistant", "content": [{"type": "text", "text": "done"}]},
        {
            "role": "user",
            "content": [{"type": "image_url", "image_url": {"url": "https://x.invalid/a.png"}}],
        },
        {"role": "assistant", "content": "", "tool_calls": [_call("c", args='{"p": 1}')]},
        _result("c", ""),
    ]
    assert problems(good) == []


@pytest.mark.parametrize(
    "messages, rule",
    [
        ([_result("a")], "not right after its call"),
        (
            [
                _ask(),
                {"role": "assistant", "content": "", "tool_calls": [_call("a")]},
                _ask(),
                _result("a"),
            ],
            "has no result",
        ),
        (
            [
                {"role": "assistant", "content": "", "tool_calls": [_call("a")]},
                _result("a"),
                _result("a"),
            ],
            "a second result",
        ),
        (
            [
                {"role": "assistant", "content": "", "tool_calls": [_call("a")]},
                _result("a"),
                {"role": "assistant", "content": "", "tool_calls": [_call("a")]},
                _result("a"),
            ],
            "used twice",
        ),
        (
            [{"role": "assistant", "content": "", "tool_calls": [_call(7)]}, _result(7)],
            "without an id",
        ),
        ([{"role": "assistant", "content": "", "tool_calls": ["x"]}], "not an object"),
        (
            [
                {"role": "assistant", "content": "", "tool_calls": [_call("a", name="")]},
                _result("a"),
            ],
            "function name",
        ),
        (
            [
                {"role": "assistant", "content": "", "tool_calls": [_call("a", args={"p": 1})]},
                _result("a"),
            ],
            "not a string",
        ),
        (
            [
                {"role": "assistant", "content": "", "tool_calls": [_call("a", args="{oops")]},
                _result("a"),
            ],
            "not a JSON object",
        ),
        (
            [
                {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [{**_call("a"), "type": "custom"}],
                },
                _result("a"),
            ],
            "type is not",
        ),
        ([{"role": "assistant", "content": "", "tool_calls": []}], "non-empty list"),
        ([{"role": "assistant", "content": None}], "content that is not text"),
        ([{"role": "assistant", "content": "  "}], "empty content"),
        ([{"role": "user", "content": {"a": 1}}], "not text or parts"),
        ([{"role": "user", "content": [{"text": "no type"}]}], "typed object"),
        ([{"role": "developer", "content": "x"}], "not a user, assistant or tool"),
        ([{"role": "user", "content": "x", "tool_calls": [_call("a")]}], "tool calls on a user"),
        (
            [{"role": "assistant", "content": "", "tool_calls": [_call("a")]}, _result("a", None)],
            "not text",
        ),
    ],
)
def test_the_strict_check_names_each_broken_rule(messages, rule):
    found = problems(messages)
    assert any(rule in p for p in found), found


# -- malformed input ---------------------------------------------------------------------


def _check(out: list[dict[str, Any]], history: list[Any], total: int) -> None:
    assert problems(out) == [], problems(out)
    assert count_messages(out) <= total
    if any(is_storable(m) for m in history):
        assert out, "empty prompt from a history with storable messages"
    wanted = newest_request_text(history)
    if wanted is not None:
        assert shows(out, wanted), f"the newest user request {wanted[:60]!r} is missing"


def _through_engine(
    home: Path, history: list[Any], threshold: int, backend: str
) -> tuple[LcmEngine, list[dict[str, Any]]]:
    with fresh_database(backend) as where:
        return _engine_checked(new_engine(home, threshold=threshold, **where), history)


def _engine_checked(
    engine: LcmEngine, history: list[Any]
) -> tuple[LcmEngine, list[dict[str, Any]]]:
    engine.ingest_host(list(history))
    out = engine.compress(list(history), current_tokens=None)
    assert engine.errors == [], engine.errors
    budget = engine.core.budget(engine.threshold_tokens, engine.overhead(history, None))
    _check(out, history, budget.total)
    stored = engine.core.store.messages_after(engine.core.binding.conversation_id, 0)
    assert [m.role for m in stored] == [m["role"] for m in history if is_storable(m)], (
        "a message was not stored"
    )
    return engine, out


def _through_trim(history: list[Any], threshold: int) -> list[dict[str, Any]]:
    budget = plan_budget(
        threshold,
        int(threshold * 0.15),
        max(256, threshold // 10),
        tail_count=32,
        tail_max_tokens=0,
        target_ratio=0.6,
        summary_ratio=0.4,
    )
    out = trim(history, budget)
    _check(out, history, budget.total)
    return out


@settings(PROPERTY, max_examples=60)
@given(rng=st.randoms(use_true_random=False), threshold=st.integers(700, 6000))
def test_malformed_histories_give_valid_bounded_prompts_and_lose_nothing(
    tmp_path_factory, backend, rng, threshold
):
    history = malformed_history(rng)
    _through_engine(tmp_path_factory.mktemp("malformed"), history, threshold, backend)
    _through_trim(history, threshold)


@settings(PROPERTY, max_examples=150)
@given(
    rng=st.randoms(use_true_random=False),
    total=st.integers(64, 400),
    tail_count=st.integers(1, 40),
    wide=st.booleans(),
)
def test_down_to_the_smallest_budget_the_prompt_is_valid_and_keeps_the_request(
    rng, total, tail_count, wide
):
    """Assembly alone, budgets from the 64-token floor up: the request's head still shows."""
    history = (
        wide_history(rng, [(rng.randint(1, 400), rng.randint(0, 2000))])
        if wide
        else malformed_history(rng, big=300)
    )
    messages = [m for m in history if is_storable(m)]
    items = [
        Item(str(m["role"]), count_messages([m]), dict(m), store_id=i + 1)
        for i, m in enumerate(messages)
    ]
    budget = plan_budget(
        total, 0, 0, tail_count=tail_count, tail_max_tokens=0, target_ratio=0.6, summary_ratio=0.4
    )
    _check(build([], items, budget, newest_request(items)), history, budget.total)


def test_what_cannot_be_sent_is_shown_as_text_naming_its_row(make_engine):
    history = [
        _ask("first"),
        _result("ghost", "ORPHAN-RESULT"),
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [_call("a"), "BROKEN-CALL", _call("b", name="")],
        },
        _result("a", "A-RESULT"),
        _result("a", "SECOND-RESULT"),
        {"role": "bogus", "content": "BOGUS-ROLE"},
        {"role": "assistant", "content": None},
        _ask("last"),
        _result("late-ghost", "LATE-ORPHAN"),
    ]
    engine = make_engine(threshold=10**6)
    out = engine.compress(list(history), current_tokens=None)
    assert problems(out) == []
    text = json.dumps(out)
    for mark in ("ORPHAN-RESULT", "BROKEN-CALL", "SECOND-RESULT", "BOGUS-ROLE", "A-RESULT"):
        assert mark in text, mark
    rows = engine.core.store.messages_after(engine.core.binding.conversation_id, 0)
    orphan = next(m for m in out if "ORPHAN-RESULT" in str(m.get("content")))
    assert orphan["role"] == "user" and f"lcm_expand store_id={rows[1].id}]" in orphan["content"]
    assert [m.role for m in rows] == [m["role"] for m in history]
    assert out[-1]["role"] == "user" and "LATE-ORPHAN" in out[-1]["content"]
    # a new process gets back the list compress returned, ending in a message shown as text:
    # its marker names the stored row, so only the new message is stored
    resumed = make_engine(threshold=10**6)
    resumed.ingest_host([*out, {"role": "assistant", "content": "next"}])
    rows = resumed.core.store.messages_after(resumed.core.binding.conversation_id, 0)
    assert [m.content for m in rows[-2:]] == ["LATE-ORPHAN", "next"] and len(rows) == len(
        history
    ) + 1


def test_a_valid_history_passes_through_unchanged(make_engine):
    history = [
        _ask(),
        {"role": "assistant", "content": None, "tool_calls": [_call("a")]},
        _result("a"),
        {"role": "assistant", "content": "done"},
    ]
    items = [Item.host(m) for m in history]
    budget = plan_budget(
        10**5, 0, 0, tail_count=32, tail_max_tokens=0, target_ratio=0.6, summary_ratio=0.4
    )
    assert build([], items, budget) == history


FUZZ_INPUTS = 2000
FUZZ_INPUTS_PG = 500


def test_seeded_fuzz_of_malformed_inputs_has_no_invalid_output(tmp_path, backend_env):
    """>= 2,000 malformed histories through a real engine (a new session each) and through trim:
    no output breaks a provider rule, the budget or the request; no storable message is lost."""
    invalid: list[tuple[int, str, list[str]]] = []
    checked = 0
    try:
        # PostgreSQL: the first 500 seeds (every one a new session over TCP, ~2.5x SQLite's time per
        # input); the malformed shapes repeat well inside that range, SQLite keeps the full 2,000.
        for seed in range(FUZZ_INPUTS if not backend_env else FUZZ_INPUTS_PG):
            rng = random.Random(seed)
            history = malformed_history(rng, big=300)
            threshold = rng.randint(700, 3000)
            engine = new_engine(
                tmp_path, threshold=threshold, session=f"fuzz-{seed}", **backend_env
            )
            out = engine.compress(list(history), current_tokens=None)
            budget = engine.core.budget(engine.threshold_tokens, engine.overhead(history, None))
            for path, result, total in (
                ("engine", out, budget.total),
                ("trim", trim(history, budget), budget.total),
            ):
                checked += 1
                try:
                    _check(result, history, total)
                except AssertionError as exc:
                    invalid.append((seed, path, [str(exc)[:200]]))
            if engine.errors:
                invalid.append((seed, "errors", engine.errors[:2]))
            stored = engine.core.store.message_count(engine.core.binding.conversation_id)
            if stored != sum(1 for m in history if is_storable(m)):
                invalid.append((seed, "lost", [f"{stored} stored"]))
    finally:
        close_all()
    print(f"fuzz: {len(invalid)} invalid of {checked} outputs")
    assert invalid == [], invalid[:5]


# -- wide turns --------------------------------------------------------------------------


@settings(PROPERTY, max_examples=15)
@given(
    rng=st.randoms(use_true_random=False),
    threshold=st.integers(1500, 9000),
    blocks=st.lists(st.tuples(st.integers(1, 3000), st.integers(0, 2000)), min_size=1, max_size=2),
)
def test_wide_tool_turns_give_valid_bounded_prompts_with_the_request(
    tmp_path_factory, backend, rng, threshold, blocks
):
    history = wide_history(rng, blocks)
    _, out = _through_engine(tmp_path_factory.mktemp("wide"), history, threshold, backend)
    assert any("REQUEST" in str(m.get("content")) for m in out)
    _through_trim(history, threshold)


def _wide(n: int, size: int) -> list[dict[str, Any]]:
    calls = [
        _call(f"c{i}", name="read_file", args=json.dumps({"path": f"f{i}.py"})) for i in range(n)
    ]
    return [
        _ask("REQUEST: read all the files"),
        {"role": "assistant", "content": "", "tool_calls": calls},
        *(_result(f"c{i}", f"r{i} " + "x" * size) for i in range(n)),
    ]


@pytest.mark.parametrize("n, size", [(3000, 20), (50, 2000)], ids=["3000-calls", "50-long-results"])
def test_the_reported_wide_turns_keep_the_request(make_engine, n, size):
    history = _wide(n, size)
    engine = make_engine(threshold=6000)
    out = engine.compress(list(history), current_tokens=None)
    budget = engine.core.budget(engine.threshold_tokens, engine.overhead(history, None))
    assert out and problems(out) == [] and count_messages(out) <= budget.total
    assert any(m.get("content") == history[0]["content"] for m in out)
    out = trim(history, budget)
    assert out and problems(out) == [] and count_messages(out) <= budget.total
    assert out[0] == history[0]


def test_long_results_are_shortened_with_their_pairs_kept():
    history = _wide(50, 2000)
    items = [Item(m["role"], count_messages([m]), m, store_id=i + 1) for i, m in enumerate(history)]
    budget = plan_budget(
        7000, 0, 0, tail_count=32, tail_max_tokens=0, target_ratio=0.6, summary_ratio=0.4
    )
    out = build([], items, budget, items[0])
    assert problems(out) == [] and count_messages(out) <= budget.total
    assert [m["role"] for m in out] == ["user", "assistant", *["tool"] * 50]
    assert all(
        "lcm_expand store_id=" in m["content"] and m["content"].startswith(f"r{k} ")
        for k, m in enumerate(out[2:])
    )


def test_a_block_too_wide_for_pairs_becomes_one_text_message_naming_the_rows():
    history = _wide(3000, 20)
    items = [Item(m["role"], count_messages([m]), m, store_id=i + 1) for i, m in enumerate(history)]
    budget = plan_budget(
        5000, 0, 0, tail_count=32, tail_max_tokens=0, target_ratio=0.6, summary_ratio=0.4
    )
    out = build([], items, budget, items[0])
    assert problems(out) == [] and count_messages(out) <= budget.total
    assert out[0] == history[0] and len(out) == 2 and out[1]["role"] == "user"
    assert "3000 tool calls" in out[1]["content"] and "lcm_expand store_id=2]" in out[1]["content"]
    assert (
        "read_file" in out[1]["content"] and "more calls not shown (store ids" in out[1]["content"]
    )

"""Searches made from inside a turn: what the prompt shows, LCM's own traffic and the summaries'
copies do not crowd out the answer (lcm_grep, lcm_recall, lcm_expand_query, `lcm grep`)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hermes_lcm.cli.main import main as cli_main
from hermes_lcm.engine import LcmEngine

from .backends import matching_ids, raw_sql
from .conftest import fresh_database, new_engine
from .convo import host_run
from .tooltest import err, ok, walk

pytestmark = pytest.mark.both_backends

FACT = "Note for later: the staging database password rotation happens every Thursday at 04:30 UTC."
QUESTION = "When does the staging database password rotation happen?"


def filler(i: int) -> list[dict[str, Any]]:
    words = " ".join(f"w{(i * 7 + k) % 97}" for k in range(220))
    return [
        {"role": "user", "content": f"turn {i}: review these notes {words}"},
        {"role": "assistant", "content": f"reviewed turn {i}: {words[:600]}"},
    ]


def lcm_search_turn(n: int, query: str, reply: str, *, text: str = "") -> list[dict[str, Any]]:
    """A turn answered from memory: the question, an lcm_grep call, its result, the reply."""
    call = f"call_mem_{n}"
    result = json.dumps({"hits": [{"store_id": 1, "snippet": FACT}], "count": 1})
    return [
        {"role": "user", "content": query},
        {
            "role": "assistant",
            "content": text,
            "tool_calls": [
                {
                    "id": call,
                    "type": "function",
                    "function": {"name": "lcm_grep", "arguments": json.dumps({"query": query})},
                }
            ],
        },
        {"role": "tool", "name": "lcm_grep", "tool_call_id": call, "content": result},
        {"role": "assistant", "content": reply},
    ]


def compacted_with_fact(engine: LcmEngine, turns: int = 30) -> list[dict[str, Any]]:
    history, outputs = host_run(
        engine,
        [
            [{"role": "user", "content": FACT}, {"role": "assistant", "content": "Noted."}],
            *(filler(i) for i in range(turns)),
        ],
    )
    assert outputs, "the conversation must compact"
    return history


def fact_id(engine: LcmEngine) -> int:
    return int(
        raw_sql(engine.core.store.path, "SELECT id FROM messages WHERE content=?", (FACT,))[0][0]
    )


def ask(
    engine: LcmEngine, history: list[dict[str, Any]], *extra: dict[str, Any]
) -> list[dict[str, Any]]:
    history = [*history, *extra]
    engine.ingest_host(history)
    return history


def test_the_request_being_answered_is_listed_after_the_fact(make_engine):
    engine = make_engine(threshold=3000)
    history = ask(engine, compacted_with_fact(engine), {"role": "user", "content": QUESTION})
    state = engine.core.store.conversation(engine.core.binding.conversation_id)
    fact = fact_id(engine)
    asked = engine.core.store.newest_request(engine.core.binding.conversation_id).id
    assert len(history) > 40
    assert engine.core.store.message(fact).seq <= state.frontier_seq, (
        "the fact must be compacted out"
    )
    for tool in ("lcm_grep", "lcm_recall"):
        answer = ok(engine, tool, query=QUESTION)
        assert answer["hits"][0]["store_id"] == fact, (tool, answer["hits"][:2])
        question = [h for h in answer["hits"] if h.get("store_id") == asked]
        assert answer["in_context"] >= 1 and "include_in_context" in answer["in_context_note"]
        assert question and all(h.get("in_context") for h in question), (
            "listed, marked, after the fact"
        )
        ranked = ok(engine, tool, query=QUESTION, include_in_context=True)
        assert ranked["hits"][0].get("in_context") is True, (
            "in place, the question (every word) ranks first"
        )
        assert ranked["in_context"] >= 1


def test_lcm_traffic_is_stored_but_not_searched_by_default(make_engine):
    engine = make_engine(threshold=3000)
    history = compacted_with_fact(engine)
    turn = lcm_search_turn(
        1,
        QUESTION,
        "Rotation is Thursdays at 04:30 UTC.",
        text="Let me search memory for the staging database password rotation.",
    )
    mixed = {
        "role": "assistant",
        "content": "Checking the rotation cron too.",
        "tool_calls": [
            {
                "id": "c_mixed_1",
                "type": "function",
                "function": {"name": "lcm_grep", "arguments": json.dumps({"query": "rotation"})},
            },
            {
                "id": "c_mixed_2",
                "type": "function",
                "function": {
                    "name": "terminal",
                    "arguments": json.dumps({"command": "grep rotation /etc/cron.d/db"}),
                },
            },
        ],
    }
    history = ask(
        engine,
        history,
        *turn,
        mixed,
        {
            "role": "tool",
            "name": "lcm_grep",
            "tool_call_id": "c_mixed_1",
            "content": '{"s": "rotation"}',
        },
        {
            "role": "tool",
            "name": "terminal",
            "tool_call_id": "c_mixed_2",
            "content": "30 4 * * 4 rotate",
        },
    )
    store = engine.core.store
    conv = engine.core.binding.conversation_id
    rows = store.messages_after(conv, 0)
    own = {
        m.id
        for m in rows
        if (m.tool_name or "").startswith("lcm_")
        or (m.tool_calls and "terminal" not in m.tool_calls and "lcm_grep" in m.tool_calls)
    }
    assert len(own) == 3, "the call with text, its result, and the mixed turn's lcm result"
    default = {
        h.get("store_id")
        for h in walk(
            lambda c: ok(
                engine, "lcm_grep", query="rotation", limit=20, **({"cursor": c} if c else {})
            ),
            "hits",
        )
    }
    assert not default & own
    mixed_id = next(m.id for m in rows if m.tool_calls and "terminal" in m.tool_calls)
    assert mixed_id in default, "a turn that also calls another tool stays searchable"
    every = {
        h.get("store_id")
        for h in walk(
            lambda c: ok(
                engine,
                "lcm_grep",
                query="rotation",
                limit=20,
                include_lcm_traffic=True,
                **({"cursor": c} if c else {}),
            ),
            "hits",
        )
    }
    assert own <= every


def test_memory_turns_come_after_every_ranked_hit_and_the_walk_is_complete(make_engine):
    engine = make_engine(threshold=3000)
    history = compacted_with_fact(engine, turns=12)
    history = ask(engine, history, *lcm_search_turn(1, QUESTION, f"From memory: {FACT}"))
    history, _ = host_run(engine, [history, *(filler(100 + i) for i in range(20))])
    engine.ingest_host([*history, {"role": "user", "content": "anything else?"}])
    hits = walk(
        lambda c: ok(engine, "lcm_grep", query=QUESTION, limit=7, **({"cursor": c} if c else {})),
        "hits",
    )
    assert hits[0]["store_id"] == fact_id(engine)
    store = engine.core.store
    echoes = {
        m.id
        for m in store.messages_after(engine.core.binding.conversation_id, 0)
        if m.content in (QUESTION, f"From memory: {FACT}")
    }
    positions = {h.get("store_id"): i for i, h in enumerate(hits)}
    scored = [i for i, h in enumerate(hits) if "score" in h]
    assert echoes <= set(positions), "memory turns are still found, by the walk"
    assert all(positions[e] > max(scored) for e in echoes), "…after every ranked hit"
    keys = [h.get("store_id") or h.get("node_id") for h in hits]
    assert len(keys) == len(set(keys))


def test_a_summary_that_copies_a_hit_is_listed_after_it(make_engine):
    engine = make_engine(threshold=3000)
    special = [
        {"role": "user", "content": "the quetzal feather ledger is in drawer nine"},
        {"role": "assistant", "content": "and the axolotl invoice is in drawer four"},
    ]
    host_run(engine, [special, *(filler(i) for i in range(30))])
    leaf = matching_ids(engine.core.store.path, '"quetzal"', None, kind="summaries") & matching_ids(
        engine.core.store.path, '"axolotl"', None, kind="summaries"
    )
    assert leaf, "the extractive summary kept both sentences"
    one = ok(engine, "lcm_grep", query="quetzal ledger", include_in_context=True, limit=20)
    raw = next(h for h in one["hits"] if h.get("store_id"))
    copies = [h for h in one["hits"] if "node_id" in h and "quetzal" in h["snippet"]]
    assert copies and all(c.get("copy_of") == raw["store_id"] for c in copies)
    scored_raw = [i for i, h in enumerate(one["hits"]) if "store_id" in h and "score" in h]
    assert all(one["hits"].index(c) > max(scored_raw) for c in copies)
    both = ok(engine, "lcm_grep", query="quetzal axolotl", include_in_context=True, limit=20)
    joined = [h for h in both["hits"] if "node_id" in h and "quetzal" in h["snippet"]]
    assert joined and "copy_of" not in joined[0], (
        "a summary joining two sources' words is its own hit"
    )


def test_the_summarizer_does_not_restate_lcm_results(make_engine):
    engine = make_engine(threshold=3000)
    turn = lcm_search_turn(1, "where is the wombat", "It is in the shed.")
    turn[2]["content"] = json.dumps(
        {"hits": [{"snippet": "the wombat sleeps beside the zeppelinhangar"}]}
    )
    host_run(engine, [turn, *(filler(i) for i in range(30))])
    where = engine.core.store.path
    assert raw_sql(where, "SELECT count(*) FROM summaries")[0][0] > 0
    assert matching_ids(where, '"zeppelinhangar"', None, kind="summaries") == set()
    assert (
        raw_sql(where, "SELECT count(*) FROM messages WHERE content LIKE ?", ("%zeppelinhangar%",))[
            0
        ][0]
        == 1
    )


def test_expand_query_evidence_starts_outside_the_prompt(make_engine):
    engine = make_engine(threshold=3000)
    ask(engine, compacted_with_fact(engine), {"role": "user", "content": QUESTION})
    answer = ok(engine, "lcm_expand_query", question=QUESTION, mode="evidence")
    refs = [b["ref"] for b in answer["evidence"]] if "evidence" in answer else []
    assert refs and f"store_id={fact_id(engine)}" in refs[:3], refs[:5]


def test_cli_grep_follows_the_same_rules(make_engine, tmp_path: Path):
    engine = make_engine(threshold=3000)
    history = compacted_with_fact(engine)
    ask(
        engine,
        history,
        *lcm_search_turn(
            1, QUESTION, "Thursdays.", text="Searching for the staging database password rotation."
        ),
        {"role": "user", "content": QUESTION},
    )
    conv = engine.core.binding.conversation_id

    def grep(*flags: str) -> list[dict[str, Any]]:
        out = io.StringIO()
        assert (
            cli_main(
                [
                    "--db",
                    engine.core.store.path,
                    "grep",
                    QUESTION,
                    "--conversation",
                    str(conv),
                    "--kind",
                    "messages",
                    *flags,
                ],
                out=out,
            )
            == 0
        )
        return json.loads(out.getvalue())["items"]

    items = grep()
    assert items[0]["store_id"] == fact_id(engine)
    tool_rows = {
        m.id
        for m in engine.core.store.messages_after(conv, 0)
        if m.tool_name == "lcm_grep" or (m.tool_calls and "lcm_grep" in m.tool_calls)
    }
    assert not tool_rows & {i["store_id"] for i in items}
    assert any(i.get("in_context") for i in items)
    assert tool_rows & {i["store_id"] for i in grep("--include-lcm-traffic")}


_ROLES = st.sampled_from(["plain", "lcm_turn", "mixed"])


@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(kinds=st.lists(_ROLES, min_size=5, max_size=25), seed=st.integers(0, 50))
def test_walk_is_every_match_but_lcm_results_once(
    tmp_path_factory, backend: str, kinds: list[str], seed: int
):
    """Random turns, some answered from memory: the default walk lists every row matching the
    query exactly once, except LCM's own calls and results, whatever compacted."""
    with fresh_database(backend) as where:
        _walk_once(new_engine(tmp_path_factory.mktemp("walk"), 2500, "p", **where), kinds, seed)


def _walk_once(engine: LcmEngine, kinds: list[str], seed: int) -> None:
    turns = []
    for i, kind in enumerate(kinds):
        if kind == "lcm_turn":
            turns.append(lcm_search_turn(i, f"marmot question {i}", f"marmot answer {i}"))
        elif kind == "mixed":
            turns.append(
                [
                    {"role": "user", "content": f"marmot check {i}"},
                    {
                        "role": "assistant",
                        "content": "",
                        "tool_calls": [
                            {
                                "id": f"x{i}",
                                "type": "function",
                                "function": {"name": "terminal", "arguments": '{"q": "marmot"}'},
                            }
                        ],
                    },
                    {
                        "role": "tool",
                        "name": "terminal",
                        "tool_call_id": f"x{i}",
                        "content": "marmot ok",
                    },
                ]
            )
        else:
            turns.append([*filler(seed + i), {"role": "user", "content": f"a marmot fact {i}"}])
    host_run(engine, turns)
    store = engine.core.store
    rows = store.messages_after(engine.core.binding.conversation_id, 0)
    matching = matching_ids(store.path, '"marmot"', None)
    own = {
        m.id
        for m in rows
        if (m.tool_name or "").startswith("lcm_") or (m.tool_calls and '"lcm_grep"' in m.tool_calls)
    }
    hits = walk(
        lambda c: ok(engine, "lcm_grep", query="marmot", limit=9, **({"cursor": c} if c else {})),
        "hits",
    )
    ids = [h["store_id"] for h in hits if "store_id" in h and not h.get("neighbour")]
    assert len(ids) == len(set(ids))
    assert set(ids) == matching - own


def test_only_the_callers_own_prompt_counts_as_shown(make_engine):
    """Another conversation of the same owner is not in this prompt: its copy of the question is an
    ordinary hit, never marked or moved; a flag that is not a boolean is a clear error."""
    other = make_engine(session="other")
    other.ingest_host([{"role": "user", "content": QUESTION}])
    engine = make_engine(threshold=3000)
    ask(engine, compacted_with_fact(engine), {"role": "user", "content": QUESTION})
    hits = ok(engine, "lcm_recall", query=QUESTION, limit=10)["hits"]
    theirs = [h for h in hits if h.get("conversation_id") is not None]
    mine = [h for h in hits if h.get("conversation_id") is None and h.get("in_context")]
    assert theirs and not any(h.get("in_context") for h in theirs)
    assert mine and hits.index(mine[0]) > hits.index(theirs[0])
    for tool in ("lcm_grep", "lcm_recall"):
        assert "must be true or false" in err(
            engine, tool, query=QUESTION, include_in_context="maybe"
        )
        assert "must be true or false" in err(engine, tool, query=QUESTION, include_lcm_traffic=[1])

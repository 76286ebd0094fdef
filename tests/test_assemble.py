"""Assembly on its own: any history, any budget -> a valid list within the budget."""

from __future__ import annotations

import time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hermes_lcm.base.records import SummaryNode
from hermes_lcm.base.tokens import count_messages, count_tokens
from hermes_lcm.prompt.assemble import SUMMARY_WRAPPER_TOKENS, build, tail_start
from hermes_lcm.prompt.blocks import Item, group
from hermes_lcm.prompt.budget import plan_budget

from .convo import assert_valid_sequence

pytestmark = pytest.mark.both_backends


def _node(i: int, depth: int, text: str) -> SummaryNode:
    now = time.time()
    tokens = count_tokens(text) + SUMMARY_WRAPPER_TOKENS  # as compaction stores it
    return SummaryNode(i, 1, "s", depth, text, tokens, i, i, now, now, 100, "normal", "x", now)


def _call(cid: str) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": cid, "type": "function", "function": {"name": "f", "arguments": "{}"}}
        ],
    }


message = st.one_of(
    st.builds(lambda t: {"role": "user", "content": t}, st.text(max_size=3000)),
    st.builds(lambda t: {"role": "assistant", "content": t}, st.text(max_size=3000)),
    st.builds(lambda i: _call(f"c{i}"), st.integers(0, 5)),
    st.builds(
        lambda i, t: {"role": "tool", "tool_call_id": f"c{i}", "content": t},
        st.integers(0, 5),
        st.text(max_size=5000),
    ),
)


@settings(max_examples=300, deadline=None)
@given(
    messages=st.lists(message, max_size=40),
    total=st.integers(64, 6000),
    summaries=st.lists(st.text(min_size=1, max_size=2000), max_size=5),
    tail_count=st.integers(1, 40),
)
def test_any_history_fits_any_budget_as_a_valid_sequence(messages, total, summaries, tail_count):
    budget = plan_budget(
        total + 100,
        50,
        50,
        tail_count=tail_count,
        tail_max_tokens=0,
        target_ratio=0.6,
        summary_ratio=0.4,
    )
    items = [
        Item(m["role"], count_messages([m]), m, store_id=i + 1) for i, m in enumerate(messages)
    ]
    nodes = [_node(i, 0, s) for i, s in enumerate(summaries)]
    out = build(nodes, items, budget)
    assert count_messages(out) <= budget.total
    assert_valid_sequence([m for m in out])


def test_tool_groups_are_never_split_and_orphans_are_shown_as_text():
    """Repairing malformed sequences changed this: an orphan result and an unanswered call were dropped from the
    replay; now they are shown as text (a user message, a note in the assistant's content)."""
    items = [
        Item.host(m)
        for m in [
            {"role": "tool", "tool_call_id": "ghost", "content": "orphan"},
            {"role": "user", "content": "go"},
            _call("a"),
            {"role": "tool", "tool_call_id": "a", "content": "A"},
            _call("b"),  # never answered
            {"role": "assistant", "content": "done"},
        ]
    ]
    groups = group(items)
    assert [[i.message["role"] for i in g] for g in groups] == [
        ["user"],
        ["user"],
        ["assistant", "tool"],
        ["assistant"],
        ["assistant"],
    ]
    assert (
        "ghost" in groups[0][0].message["content"] and "orphan" in groups[0][0].message["content"]
    )
    assert (
        "tool_calls" not in groups[3][0].message
    )  # the unanswered call is text in the replay copy
    assert (
        "without a result" in groups[3][0].message["content"]
        and '"b"' in groups[3][0].message["content"]
    )
    assert groups[2][0].message is items[2].message  # a valid block is passed through untouched


def test_tail_start_respects_count_and_tokens_but_keeps_the_newest_group():
    items = [Item.host({"role": "user", "content": "x " * 500}) for _ in range(10)]
    groups = group(items)
    assert tail_start(groups, 3, 10**6) == 7
    assert tail_start(groups, 100, 1) == 9


def test_summaries_are_labelled_untrusted_with_ids_and_times():
    budget = plan_budget(
        10000, 0, 0, tail_count=5, tail_max_tokens=0, target_ratio=0.6, summary_ratio=0.4
    )
    out = build(
        [_node(7, 1, "we chose sqlite")], [Item.host({"role": "user", "content": "hi"})], budget
    )
    assert out[0]["role"] == "user"
    assert (
        'id="S7"' in out[0]["content"]
        and "untrusted" in out[0]["content"]
        and 'from="' in out[0]["content"]
    )
    assert out[-1] == {"role": "user", "content": "hi"}


def test_raw_messages_older_than_the_fresh_tail_are_shown_while_they_fit():
    """The fresh tail is what compaction may not touch, not a cap on what the prompt shows."""
    items = [
        Item.host({"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i}"})
        for i in range(50)
    ]
    roomy = plan_budget(
        20000, 0, 0, tail_count=5, tail_max_tokens=0, target_ratio=0.6, summary_ratio=0.4
    )
    assert [m["content"] for m in build([], items, roomy)] == [f"message {i}" for i in range(50)]
    tight = plan_budget(
        260, 0, 0, tail_count=5, tail_max_tokens=0, target_ratio=0.6, summary_ratio=0.4
    )
    out = build([_node(1, 0, "summary text")], items, tight)
    assert out[-1]["content"] == "message 49" and "older messages" in out[0]["content"]
    assert count_messages(out) <= tight.total


@settings(max_examples=150, deadline=None)
@given(messages=st.lists(message, max_size=40), cut=st.integers(0, 40))
def test_grouping_remembered_on_items_gives_the_same_groups(messages, cut):
    """group() remembers each tool block on its call item; a second grouping of the same items,
    alone or after other blocks that may take its call ids, equals a grouping from fresh items."""
    items = [Item.host(m) for m in messages]
    first = group(items)
    assert group(items) == first
    tail = items[cut:]
    fresh = [Item.host(m) for m in messages[cut:]]
    assert [[i.message for i in g] for g in group(tail)] == [
        [i.message for i in g] for g in group(fresh)
    ]
    again = items[:cut] + tail
    assert [[i.message for i in g] for g in group(again)] == [[i.message for i in g] for g in first]


def test_assembly_is_the_same_whatever_the_item_cache_holds(make_engine, monkeypatch):
    """Assembly reads only rows it has no item for; a cache smaller than the window gives the same prompt."""
    from hermes_lcm.prompt import stored as stored_module

    engine = make_engine(threshold=40000)
    history: list[dict[str, Any]] = []
    for i in range(60):
        history += [
            {"role": "user", "content": f"question {i} about the ledger"},
            _call(f"k{i}"),
            {"role": "tool", "tool_call_id": f"k{i}", "content": f"result {i}"},
            {"role": "assistant", "content": f"answer {i}"},
        ]
    engine.ingest_host(history)
    core = engine.core
    budget = core.budget(engine.threshold_tokens, 1000)
    whole = core.assemble(budget)
    monkeypatch.setattr(stored_module, "ITEM_CACHE_SIZE", 7)
    core.items.cache.clear()
    assert core.assemble(budget) == whole
    assert core.assemble(budget) == whole
    assert len(core.items.cache) <= 7


def test_context_summaries_are_read_once_and_again_after_a_rewrite(make_engine, monkeypatch):
    """The prompt's summaries are held between assemblies (a server sends only their ids), and an
    operator's rewrite of one (redact, doctor's repair) shows in the very next prompt."""
    from hermes_lcm.prompt import stored as stored_module

    engine = make_engine(threshold=3000)
    history: list[dict[str, Any]] = []
    for i in range(80):
        history += [
            {"role": "user", "content": f"question {i} about the ledger kestrelword{i}"},
            {"role": "assistant", "content": f"answer {i} " + "detail " * 30},
        ]
    engine.ingest_host(history)
    core = engine.core
    budget = core.budget(engine.threshold_tokens, 0)
    core.compress(history, budget, force=True)
    first = core.assemble(budget)
    cid = core.binding.conversation_id
    _, _, nodes, _ = core.items.prompt(cid, 10, None)
    assert nodes and set(core.items.nodes) == {n.id for n in nodes}
    held = core.store.prompt_reads(cid, 10, None, 0, [n.id for n in nodes])
    assert held.node_ids == [n.id for n in nodes]
    if type(core.store).__name__ == "PgStore":  # SQLite reads them in process, whole
        assert held.nodes == []
    assert core.assemble(budget) == first  # served from what it holds: the same prompt
    monkeypatch.setattr(stored_module, "ITEM_CACHE_SIZE", 3)  # building the items clears the caches
    assert core.assemble(budget) == first
    assert core.assemble(budget) == first
    monkeypatch.undo()
    target = nodes[0]
    core.store.rewrite_text("summaries", target.id, "the ledger summary, rewritten zzrewritten")
    shown = "\n".join(str(m.get("content")) for m in core.assemble(budget))
    assert "zzrewritten" in shown
    assert target.content[:200] not in shown

"""A search's scope figures (``Store.conversation_ranges``) stay exact while the count behind them is kept.

Counting a conversation's summaries walks their index entries on every search (7,000 summaries
at 1M messages: about half a millisecond), so the store keeps the summaries' id range and count
until a summary is made anywhere (the newest id moves) or a delete or rewrite moves the counter.
These tests compare the kept figures with the figures counted afresh after each kind of change,
in two conversations sharing one store, and (SQLite) that an unchanged store counts nothing.
"""

from __future__ import annotations

from typing import Any

import pytest

from hermes_lcm.base.tokens import count_messages
from hermes_lcm.engine import LcmEngine

from .conftest import new_engine
from .convo import conversation
from .test_search_statements import traced

pytestmark = pytest.mark.both_backends


class Host:
    """The host's loop (tests/convo.py's ``host_run``) kept across calls, so a test can look at the
    store between stretches of one conversation."""

    def __init__(self, engine: LcmEngine, seed: int) -> None:
        self.engine, self.turns = engine, iter(conversation(seed, 200, 60))
        self.live: list[dict[str, Any]] = []
        self.compactions = 0

    def play(self, turns: int) -> None:
        for _ in range(turns):
            self.live.extend(next(self.turns))
            self.engine.ingest_host(list(self.live))
            tokens = count_messages(self.live) + 500
            if self.engine.should_compress(tokens):
                self.live = list(self.engine.compress(list(self.live), current_tokens=tokens))
                self.compactions += 1

    def until_compacted(self) -> None:
        done = self.compactions
        while self.compactions == done:
            self.play(1)


def fresh(engine: LcmEngine, conversation_id: int) -> tuple[Any, ...]:
    """The same figures from the store's other readers, each counted now."""
    store, dag = engine.core.store, engine.core.dag
    return (
        store.message_id_bounds(conversation_id),
        dag.summary_id_bounds(conversation_id),
        store.conversation(conversation_id).last_seq,
        sum(dag.depth_counts(conversation_id).values()),
        store.rewrite_generation(),
    )


def test_kept_figures_follow_every_change(make_engine):
    first = make_engine(session="one")
    host = Host(first, seed=3)
    host.until_compacted()
    one = first.core.binding.conversation_id
    store = first.core.store
    assert store.conversation_ranges(one) == fresh(first, one)
    assert store.conversation_ranges(one)[3] > 0, "the conversation has summaries to count"

    second = make_engine(session="two")  # another conversation in the same store
    Host(second, seed=4).until_compacted()
    two = second.core.binding.conversation_id
    assert two != one
    for conv in (one, two):
        assert store.conversation_ranges(conv) == fresh(first, conv)

    before = store.conversation_ranges(one)
    host.until_compacted()  # more summaries in the first: its figures move
    after = store.conversation_ranges(one)
    assert after == fresh(first, one)
    assert after[3] > before[3]
    assert store.conversation_ranges(two) == fresh(first, two)

    store.delete_conversations([two])  # a delete: the counter moves, the kept figures go
    assert store.conversation_ranges(one) == fresh(first, one)
    assert store.conversation_ranges(one)[4] == after[4] + 1
    assert store.conversation_ranges(two)[1] == (0, -1)


def test_an_unchanged_store_counts_nothing_again(tmp_path):
    engine = new_engine(tmp_path)  # SQLite: statements are traced on its connection
    host = Host(engine, seed=3)
    host.until_compacted()
    store, conv = engine.core.store, engine.core.binding.conversation_id
    store.conversation_ranges(conv)
    with traced(engine) as seen:
        store.conversation_ranges(conv)
    assert len(seen) == 1 and "count(" not in seen[0], seen
    host.until_compacted()
    with traced(engine) as seen:
        assert store.conversation_ranges(conv) == fresh(engine, conv)
    assert any("count(" in sql for sql in seen), "a new summary: counted afresh"

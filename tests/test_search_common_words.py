"""What one search learns of the indexes (which words are over bm25's budget) is reused by the next.

Probing a common word for its cap walks its index entries; the words of identifiers and prose
questions come back query after query. A word over its cap in an id range stays over it while
rows are only added, so the search keeps those answers per store and rewrite counter
(``search.arms.CommonWords``). These tests pin that reusing them changes no hit and no order,
that a warm search runs fewer probes, and that a delete (which moves the counter) makes the
next search probe again.
"""

from __future__ import annotations

import pytest

from hermes_lcm.search import arms
from hermes_lcm.search.arms import CommonWords

from .conftest import new_engine
from .test_search_pinned import QUERIES, _build, ranked
from .test_search_statements import traced
from .tooltest import ok

pytestmark = pytest.mark.both_backends

SMALL_BUDGET = 20  # the test store's common words (ledger, auth, ...) are over it


@pytest.fixture
def small_budget(monkeypatch):
    monkeypatch.setattr(arms, "BM25_BUDGET", SMALL_BUDGET)
    arms.COMMON_WORDS.clear()
    yield
    arms.COMMON_WORDS.clear()


@pytest.mark.parametrize("query", QUERIES)
def test_a_warm_search_ranks_as_a_cold_one(make_engine, small_budget, query):
    engine = make_engine()
    _build(engine)
    cold = ranked(engine, query)
    learnt = len(arms.COMMON_WORDS)
    warm = ranked(engine, query)
    assert warm == cold
    if query in ("ledger", "AUTH_INVOICE_LIMIT", "auth_invoice_limit ledger"):
        assert learnt > 0, "a word over the budget was probed, so it is known"
    arms.COMMON_WORDS.clear()
    assert ranked(engine, query) == cold


def test_a_warm_identifier_search_skips_its_probes_until_a_delete(tmp_path, small_budget):
    engine = new_engine(tmp_path)  # SQLite: statements are traced on its connection
    _build(engine)
    store = engine.core.store
    ok(engine, "lcm_grep", query="zqvortexrare")  # the cursor secret and scratch table exist
    arms.COMMON_WORDS.clear()
    with traced(engine) as cold:
        first = ranked(engine, "AUTH_INVOICE_LIMIT")
    with traced(engine) as warm:
        again = ranked(engine, "AUTH_INVOICE_LIMIT")
    assert again == first
    assert _probes(cold) >= 1, "\n".join(cold)
    assert _probes(warm) < _probes(cold), "\n".join(warm)
    generation = store.rewrite_generation()
    newest = ok(engine, "lcm_grep", query="ledger", sort="recency", limit=1)["hits"][0]["store_id"]
    store.delete_messages([newest])
    assert store.rewrite_generation() == generation + 1
    with traced(engine) as after:
        ranked(engine, "AUTH_INVOICE_LIMIT")
    assert _probes(after) == _probes(cold), "the delete moved the counter: probed again"


def _probes(seen: list[str]) -> int:
    """The count probes among traced statements (a probe steps to the cap-th match by OFFSET)."""
    return sum(1 for sql in seen if " OFFSET " in sql)


def test_over_holds_for_the_same_start_and_a_later_end_only():
    words = CommonWords(3)
    key = ("lcm.db", 4)
    words.learn(key, "messages", '"auth"', (10, 500), 21)
    assert words.over(key, "messages", '"auth"', (10, 500), 21)
    assert words.over(key, "messages", '"auth"', (10, 900), 21)
    assert not words.over(key, "messages", '"auth"', (10, 499), 21)  # fewer rows: unknown
    assert not words.over(key, "messages", '"auth"', (11, 900), 21)  # another start
    assert not words.over(("lcm.db", 5), "messages", '"auth"', (10, 900), 21)  # counter moved
    assert not words.over(key, "summaries", '"auth"', (10, 900), 21)
    assert not words.over(key, "messages", '"auth"', (10, 900), 22)  # another cap
    words.learn(key, "messages", '"auth"', (10, 300), 21)
    assert words.over(key, "messages", '"auth"', (10, 300), 21)  # the lowest end seen is kept
    words.learn(("lcm.db", -1), "messages", '"x"', (1, 2), 3)
    assert len(words) == 1, "a scope read without the counter is not learnt"
    for i in range(5):
        words.learn(key, "messages", f'"w{i}"', (1, 2), 3)
    assert len(words) == 3, "bounded"

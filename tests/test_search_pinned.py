"""lcm_grep's ranked hits for a few query shapes, pinned on a generated conversation.

The search's cost was cut to follow the result size (rare terms and identifiers paid a
fixed cost). These lists were recorded before that work began: the same hits in the same order
must come back, for rare words, an identifier with a handful of matches, a common word, a call id
and a prose question (which gets conversational context), summaries included. One list changed
since, on purpose, and says so.

The pinned lists are SQLite's bm25 order (PostgreSQL ranks with ts_rank_cd: its agreement with
these is tests/test_search_ranking_parity.py's); the term counts are exact on both backends.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from hermes_lcm.engine import LcmEngine
from hermes_lcm.search import arms

from .backends import matching_ids
from .conftest import new_engine
from .tooltest import compacted, hit_key, ok

pytestmark = pytest.mark.both_backends

PLANTED = {
    70: "zqvortexrare",
    190: "zqvortexrare",
    33: "AUTH_INVOICE_LIMIT",
    151: "AUTH_INVOICE_LIMIT",
    252: "AUTH_INVOICE_LIMIT",
}
VOCAB = [
    f"{a}{b}"
    for a in ("kal", "mor", "tesh", "vun", "pra", "dol")
    for b in ("ix", "ema", "oru", "an", "ept")
]
VOCAB += "auth invoice limit deploy retry ledger".split()


def _build(engine: LcmEngine) -> None:
    """Compacted turns (summaries, call ids), then 300 messages of a skewed 36-word vocabulary, so
    bm25 tells rows apart and ties are rare."""
    compacted(engine, turns=30, seed=5)
    rng = random.Random(17)
    weights = [1.0 / (i + 1) for i in range(len(VOCAB))]
    tail: list[dict[str, Any]] = []
    for i in range(300):
        text = " ".join(rng.choices(VOCAB, weights, k=rng.randint(4, 30)))
        if i in PLANTED:
            text += f" set {PLANTED[i]} now"
        tail.append({"role": "user" if i % 2 == 0 else "assistant", "content": f"[{i}] {text}"})
    engine.core.ingest(tail, source="test")


QUERIES = (
    "zqvortexrare",
    "AUTH_INVOICE_LIMIT",
    "ledger",
    "call_12_0_0",
    "why did the vunoru deploy fail on praan again?",
    "auth_invoice_limit ledger",
)


def ranked(engine: LcmEngine, query: str) -> list[tuple[str, Any]]:
    return [hit_key(h) for h in ok(engine, "lcm_grep", query=query, limit=15)["hits"]]


def groups(
    engine: LcmEngine, query: str, pinned: list[tuple[str, Any]]
) -> tuple[list[Any], list[Any]]:
    """The answer and the pinned list as runs of equal (shown) score: rows whose scores tie may
    trade places (their order then rests on the ingest clock), every other order is pinned."""
    hits = ok(engine, "lcm_grep", query=query, limit=15)["hits"]
    score = {hit_key(h): h["score"] for h in hits}
    got: list[Any] = []
    want: list[Any] = []
    for keys, out in (([hit_key(h) for h in hits], got), (pinned, want)):
        for key in keys:
            s = score.get(key)
            if out and out[-1][0] == s:
                out[-1][1].add(key)
            else:
                out.append((s, {key}))
    return got, want


PINNED: dict[str, list[tuple[str, Any]]] = {  # recorded before the work
    "zqvortexrare": [("m", 189), ("m", 309)],
    "AUTH_INVOICE_LIMIT": [("m", 371), ("m", 152), ("m", 270)],
    "ledger": [
        ("m", 6),
        ("m", 75),
        ("m", 2),
        ("m", 58),
        ("m", 42),
        ("m", 5),
        ("m", 50),
        ("m", 49),
        ("m", 45),
        ("m", 22),
        ("m", 11),
        ("m", 71),
        ("m", 19),
        ("m", 16),
        ("m", 10),
    ],
    "call_12_0_0": [("m", 47), ("m", 48), ("s", "S2")],
    # recorded again when neighbour rows (no query word: 4, 2, 57, 53 here) moved after every real
    # match: the matches keep their recorded order, and the next matches by score fill the page
    "why did the vunoru deploy fail on praan again?": [
        ("m", 55),
        ("m", 54),
        ("m", 3),
        ("m", 44),
        ("m", 14),
        ("m", 65),
        ("m", 5),
        ("m", 1),
        ("m", 56),
        ("m", 46),
        ("m", 45),
        ("m", 43),
        ("m", 42),
        ("m", 16),
        ("m", 13),
    ],
    # re-recorded when a long text's coverage lift began shrinking with its length: the
    # 800-character tool results trade places among themselves
    "auth_invoice_limit ledger": [
        ("m", 6),
        ("m", 75),
        ("m", 2),
        ("m", 42),
        ("m", 58),
        ("m", 5),
        ("m", 50),
        ("m", 49),
        ("m", 45),
        ("m", 22),
        ("m", 11),
        ("m", 19),
        ("m", 10),
        ("m", 16),
        ("m", 71),
    ],
}


@pytest.mark.parametrize("query", QUERIES)
def test_ranked_hits_are_pinned(tmp_path, query):
    engine = new_engine(tmp_path)  # SQLite: the lists are its bm25 order
    _build(engine)
    got, want = groups(engine, query, PINNED[query])
    assert got == want


@pytest.mark.parametrize("query", QUERIES)
def test_counting_the_summaries_terms_first_ranks_the_same(tmp_path, monkeypatch, query):
    """A summaries range within bm25's budget is ranked without counting its terms; a larger one
    counts them first. With the budget just under this store's summaries, the counted path must
    give the pinned hits too."""
    engine = new_engine(tmp_path)
    _build(engine)
    low, high = engine.core.dag.summary_id_bounds(engine.core.binding.conversation_id)
    assert high - low >= 1, "the store needs summaries to rank"
    monkeypatch.setattr(arms, "SUMMARY_BM25_BUDGET", high - low)
    got, want = groups(engine, query, PINNED[query])
    assert got == want


def test_term_counts_are_exact_up_to_the_cap(make_engine):
    """The count is probed at the cap first and counted exactly below it: every cap around the
    true count, a range that cuts the matches, and a term with no match give min(count, cap)."""
    engine = make_engine()
    _build(engine)
    store = engine.core.store
    low, high = store.message_id_bounds()
    for word in ("ledger", "kalix", "zqvortexrare", "nosuchwordzz"):
        match = f'"{word}"'
        found = matching_ids(store.url if hasattr(store, "url") else store.path, match, None)
        for bounds in ((low, high), (low, (low + high) // 2)):
            true = sum(1 for i in found if bounds[0] <= i <= bounds[1])
            for cap in {1, 2, max(1, true - 1), true or 1, true + 1, true + 50}:
                assert store.fts_term_counts("messages", [match], bounds, cap) == [
                    min(true, cap)
                ], (word, cap)

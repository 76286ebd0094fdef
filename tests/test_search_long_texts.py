"""A long reply covers a question's words by chance; the short turn that states the fact wins.

In an assistant chat the user's turns are short and carry the facts a later question asks for,
while the assistant's replies run to thousands of characters and mention most of a question's
words somewhere. Coverage (the share of the query's weighted words a row holds) lifted those
replies above the turn the question cites; it now counts for less in a text much longer than a
turn (``search.rank.COVER_CHARS``). These tests build that shape and check the order on both
backends, and that a turn-length conversation ranks exactly as before.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from hermes_lcm.search import rank

from .tooltest import ok

pytestmark = pytest.mark.both_backends

FILLER = (
    "consider the tradeoffs carefully and keep the design simple while you measure each option "
    "against the workload you expect over the next quarter before choosing anything permanent"
).split()
FACT = "For inventory I picked Postgres as the database."
QUESTION = "Which database did I pick for the inventory service, its backups, replicas and alerts?"


def _reply(rng: random.Random, words: list[str]) -> str:
    """About 2,500 characters of advice that mentions each of the given words a few times."""
    body = [rng.choice(FILLER) for _ in range(360)]
    for w in words * 3:
        body.insert(rng.randrange(len(body)), w)
    return " ".join(body)


def _chat(rng: random.Random) -> list[dict[str, Any]]:
    topics = ["caching", "logging", "deploys", "testing", "queues", "metrics", "billing"]
    turns: list[dict[str, Any]] = []
    for i, topic in enumerate(topics):
        turns.append({"role": "user", "content": f"How should I approach {topic} this week?"})
        # each long reply holds every word of the question somewhere in its advice; the turn
        # the question is about holds three
        words = ["database", "inventory", "service", "pick", "backups", "replicas", "alerts"]
        turns.append({"role": "assistant", "content": _reply(rng, [*words, topic])})
        if i == 3:
            turns.append({"role": "user", "content": FACT})
            turns.append({"role": "assistant", "content": "Noted."})
        for j in range(12):  # small talk, so the question's words are rare in the store
            turns.append(
                {"role": "user", "content": f"Quick note {i}.{j}: lunch was {topic} again."}
            )
            turns.append({"role": "assistant", "content": f"Thanks for note {i}.{j}."})
    return turns


def _lead(engine: Any) -> float:
    """The fact's score over the best long reply's (above 1: the fact ranks first)."""
    engine.ingest_host(_chat(random.Random(3)))
    hits = ok(engine, "lcm_grep", query=QUESTION, limit=10, include_in_context=True)["hits"]
    text = {id(h): h.get("content") or h.get("snippet") or "" for h in hits}
    fact = [h["score"] for h in hits if "Postgres" in text[id(h)]]
    replies = [  # the long ones: the short replies are "Noted." and "Thanks for note ..."
        h["score"]
        for h in hits
        if h.get("role") == "assistant" and not text[id(h)].startswith(("Noted", "Thanks"))
    ]
    assert fact and replies, hits
    return float(fact[0]) / float(max(replies))


def test_the_short_turn_holding_the_fact_gains_on_the_long_replies(
    make_engine, backend, monkeypatch
):
    """SQLite's bm25 normalises for length, so there the fact ranks first, now by a clear margin
    rather than a hair; PostgreSQL's ts_rank_cd does not, so there the long replies stay ahead,
    by less."""
    lead = _lead(make_engine())
    monkeypatch.setattr(rank, "COVER_CHARS", 10**9)  # the lift whole at any length, as before
    lead_before = _lead(make_engine())
    assert lead > 1.1 * lead_before, (lead, lead_before)
    if backend == "sqlite":
        assert lead > 1.1, "the fact ranks first"


def test_turns_of_a_turns_length_keep_the_whole_lift():
    for chars in (1, 200, rank.COVER_CHARS):
        assert rank.own_score(2.0, 0.8, False, chars) == rank.own_score(2.0, 0.8, False)
    assert rank.own_score(2.0, 1.0, False, 2000) < rank.own_score(2.0, 1.0, False, 1000)
    # a text four times the threshold holding every word is level with a short one holding half
    assert rank.own_score(2.0, 1.0, False, 4 * rank.COVER_CHARS) == pytest.approx(
        rank.own_score(2.0, 0.5, False, 100)
    )

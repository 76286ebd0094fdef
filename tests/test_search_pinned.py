"""lcm_grep's ranked hits for a few query shapes, pinned on a generated conversation.

The search's cost was cut to follow the result size (issue 17: rare terms and identifiers paid a
fixed cost). These lists were recorded before that work began: the same hits in the same order
must come back, for rare words, an identifier with a handful of matches, a common word, a call id
and a prose question (which gets conversational context), summaries included.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from hermes_lcm.engine import LcmEngine

from .tooltest import compacted, hit_key, ok

PLANTED = {7: "zqvortexrare", 19: "zqvortexrare", 33: "AUTH_INVOICE_LIMIT", 51: "AUTH_INVOICE_LIMIT",
           52: "AUTH_INVOICE_LIMIT"}


def _build(engine: LcmEngine) -> None:
    compacted(engine, turns=40, seed=5)
    rng = random.Random(17)
    words = "alpha beta gamma auth invoice limit deploy config retry timeout ledger".split()
    tail: list[dict[str, Any]] = []
    for i in range(60):
        text = " ".join(rng.choice(words) for _ in range(12))
        if i in PLANTED:
            text += f" set {PLANTED[i]} now"
        tail.append({"role": "user" if i % 2 == 0 else "assistant", "content": f"[{i}] {text}"})
    engine.core.ingest(tail, source="test")


QUERIES = ("zqvortexrare", "AUTH_INVOICE_LIMIT", "ledger", "call_12_0_0",
           "why did the deploy retry time out on the ledger?", "auth_invoice_limit ledger")


def ranked(engine: LcmEngine, query: str) -> list[tuple[str, Any]]:
    return [hit_key(h) for h in ok(engine, "lcm_grep", query=query, limit=15)["hits"]]


PINNED: dict[str, list[tuple[str, Any]]] = {
    "zqvortexrare": [("m", 187), ("m", 175)],
    "AUTH_INVOICE_LIMIT": [("m", 220), ("m", 219), ("m", 201)],
    "ledger": [("m", 6), ("m", 107), ("m", 75), ("m", 2), ("m", 127), ("m", 122), ("m", 58), ("m", 42), ("m", 5),
               ("m", 101), ("m", 109), ("m", 50), ("m", 49), ("m", 45), ("m", 22)],
    "call_12_0_0": [("m", 47), ("m", 48), ("s", "S2")],
    "why did the deploy retry time out on the ledger?": [
        ("m", 20), ("m", 3), ("m", 122), ("m", 54), ("m", 19), ("m", 49), ("m", 6), ("m", 127), ("m", 65),
        ("m", 75), ("m", 52), ("m", 107), ("m", 105), ("m", 121), ("m", 40)],
    "auth_invoice_limit ledger": [
        ("m", 6), ("m", 107), ("m", 75), ("m", 2), ("m", 127), ("m", 122), ("m", 58), ("m", 42), ("m", 5),
        ("m", 101), ("m", 109), ("m", 50), ("m", 49), ("m", 45), ("m", 22)],
}


@pytest.mark.parametrize("query", QUERIES)
def test_ranked_hits_are_pinned(make_engine, query):
    engine = make_engine()
    _build(engine)
    assert ranked(engine, query) == PINNED[query]

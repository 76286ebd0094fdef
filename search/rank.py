"""How well a candidate row answers a query, whichever arm found it.

Ranking (general purpose, no per-dataset vocabulary): bm25 over the selective terms, scaled
by how much of the query a row covers (terms weighted by rarity; in a long text that cover counts
for less, since a long text holds many words by chance), a small bonus when an
identifier or phrase appears verbatim, and conversational context: a turn next to a strongly
matching turn inherits part of its score, because in a dialogue the answer usually sits beside
the words of the question. All of it works on a small candidate set capped in SQL.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from .query import Term

# Ranking constants (measured on LoCoMo, kept in the flat part of the curve; see bench/locomo_recall.py).
COVERAGE_GAIN = 2.0  # a row covering every weighted term scores up to 3x its bm25
COVER_CHARS = 500  # longer texts get sqrt(COVER_CHARS/len) of the lift (set on BEAM's 100K 1-10)
EXACT_GAIN = 0.25  # an identifier or phrase present verbatim
CONTEXT_GAIN = 0.5  # share of the best neighbour's score a turn inherits
CONTEXT_WINDOW = 2  # neighbours: seq +-1 and +-2 in the same conversation
SUMMARY_WEIGHT = 0.5  # a summary hit against a raw message holding the same terms
RELEVANCE_FLOOR = 0.01


def idf(rows: int, matching: int) -> float:
    """bm25's inverse document frequency, floored like FTS5 so a common term is never negative."""
    rows = max(rows, matching, 1)
    return max(1e-6, math.log((rows - matching + 0.5) / (matching + 0.5)))


def coverage(key: int, matched: Sequence[set[int]], weights: Sequence[float]) -> float:
    """The weighted share of query terms a row contains (0..1)."""
    total = sum(weights)
    if total <= 0:
        return 0.0
    return sum(w for hits, w in zip(matched, weights, strict=True) if key in hits) / total


def own_score(relevance: float, cover: float, exact: bool, chars: int = 0) -> float:
    """A row's score before context; the small floor keeps coverage and exactness deciding the
    order when bm25 degenerates (terms in most rows of a tiny store score ~0).

    ``chars`` is the length of the text the coverage was read in. A text many times a turn's
    length covers the query's words by chance (an assistant's 4,000-character reply holds most of
    any question's words), so its lift shrinks with the square root of its length: on BEAM such
    replies took two thirds of the top 10 while the questions cite the user's short turns. Turns
    of a chat's usual length (LoCoMo's, all under ``COVER_CHARS``) keep the whole lift; the square
    root keeps a long text holding every query word level with a short one holding half of them."""
    focus = min(1.0, math.sqrt(COVER_CHARS / chars)) if chars > 0 else 1.0
    return (
        (relevance + RELEVANCE_FLOOR)
        * (1.0 + COVERAGE_GAIN * cover * focus)
        * (1.0 + EXACT_GAIN if exact else 1.0)
    )


def summary_relevance(key: int, matched: Sequence[set[int]], weights: Sequence[float]) -> float:
    """A summary's relevance on the raw messages' bm25 scale: a message holding each matched term
    once scores about the sum of their weights; a summary, a pointer rather than evidence, half."""
    return SUMMARY_WEIGHT * sum(w for hits, w in zip(matched, weights, strict=True) if key in hits)


def is_exact(text: str, terms: Sequence[Term]) -> bool:
    """Does the text contain an identifier or phrase exactly as typed?"""
    return any(t.kind in ("ident", "phrase") and len(t.raw) > 2 and t.raw in text for t in terms)


def with_context(
    scores: Mapping[tuple[int, int], float],
    window: int = CONTEXT_WINDOW,
    gain: float = CONTEXT_GAIN,
) -> dict[tuple[int, int], float]:
    """Scores keyed by (conversation, seq) after each turn inherits ``gain`` x its best neighbour's."""
    keys = (
        {(c, s + d) for c, s in scores for d in range(-window, window + 1)}
        if window > 0
        else set(scores)
    )
    out = {}
    for conv, seq in keys:
        best = max(
            (scores.get((conv, seq + d), 0.0) for d in range(-window, window + 1) if d), default=0.0
        )
        out[(conv, seq)] = scores.get((conv, seq), 0.0) + gain * best
    return out

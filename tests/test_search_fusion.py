"""lcm_recall's fusion (search/fusion.py) on generated pools: what must hold for any scores."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from hermes_lcm.search.arms import Hit
from hermes_lcm.search.fusion import E5_MODEL, mix, reserve, reserved_places

_pool = st.lists(
    st.tuples(
        st.floats(0.0, 50.0, allow_nan=False),
        st.one_of(st.none(), st.floats(-0.2, 1.0, allow_nan=False)),
    ),
    min_size=1,
    max_size=30,
)


def _hits(pool: list[tuple[float, float | None]]) -> list[Hit]:
    return [
        Hit("message", i, score, score > 0, "t", 1, 0.0, 1, seq=i, cosine=cosine)
        for i, (score, cosine) in enumerate(pool)
    ]


@given(
    pool=_pool,
    weight=st.floats(0.0, 1.0),
    confidence=st.floats(0.0, 1.0),
    scale=st.floats(0.05, 1.0),
    shift=st.floats(0.0, 0.8),
)
def test_a_models_cosine_scale_does_not_change_the_fused_scores(
    pool: list[tuple[float, float | None]],
    weight: float,
    confidence: float,
    scale: float,
    shift: float,
) -> None:
    """Two models that order the rows alike by meaning, one with its cosines squeezed into a
    narrow band high up (e5's unrelated rows sit near 0.75), give the same fused scores."""
    positive = [(s, None if c is None else max(0.01, c)) for s, c in pool]
    plain, squeezed = _hits(positive), _hits(positive)
    for hit in squeezed:
        if hit.cosine is not None:
            hit.cosine = shift + scale * hit.cosine * (1 - shift)
    mix(plain, weight, confidence)
    mix(squeezed, weight, confidence)
    for a, b in zip(plain, squeezed, strict=True):
        assert math.isclose(a.score, b.score, rel_tol=1e-6, abs_tol=1e-6), (a.score, b.score)


@given(pool=_pool, weight=st.floats(0.0, 1.0), confidence=st.floats(0.0, 1.0))
def test_fused_scores_stay_on_the_text_scale(
    pool: list[tuple[float, float | None]], weight: float, confidence: float
) -> None:
    hits = _hits(pool)
    top_text = max(s for s, _ in pool) or 1.0
    mix(hits, weight, confidence)
    for hit in hits:
        assert math.isfinite(hit.score) and -1e-9 <= hit.score <= top_text * (1 + 1e-9)


def test_the_best_match_by_meaning_keeps_a_first_page_place() -> None:
    ranked = _hits([(10.0 - i, 0.2) for i in range(15)])
    ranked[12].cosine = 0.9
    kept = reserve(ranked, 1, 0.3)
    assert [h.id for h in kept[:10]] == [*range(9), 12]
    assert sorted(h.id for h in kept) == list(range(15))  # nothing lost, nothing twice
    assert reserve(ranked, 1, 0.95) == ranked  # below the model's floor: no place


def test_each_local_model_has_its_reading() -> None:
    assert reserved_places(E5_MODEL) == (2, 0.8)
    assert reserved_places("local:all-minilm-l6-v2-int8") == (1, 0.3)
    assert reserved_places(None) == (1, 0.3)

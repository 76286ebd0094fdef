"""How lcm_recall mixes the two arms: the fused score of each candidate and the first-page places
kept for the nearest rows by meaning, with each model's reading of its cosines.

The searcher finds the candidates and their cosines; this module only scores and orders them, so
the settings bench/fusion_lab.py tunes are all here.
"""

from __future__ import annotations

from .arms import Hit

# The nearest rows by meaning that keep a place in the first page whatever the text says
# (``reserve``): a question in other words still shows its best semantic match, while a keyword
# question loses at most the last of its ten places. Measured (bench/fusion_lab.py): one slot
# lifted the paraphrase set (R@10 0.11 -> 0.20) and LoCoMo (0.780 -> 0.783, no conversation below
# full text); two slots reached 0.26 but ranked conv-30 one question below full text.
DENSE_SLOTS = 1
SLOT_DEPTH = 10  # lcm_recall's default page
SLOT_COSINE = (
    0.3  # a reserved row must at least be related (MiniLM: unrelated turns sit near 0.1-0.2)
)
# multilingual-e5-small (the local-e5 model) ranks well enough alone for two reserved places, and
# its scale is higher: unrelated turns sit near 0.75. Measured (bench/fusion_lab.py, weight 0.5):
# two places lift the paraphrase set 0.336 -> 0.379 with LoCoMo 0.777 -> 0.780, no conversation
# below full text; three add 0.007 there, and at weight 0.6 a conversation falls below.
E5_MODEL = "local:multilingual-e5-small-q4"
E5_SLOTS = 2
E5_SLOT_COSINE = 0.8


def reserved_places(model: str | None) -> tuple[int, float]:
    """How many first-page places the nearest rows by meaning keep, and the cosine they need, for
    the model that made the vectors."""
    if model == E5_MODEL:
        return E5_SLOTS, E5_SLOT_COSINE
    return DENSE_SLOTS, SLOT_COSINE


def mix(candidates: list[Hit], weight: float, confidence: float) -> None:
    """Gated, weighted fusion of the full-text score and the cosine, on one scale.

    Each hit's full-text score is divided by the pool's best; its cosine is placed between the
    pool's lowest and best cosine (0 to 1), because models differ in scale: e5's unrelated rows
    sit near 0.75, MiniLM's near 0.15, and divided by the best alone e5's scores hardly differ
    (bench/fusion_lab.py: LoCoMo 0.763 -> 0.775 with e5, MiniLM unchanged). The text's share is
    ``(1 - w) * confidence`` (``w`` the vector weight), where ``confidence`` says how well the
    best row matches the query's words at all (its weighted coverage against the searcher's
    ``CONFIDENT_COVER``): when some row holds most of the query's rare words (LoCoMo's
    questions), the text keeps ``1 - w`` and a strong keyword match is never buried by the dense
    arm (plain RRF was seen to do that); when the words match only stray rows (a question in
    other words), the dense score decides. The fused score is scaled back to the full-text scale
    so summaries and context keep their meaning; a hit with no vector (not embedded yet) keeps
    its text score."""
    w = min(1.0, max(0.0, weight))
    top_text = max((h.score for h in candidates), default=0.0) or 1.0
    cosines = [h.cosine for h in candidates if h.cosine is not None]
    top_cos = max(cosines, default=0.0)
    if top_cos <= 0:
        return
    low = max(0.0, min(cosines))
    if low >= top_cos:  # every row as near as the best: each is the best
        low = 0.0
    span = top_cos - low
    share = (1.0 - w) * confidence if w > 0 else 1.0
    for h in candidates:
        text = h.score / top_text
        dense = max(0.0, h.cosine - low) / span if h.cosine is not None else text
        h.score = top_text * (share * text + (1.0 - share) * dense)


def reserve(ranked: list[Hit], slots: int, floor: float) -> list[Hit]:
    """The best ``slots`` rows by cosine (at least ``floor``) moved into the first
    ``SLOT_DEPTH`` places when they rank below them: at the end of those places, in cosine order,
    so the full text's best rows keep theirs. The fused score alone cannot do this without a weight
    that buries keyword answers (bench/fusion_lab.py: a dense weight of 0.5 or a stricter gate cost
    LoCoMo conversations up to 0.06); a reserved place costs a keyword question one place at most."""
    if slots <= 0:
        return ranked
    head = ranked[:SLOT_DEPTH]
    best = sorted(
        (h for h in ranked if h.cosine is not None and h.cosine >= floor),
        key=lambda h: -(h.cosine or 0.0),
    )[:slots]
    shown = {id(h) for h in head}
    lifted = [h for h in best if id(h) not in shown]
    if not lifted:
        return ranked
    keep = head[: SLOT_DEPTH - len(lifted)]
    placed = {id(h) for h in keep + lifted}
    return keep + lifted + [h for h in ranked if id(h) not in placed]

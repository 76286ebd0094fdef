"""Snippets: a hit's text as one short line, cut around the first query word it holds.

Every place that shows a hit (lcm_grep and lcm_recall, proactive recall's block, the CLI's
tables) cuts it here, so the window arithmetic (where to start, where to stop, when to mark a cut
with "…") is written once. They differ only in what they want from the cut, which
:func:`snippet`'s keywords say: how much to keep before the match (``lead``), whether a text
that fits comes back whole and a window near the end slides back to stay full (``fill``; a table
column wants the match at its left edge instead), and whether an edge moves to a word boundary
(``word_start``, ``word_end``).

Highlighted snippets (``«match»``) are FTS5's own ``snippet()``, computed in SQL by the store
(``fts_snippets``, ``scratch_fts``); this module only folds and cuts text.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..base.display import ELLIPSIS
from .query import Term


def first_words(terms: Iterable[Term]) -> tuple[str, ...]:
    """The word each term starts with: what a snippet looks for (a phrase or identifier is found
    by its first word, a prefix by its stem)."""
    return tuple(t.words[0] for t in terms if t.words)


def first_match(flat: str, needles: Iterable[str]) -> int | None:
    """Where in ``flat`` the earliest of ``needles`` starts (any case), or None.

    Searched in ``flat.lower()``, which is longer than ``flat`` when a character lowers to two
    ("İ" is "i" and a combining dot): the position found there is mapped back to ``flat``'s, or
    the window would start that many characters off."""
    lowered = flat.lower()
    found = [i for i in (lowered.find(n.lower()) for n in needles if n) if i >= 0]
    if not found:
        return None
    at = min(found)
    if len(lowered) == len(flat):
        return at
    offsets = [i for i, ch in enumerate(flat) for _ in ch.lower()]
    return offsets[at] if at < len(offsets) else len(flat)


def snippet(
    text: str,
    needles: Iterable[str] = (),
    width: int = 200,
    *,
    lead: int = 0,
    fill: bool = True,
    word_start: bool = False,
    word_end: bool = False,
) -> str:
    """``width`` characters of ``text`` on one line (whitespace runs as one space), starting
    ``lead`` characters before the first of ``needles`` it holds (none: at the start), with "…"
    on each side that was cut: at most ``width + 2`` characters.

    ``fill``: a text of at most ``width`` characters comes back whole, and a match near the end
    starts the window earlier so it still holds ``width`` characters. Without it the window
    always starts ``lead`` before the match, so a column cut at its right edge still shows it.
    ``word_start``: a cut start moves forward to the next word, if one begins before the match.
    ``word_end``: a cut end moves back to the last space, if that keeps over half the width."""
    if width < 1:
        raise ValueError("a snippet is at least one character wide")
    flat = " ".join(text.split())
    if fill and len(flat) <= width:
        return flat
    at = first_match(flat, needles)
    start = 0 if at is None else max(0, at - lead)
    if fill:
        start = min(start, max(0, len(flat) - width))
    if word_start and start > 0 and at is not None:
        space = flat.find(" ", start, at)
        start = space + 1 if space >= 0 else start
    end = start + width
    if word_end and end < len(flat):
        space = flat.rfind(" ", start, end)
        end = space if space > start + width // 2 else end
    head = ELLIPSIS if start > 0 else ""
    tail = ELLIPSIS if end < len(flat) else ""
    return head + flat[start:end] + tail

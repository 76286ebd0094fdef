"""search/snippets.py: the one place a hit's text is folded and cut to a window around its match."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hermes_lcm.search.query import build_query
from hermes_lcm.search.snippets import first_match, first_words, snippet

FILLER = "word " * 60


def test_a_text_that_fits_comes_back_whole_on_one_line():
    assert snippet("short \n\t text  here", ["text"], 50) == "short text here"
    assert snippet("", ["text"], 10) == ""


def test_term_at_the_start_keeps_the_start_and_marks_the_end():
    text = "quetzal " + FILLER
    shown = snippet(text, ["quetzal"], 40, lead=10)
    assert shown.startswith("quetzal") and shown.endswith("…") and len(shown) == 41


def test_term_in_the_middle_is_shown_after_lead_characters_with_both_ends_marked():
    text = FILLER + "the quetzal ledger " + FILLER
    shown = snippet(text, ["quetzal"], 40, lead=10)
    assert shown.startswith("…") and shown.endswith("…") and len(shown) == 42
    assert shown.index("quetzal") == 1 + 10


def test_term_at_the_end_slides_the_window_back_and_claims_no_more_text():
    text = FILLER + "quetzal"
    shown = snippet(text, ["quetzal"], 40, lead=10)
    assert shown.startswith("…") and shown.endswith("quetzal")  # nothing follows: no "…"
    assert len(shown) == 41


def test_without_fill_the_window_starts_at_the_match_however_short_the_text():
    text = "a few words then the quetzal and a bit more"
    shown = snippet(text, ["quetzal"], 200, lead=5, fill=False, word_start=True)
    assert shown == "…the quetzal and a bit more"
    assert snippet(FILLER + "quetzal", ["quetzal"], 40, lead=10, fill=False).endswith("quetzal")


def test_no_match_shows_the_start():
    assert snippet(FILLER, ["absent"], 20) == FILLER[:20] + "…"
    assert snippet(FILLER, [], 20) == FILLER[:20] + "…"
    assert snippet(FILLER, [""], 20) == FILLER[:20] + "…"  # an empty needle is no match


def test_the_earliest_of_several_terms_and_any_case_anchors_the_window():
    text = FILLER + "Ledger then quetzal " + FILLER
    shown = snippet(text, ["quetzal", "ledger"], 30, lead=0)
    assert shown.startswith("…Ledger")


def test_word_edges_move_to_word_boundaries():
    text = FILLER + "the quetzal ledger " + FILLER
    start = snippet(text, ["quetzal"], 40, lead=6, fill=False, word_start=True)
    assert start.startswith("…the quetzal")
    end = snippet("word " * 100, width=50, word_end=True)
    assert end.endswith("word…") and len(end) <= 51
    # no space in the second half of the window: a hard cut rather than half a snippet
    assert snippet("a " + "x" * 100, width=50, word_end=True) == "a " + "x" * 48 + "…"


def test_whitespace_of_every_kind_folds_to_one_space():
    shown = snippet("one\n\ntwo\t\tthree\u00a0\u2003four\r\nquetzal", ["quetzal"], 200)
    assert shown == "one two three four quetzal"


def test_multibyte_text_cuts_on_characters_and_keeps_the_match_in_place():
    text = "é" * 80 + " quetzal " + "漢字" * 60
    shown = snippet(text, ["QUETZAL"], 30, lead=4)
    assert shown == "…ééé quetzal " + "漢字" * 9 + "…"  # 4 before the match, 30 in all
    # "İ" lowers to two characters: positions found in the lowered text are mapped back
    dotted = "İ" * 50 + " quetzal " + "x" * 100
    assert first_match(dotted, ["quetzal"]) == 51
    assert snippet(dotted, ["quetzal"], 20, lead=0) == "…quetzal " + "x" * 12 + "…"


def test_width_limits():
    with pytest.raises(ValueError):
        snippet("text", width=0)
    assert snippet("abc", width=1) == "a…"
    assert snippet("abc", ["c"], 1) == "…c"
    assert snippet("abc", ["b"], 1) == "…b…"


def test_first_words_are_what_a_query_is_found_by():
    query = build_query('src/app.py "Rollback plan" pars* Quetzal')
    assert first_words(query.parts) == ("rollback", "src", "pars", "quetzal")


texts = st.lists(st.sampled_from([*"abc xyz\n\tÉéß漢İ", "quetzal", "  "]), max_size=200).map(
    "".join
)
needle = st.sampled_from(["quetzal", "abc", "é", "漢", "zzz"])


@settings(max_examples=300, deadline=None)
@given(
    text=texts,
    word=needle,
    width=st.integers(1, 120),
    lead=st.integers(0, 60),
    fill=st.booleans(),
    word_start=st.booleans(),
    word_end=st.booleans(),
)
def test_a_snippet_is_at_most_width_plus_its_marks_and_holds_the_match_when_it_fits(
    text: str, word: str, width: int, lead: int, fill: bool, word_start: bool, word_end: bool
) -> None:
    shown = snippet(
        text, [word], width, lead=lead, fill=fill, word_start=word_start, word_end=word_end
    )
    body = shown.removeprefix("…").removesuffix("…")
    assert len(body) <= width and len(shown) <= width + 2
    assert "\n" not in shown and "\t" not in shown and "  " not in shown
    flat = " ".join(text.split())
    assert body in flat
    at = first_match(flat, [word])
    if at is None:
        return
    room = width // 2 if word_end else width  # an end cut back to a word keeps over half
    if (len(flat) <= width and fill) or lead + len(word) <= room:
        assert flat[at : at + len(word)] in body

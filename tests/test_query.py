"""The query language (query.py) and ranking math (rank.py), against a real FTS5 table."""

from __future__ import annotations

import sqlite3

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hermes_lcm.query import Term, build_query, conversational, plain_snippet, plan_terms
from hermes_lcm.rank import coverage, idf, is_exact, own_score, with_context

ROWS = [
    "Gina: I lost my job at Door Dash this month, so I'm opening a dance studio.",
    "Jon: edited src/app/main.py and lcm_grep now returns hits",
    "Jon: the US holiday trip was great",
    "Gina: we talked about the ULID migration and the rollback plan",
    "tool output: Traceback in parser.py line 42: KeyError 'token'",
    "Jon: pancakes, pancake recipes and panning for gold",
]


@pytest.fixture
def fts() -> sqlite3.Connection:
    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE f USING fts5(content, tokenize='porter unicode61')")
    db.executemany("INSERT INTO f(rowid, content) VALUES (?, ?)", list(enumerate(ROWS, start=1)))
    return db


def search(db: sqlite3.Connection, text: str) -> list[int]:
    query = build_query(text)
    if query.empty:
        return []
    return [r[0] for r in db.execute("SELECT rowid FROM f WHERE f MATCH ? ORDER BY bm25(f)", (query.match,))]


def test_prose_question_is_an_or_of_meaningful_words(fts):
    query = build_query("When did Gina lose her job at Door Dash?")
    assert [t.text for t in query.parts] == ["gina", "lose", "job", "door", "dash"]
    assert {"when", "did", "her", "at"} <= set(query.dropped)
    assert search(fts, "When did Gina lose her job at Door Dash?")[0] == 1


def test_possessives_and_single_letters_are_dropped():
    assert [t.text for t in build_query("What is John's dog's name?").parts] == ["john", "dog", "name"]


def test_acronyms_in_capitals_survive_the_stop_list(fts):
    assert [t.text for t in build_query("the US trip").parts] == ["us", "trip"]
    assert [t.text for t in build_query("take us home").parts] == ["take", "home"]
    assert search(fts, "the US trip")[0] == 3


def test_paths_and_identifiers_become_phrases(fts):
    path = build_query("src/app/main.py").parts[0]
    assert (path.kind, path.match) == ("ident", '"src app main py"')
    assert search(fts, "src/app/main.py") == [2]
    assert search(fts, "lcm_grep") == [2]
    assert search(fts, "parser.py") == [5]


def test_quoted_phrases_keep_word_order(fts):
    query = build_query('"rollback plan" ULID')
    assert query.parts[0].kind == "phrase" and query.parts[0].match == '"rollback plan"'
    assert search(fts, '"rollback plan"') == [4]
    assert search(fts, '"plan rollback"') == []


def test_prefix_search(fts):
    assert build_query("pancak*").parts[0].match == '"pancak" *'
    assert search(fts, "panc*") == [6]


def test_only_stop_words_still_search_them(fts):
    query = build_query("what is this")
    assert [t.text for t in query.parts] == ["what", "is", "this"] and not query.dropped


def test_empty_and_punctuation_only_queries_are_empty():
    for text in ("", "   ", "?!", '""', "___", "\x00"):
        assert build_query(text).empty


def test_legacy_terms_view_gives_fts_expressions():
    assert build_query("dance src/a.py").terms == ('"dance"', '"src a py"')


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=80))
def test_any_user_text_is_a_valid_fts_query(text):
    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE f USING fts5(content, tokenize='porter unicode61')")
    db.execute("INSERT INTO f(rowid, content) VALUES (1, 'some text')")
    query = build_query(text)
    if not query.empty:
        db.execute("SELECT rowid FROM f WHERE f MATCH ?", (query.match,)).fetchall()
        for term in query.parts:
            db.execute("SELECT rowid FROM f WHERE f MATCH ?", (term.match,)).fetchall()


@pytest.mark.parametrize("text", ['a" OR b', "NEAR(a b)", "col:value", "a AND NOT b", "(*)", "^start", "x -y",
                                  'he said "unterminated', "\u00e9t\u00e9 \u4f60\u597d \U0001f600", "a\tb\nc"])
def test_fts_syntax_in_user_text_is_never_an_error(fts, text):
    search(fts, text)


def test_plan_terms_keeps_rare_terms_within_the_budget():
    terms = [Term(w, f'"{w}"', "word", w) for w in ("common", "rare", "middle", "absent")]
    selective, common = plan_terms(terms, [5000, 3, 400, 0], budget=1000)
    assert [t.text for t in selective] == ["rare", "middle"]
    assert [t.text for t in common] == ["common"]


def test_coverage_weights_rare_terms_more():
    weights = [idf(1000, 2), idf(1000, 600)]
    assert weights[0] > weights[1] > 0
    matched = [{1}, {1, 2}]
    assert coverage(1, matched, weights) == pytest.approx(1.0)
    assert coverage(2, matched, weights) < 0.1
    assert coverage(3, matched, weights) == 0.0


def test_own_score_rewards_coverage_and_exact_text():
    assert own_score(2.0, 1.0, False) > own_score(2.0, 0.5, False) > own_score(2.0, 0.0, False)
    assert own_score(2.0, 0.0, False) == pytest.approx(2.0, abs=0.02)
    assert own_score(2.0, 0.0, True) > 2.4
    assert own_score(0.0, 1.0, False) > own_score(0.0, 0.0, False) > 0, "coverage decides when bm25 degenerates"
    ident = build_query("src/app/main.py").parts
    assert is_exact("see src/app/main.py", ident) and not is_exact("src app main py", ident)


def test_context_gives_neighbours_part_of_a_strong_score():
    scores = {(1, 10): 10.0, (1, 14): 1.0}
    out = with_context(scores, window=2, gain=0.5)
    assert out[(1, 11)] == pytest.approx(5.0) and out[(1, 12)] == pytest.approx(5.0)
    assert out[(1, 10)] == pytest.approx(10.0)
    assert out[(1, 13)] == pytest.approx(0.5)
    assert (2, 10) not in out
    assert with_context(scores, window=0) == scores


def test_context_is_for_prose_questions_only():
    assert conversational(build_query("what did we decide about the parser").parts)
    assert not conversational(build_query("src/app/main.py").parts)
    assert not conversational(build_query('"rollback plan"').parts)


def test_plain_snippet_cuts_on_a_word():
    assert plain_snippet("short  text") == "short text"
    long = "word " * 100
    cut = plain_snippet(long, 50)
    assert cut.endswith("…") and len(cut) <= 51

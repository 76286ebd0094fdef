"""The query language (query.py) and ranking math (rank.py), against a real FTS5 table; what the
pipeline writes is also run against PostgreSQL's full-text index (``both``: the same rows found,
and no user text, however hostile, makes an expression the server or our translation refuses)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hermes_lcm.search.query import Term, build_query, conversational, plan_terms
from hermes_lcm.search.rank import coverage, idf, is_exact, own_score, with_context

from .conftest import BACKENDS

# On both backends through the module-scoped ``both`` fixture (one table per backend for the module).
pytestmark = pytest.mark.both_backends

ROWS = [
    "Gina: I lost my job at Door Dash this month, so I'm opening a dance studio.",
    "Jon: edited src/app/main.py and lcm_grep now returns hits",
    "Jon: the US holiday trip was great",
    "Gina: we talked about the ULID migration and the rollback plan",
    "tool output: Traceback in parser.py line 42: KeyError 'token'",
    "Jon: pancakes, pancake recipes and panning for gold",
]


def search(db: Any, text: str) -> list[int]:
    query = build_query(text)
    if query.empty:
        return []
    return match(db, query.match)


def match(db: Any, expression: str) -> list[int]:
    """Rows matching an FTS5 expression: FTS5 itself, or the expression as our PostgreSQL store
    runs it (``to_tsquery_text`` then ``lcm_tsq`` on the ``lcm_tsv`` of each row)."""
    if isinstance(db, sqlite3.Connection):
        return [
            r[0]
            for r in db.execute(
                "SELECT rowid FROM f WHERE f MATCH ? ORDER BY bm25(f)", (expression,)
            )
        ]
    from hermes_lcm.storage.pg.fulltext import to_tsquery_text

    sql = "SELECT id FROM f WHERE tsv @@ lcm_tsq(%s) ORDER BY ts_rank_cd(tsv, lcm_tsq(%s), 1) DESC, id"
    tsq = to_tsquery_text(expression)
    return [r[0] for r in db.execute(sql, (tsq, tsq))]


@pytest.fixture(scope="module", params=BACKENDS)
def both(request: pytest.FixtureRequest) -> Iterator[Any]:
    """The rows in FTS5 (in memory), or in a PostgreSQL table indexed as the store indexes messages."""
    if request.param == "sqlite":
        db = sqlite3.connect(":memory:")
        db.execute("CREATE VIRTUAL TABLE f USING fts5(content, tokenize='porter unicode61')")
        db.executemany(
            "INSERT INTO f(rowid, content) VALUES (?, ?)", list(enumerate(ROWS, start=1))
        )
        yield db
        db.close()
        return
    import psycopg

    from hermes_lcm import store as store_module

    from .pgserver import fresh_url

    url = fresh_url()
    store_module.open_store(url).close()  # the schema: lcm_tsv, lcm_tsq and the lcm configuration
    with psycopg.connect(url, autocommit=True) as pg:
        pg.execute(
            "CREATE TABLE f(id integer PRIMARY KEY, content text NOT NULL, "
            "tsv tsvector GENERATED ALWAYS AS (lcm_tsv(content)) STORED)"
        )
        with pg.cursor() as cur:
            cur.executemany(
                "INSERT INTO f(id, content) VALUES (%s, %s)", list(enumerate(ROWS, start=1))
            )
        yield pg


def test_prose_question_is_an_or_of_meaningful_words(both):
    query = build_query("When did Gina lose her job at Door Dash?")
    assert [t.text for t in query.parts] == ["gina", "lose", "job", "door", "dash"]
    assert {"when", "did", "her", "at"} <= set(query.dropped)
    assert search(both, "When did Gina lose her job at Door Dash?")[0] == 1


def test_possessives_and_single_letters_are_dropped():
    assert [t.text for t in build_query("What is John's dog's name?").parts] == [
        "john",
        "dog",
        "name",
    ]


def test_acronyms_in_capitals_survive_the_stop_list(both):
    assert [t.text for t in build_query("the US trip").parts] == ["us", "trip"]
    assert [t.text for t in build_query("take us home").parts] == ["take", "home"]
    assert search(both, "the US trip")[0] == 3


def test_paths_and_identifiers_become_phrases(both):
    path = build_query("src/app/main.py").parts[0]
    assert (path.kind, path.match) == ("ident", '"src app main py"')
    assert search(both, "src/app/main.py") == [2]
    assert search(both, "lcm_grep") == [2]
    assert search(both, "parser.py") == [5]


def test_quoted_phrases_keep_word_order(both):
    query = build_query('"rollback plan" ULID')
    assert query.parts[0].kind == "phrase" and query.parts[0].match == '"rollback plan"'
    assert search(both, '"rollback plan"') == [4]
    assert search(both, '"plan rollback"') == []


def test_prefix_search(both):
    assert build_query("pancak*").parts[0].match == '"pancak" *'
    assert search(both, "panc*") == [6]


def test_only_stop_words_still_search_them(both):
    query = build_query("what is this")
    assert [t.text for t in query.parts] == ["what", "is", "this"] and not query.dropped
    assert (
        search(both, "what is this")[0] == 1
    )  # "this month": the stop words are searched, not dropped


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


@settings(max_examples=300, deadline=None)
@given(text=st.text(max_size=80))
def test_any_user_text_is_a_valid_query_on_either_backend(both, text):
    """Attack: whatever the user types, the expression and each term run on FTS5 and on PostgreSQL
    (our translation accepts it and the server parses the tsquery it makes)."""
    query = build_query(text)
    if not query.empty:
        match(both, query.match)
        for term in query.parts:
            match(both, term.match)


@pytest.mark.parametrize(
    "text",
    [
        'a" OR b',
        "NEAR(a b)",
        "col:value",
        "a AND NOT b",
        "(*)",
        "^start",
        "x -y",
        'he said "unterminated',
        "\u00e9t\u00e9 \u4f60\u597d \U0001f600",
        "a\tb\nc",
    ],
)
def test_fts_syntax_in_user_text_is_never_an_error(both, text):
    search(both, text)


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
    assert own_score(0.0, 1.0, False) > own_score(0.0, 0.0, False) > 0, (
        "coverage decides when bm25 degenerates"
    )
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


def test_fts_keywords_and_apostrophes_mean_what_a_user_means():
    query = build_query("webhook NOT relay")
    assert [t.text for t in query.parts] == ["webhook"] and [t.match for t in query.excluded] == [
        '"relay"'
    ]
    assert "NOT" not in query.match and "not" not in query.dropped
    assert [t.text for t in build_query("deploy -staging").excluded] == ["staging"]
    assert [t.text for t in build_query("pre-commit hook").parts] == [
        "pre commit",
        "hook",
    ]  # a dash inside stays
    assert [t.text for t in build_query("US OR EU AND UK").parts] == [
        "us",
        "eu",
        "uk",
    ]  # operators join
    its = build_query("it's broken")
    assert [t.text for t in its.parts] == ["broken"] and its.dropped == (
        "it's",
    )  # one stop word, not it + s
    assert [t.match for t in build_query("it's").parts] == [
        '"it s"'
    ]  # alone: the contraction as indexed
    assert [t.text for t in build_query("don't restart the relay").parts] == ["restart", "relay"]
    assert [t.match for t in build_query("O'Brien").parts] == ['"O Brien"']


def test_an_excluded_term_leaves_out_the_rows_holding_it(both):
    query = build_query("Jon NOT pancakes")
    found = match(both, query.match)
    left = [r for r in found if r not in match(both, query.excluded_match)]
    assert 6 in found and 6 not in left and {2, 3} <= set(left)

"""Keyword search as agents and people ask: the query language (the ranking math is in rank.py).

Query: what anyone types becomes a list of terms, each a quoted FTS5 expression, so no user
text can be an FTS syntax error. Prose becomes an OR of its meaningful words (implicit AND finds
nothing for a question); ``"quoted text"`` stays a phrase; identifiers and paths
(``src/app.py``, ``lcm_grep``, ``v1.2``) become phrases of their parts, which is how the
``unicode61`` tokenizer indexed them; a trailing ``*`` keeps a prefix search.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

_STOPWORD_TEXT = """
a about above after again against all am an and any are as at be because been before being below
between both but by can could did do does doing done down during each few for from further had has
have having he her here hers herself him himself his how i if in into is it its itself just me more
most my myself no nor not now of off on once only or other our ours ourselves out over own same she
should so some such than that the their theirs them themselves then there these they this those
through to too under until up very was we were what when where which while who whom whose why will
with would you your yours yourself yourselves us tell know think get got also ever still yet
something anything please let lets may might must shall any ok okay really
"""
STOPWORDS = frozenset(_STOPWORD_TEXT.split())
MAX_TERMS = 24

_PHRASE = re.compile(r'"([^"]*)"')
_TOKEN = re.compile(r"[^\W_][\w./:\-@#+~'\u2019\u02bc]*\*?|_[\w./:\-@#+~]*\*?", re.UNICODE)
_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_APOSTROPHE = re.compile(r"['\u2019\u02bc]")
# FTS5's operators typed in capitals: NOT excludes the next term, AND/OR/NEAR join (terms are ORed anyway)
OPERATORS = frozenset({"AND", "OR", "NOT", "NEAR"})


@dataclass(frozen=True)
class Term:
    """One search term: ``match`` is its FTS5 expression, ``raw`` what was typed."""

    text: str
    match: str
    kind: str  # word | phrase | ident | prefix
    raw: str

    @property
    def words(self) -> tuple[str, ...]:
        """The indexed words this term is made of, lower case."""
        return tuple(w.lower() for w in _WORD.findall(self.match))


@dataclass(frozen=True)
class Query:
    """A compiled query; ``match`` ORs every term."""

    parts: tuple[Term, ...]
    dropped: tuple[str, ...] = ()
    excluded: tuple[
        Term, ...
    ] = ()  # ``NOT word`` / ``-word``: a row holding any of these is no hit

    @property
    def empty(self) -> bool:
        return not self.parts

    @property
    def match(self) -> str:
        return or_match(self.parts)

    @property
    def excluded_match(self) -> str:
        return or_match(self.excluded)

    @property
    def terms(self) -> tuple[str, ...]:
        """Each term's FTS5 expression (``'"word"'``, ``'"src app py"'``, ``'"pref" *'``)."""
        return tuple(t.match for t in self.parts)


def or_match(terms: Iterable[Term]) -> str:
    return " OR ".join(t.match for t in terms)


def _quote(words: Sequence[str]) -> str:
    return '"' + " ".join(words).replace('"', '""') + '"'


def _is_stopword(token: str) -> bool:
    """Function words are dropped, but an acronym in capitals (US, IT, OR) is kept."""
    return token.lower() in STOPWORDS and not (token.isupper() and len(token) > 1)


_SUFFIXES = frozenset({"s", "t", "m", "re", "ve", "ll", "d"})


def _function_contraction(words: Sequence[str]) -> bool:
    """it's, don't, won't, I'm, we'll: a function word with its clitic (Alice's is not one)."""
    base = words[0].lower()
    if words[1].lower() == "t" and base.endswith("n"):
        base = {"ca": "can", "wo": "will", "ai": "am", "sha": "shall"}.get(base[:-1], base[:-1])
    return base in STOPWORDS or len(base) == 1


def _token_term(token: str) -> Term | None:
    prefix = token.endswith("*")
    body = token.rstrip("*").rstrip("'\u2019\u02bc")
    words = _WORD.findall(body)
    if not words:
        return None
    if _APOSTROPHE.search(body) and len(words) == 2 and words[1].lower() in _SUFFIXES:
        if _function_contraction(words):
            return None  # a contraction of a function word (it's, don't, I'm) is one stop word
        body, words = (
            words[0],
            words[:1],
        )  # a possessive or clitic (John's, Sam'll): the name is the term
    if len(words) == 1 and not prefix:
        word = words[0]
        if _is_stopword(word) or (len(word) == 1 and not word.isdigit()):
            return None
        return Term(word.lower(), _quote(words), "word", body)
    kind = "prefix" if prefix else "ident"
    match = _quote(words) + (" *" if prefix else "")
    return Term(" ".join(words).lower() + ("*" if prefix else ""), match, kind, body)


def build_query(text: str, max_terms: int = MAX_TERMS) -> Query:
    """The phrases and meaningful terms of ``text``; only stop words -> search those."""
    text = (text or "").replace("\x00", " ")
    terms: list[Term] = []
    dropped: list[str] = []
    seen: set[str] = set()

    def add(term: Term | None) -> None:
        if term is not None and term.match.lower() not in seen:
            seen.add(term.match.lower())
            terms.append(term)

    for phrase in _PHRASE.findall(text):
        words = _WORD.findall(phrase)
        if words:
            add(Term(" ".join(words).lower(), _quote(words), "phrase", phrase.strip()))
    rest = _PHRASE.sub(" ", text)
    excluded: list[Term] = []
    negate = False
    for found in _TOKEN.finditer(rest):
        token = found.group()
        if token in OPERATORS:
            negate = token == "NOT"
            continue
        minus = (
            found.start() > 0
            and rest[found.start() - 1] == "-"
            and (found.start() == 1 or rest[found.start() - 2].isspace())
        )
        term = _token_term(token)
        if negate or minus:
            if term is not None:
                excluded.append(term)
            negate = False
            continue
        if term is None:
            dropped.append(token)
        add(term)
    if not terms:  # only stop words: searching them beats finding nothing
        for word in _TOKEN.findall(rest):
            if word not in OPERATORS and _WORD.findall(word):
                words = _WORD.findall(word)
                add(
                    Term(
                        " ".join(words).lower(),
                        _quote(words),
                        "word" if len(words) == 1 else "ident",
                        word,
                    )
                )
        dropped = []
    return Query(
        tuple(terms[:max_terms]),
        tuple(dict.fromkeys(d.lower() for d in dropped)),
        tuple(excluded[:max_terms]),
    )


# --------------------------------------------------------------------------- term planning


def plan_terms(
    terms: Sequence[Term], counts: Sequence[int], budget: int
) -> tuple[list[Term], list[Term]]:
    """Split terms into (selective, common) so bm25 ranks at most ``budget`` matching rows.

    The rarest terms go first; a term whose matches would push the total over the budget is
    common: it still counts for coverage but does not drive candidate selection (its bm25
    weight is small anyway, and ranking all its rows is what makes common words slow).
    """
    order = sorted(range(len(terms)), key=lambda i: (counts[i], i))
    selective, common, total = [], [], 0
    for i in order:
        if counts[i] == 0:
            continue
        if total + counts[i] <= budget:
            selective.append(terms[i])
            total += counts[i]
        else:
            common.append(terms[i])
    return selective, common


def conversational(terms: Sequence[Term]) -> bool:
    """A prose question (two or more plain words) gets conversational context; an identifier,
    phrase or prefix lookup wants exact matches only."""
    return sum(1 for t in terms if t.kind == "word") >= 2

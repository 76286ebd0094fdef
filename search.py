"""Turning what an agent or a person types into a safe FTS5 query.

Prose questions become an OR of their meaningful terms (implicit AND finds
nothing for prose); quoted text stays a phrase; identifiers and paths become
phrases of their parts, which is how the ``unicode61`` tokenizer indexed them;
a trailing ``*`` keeps a prefix search. Every term is quoted, so no user text
can be an FTS syntax error.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_STOPWORD_TEXT = """
a about above after again against all am an and any are as at be because been before being below
between both but by can could did do does doing down during each few for from further had has have
having he her here hers herself him himself his how i if in into is it its itself just me more most
my myself no nor not now of off on once only or other our ours ourselves out over own same she
should so some such than that the their theirs them themselves then there these they this those
through to too under until up very was we were what when where which while who whom why will with
would you your yours yourself yourselves tell know think like get got also ever still yet something
anything
"""
STOPWORDS = frozenset(_STOPWORD_TEXT.split())

_PHRASE = re.compile(r'"([^"]+)"')
_TOKEN = re.compile(r"[\w][\w./:\-@#+]*\*?", re.UNICODE)
_WORD = re.compile(r"\w+", re.UNICODE)


@dataclass(frozen=True)
class Query:
    """A compiled query: the FTS5 MATCH text and the terms it was built from."""

    match: str
    terms: tuple[str, ...]

    @property
    def empty(self) -> bool:
        return not self.match


def _quote(text: str) -> str:
    return '"' + text.replace('"', '""') + '"'


def _term(token: str) -> str | None:
    prefix = token.endswith("*")
    words = _WORD.findall(token.rstrip("*"))
    if not words:
        return None
    if len(words) == 1 and words[0].lower() in STOPWORDS and not prefix:
        return None
    quoted = _quote(" ".join(words))
    return quoted + " *" if prefix else quoted


def build_query(text: str, max_terms: int = 32) -> Query:
    """An OR query of the phrases and meaningful terms of ``text``."""
    text = (text or "").replace("\x00", " ")
    parts: list[str] = []
    seen: set[str] = set()
    for phrase in _PHRASE.findall(text):
        words = _WORD.findall(phrase)
        if words:
            parts.append(_quote(" ".join(words)))
    for token in _TOKEN.findall(_PHRASE.sub(" ", text)):
        term = _term(token)
        if term and term.lower() not in seen:
            seen.add(term.lower())
            parts.append(term)
    if not parts:  # only stop words: search them rather than nothing
        words = [w for w in _WORD.findall(text)][:max_terms]
        parts = [_quote(w) for w in dict.fromkeys(w.lower() for w in words)]
    parts = parts[:max_terms]
    return Query(" OR ".join(parts), tuple(parts))

"""Full-text search on PostgreSQL: the search pipeline's FTS5 expressions as ``tsquery``.

The pipeline (``query.py``) writes a small, fixed subset of FTS5: quoted phrases of words, a
phrase optionally followed by `` *`` (prefix on its last word), joined by `` OR ``. That subset
maps one-to-one onto ``tsquery``: a phrase is ``w1 <-> w2``, a prefix ``w:*``, OR is ``|``.
The index (``schema.lcm_tsv``) splits text at every character that is not a letter or digit,
as SQLite's ``unicode61`` does, and stems with Snowball English and no stop words (the
``lcm`` text search configuration), as ``porter`` does: the same words match on both backends.

Scores keep SQLite's convention, lower is better (bm25 is negative): ``-ts_rank_cd``.
"""

from __future__ import annotations

from collections.abc import Sequence

import regex

_TERM = regex.compile(r'"((?:[^"]|"")*)"(\s*\*)?')
_WORD = regex.compile(r"[^\W_]+")
_JOINER = regex.compile(r"\s+OR\s+")


class UnsupportedMatch(ValueError):
    """An FTS5 expression outside the subset the pipeline writes."""


def to_tsquery_text(match: str) -> str:
    """``'"auth batch" OR "pref" *'`` -> ``'(auth <-> batch) | (pref:*)'`` (text for ``to_tsquery('lcm', ...)``).

    An expression with no words at all gives the empty string (no row matches it)."""
    parts: list[str] = []
    rest = match.strip()
    while rest:
        found = _TERM.match(rest)
        if found is None:
            raise UnsupportedMatch(f"not a phrase/prefix term: {rest[:80]!r}")
        words = _WORD.findall(found.group(1).replace('""', '"').lower())
        if words:
            if found.group(2):
                words[-1] += ":*"
            parts.append("(" + " <-> ".join(words) + ")")
        rest = rest[found.end() :].lstrip()
        if rest:
            joiner = _JOINER.match(" " + rest)
            if joiner is None:
                raise UnsupportedMatch(f"terms must be joined by OR: {rest[:80]!r}")
            rest = (" " + rest)[joiner.end() :]
    return " | ".join(parts)


def tsqueries(matches: Sequence[str]) -> list[str]:
    return [to_tsquery_text(m) for m in matches]

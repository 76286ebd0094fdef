"""The offline summary: the most informative lines of the sources, deterministic and always in budget.

Used when no LLM route is configured and as the last resort when every route failed; its keyword
ranking also supplies the footer an LLM answer left out.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass

from ..base.tokens import count_tokens
from .fitting import FOOTER_PREFIX, SourceItem, fit_with_footer, footer_cap, make_footer

_UNIT_MAX_CHARS = 300
_SELECT_MAX_MISSES = 64
_MAX_KEYWORDS = 12
_STRONG, _PROSE = 0, 1  # keyword tiers
_CACHED_WORD_CHARS = 40
_KEYWORD_MAX_CHARS = 60
_WORD_STRIP = "\"'`()[]{}<>,;:!?*"
_SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+")
_HAS_ALNUM = re.compile(r"[^\W_]")
_HAS_DIGIT = re.compile(r"\d")
_CAMEL = re.compile(r"[a-z][A-Z]")
_DOTTED = re.compile(r"[A-Za-z_]\w*(?:\.\w+)+")
_ROLE = re.compile(r"\b(user|assistant|tool|system)\b", re.I)


def _word_set(text: str) -> frozenset[str]:
    return frozenset(text.split())


_FILE_EXTS = _word_set(
    "py pyi js mjs ts tsx jsx md rst json jsonl yaml yml toml txt sh bash zsh rs go c h cc cpp hpp java kt "
    "rb php sql html css scss cfg ini conf lock db sqlite log csv env xml proto tf ipynb"
)
_DECISION_WORDS = _word_set(
    "decided decide decision chose choose chosen agreed agree fixed fix fixes resolved resolve error errors "
    "exception traceback failed fail fails failure bug todo fixme warning must never always blocked "
    "cause caused reverted revert rollback passed succeeded success done requirement required deprecated "
    "breaking instead because plan next"
)
_COMMANDS = _word_set(
    "git pip pip3 python python3 pytest npm npx yarn pnpm cargo make docker kubectl curl wget ls cd cat grep "
    "rg sed awk uv poetry node bash sh sudo apt apt-get brew ssh scp rm mv cp mkdir chmod export hermes lcm "
    "sqlite3 ruff mypy go"
)
_STOPWORDS = _word_set(
    "about above after again against because before being below between could didn't doesn't during "
    "each from have having here itself just more most other over same should some such than that their "
    "theirs them then there these they this those through under until very what when where which while "
    "with would your yours also into only will were been does done make made like want need using used "
    "okay thanks please"
)


@dataclass(frozen=True)
class _Unit:
    source: int
    text: str
    score: float


@dataclass(frozen=True)
class _Analysis:
    units: tuple[_Unit, ...]
    keywords: tuple[str, ...]


def _split_long(line: str) -> list[str]:
    """Lines cut into units of at most _UNIT_MAX_CHARS, at sentence then word breaks, so one huge
    line (a minified blob, a pasted log) cannot crowd out everything else."""
    if len(line) <= _UNIT_MAX_CHARS:
        return [line]
    units: list[str] = []
    for sentence in _SENTENCE_BREAK.split(line):
        current = ""
        for word in sentence.split():
            pieces = [word[i : i + _UNIT_MAX_CHARS] for i in range(0, len(word), _UNIT_MAX_CHARS)]
            for piece in pieces:
                if current and len(current) + 1 + len(piece) > _UNIT_MAX_CHARS:
                    units.append(current)
                    current = ""
                current = f"{current} {piece}" if current else piece
        if current:
            units.append(current)
    return units


def _word_kind(raw: str) -> tuple[str, str]:
    """(kind, cleaned word); kind is path, ident, url, number, word or '' for noise.

    Short words are cached because they repeat heavily across a transcript and this runs on the
    compaction path; long ones (blobs, hashes) rarely repeat and would only bloat the cache.
    """
    return _classify_word(raw) if len(raw) > _CACHED_WORD_CHARS else _classify_cached(raw)


def _classify_word(raw: str) -> tuple[str, str]:
    word = raw.strip(_WORD_STRIP).rstrip(".")
    if len(word) < 2:
        return "", word
    if word.isalpha() and (word.islower() or not _CAMEL.search(word)):
        return "word", word.lower()
    if word.lower().startswith(("http://", "https://")):
        return "url", word
    if ("/" in word or "\\" in word) and _HAS_ALNUM.search(word):
        return "path", word
    stem, dot, ext = word.rpartition(".")
    if dot and stem and ext.lower() in _FILE_EXTS:
        return "path", word
    if _looks_like_identifier(raw, word):
        return "ident", word
    if _HAS_DIGIT.search(word):
        return "number", word
    return "word", word.lower()


_classify_cached = functools.lru_cache(maxsize=32768)(_classify_word)


def _looks_like_identifier(raw: str, word: str) -> bool:
    return bool(
        "_" in word.strip("_")
        or "::" in word
        or "()" in raw
        or "=" in word[1:]
        or word.startswith("--")
        or _CAMEL.search(word)
        or _DOTTED.fullmatch(word)
    )


def _score_unit(words: list[str], keywords: dict[str, list[int]], position: int) -> float:
    """Salience of one unit; also tallies keyword weights (identifiers and paths count most)."""
    counts = {"path": 0, "ident": 0, "url": 0, "number": 0}
    decision = False
    for raw in words:
        kind, word = _word_kind(raw)
        if kind in counts:
            counts[kind] += 1
        if kind == "word":
            decision = decision or word in _DECISION_WORDS
            if (
                len(word) >= 5
                and word.isalpha()
                and word not in _STOPWORDS
                and word not in _DECISION_WORDS
            ):
                _tally(keywords, word, _PROSE, position)
        elif kind in ("path", "ident") and len(word) <= _KEYWORD_MAX_CHARS:
            _tally(keywords, word, _STRONG, position)
    command = words[0].lstrip("$❯>").lower() in _COMMANDS or words[0] in ("$", "❯")
    return (
        3 * min(counts["path"], 2)
        + 2 * min(counts["ident"], 3)
        + min(counts["number"], 2)
        + 2 * min(counts["url"], 1)
        + (3 if decision else 0)
        + (2 if command else 0)
    )


def _tally(keywords: dict[str, list[int]], word: str, tier: int, position: int) -> None:
    """Count one use of a keyword: [tier, uses, first position]; the best tier seen wins."""
    entry = keywords.get(word)
    if entry is None:
        keywords[word] = [tier, 1, position]
    else:
        entry[0] = min(entry[0], tier)
        entry[1] += 1


def _role_bonus(role: str, line_index: int, line_count: int) -> float:
    """User asks matter most; a tool result's first and last lines carry its name and outcome."""
    bonus = 1.0 if line_index == 0 else 0.0
    if role == "user" or (role == "tool" and line_index in (0, line_count - 1)):
        bonus += 2
    return bonus


def _source_lines(item: SourceItem, keywords: dict[str, list[int]], position: int) -> list[str]:
    """Candidate lines of one source; child-summary footers feed keywords instead of the body."""
    lines: list[str] = []
    for line in item.text.splitlines():
        stripped = line.strip()
        if stripped.lower().startswith(FOOTER_PREFIX.lower()):
            for topic in stripped[len(FOOTER_PREFIX) :].split(","):
                topic = topic.strip()
                if topic and len(topic) <= _KEYWORD_MAX_CHARS:
                    _tally(keywords, topic, _STRONG, position)
        elif stripped and _HAS_ALNUM.search(stripped):
            lines.append(stripped)
    return lines


def _analyse(sources: Sequence[SourceItem]) -> _Analysis:
    """Score every unit of every source once; dedupe; rank keywords by weight then first use."""
    keywords: dict[str, list[int]] = {}
    units: list[_Unit] = []
    seen: set[str] = set()
    first_ask_done = False
    for index, item in enumerate(sources):
        role_match = _ROLE.search(item.label)
        role = role_match.group(1).lower() if role_match else ""
        lines = _source_lines(item, keywords, len(units))
        for line_index, line in enumerate(lines):
            bonus = _role_bonus(role, line_index, len(lines))
            if role == "user" and not first_ask_done:
                bonus, first_ask_done = bonus + 100, True
            for unit in _split_long(line):
                words = unit.split()
                text = " ".join(words)
                key = text.lower()
                if not words or key in seen:
                    continue
                seen.add(key)
                score = _score_unit(words, keywords, len(units)) + bonus
                units.append(_Unit(index, text, score))
    # Identifiers, paths and child-summary topics before prose words; then by use count, first use.
    ranked = sorted(keywords.items(), key=lambda kv: (kv[1][0], -kv[1][1], kv[1][2]))
    return _Analysis(tuple(units), tuple(word for word, _ in ranked[:_MAX_KEYWORDS]))


def _select(units: Sequence[_Unit], sources: Sequence[SourceItem], budget: int) -> list[int]:
    """Greedy by score (ties: earlier first), paying each source's label once; indexes in order."""
    chosen: list[int] = []
    labelled: set[int] = set()
    used = misses = 0
    for i in sorted(range(len(units)), key=lambda i: (-units[i].score, i)):
        unit = units[i]
        cost = count_tokens(unit.text) + 2
        if unit.source not in labelled:
            cost += count_tokens(sources[unit.source].label) + 3
        if used + cost > budget:
            misses += 1
            if misses > _SELECT_MAX_MISSES or budget - used < 4:
                break
            continue
        used += cost
        labelled.add(unit.source)
        chosen.append(i)
    return sorted(chosen)


def _render(units: Sequence[_Unit], chosen: Sequence[int], sources: Sequence[SourceItem]) -> str:
    lines: list[str] = []
    current = -1
    for i in chosen:
        unit = units[i]
        if unit.source != current:
            current = unit.source
            lines.append(f"[{sources[current].label}]")
        text = unit.text.lstrip()
        lines.append(text if text.startswith(("- ", "* ")) else f"- {text}")
    return "\n".join(lines)


def extractive_summary(sources: Sequence[SourceItem], target_tokens: int) -> str:
    """Deterministic offline summary: the most informative lines (paths, commands, identifiers,
    values, decisions, the first user ask, tool outcomes) in original order under their source
    labels, ending with an "Expand for details about:" line; always within ``target_tokens``."""
    if target_tokens <= 0:
        return ""
    analysis = _analyse(sources)
    footer = make_footer(analysis.keywords, footer_cap(target_tokens))
    budget = target_tokens - count_tokens(footer) - 1
    chosen = _select(analysis.units, sources, budget) if budget > 0 else []
    return fit_with_footer(_render(analysis.units, chosen, sources), footer, target_tokens)


def keywords(sources: Sequence[SourceItem]) -> tuple[str, ...]:
    """The sources' keywords, best first: identifiers, paths and child-summary topics, then prose."""
    return _analyse(sources).keywords

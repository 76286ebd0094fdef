"""Session globs and message regexes, compiled once per engine.

Session globs: ``*`` matches within one colon-separated segment, ``**`` across
segments; a pattern is tried against ``session_id``, ``platform`` and
``platform:session_id``. Message patterns are regexes run with a per-pattern
timeout (``regex`` package), so one pathological pattern cannot stall a turn;
an invalid pattern is dropped and reported.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported where a pattern is compiled: most processes never compile one
    import regex

MESSAGE_PATTERN_TIMEOUT_S = 0.05


def split_list(value: str) -> tuple[str, ...]:
    """A comma-separated setting's items (session globs, model names, tool names)."""
    return tuple(part.strip() for part in (value or "").split(",") if part.strip())


def glob_to_regex(pattern: str) -> re.Pattern[str]:
    out = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^:]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^:]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("^" + "".join(out) + "$")


@dataclass(frozen=True)
class SessionPatterns:
    patterns: tuple[str, ...]
    compiled: tuple[re.Pattern[str], ...]

    @classmethod
    def parse(cls, value: str) -> SessionPatterns:
        items = split_list(value)
        return cls(items, tuple(glob_to_regex(p) for p in items))

    def match(self, session_id: str, platform: str = "") -> str | None:
        """The first pattern that matches, or None."""
        keys = [session_id, platform, f"{platform}:{session_id}" if platform else session_id]
        for text, rx in zip(self.patterns, self.compiled, strict=True):
            if any(k and rx.match(k) for k in keys):
                return text
        return None


_LEADING_FLAGS = re.compile(r"^\(\?([aimsux]+)\)")
_GLOBAL_FLAGS = re.compile(r"\(\?[aimsuxL]+\)")
_BACKREF = re.compile(r"\\[1-9]|\(\?P=|\\g<")


@dataclass(frozen=True)
class MessagePatterns:
    """The ignore patterns. They are searched as one alternation (one ``regex`` call with one
    timeout per text: arming a timeout costs about as much as a short search), each pattern alone
    only when the alternation runs out of time (so one slow pattern cannot hide the others)."""

    compiled: tuple[regex.Pattern[str], ...]
    problems: tuple[str, ...]
    combined: regex.Pattern[str] | None = None

    @classmethod
    def parse(cls, value: str) -> MessagePatterns:
        import regex

        compiled, sources, problems = [], [], []
        for item in split_entries(value):  # a comma inside {2,5} or [a,b] does not split a pattern
            try:
                compiled.append(regex.compile(item))
                sources.append(item)
            except regex.error as exc:
                problems.append(f"LCM_IGNORE_MESSAGE_PATTERNS: {item!r} dropped ({exc})")
        return cls(tuple(compiled), tuple(problems), _combine(sources))

    def matches(self, texts: Iterable[str]) -> bool:
        if not self.compiled:
            return False
        for text in texts:
            if self.combined is not None:
                try:
                    if self.combined.search(
                        text, timeout=MESSAGE_PATTERN_TIMEOUT_S * len(self.compiled)
                    ):
                        return True
                    continue
                except TimeoutError:
                    pass
            for rx in self.compiled:
                try:
                    if rx.search(text, timeout=MESSAGE_PATTERN_TIMEOUT_S):
                        return True
                except TimeoutError:
                    continue
        return False


def _combine(sources: list[str]) -> regex.Pattern[str] | None:
    import regex

    """One alternation of the patterns with the same matches, or None when one of them cannot be
    put in one (a back-reference numbers groups of the whole pattern)."""
    if not sources or any(_BACKREF.search(s) for s in sources):
        return None
    parts = []
    for source in sources:
        flags = _LEADING_FLAGS.match(source)
        rest = source[flags.end() :] if flags else source
        if _GLOBAL_FLAGS.search(rest):
            return None  # a flag further in applies to the whole pattern: keep each on its own
        parts.append(f"(?{flags.group(1)}:{rest})" if flags else f"(?:{rest})")
    try:
        return regex.compile("|".join(parts))
    except regex.error:
        return None


def split_entries(text: str) -> list[str]:
    """Comma-separated entries, where a comma that keeps brackets or braces open on both sides
    (``[a,b]``, ``{2,8}``) or is escaped as ``\\,`` belongs to the entry (a user pattern may hold
    one). A piece whose brackets never close stays an entry of its own (then reported invalid)."""
    pieces, current, escaped = [], [], False
    for char in text or "":
        if escaped:
            current.append(char if char == "," else "\\" + char)
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == ",":
            pieces.append("".join(current))
            current = []
        else:
            current.append(char)
    if escaped:
        current.append("\\")
    pieces.append("".join(current))
    entries, i = [], 0
    while i < len(pieces):
        joined, j = pieces[i], i
        while _open_brackets(joined) and j + 1 < len(pieces):
            j += 1
            joined = f"{joined},{pieces[j]}"
        if _open_brackets(joined):
            joined, j = pieces[i], i  # never closes: the piece alone
        entries.append(joined.strip())
        i = j + 1
    return [entry for entry in entries if entry]


def _open_brackets(text: str) -> bool:
    depth, escaped = 0, False
    for char in text:
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
    return depth > 0

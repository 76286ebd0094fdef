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

import regex

from .config import split_list
from .sensitive import split_entries

MESSAGE_PATTERN_TIMEOUT_S = 0.05


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


@dataclass(frozen=True)
class MessagePatterns:
    compiled: tuple[regex.Pattern[str], ...]
    problems: tuple[str, ...]

    @classmethod
    def parse(cls, value: str) -> MessagePatterns:
        compiled, problems = [], []
        for item in split_entries(value):  # a comma inside {2,5} or [a,b] does not split a pattern
            try:
                compiled.append(regex.compile(item))
            except regex.error as exc:
                problems.append(f"LCM_IGNORE_MESSAGE_PATTERNS: {item!r} dropped ({exc})")
        return cls(tuple(compiled), tuple(problems))

    def matches(self, texts: Iterable[str]) -> bool:
        if not self.compiled:
            return False
        for text in texts:
            for rx in self.compiled:
                try:
                    if rx.search(text, timeout=MESSAGE_PATTERN_TIMEOUT_S):
                        return True
                except TimeoutError:
                    continue
        return False

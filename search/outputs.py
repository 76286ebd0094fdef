"""Search inside externalized tool outputs (lcm_grep's ``content_scope``, ``lcm grep
--content-scope``).

A large tool output is stored as a stub (its head, tail and ref) and its whole text in a payload,
so full-text search sees only the stub. :func:`scan_outputs` reads the payloads it is given
(the caller decides which are in reach) and returns the lines that hold every word of the query,
each with the character offset its text pages from. It is bounded: at most MAX_REFS payloads and
MAX_CHARS characters read per call, in the order given (newest outputs first), and it says why
it stopped.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..base.display import ELLIPSIS, cut

MAX_REFS = 50
MAX_CHARS = 20_000_000
LINE_CHARS = 300
_WORD = re.compile(r"[^\W_]+(?:[._/-][^\W_]+)*", re.UNICODE)
_OPERATORS = {"and", "or", "not"}

# (ref, offset, most characters) -> (the text from offset, the payload's whole length)
Reader = Callable[[str, int, int], tuple[str, int]]


@dataclass(frozen=True)
class OutputHit:
    ref: str
    owner: int  # the store_id of the row the payload was kept for
    offset: int  # where the line starts in the payload's text
    line: str  # cut to LINE_CHARS


@dataclass(frozen=True)
class OutputScan:
    hits: tuple[OutputHit, ...]
    scanned: int
    words: tuple[str, ...]
    stopped: str | None


def words_of(query: str) -> list[str]:
    """The query's words (identifiers whole), lower-cased, operators left out."""
    return [w for w in (m.group(0).lower() for m in _WORD.finditer(query)) if w not in _OPERATORS]


def scan_outputs(
    read: Reader, owners: Sequence[tuple[str, int]], words: Sequence[str], limit: int
) -> OutputScan:
    """The lines of the payloads ``owners`` (ref, owning store_id) that hold every word. A
    payload that cannot be read is passed over (doctor reports missing payload files)."""
    hits: list[OutputHit] = []
    read_chars, stopped = 0, None
    for ref, owner in owners[:MAX_REFS]:
        if len(hits) >= limit:
            stopped = f"limit {limit} reached"
            break
        if read_chars >= MAX_CHARS:
            stopped = f"read {MAX_CHARS:,} characters"
            break
        try:
            text, total = read(ref, 0, MAX_CHARS - read_chars)
        except (FileNotFoundError, OSError):
            continue
        read_chars += len(text)
        offset = 0
        for line in text.splitlines(keepends=True):
            if all(w in line.lower() for w in words):
                shown = cut(line.rstrip("\r\n"), LINE_CHARS, ELLIPSIS)[0]
                hits.append(OutputHit(ref, owner, offset, shown))
                if len(hits) >= limit:
                    break
            offset += len(line)
        if len(text) < total:
            stopped = f"read {MAX_CHARS:,} characters"
            break
    if stopped is None and len(owners) > MAX_REFS:
        stopped = f"scanned the newest {MAX_REFS} outputs"
    return OutputScan(tuple(hits), min(len(owners), MAX_REFS), tuple(words), stopped)

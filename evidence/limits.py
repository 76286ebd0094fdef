"""Work limits of one evidence tool call, and the reading that keeps within them.

A cited line is whatever was said or pasted: a 300 KB access log, one line of 6,000 dates,
100,000 digits. Resolving its dates, reading its numbers and comparing claims with it cost time
in proportion to its length (times the claims and refs of a call), so before these limits one
lcm_compile_evidence call could hold a user's turn for minutes. Now one call reads each cited
line only up to ``MAX_LINE_CHARS`` and ``MAX_LINE_DATES`` dates, and all its lines together only
up to ``MAX_CALL_CHARS``. What lies beyond is not read, and the answer says so (``limits``):
the services treat an unread part as unknown, never as empty. A claim it could hold is
``unchecked`` (compile.py), a computation over it fails closed (compute.py), a pack line shows
how far its dates were read (pack.py).

The figures were measured on the hostile lines of tests/security/test_evidence_limits.py:
resolving dates costs 1 to 2.5 microseconds a character whatever the text, so the reading of
a whole call stays within about a quarter of a second.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from .timeexpr import DateMention, resolve_dates

# One cited line is read up to this many characters (about 5,000 tokens: a long message); at
# 2.5 us a character that is 50 ms a line at worst. Cite a span to have another part read.
MAX_LINE_CHARS = 20_000
# The text read past a cut, so a date phrase across it is seen whole (or dropped when it may run
# on further); every pattern of timeexpr.py is far shorter than this.
SLACK_CHARS = 256
# Characters read over all the refs of one call: about 250 ms of date resolution at worst, and
# room for 64 refs of ordinary messages (1,500 characters) read whole.
MAX_CALL_CHARS = 100_000
# Dates kept for one line: no message states more dates a claim would cite one by one, and each
# claim's dates are compared with every date of its lines.
MAX_LINE_DATES = 200
# Distinct refs lcm_compile_evidence reads over all its claims (20 claims x 64 refs could name
# 1,280); the same bound as one claim's refs (refs.MAX_REFS).
MAX_CALL_REFS = 64
# Characters of cited text the claims of one call are compared with, summed over the claims
# (claims x refs): 20 claims each citing the whole call's reading once.
MAX_COMPARE_CHARS = 1_000_000
# A claim (or its quote) longer than this is not checked: a claim is one sentence, and its
# words, dates and names are each looked up in every cited line.
MAX_CLAIM_CHARS = 1_000
# Values (numbers, dates, names) one claim may state and still be checked, for the same reason.
MAX_CLAIM_VALUES = 40
# A run of more digits than this (single commas between them aside) is no quantity lcm_compute
# can use: 2**53, the largest integer a float holds exactly, has 16 digits. Refusing such a line
# also keeps the number pattern from backtracking over a long chain of comma groups.
MAX_NUMBER_RUN = 20
# Above this many characters a token is not expected (English runs about 4 characters a token,
# code and logs fewer): a line longer than its room times this cannot fit whole, so it is cut
# before its tokens are counted.
MAX_CHARS_PER_TOKEN = 8
# A question (lcm_retrieve, and the question of the pack, brief and compute tools) is one question.
MAX_QUESTION_CHARS = 4096
# Cut lines named one by one in a ``limits`` note; the rest are counted.
MAX_NOTED = 16
# A date phrase followed by fewer non-space characters than this before the end of what was
# read may run on past it (a year after a long run of spaces): it is not kept.
_OPEN_TAIL = 24
_WORDISH = frozenset(",.'’-_")

BY_LINE, BY_DATES, BY_CALL = "line", "dates", "call"
WHY = {
    BY_LINE: f"a line is read up to {MAX_LINE_CHARS} characters",
    BY_DATES: f"a line keeps at most {MAX_LINE_DATES} dates",
    BY_CALL: f"one call reads {MAX_CALL_CHARS} characters over all its refs",
}


@dataclass(frozen=True)
class Scan:
    """The dates of a text's read part: ``read`` characters from its start (None: all of it),
    cut for ``by`` (BY_LINE, BY_DATES, BY_CALL; "" when read whole)."""

    dates: tuple[DateMention, ...]
    read: int | None
    by: str = ""


@dataclass
class ReadingBudget:
    """One call's reading: characters left to read, cited text left for claims to be compared
    with, and what was read already (a ref cited again is not read again; ``memo`` keeps the
    pack's token counts of a line, which a retrieval counts again on every rebuild)."""

    chars_left: int = MAX_CALL_CHARS
    compare_left: int = MAX_COMPARE_CHARS
    read_chars: int = 0
    compared_chars: int = 0
    lines: dict[Any, Any] = field(default_factory=dict)
    memo: dict[Any, int] = field(default_factory=dict)

    def scan(self, text: str, anchor: float, tz: str = "") -> Scan:
        """The dates of ``text`` within this call's limits; the characters read are spent."""
        take = min(len(text), MAX_LINE_CHARS + SLACK_CHARS, max(0, self.chars_left))
        self.chars_left -= take
        self.read_chars += take
        window = text[:take]
        found = resolve_dates(window, anchor, tz) if take else []
        if take == len(text):
            if len(found) <= MAX_LINE_DATES:
                return Scan(tuple(found), None)
            return _cut(text, found[:MAX_LINE_DATES], found[MAX_LINE_DATES].start, BY_DATES)
        by = BY_LINE if take == MAX_LINE_CHARS + SLACK_CHARS else BY_CALL
        end = max(0, take - SLACK_CHARS)
        closed = _closed_before(window)
        kept: list[DateMention] = []
        for mention in found:
            if mention.start >= end:
                break
            if mention.end > closed:  # it may go on past what was read: its start is the cut
                end = mention.start
                break
            kept.append(mention)
            end = max(end, mention.end)
        if len(kept) > MAX_LINE_DATES:
            end, by, kept = kept[MAX_LINE_DATES].start, BY_DATES, kept[:MAX_LINE_DATES]
        return _cut(text, kept, end, by)

    def compare(self, chars: int) -> bool:
        """Spend ``chars`` of the comparison budget; False (nothing spent) when too few are left."""
        if chars > self.compare_left:
            return False
        self.compare_left -= chars
        self.compared_chars += chars
        return True


def _closed_before(window: str) -> int:
    """The last offset of ``window`` at which ``_OPEN_TAIL`` non-space characters still follow:
    a phrase ending after it may run on past the window."""
    tail = re.match(rf"(?:\s*\S){{{_OPEN_TAIL}}}", window[::-1])
    return len(window) - tail.end() if tail else 0


def _cut(text: str, kept: list[DateMention], end: int, by: str) -> Scan:
    """A scan read up to ``end``, moved back so no word or number is split at the cut."""
    while 0 < end < len(text) and _wordish(text[end - 1]) and _wordish(text[end]):
        end -= 1
    return Scan(tuple(m for m in kept if m.end <= end), end, by)


def _wordish(char: str) -> bool:
    return char.isalnum() or char in _WORDISH


def cut_text(label: str, store_id: int, start: int, read: int, length: int, by: str) -> str:
    """Why a line's unread part is unknown, and how to have it read (a span after the read part,
    or, when the call's reading ran out, the same ref in a call with fewer refs)."""
    after = start + read
    how = (
        f"cite it in a call with fewer refs, or as a span such as {store_id}:{after}-{after + MAX_LINE_CHARS}"
        if by == BY_CALL
        else f"cite the part that matters as a span, e.g. {store_id}:{after}-{after + MAX_LINE_CHARS}"
    )
    return f"ref {label} was read only in its first {read} of {length} characters ({WHY.get(by, by)}); {how}"


NOTE = (
    "work limits cut this answer: the lines listed were read only in their first read_chars characters, "
    "so their dates, numbers and words beyond that are unknown here (not absent); cite the part that "
    "matters as a span (store_id:start-end), or fewer refs per call"
)

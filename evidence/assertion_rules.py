"""Deterministic extraction of typed facts from one message's text: the rules, no model, no network.

Precision over recall: a fact is kept only from a plain declarative sentence. Questions,
hypotheticals ("if the port were 80"), negations, reported speech in quotes and code (fenced
blocks, `inline code`, lines that look like code) yield nothing. Every candidate cites the exact
character span of the sentence it came from (its quote), and its value is a substring of that
quote, so a citation is checkable against the stored text (storage/assertions.py refuses any
other). Each pattern runs with a time limit (``regex``'s timeout) and a message yields at most
``MAX_PER_MESSAGE`` facts, so hostile input costs a bounded time.
"""

from __future__ import annotations

import datetime as dt
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import regex

MAX_PER_MESSAGE = 20
MAX_QUOTE_CHARS = 300
PATTERN_TIMEOUT_S = (
    0.05  # per pattern and sentence: a pathological text loses its facts, not the job's time
)
MESSAGE_BUDGET_S = 0.25  # per message, all patterns together


class DateLike(Protocol):
    """What a resolved date mention offers (timeexpr.DateMention), read-only."""

    @property
    def start(self) -> int: ...
    @property
    def end(self) -> int: ...
    @property
    def first(self) -> dt.date: ...


@dataclass(frozen=True)
class Candidate:
    """One fact found in a text: what it says and where (``start``/``end`` = the quote's span)."""

    kind: str
    subject: str
    value: str
    unit: str
    start: int
    end: int
    quote: str
    date: dt.date | None = None

    def as_row(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "subject": self.subject,
            "value": self.value,
            "unit": self.unit,
            "span_start": self.start,
            "span_end": self.end,
            "quote": self.quote,
            "date_text": self.date.isoformat() if self.date else "",
        }


_F = regex.IGNORECASE | regex.VERSION1
_SENTENCE = regex.compile(r"[^.!?\n]+(?:[.!?]+|$)", regex.MULTILINE)
_CODE = regex.compile(
    r"```.*?(?:```|\Z)|`[^`\n]*`|^(?: {4}|\t).*$|\"[^\"\n]*\"|“[^”\n]*”",
    regex.DOTALL | regex.MULTILINE,
)
_CODEISH = regex.compile(r"[{};<>]|==|=>|::|\b(?:def|return|import|const|var|let)\b|\w\(|\w\.\w+\(")
_QUESTION = regex.compile(
    r"^\W*(?:what|which|who|whom|whose|where|when|why|how|is|are|was|were|do|does|did|can|"
    r"could|should|would|will|shall|may|has|have|had)\b",
    _F,
)
_HYPOTHETICAL = regex.compile(
    r"\b(?:if|suppose|supposing|imagine|hypothetically|pretend|unless|whether|would|"
    r"wouldn't|might|could|should|maybe|perhaps|wish|assuming)\b",
    _F,
)
_NEGATION = regex.compile(r"\b(?:not|never|no longer|no|nobody|nothing)\b|n't\b", _F)

_UNITS = (
    r"%|km|kilomet(?:er|re)s?|mi|miles?|m|met(?:er|re)s?|kg|kilos?|lbs?|pounds|g|grams?|hours?|hrs?|"
    r"minutes?|mins?|seconds?|secs?|ms|days?|weeks?|months?|years?|gb|mb|kb|tb|usd|eur|gbp|dollars?|euros?|"
    r"steps|pages|books|people|times"
)
_NUMBER = r"(?P<cur>[$€£])?(?P<num>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)"
_NOUN = r"[a-z][\w\-]*(?: [a-z][\w\-]*){0,3}?"
_OWNER = r"(?P<own>the|my|our|your|his|her|their|its|[A-Z][a-z]+'s)"

_QUANTITY = regex.compile(
    rf"\b{_OWNER}\s+(?P<subj>{_NOUN})\s+(?:is|was|are|were|equals|costs?|weighs?|takes?|is now|has been|"
    rf"was set to|is set to|changed to)\s+(?:now\s+|about\s+|around\s+|roughly\s+|exactly\s+)?{_NUMBER}"
    rf"(?:\s*(?P<unit>{_UNITS})\b)?",
    _F,
)
_COST = regex.compile(
    rf"\b(?P<subj>it|that|this|[a-z][\w\-]*)\s+(?P<verb>costs?|cost me|was|is)\s+{_NUMBER}"
    rf"(?:\s*(?P<unit>{_UNITS})\b)?",
    _F,
)
_ACTIVITY = regex.compile(
    rf"\b(?P<subj>ran|run|walked|cycled|biked|rode|swam|drove|hiked|read|wrote|lost|gained|saved|spent|paid|earned|"
    rf"slept|worked|lifted)\s+(?:about\s+|around\s+|over\s+|almost\s+)?{_NUMBER}\s*(?P<unit>{_UNITS})\b",
    _F,
)
_MOVED = regex.compile(
    r"\b(?P<subj>I|we|he|she|they|[A-Z][a-z]+(?: [A-Z][a-z]+)?)\s+(?:just\s+|recently\s+|finally\s+|have\s+|has\s+|"
    r"had\s+)?(?:moved|relocated)\s+(?:back\s+)?to\s+(?P<val>[A-Z][\w\-]+(?:,? [A-Z][\w\-]+){0,3})"
)
_NOW = regex.compile(
    rf"\b{_OWNER}\s+(?P<subj>{_NOUN})\s+(?P<verb>is now|are now|has changed to|was changed to|changed to|"
    rf"switched to|became|is|are)\s+(?P<val>[^\s,.;!?][^,.;!?\n]{{0,58}})",
    _F,
)
# A plain "is" states a fact only with an owner ("my goal is", "Jon's studio is"), and never an
# opinion or a feeling ("is awesome", "are so excited"): those are conversation, not state.
_CHANGE = regex.compile(r"now|changed|switched|became", _F)
_OPINION = regex.compile(
    r"^(?:so|really|very|such|too|pretty|quite|totally|super|just|always|still|also|going|getting|gonna|"
    r"awesome|amazing|great|gorgeous|beautiful|incredible|cool|nice|fun|key|lovely|fantastic|wonderful|perfect|"
    r"important|tough|hard|good|bad|better|best|worth|crazy|wild|huge|insane|special|different|unreal|"
    r"exciting|impressive|inspiring|stunning|adorable|cute|a blast|a lot|all|one of|like|the best|what|how|"
    r"[a-z]+ing)\b",
    _F,
)
_VAGUE = regex.compile(
    r"\b(?:when|and|or|but|that|which|who|if|because|than|as|they|it|i|we|you|he|she|this|"
    r"these|those|everyone|everything|something|anything|all|thing|things)\b",
    _F,
)
_PREFER = regex.compile(
    r"\b(?P<subj>I|we)\s+(?:really\s+|still\s+)?(?P<verb>prefer|love|like|hate|dislike|enjoy)\s+"
    r"(?P<val>[^\s,.;!?][^,.;!?\n]{1,58})"
)
_COMMIT = regex.compile(
    r"\b(?P<subj>I|we)\s+(?:will|'ll|promise to|am going to|are going to|plan to|commit to|"
    r"intend to)\s+(?P<val>[^\s,.;!?][^,.;!?\n]{2,78})",
    _F,
)
_EVENT = regex.compile(
    r"\b(?P<subj>I|we|he|she|they|[A-Z][a-z]+)\s+(?:just\s+|finally\s+|officially\s+)?(?P<verb>started|began|joined|"
    r"left|quit|finished|graduated|married|got married|got engaged|bought|sold|visited|went to|returned|arrived|"
    r"launched|released|shipped|signed up for|adopted|moved|retired|attended|met)\b(?P<obj>[^,.;!?\n]{0,60})"
)

_PRONOUNS = {"it", "that", "this", "which", "there", "what", "he", "she", "they", "we", "i", "you"}
_TRAIL = regex.compile(
    r"(?:\s+(?:now|too|also|again|today|yesterday|anymore|though|then|here|there))+$", _F
)


def canonical(subject: str) -> str:
    """A subject as stored: lower-case, single spaces, no leading article."""
    text = " ".join(subject.lower().split())
    for article in ("the ", "a ", "an "):
        if text.startswith(article):
            text = text[len(article) :]
    return text[:200].strip()


def _owner(own: str | None, role: str) -> str:
    if not own or own.lower() in ("the", "its"):
        return ""
    lower = own.lower()
    if lower in ("my", "our"):
        return "user " if role == "user" else "assistant "
    if lower == "your":
        return "assistant " if role == "user" else "user "
    return lower + " "


def _who(subj: str, role: str) -> str:
    lower = subj.lower()
    if lower in ("i", "we"):
        return "user" if role == "user" else "assistant"
    return lower


def _blocked(text: str) -> list[tuple[int, int]]:
    return [(m.start(), m.end()) for m in _CODE.finditer(text, timeout=PATTERN_TIMEOUT_S * 4)]


def _sentences(text: str) -> list[tuple[int, int]]:
    found = []
    for m in _SENTENCE.finditer(text, timeout=PATTERN_TIMEOUT_S * 4):
        start, end = m.start(), m.end()
        while start < end and text[start].isspace():
            start += 1
        while end > start and text[end - 1].isspace():
            end -= 1
        if end > start:
            found.append((start, end))
    return found


def extract(
    text: str, role: str = "user", dates: Callable[[str], Sequence[DateLike]] | None = None
) -> list[Candidate]:
    """The facts one message states, each citing its sentence's span; ``dates`` resolves the
    date phrases of a text (offsets into it) so an event is dated by what it says."""
    import time

    out: list[Candidate] = []
    if not text or not text.strip():
        return out
    started = time.monotonic()
    try:
        blocked = _blocked(text)
        sentences = _sentences(text)
    except TimeoutError:
        return out
    mentions = sorted(dates(text), key=lambda d: d.start) if dates is not None else []
    # Sorted offsets, so each sentence finds its code spans and first date by bisection: a dense
    # message (thousands of sentences, dates and code spans) is not their product.
    mention_starts = [d.start for d in mentions]
    block_ends = [b1 for _, b1 in blocked]
    for start, end in sentences:
        if len(out) >= MAX_PER_MESSAGE or time.monotonic() - started > MESSAGE_BUDGET_S:
            break
        i = bisect_right(block_ends, start)  # the first code span ending after the sentence starts
        if i < len(blocked) and blocked[i][0] < end:
            continue
        sentence = text[start:end]
        if sentence.endswith("?") or len(sentence) > 2000:
            continue
        try:
            if (
                _QUESTION.search(sentence, timeout=PATTERN_TIMEOUT_S)
                or _HYPOTHETICAL.search(sentence, timeout=PATTERN_TIMEOUT_S)
                or _NEGATION.search(sentence, timeout=PATTERN_TIMEOUT_S)
                or _CODEISH.search(sentence, timeout=PATTERN_TIMEOUT_S)
            ):
                continue
            found = _facts(sentence, role)
        except TimeoutError:
            continue
        j = bisect_left(mention_starts, start)
        day = mentions[j].first if j < len(mentions) and mentions[j].end <= end else None
        for kind, subject, value, unit, v0, v1 in found:
            if kind == "event" and day is None:
                continue  # an event without a date in its sentence is not a dated event
            q0, q1 = start, end
            if q1 - q0 > MAX_QUOTE_CHARS:  # a long sentence: the clause around the value
                q0 = max(start, min(v0, v1 - MAX_QUOTE_CHARS // 2) - 40)
                q1 = min(end, q0 + MAX_QUOTE_CHARS)
                if not (q0 <= start + v0 and start + v1 <= q1):
                    continue
            value = value.strip()
            subject = canonical(subject)
            if not value or not subject or "[lcm-" in value:
                continue
            out.append(
                Candidate(
                    kind,
                    subject,
                    value,
                    unit.lower(),
                    q0,
                    q1,
                    text[q0:q1],
                    day if kind in ("event", "state", "quantity") else None,
                )
            )
            if len(out) >= MAX_PER_MESSAGE:
                break
    return out


def _whole_words(value: str, end: int, sentence: str) -> str:
    """A value the pattern's length limit cut inside a clause ends at its last whole word."""
    if end < len(sentence) and sentence[end].isalnum() and " " in value:
        return value[: value.rindex(" ")]
    return value


def _facts(sentence: str, role: str) -> list[tuple[str, str, str, str, int, int]]:
    """(kind, subject, value, unit, value start, value end) in one sentence; offsets are the
    sentence's. A numeric value makes a quantity, and the same span is not also a state."""
    t = PATTERN_TIMEOUT_S
    found: list[tuple[str, str, str, str, int, int]] = []
    taken: list[tuple[int, int]] = []

    def add(
        kind: str, subject: str, value: str, unit: str, v0: int, v1: int, whole: tuple[int, int]
    ) -> None:
        if any(a < whole[1] and whole[0] < b for a, b in taken):
            return
        taken.append(whole)
        found.append((kind, subject, value, unit, v0, v1))

    for m in _QUANTITY.finditer(sentence, timeout=t):
        subj = m["subj"]
        if subj.lower() in _PRONOUNS:
            continue
        value = (m["cur"] or "") + m["num"]
        unit = m["unit"] or {"$": "usd", "€": "eur", "£": "gbp"}.get(m["cur"] or "", "")
        add(
            "quantity",
            _owner(m["own"], role) + subj,
            value,
            unit,
            m.start("num") - len(m["cur"] or ""),
            m.end("num"),
            m.span(),
        )
    for m in _COST.finditer(sentence, timeout=t):
        if m["cur"] is None and m["unit"] is None:
            continue
        verb = m["verb"].lower()
        if not verb.startswith("cost") and m["cur"] is None:
            continue
        subj = "cost" if m["subj"].lower() in _PRONOUNS else m["subj"] + " cost"
        unit = m["unit"] or {"$": "usd", "€": "eur", "£": "gbp"}.get(m["cur"] or "", "")
        add(
            "quantity",
            subj,
            (m["cur"] or "") + m["num"],
            unit,
            m.start("num") - len(m["cur"] or ""),
            m.end("num"),
            m.span(),
        )
    for m in _ACTIVITY.finditer(sentence, timeout=t):
        add(
            "quantity",
            m["subj"],
            (m["cur"] or "") + m["num"],
            m["unit"],
            m.start("num") - len(m["cur"] or ""),
            m.end("num"),
            m.span(),
        )
    for m in _MOVED.finditer(sentence, timeout=t):
        add(
            "state",
            _who(m["subj"], role) + " location",
            m["val"],
            "",
            m.start("val"),
            m.end("val"),
            m.span(),
        )
    for m in _NOW.finditer(sentence, timeout=t):
        subj, own = m["subj"], m["own"].lower()
        changed = _CHANGE.search(m["verb"], timeout=t) is not None
        if (
            own == "its"
            or _VAGUE.search(subj, timeout=t)
            or (not changed and own in ("the", "your"))
        ):
            continue
        value = _TRAIL.sub("", _whole_words(m["val"], m.end("val"), sentence), timeout=t).strip()
        if not value or (not changed and _OPINION.search(value, timeout=t)):
            continue
        kind = "preference" if regex.match(r"(?:favou?rite|preferred)\b", subj, _F) else "state"
        add(
            kind,
            _owner(m["own"], role) + subj,
            value,
            "",
            m.start("val"),
            m.start("val") + len(value),
            m.span(),
        )
    for m in _PREFER.finditer(sentence, timeout=t):
        value = _TRAIL.sub("", _whole_words(m["val"], m.end("val"), sentence), timeout=t).strip()
        add(
            "preference",
            f"{_who(m['subj'], role)} {m['verb'].lower()}s",
            value,
            "",
            m.start("val"),
            m.start("val") + len(value),
            m.span(),
        )
    for m in _COMMIT.finditer(sentence, timeout=t):
        value = _whole_words(m["val"], m.end("val"), sentence).strip()
        add(
            "commitment",
            f"{_who(m['subj'], role)} commitment",
            value,
            "",
            m.start("val"),
            m.start("val") + len(value),
            m.span(),
        )
    for m in _EVENT.finditer(sentence, timeout=t):
        value = _whole_words(m["verb"] + m["obj"], m.end("obj"), sentence).strip()
        add(
            "event",
            _who(m["subj"], role) + " " + m["verb"].lower(),
            value,
            "",
            m.start("verb"),
            m.start("verb") + len(value),
            m.span(),
        )
    return found

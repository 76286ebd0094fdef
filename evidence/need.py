"""Does a user message need recall? The pre-answer hook's gate (evidence/preanswer.py).

The hook adds an evidence brief only before questions about the past: running a search and a
pack on "write a regex for IPv4" costs time and puts unrelated history in front of the model.
Deterministic, no model call. A message needs recall when it is a question (or a "remind me"
request) and any of:

* it says so: remember, recall, mentioned, told, said, discussed, "last time", earlier, before...;
* it asks about a past event: a past auxiliary (did, was, were, had) in a question, "when ..." ;
* it names a time in the past (timeexpr: "yesterday", "last Friday", "in June", "May 2023");
* it names someone or something the store knows (a capitalised name found in the stored
  messages, through ``known``): "What is Gina's favourite dance?" has no past tense at all.

An imperative request ("write", "explain", "debug" ...) needs recall only when it says so in
words. Measured on the LoCoMo questions against ordinary requests (bench/locomo_evidence.py).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from .timeexpr import resolve_dates

MAX_CHARS = 1000  # a longer message is a paste or a task, not a question about the past

_WORD = re.compile(r"[A-Za-z][A-Za-z'’-]*")
_SAYS_SO = re.compile(
    r"\b(remember|recall|remind me|mention(?:ed)?|told|said|say about|discuss(?:ed)?|talk(?:ed)? about|we decided|"
    r"you suggested|we agreed|last time|earlier|previously|before that|the other day|ago|again what)\b",
    re.I,
)
_PAST_Q = re.compile(r"\b(did|was|were|had|has .+ ever|have .+ ever)\b", re.I)
_ASKS = re.compile(
    r"^\s*(what|when|where|who|whom|which|why|how|did|does|do|is|are|was|were|has|have|had|can|could|"
    r"would|will|should)\b",
    re.I,
)
_IMPERATIVE = re.compile(
    r"^\s*(please\s+)?(write|explain|generate|convert|refactor|draft|plan|translate|compare|summari[sz]e|set up|"
    r"give|debug|create|implement|fix|recommend|make|build|add|show me how|help me)\b",
    re.I,
)
_NOT_NAMES = frozenset(
    "I I'm I've I'd I'll What When Where Who Which Why How Did Does Do Is Are Was Were Has Have Had Can Could Would "
    "Will Should The A An My Our Your Please Thanks Ok Okay Yes No Hi Hello Hey Remind Tell Also And But So If Then "
    "Monday Tuesday Wednesday Thursday Friday Saturday Sunday January February March April May June July August "
    "September October November December".split()
)


@dataclass(frozen=True)
class Need:
    """The verdict and why (status, tests, the benchmark's breakdown)."""

    recall: bool
    reasons: tuple[str, ...] = ()


def names(text: str) -> list[str]:
    """Capitalised words that are not the first of a sentence nor a stock word: candidate names."""
    found: list[str] = []
    for m in _WORD.finditer(text):
        word = m.group(0).rstrip("'’s").rstrip("'’")
        before = text[: m.start()].rstrip()
        if not word[:1].isupper() or word in _NOT_NAMES or not before or before[-1] in ".!?":
            continue
        if (
            len(word) > 2 and word[1:].islower() and word not in found
        ):  # IPv4, JWTs, TypeScript: not names
            found.append(word)
    return found


def needs_recall(
    text: str, anchor: float, known: Callable[[Sequence[str]], Sequence[bool]] | None = None
) -> Need:
    """Whether ``text`` (the newest user message) asks about the past; ``anchor`` is its time,
    ``known(words)`` says which of the words the store holds (None: no store lookup)."""
    head = " ".join(text.split())
    if not head or len(head) > MAX_CHARS:
        return Need(False)
    reasons: list[str] = []
    if _SAYS_SO.search(head):
        reasons.append("says so")
    question = "?" in head or bool(_ASKS.match(head)) or head.lower().startswith("remind me")
    if not question or (_IMPERATIVE.match(head) and not reasons):
        return Need(bool(reasons), tuple(reasons))
    if _PAST_Q.search(head) or head.lower().startswith("when "):
        reasons.append("past event")
    today = datetime.fromtimestamp(anchor, UTC).date() if anchor > 0 else None
    past = [d for d in resolve_dates(head, anchor) if today is None or d.first <= today]
    asks_past = bool(reasons) and reasons[-1] == "past event"
    if any(
        (d.relative or d.granularity != "year")
        and (asks_past or not d.phrase.lower().startswith("in "))
        for d in past
    ):  # "married in June; any ideas?" is the future's June, said loosely
        reasons.append("past date")
    candidates = names(head)
    if known is not None and candidates and any(known(candidates)):
        reasons.append("known name")
    return Need(bool(reasons), tuple(reasons))

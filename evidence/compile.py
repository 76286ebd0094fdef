"""Claims checked against the exact lines they cite: the evidence brief of lcm_compile_evidence.

A claim is ``{"text": ..., "refs": [...], "quote": optional}``. It is supported only with an
exact source in its own refs:

- its ``quote`` (or, without one, its text) appears in a cited line (case and spacing aside), or
- every value it states — each number, each date (compared as resolved days/ranges, so "last
  Friday" in a line said on 12 May 2023 supports "5 May 2023") and each named entity — appears in
  its cited lines, and most of its other words do too.

A claim with no refs, refs that gave no line, or nothing checkable is unsupported, with why.
The brief is ``sufficient`` only when every claim is supported and the question's needs
(pack.sufficiency) are covered by the supporting lines. This checks sources, not truth: a line
that says the opposite with the same words passes the second rule, which is why the quote rule
is stated first and the basis of each verdict is given.

The work is bounded (limits.py): a claim is checked against the read part of its lines only, and
a claim too long, citing refs past the call's limit, or past the comparison budget is not
checked. A verdict that a limit may have decided is ``unchecked`` with why, never
``unsupported`` or ``supported`` by default: what was read still supports, what was not read
can neither support nor refute. Each line's words, numbers and dates are read once per call
however many claims cite it.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from typing import TYPE_CHECKING, Any

from .limits import (
    MAX_CALL_REFS,
    MAX_CLAIM_CHARS,
    MAX_CLAIM_VALUES,
    MAX_COMPARE_CHARS,
    ReadingBudget,
)
from .pack import fit_lines, names, sufficiency
from .refs import Line, Missing, Ref, RefError, dedupe, hydrate_all, limits_note, read_refs
from .timeexpr import DateMention, resolve_dates

if TYPE_CHECKING:
    from ..store import Store

MAX_CLAIMS = 20
_WORD = re.compile(r"[a-z][a-z']{3,}")
_VALUE = re.compile(r"(?<![\w.])\d[\d,]*(?:\.\d+)?")
_STOP = frozenset(
    "that this with from have were they their there what when which would about been into than then "
    "them also just very said says told some will your user users assistant".split()
)
_WORD_SHARE = 0.6


def _flat(text: str) -> str:
    return " ".join(text.casefold().split())


def _numbers(text: str, skip: Sequence[tuple[int, int]]) -> set[str]:
    """The numbers of ``text`` that do not start inside a ``skip`` span (a date phrase); the
    spans are sorted and disjoint (timeexpr's mentions), so each number is one bisection."""
    starts = [a for a, _ in skip]
    found = set()
    for m in _VALUE.finditer(text):
        i = bisect_right(starts, m.start()) - 1
        if i >= 0 and m.start() < skip[i][1]:
            continue
        found.add(m.group(0).replace(",", "").rstrip("."))
    return found


def _stem(word: str) -> str:
    return word[:5]


@dataclass(frozen=True)
class Facts:
    """What one cited line offers a claim, read once per call from its read part: its flattened
    text, word stems and numbers, and its date ranges indexed so "a range within the claim's
    range" is one bisection (first days sorted, with the minimum last day from each on)."""

    flat: str
    stems: frozenset[str]
    numbers: frozenset[str]
    firsts: tuple[date, ...]
    least_last: tuple[date, ...]

    @classmethod
    def of(cls, line: Line) -> Facts:
        text = line.examined
        flat = _flat(text)
        ranges = sorted({(m.first, m.last) for m in line.dates})
        least: list[date] = []
        for _, last in reversed(ranges):
            least.append(min(last, least[-1]) if least else last)
        return cls(
            flat,
            frozenset(_stem(w) for w in _WORD.findall(flat)),
            frozenset(_numbers(text, [(m.start, m.end) for m in line.dates])),
            tuple(a for a, _ in ranges),
            tuple(reversed(least)),
        )

    def holds(self, first: date, last: date) -> bool:
        """A date range of this line lies within [first, last]."""
        i = bisect_left(self.firsts, first)
        return i < len(self.firsts) and self.least_last[i] <= last


def _blanked(text: str, dates: Sequence[DateMention]) -> str:
    """``text`` with its date phrases replaced by spaces (same length)."""
    parts, at = [], 0
    for m in dates:
        parts += [text[at : m.start], " " * (m.end - m.start)]
        at = m.end
    return "".join(parts) + text[at:]


def _values(
    text: str, facts: Sequence[Facts], flat: str, anchor: float
) -> tuple[list[str], list[str], str] | None:
    """The claim's dates, numbers and names found in the lines (checked) and not (problems), and
    its text with the date phrases blanked (for the word check); None when the claim states more
    values than a claim is checked for."""
    dates = resolve_dates(text, anchor)
    undated = _blanked(text, dates)
    numbers = sorted(_numbers(text, [(m.start, m.end) for m in dates]))
    entities = names(undated)
    if len(dates) + len(numbers) + len(entities) > MAX_CLAIM_VALUES:
        return None
    problems: list[str] = []
    checked: list[str] = []
    for mention in dates:
        if any(f.holds(mention.first, mention.last) for f in facts):  # the claim's range holds one
            checked.append(f"date {mention.phrase!r}")
        else:
            problems.append(
                f"date {mention.phrase!r} ({mention.first.isoformat()}) is not in the cited lines"
            )
    for number in numbers:
        found = any(number in f.numbers for f in facts)
        (checked if found else problems).append(
            f"value {number}" + ("" if found else " is not in the cited lines")
        )
    for name in entities:
        (checked if name.lower() in flat else problems).append(
            f"entity {name!r}" + ("" if name.lower() in flat else " is not in the cited lines")
        )
    return checked, problems, undated


def check_claim(
    claim: dict[str, Any],
    lines: Sequence[Line],
    anchor: float,
    facts: Sequence[Facts] | None = None,
) -> dict[str, Any]:
    """One claim's verdict against its own lines (``facts``: theirs, when read already). When a
    line was read only in part and the claim is not supported by what was read, it is
    ``unchecked``: the unread part might hold it."""
    verdict = _verdict(
        claim, lines, anchor, facts if facts is not None else [Facts.of(line) for line in lines]
    )
    cut = [line for line in lines if line.read is not None]
    if cut and verdict["status"] == "unsupported":  # the limit first: it decides what to do next
        verdict.update(
            status="unchecked",
            why="; ".join(line.cut_reason() for line in cut[:3])
            + f"; in what was read: {verdict['why']}",
        )
    return verdict


def _verdict(
    claim: dict[str, Any], lines: Sequence[Line], anchor: float, facts: Sequence[Facts]
) -> dict[str, Any]:
    text = str(claim.get("text") or "").strip()
    quote = str(claim.get("quote") or "").strip()
    verdict: dict[str, Any] = {"text": text, "refs": [line.ref.label for line in lines]}
    if len(text) > MAX_CLAIM_CHARS or len(quote) > MAX_CLAIM_CHARS:
        return {
            **verdict,
            "status": "unchecked",
            "why": f"the claim or its quote is longer than {MAX_CLAIM_CHARS} "
            "characters (a work limit): state one fact per claim, with a short quote",
        }
    if not lines:
        return {
            **verdict,
            "status": "unsupported",
            "why": "no cited line could be read (cite exact store ids)",
        }
    flat = " ".join(f.flat for f in facts if f.flat)
    if quote and _flat(quote) not in flat:
        return {
            **verdict,
            "status": "unsupported",
            "why": "the quote does not appear in the cited text",
        }
    if text and _flat(text) in flat:
        return {
            **verdict,
            "status": "supported",
            "basis": "quote",
            "why": "the claim's text appears verbatim",
        }
    values = _values(text, facts, flat, anchor)
    if values is None:
        return {
            **verdict,
            "status": "unchecked",
            "why": f"the claim states more than {MAX_CLAIM_VALUES} values "
            "(dates, numbers, names; a work limit): split it into claims of one fact each",
        }
    checked, problems, undated = values
    if quote:  # an exact quote, and every value the claim states beside it is in the lines too
        if problems:
            return {
                **verdict,
                "status": "unsupported",
                "why": "the quote appears, but " + "; ".join(problems),
            }
        return {
            **verdict,
            "status": "supported",
            "basis": "quote",
            "why": "the quote appears in the cited text"
            + (" with " + ", ".join(checked) if checked else ""),
        }
    words = {_stem(w) for w in _WORD.findall(undated.casefold()) if w not in _STOP}
    share = (
        len({w for w in words if any(w in f.stems for f in facts)}) / len(words) if words else 1.0
    )
    if not checked:
        problems.append(
            "nothing in the claim can be checked exactly (give a quote, a value, a date or a name)"
        )
    if share < _WORD_SHARE:
        problems.append(f"only {round(share * 100)}% of the claim's words are in the cited lines")
    if problems:
        return {**verdict, "status": "unsupported", "why": "; ".join(problems)}
    return {
        **verdict,
        "status": "supported",
        "basis": "values",
        "why": "found: " + ", ".join(checked),
    }


def read_claims(claims: object) -> list[dict[str, Any]]:
    """The claims argument as a list of objects with text and refs; ValueError when malformed."""
    if claims is None or claims == "":
        return []
    if not isinstance(claims, list) or not all(isinstance(c, dict) for c in claims):
        raise ValueError(
            'claims must be a list of objects like {"text": "...", "refs": ["812:10-80"]}'
        )
    if len(claims) > MAX_CLAIMS:
        raise ValueError(f"at most {MAX_CLAIMS} claims per call; got {len(claims)}")
    for i, claim in enumerate(claims):
        if not str(claim.get("text") or claim.get("quote") or "").strip():
            raise ValueError(f"claim {i} has no text")
    return claims


def compile_brief(
    store: Store,
    question: str,
    claims: object,
    reach: Sequence[int] | None,
    budget_tokens: int = 1500,
    tz: str = "",
    work: ReadingBudget | None = None,
) -> dict[str, Any]:
    """The brief: each claim supported/unsupported/unchecked and why, the lines that support them
    (bounded), the refs that gave nothing, the overall sufficiency, and ``limits`` when a work
    limit cut anything (``work``: the call's reading budget, a fresh one when None)."""
    work = ReadingBudget() if work is None else work
    items = read_claims(claims)
    parsed: list[tuple[list[Ref], list[Missing]]] = []
    for claim in items:
        try:
            parsed.append(read_refs(claim.get("refs")))
        except RefError as exc:
            parsed.append(([], [Missing(repr(claim.get("refs"))[:60], str(exc))]))
    every = list(dict.fromkeys(ref for refs, _ in parsed for ref in refs))
    unread = {ref.label for ref in every[MAX_CALL_REFS:]}
    lines, missing = hydrate_all(store, every[:MAX_CALL_REFS], reach, tz, work)
    by_ref = {line.ref.label: line for line in lines}
    facts = {label: Facts.of(line) for label, line in by_ref.items()}
    verdicts: list[dict[str, Any]] = []
    supporting: list[Line] = []
    for claim, (refs, bad) in zip(items, parsed, strict=True):
        verdict = _claim(claim, refs, bad, by_ref, facts, unread, work)
        verdicts.append(verdict)
        if verdict["status"] == "supported":
            supporting += [by_ref[r.label] for r in refs if r.label in by_ref]
    shown, omitted, used = fit_lines(
        sorted(dedupe(supporting), key=lambda line: (line.at, line.ref.store_id)),
        budget_tokens,
        work,
    )
    counts = {
        status: sum(1 for v in verdicts if v["status"] == status)
        for status in ("supported", "unsupported", "unchecked")
    }
    supported = counts["supported"]
    brief: dict[str, Any] = {
        "question": question,
        "claims": verdicts,
        **counts,
        "lines": shown,
        "used_tokens": used,
        "missing": [m.as_dict() for m in missing] + [m.as_dict() for _, bad in parsed for m in bad],
    }
    if omitted:
        brief["omitted"] = omitted
    cover = sufficiency(question, dedupe(supporting)) if question.strip() else None
    brief["sufficiency"] = {
        "sufficient": bool(verdicts)
        and supported == len(verdicts)
        and (cover is None or cover["sufficient"]),
        "claims_supported": f"{supported}/{len(verdicts)}",
        **({"needs": cover["needs"], "lacking": cover["lacking"]} if cover else {}),
    }
    if not verdicts:
        brief["sufficiency"]["why"] = (
            "no claims given: cite lines as claims with refs to build a brief"
        )
    limits = limits_note(
        lines, claims_unchecked=counts["unchecked"], unread_refs=sorted(unread)[:16]
    )
    if limits is not None:
        limits["compared_chars"] = work.compared_chars
        limits["max"].update(
            compare_chars=MAX_COMPARE_CHARS, call_refs=MAX_CALL_REFS, claim_chars=MAX_CLAIM_CHARS
        )
        brief["limits"] = limits
    return brief


def _claim(
    claim: dict[str, Any],
    refs: Sequence[Ref],
    bad: Sequence[Missing],
    by_ref: dict[str, Line],
    facts: dict[str, Facts],
    unread: set[str],
    work: ReadingBudget,
) -> dict[str, Any]:
    """One claim's verdict within the call's limits: its refs past ``MAX_CALL_REFS`` were not
    read, and its lines' text is spent from the comparison budget (claims x refs)."""
    own = [by_ref[r.label] for r in refs if r.label in by_ref]
    skipped = [r.label for r in refs if r.label in unread]
    if not work.compare(sum(len(facts[line.ref.label].flat) for line in own)):
        verdict = {
            "text": str(claim.get("text") or "").strip(),
            "refs": [line.ref.label for line in own],
            "status": "unchecked",
            "why": f"the call compared its claims with {MAX_COMPARE_CHARS} characters "
            "of cited text already (a work limit over claims x refs): check this claim in another call",
        }
    else:
        anchor = max((line.at for line in own), default=0.0)
        verdict = check_claim(claim, own, anchor, [facts[line.ref.label] for line in own])
    gone = [m.ref for m in bad] + [
        r.label for r in refs if r.label not in by_ref and r.label not in unread
    ]
    if gone:
        verdict["missing_refs"] = gone
    if skipped:
        verdict["unread_refs"] = skipped
        if verdict["status"] == "unsupported":
            verdict.update(
                status="unchecked",
                why=f"refs past the call's {MAX_CALL_REFS} distinct refs were not read "
                f"(unread_refs): check this claim in another call; in what was read: {verdict['why']}",
            )
    if not refs:
        verdict.update(status="unsupported", why="the claim cites no refs")
    return verdict

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
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..timeexpr import resolve_dates
from .pack import fit_lines, names, sufficiency
from .refs import Line, Missing, Ref, RefError, dedupe, hydrate_all, read_refs

if TYPE_CHECKING:
    from ..store import Store

MAX_CLAIMS = 20
_WORD = re.compile(r"[a-z][a-z']{3,}")
_VALUE = re.compile(r"(?<![\w.])\d[\d,]*(?:\.\d+)?")
_STOP = frozenset("that this with from have were they their there what when which would about been into than then "
                  "them also just very said says told some will your user users assistant".split())
_WORD_SHARE = 0.6


def _flat(text: str) -> str:
    return " ".join(text.casefold().split())


def _numbers(text: str, skip: Sequence[tuple[int, int]]) -> set[str]:
    return {m.group(0).replace(",", "").rstrip(".") for m in _VALUE.finditer(text)
            if not any(a <= m.start() < b for a, b in skip)}


def _stem(word: str) -> str:
    return word[:5]


def _values(text: str, lines: Sequence[Line], flat: str, anchor: float) -> tuple[list[str], list[str], str]:
    """The claim's dates, numbers and names found in the lines (checked) and not (problems), and
    its text with the date phrases blanked (for the word check)."""
    dates = resolve_dates(text, anchor)
    problems: list[str] = []
    checked: list[str] = []
    line_ranges = {(m.first, m.last) for line in lines for m in line.dates}
    for mention in dates:
        if any(mention.first <= a and b <= mention.last for a, b in line_ranges):  # the claim's range holds one
            checked.append(f"date {mention.phrase!r}")
        else:
            problems.append(f"date {mention.phrase!r} ({mention.first.isoformat()}) is not in the cited lines")
    line_numbers = set().union(*(_numbers(line.text, [(m.start, m.end) for m in line.dates]) for line in lines))
    for number in sorted(_numbers(text, [(m.start, m.end) for m in dates])):
        (checked if number in line_numbers else problems).append(
            f"value {number}" + ("" if number in line_numbers else " is not in the cited lines"))
    undated = "".join(" " if any(m.start <= i < m.end for m in dates) else c for i, c in enumerate(text))
    for name in names(undated):
        (checked if name.lower() in flat else problems).append(
            f"entity {name!r}" + ("" if name.lower() in flat else " is not in the cited lines"))
    return checked, problems, undated


def check_claim(claim: dict[str, Any], lines: Sequence[Line], anchor: float) -> dict[str, Any]:
    """One claim's verdict against its own lines."""
    text = str(claim.get("text") or "").strip()
    quote = str(claim.get("quote") or "").strip()
    verdict: dict[str, Any] = {"text": text, "refs": [line.ref.label for line in lines]}
    if not lines:
        return {**verdict, "status": "unsupported", "why": "no cited line could be read (cite exact store ids)"}
    joined = "\n".join(line.text for line in lines)
    flat = _flat(joined)
    if quote and _flat(quote) not in flat:
        return {**verdict, "status": "unsupported", "why": "the quote does not appear in the cited text"}
    if text and _flat(text) in flat:
        return {**verdict, "status": "supported", "basis": "quote", "why": "the claim's text appears verbatim"}
    checked, problems, undated = _values(text, lines, flat, anchor)
    if quote:  # an exact quote, and every value the claim states beside it is in the lines too
        if problems:
            return {**verdict, "status": "unsupported", "why": "the quote appears, but " + "; ".join(problems)}
        return {**verdict, "status": "supported", "basis": "quote", "why": "the quote appears in the cited text"
                + (" with " + ", ".join(checked) if checked else "")}
    words = {_stem(w) for w in _WORD.findall(undated.casefold()) if w not in _STOP}
    present = {_stem(w) for w in _WORD.findall(flat)}
    share = len(words & present) / len(words) if words else 1.0
    if not checked:
        problems.append("nothing in the claim can be checked exactly (give a quote, a value, a date or a name)")
    if share < _WORD_SHARE:
        problems.append(f"only {round(share * 100)}% of the claim's words are in the cited lines")
    if problems:
        return {**verdict, "status": "unsupported", "why": "; ".join(problems)}
    return {**verdict, "status": "supported", "basis": "values", "why": "found: " + ", ".join(checked)}


def read_claims(claims: object) -> list[dict[str, Any]]:
    """The claims argument as a list of objects with text and refs; ValueError when malformed."""
    if claims is None or claims == "":
        return []
    if not isinstance(claims, list) or not all(isinstance(c, dict) for c in claims):
        raise ValueError('claims must be a list of objects like {"text": "...", "refs": ["812:10-80"]}')
    if len(claims) > MAX_CLAIMS:
        raise ValueError(f"at most {MAX_CLAIMS} claims per call; got {len(claims)}")
    for i, claim in enumerate(claims):
        if not str(claim.get("text") or claim.get("quote") or "").strip():
            raise ValueError(f"claim {i} has no text")
    return claims


def compile_brief(store: Store, question: str, claims: object, reach: Sequence[int] | None,
                  budget_tokens: int = 1500, tz: str = "") -> dict[str, Any]:
    """The brief: each claim supported/unsupported and why, the lines that support them (bounded),
    the refs that gave nothing, and the overall sufficiency."""
    items = read_claims(claims)
    parsed: list[tuple[list[Ref], list[Missing]]] = []
    for claim in items:
        try:
            parsed.append(read_refs(claim.get("refs")))
        except RefError as exc:
            parsed.append(([], [Missing(repr(claim.get("refs"))[:60], str(exc))]))
    every = list(dict.fromkeys(ref for refs, _ in parsed for ref in refs))
    lines, missing = hydrate_all(store, every, reach, tz)
    by_ref = {line.ref.label: line for line in lines}
    verdicts: list[dict[str, Any]] = []
    supporting: list[Line] = []
    for claim, (refs, bad) in zip(items, parsed, strict=True):
        own = [by_ref[r.label] for r in refs if r.label in by_ref]
        anchor = max((line.at for line in own), default=0.0)
        verdict = check_claim(claim, own, anchor)
        gone = [m.ref for m in bad] + [r.label for r in refs if r.label not in by_ref]
        if gone:
            verdict["missing_refs"] = gone
        if not refs:
            verdict.update(status="unsupported", why="the claim cites no refs")
        verdicts.append(verdict)
        if verdict["status"] == "supported":
            supporting += own
    shown, omitted, used = fit_lines(sorted(dedupe(supporting), key=lambda line: (line.at, line.ref.store_id)),
                                     budget_tokens)
    supported = sum(1 for v in verdicts if v["status"] == "supported")
    brief: dict[str, Any] = {"question": question, "claims": verdicts, "supported": supported,
                             "unsupported": len(verdicts) - supported, "lines": shown, "used_tokens": used,
                             "missing": [m.as_dict() for m in missing] + [m.as_dict() for _, bad in parsed
                                                                        for m in bad]}
    if omitted:
        brief["omitted"] = omitted
    cover = sufficiency(question, dedupe(supporting)) if question.strip() else None
    brief["sufficiency"] = {
        "sufficient": bool(verdicts) and supported == len(verdicts) and (cover is None or cover["sufficient"]),
        "claims_supported": f"{supported}/{len(verdicts)}",
        **({"needs": cover["needs"], "lacking": cover["lacking"]} if cover else {}),
    }
    if not verdicts:
        brief["sufficiency"]["why"] = "no claims given: cite lines as claims with refs to build a brief"
    return brief

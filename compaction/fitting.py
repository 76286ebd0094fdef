"""The shape every summary shares: source items in, text within a token target out.

Both the LLM answer and the extractive fallback end with the same "Expand for details about:" line
and must satisfy ``count_tokens(text) <= target``; the cutting that guarantees it lives here so
the two paths cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..base.tokens import count_tokens

FOOTER_PREFIX = "Expand for details about:"


@dataclass(frozen=True)
class SourceItem:
    """One thing to summarize: a raw message or a child summary, with the label a reader cites it by."""

    label: str
    text: str


def trim_to_tokens(text: str, limit: int) -> str:
    """Longest prefix within ``limit`` tokens, cut at a line or word break when one is near.

    Gallops then bisects on prefix length, so the cost stays proportional to the kept text even for
    huge inputs; a final shrink loop covers the rare prefix whose count is not monotone.
    """
    if limit <= 0:
        return ""
    if count_tokens(text) <= limit:
        return text
    good, bad = 0, len(text)
    probe = min(len(text), limit * 8)
    while probe < bad and count_tokens(text[:probe]) <= limit:
        good, probe = probe, probe * 2
    bad = min(bad, probe)
    while bad - good > 1:
        mid = (good + bad) // 2
        if count_tokens(text[:mid]) <= limit:
            good = mid
        else:
            bad = mid
    cut = text[:good]
    brk = max(cut.rfind("\n"), cut.rfind(" "))
    if brk > len(cut) * 0.8:
        cut = cut[:brk]
    cut = cut.rstrip()
    while cut and count_tokens(cut) > limit:
        cut = cut[: len(cut) * 9 // 10]
    return cut


def fit_with_footer(body: str, footer: str, limit: int) -> str:
    """``body`` then ``footer`` within ``limit``, trimming the body first so the footer survives."""
    whole = f"{body}\n{footer}" if body else footer
    if count_tokens(whole) <= limit:
        return whole
    room = limit - count_tokens(footer) - 1
    if room <= 0:
        return trim_to_tokens(footer, limit)
    text = f"{trim_to_tokens(body, room)}\n{footer}".lstrip("\n")
    return text if count_tokens(text) <= limit else trim_to_tokens(text, limit)


def footer_cap(target_tokens: int) -> int:
    return max(8, target_tokens // 5)


def make_footer(keywords: Sequence[str], max_tokens: int) -> str:
    picked: list[str] = []
    for word in keywords:
        if count_tokens(f"{FOOTER_PREFIX} {', '.join([*picked, word])}") > max_tokens:
            break
        picked.append(word)
    return f"{FOOTER_PREFIX} {', '.join(picked) if picked else 'the summarized messages'}"


def split_footer(answer: str) -> tuple[str, str | None]:
    """Body and normalised footer line of an LLM answer (None when the model left it out)."""
    at = answer.lower().rfind(FOOTER_PREFIX.lower())
    if at < 0:
        return answer.strip(), None
    rest = answer[at + len(FOOTER_PREFIX) :].strip().splitlines()
    topics = rest[0].strip() if rest else ""
    body = answer[:at].rstrip().rstrip("*_ ").rstrip()
    return body, f"{FOOTER_PREFIX} {topics or 'the summarized messages'}"

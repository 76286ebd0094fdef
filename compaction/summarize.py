"""Summaries that always fit their token target.

Compaction must neither stall a turn nor store a garbage summary. So a summary is tried through the
configured LLM routes at two levels (normal, then an aggressive bullet list), every answer is validated
before it is trusted, calls are bounded (each route at most once per level) and guarded by a per-route
circuit breaker and a spend window, and the last resort is a deterministic extractive summary that is
cut to the target. Every path returns text whose ``count_tokens`` is at most ``target_tokens``.

This module is the front door and holds the escalation; its parts sit beside it in ``compaction/``: the routes
and their call guard (routes.py), the prompt and the answer checks (prompts.py), the offline summary
(extractive.py) and the cutting to the target (fitting.py).
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

from ..base.redact import redact
from ..base.tokens import count_tokens
from .extractive import extractive_summary, keywords
from .fitting import (
    SourceItem,
    fit_with_footer,
    footer_cap,
    make_footer,
    split_footer,
    trim_to_tokens,
)
from .prompts import build_messages, clean_answer, rejection, render_transcript
from .routes import DEFAULT_TIMEOUT_S, CallGuard, LlmRoute, build_routes, describe_failure

__all__ = [
    "CallGuard",
    "LlmRoute",
    "SourceItem",
    "SummaryOutcome",
    "build_routes",
    "summarize",
]


@dataclass(frozen=True)
class SummaryOutcome:
    """The summary plus how it was obtained, so status/doctor can show degraded summarization."""

    text: str
    level: str  # "normal" | "aggressive" | "truncate" | "extractive"
    route: str  # "auxiliary[:model]" | "openai:<model>" | "extractive" | "truncate"
    errors: tuple[str, ...] = ()


def _finish_answer(answer: str, sources: Sequence[SourceItem], target_tokens: int) -> str:
    """A validated answer fitted to the target, with a footer (ours, if the model forgot one)."""
    body, footer = split_footer(answer)
    cap = footer_cap(target_tokens)
    if footer is None:
        footer = make_footer(keywords(sources), cap)
    elif count_tokens(footer) > cap:
        footer = trim_to_tokens(footer, cap)
    return fit_with_footer(body, footer, target_tokens)


# --------------------------------------------------------------------------- the escalation


@dataclass(frozen=True)
class _Request:
    sources: tuple[SourceItem, ...]
    depth: int
    target_tokens: int
    focus: str | None
    input_tokens: int
    deadline: float | None
    timeout_s: float
    instructions: str = ""


def _call_timeout(req: _Request) -> float | None:
    """Per-call timeout, shortened to the caller's deadline; None once the deadline has passed."""
    if req.deadline is None:
        return req.timeout_s
    left = req.deadline - time.monotonic()
    return min(req.timeout_s, left) if left > 0 else None


def _attempt(
    req: _Request, level: str, route: LlmRoute, guard: CallGuard, errors: list[str]
) -> tuple[str | None, bool]:
    """One guarded call: (fitted summary, False) on success, else (None, worth retrying at the next
    level). Only content failures are retried: a timeout or HTTP error would just repeat."""
    where = f"{route.name}@{level}"
    timeout = _call_timeout(req)
    if timeout is None:
        errors.append(f"{where}: skipped, deadline passed")
        return None, False
    refused = guard.acquire(route.name)
    if refused:
        errors.append(f"{where}: skipped, {refused}")
        return None, False
    aggressive = level == "aggressive"
    prompt_target = max(1, req.target_tokens // 2) if aggressive else req.target_tokens
    nonce = secrets.token_hex(8)
    messages = build_messages(
        req.sources,
        depth=req.depth,
        target_tokens=prompt_target,
        focus=req.focus,
        nonce=nonce,
        aggressive=aggressive,
        instructions=req.instructions,
    )
    try:
        raw = route.complete(messages, timeout)
    except Exception as exc:  # noqa: BLE001 - any route failure means: try the next route
        _failed(guard, route.name, where, describe_failure(exc, timeout), errors)
        return None, False
    answer = clean_answer(raw)
    limit = int(req.target_tokens * 1.5)
    reason = rejection(raw, answer, nonce=nonce, limit_tokens=limit, input_tokens=req.input_tokens)
    if reason:
        _failed(guard, route.name, where, reason, errors)
        return None, True
    guard.record_success(route.name)
    return _finish_answer(answer, req.sources, req.target_tokens), False


def _failed(guard: CallGuard, route: str, where: str, reason: str, errors: list[str]) -> None:
    reason = redact(reason)  # the errors go to status and the events table
    guard.record_failure(route, reason)
    errors.append(f"{where}: {reason}")


def summarize(
    sources: Sequence[SourceItem],
    *,
    depth: int,
    target_tokens: int,
    focus: str | None,
    routes: Sequence[LlmRoute],
    guard: CallGuard,
    deadline: float | None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    instructions: str = "",
) -> SummaryOutcome:
    """Summarize ``sources`` within ``target_tokens``: normal -> aggressive -> truncate.

    No routes means offline (level "extractive"). A ``deadline`` (``time.monotonic()`` value) that
    has passed skips the LLM entirely, and otherwise caps each call's timeout. At most
    ``2 * len(routes)`` calls are made; the result always satisfies ``count_tokens(text) <= target``.
    Its text is valid UTF-8: a lone surrogate (a host's tool name, a model's escaped output) would make
    SQLite refuse the summary, so it becomes "?".
    """
    outcome = _summarize(
        sources, depth, target_tokens, focus, routes, guard, deadline, timeout_s, instructions
    )
    safe = outcome.text.encode("utf-8", "replace").decode("utf-8")
    return outcome if safe == outcome.text else replace(outcome, text=safe)


def _summarize(
    sources: Sequence[SourceItem],
    depth: int,
    target_tokens: int,
    focus: str | None,
    routes: Sequence[LlmRoute],
    guard: CallGuard,
    deadline: float | None,
    timeout_s: float,
    instructions: str = "",
) -> SummaryOutcome:
    if not routes:
        return SummaryOutcome(
            extractive_summary(sources, target_tokens), "extractive", "extractive"
        )
    errors: list[str] = []
    if deadline is not None and time.monotonic() >= deadline:
        errors.append("deadline passed: LLM routes skipped")
    elif target_tokens > 0:
        req = _Request(
            tuple(sources),
            depth,
            target_tokens,
            focus,
            count_tokens(render_transcript(sources)),
            deadline,
            timeout_s,
            instructions,
        )
        outcome = _escalate(req, routes, guard, errors)
        if outcome is not None:
            return outcome
    return SummaryOutcome(
        extractive_summary(sources, target_tokens), "truncate", "truncate", tuple(errors)
    )


def _escalate(
    req: _Request, routes: Sequence[LlmRoute], guard: CallGuard, errors: list[str]
) -> SummaryOutcome | None:
    candidates = list(routes)
    for level in ("normal", "aggressive"):
        retry: list[LlmRoute] = []
        for route in candidates:
            text, worth_retry = _attempt(req, level, route, guard, errors)
            if text is not None:
                return SummaryOutcome(text, level, route.name, tuple(errors))
            if worth_retry:
                retry.append(route)
        candidates = retry
    return None

"""The core's one summarizer: routes chosen from the settings, redaction on both sides of a call.

Compaction, rollups, assertions, maintenance rebuilds and an unstored session's summary all go
through it, so each shares the same routes and call guard (one circuit breaker and spend window
per process) and none sends a secret to a remote model or stores one it answers.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from typing import Any

from ..base.sensitive import Redactor
from ..config import LcmConfig
from .routes import HostAuxiliaryRoute
from .summarize import CallGuard, SourceItem, SummaryOutcome, build_routes, summarize


def routes_for(config: LcmConfig, host_call_llm: Callable[..., Any] | None) -> list[Any]:
    """The summary routes ``config`` asks for (``host_call_llm``: the host's auxiliary model)."""
    provider = config.summary_provider
    if provider == "extractive":
        return []
    host = host_call_llm if provider in ("auto", "auxiliary") else None
    model = config.summary_model if provider in ("auto", "openai") else ""
    base_url = config.summary_base_url if provider in ("auto", "openai") else ""
    return build_routes(
        model,
        base_url,
        config.summary_api_key,
        list(config.fallback_models),
        host,
        effort=config.summary_reasoning_effort,
    )


def expansion_routes_for(
    config: LcmConfig, host_call_llm: Callable[..., Any] | None, summary_routes: list[Any]
) -> list[Any]:
    """lcm_expand_query's routes: its own model or provider first (LCM_EXPANSION_MODEL,
    LCM_EXPANSION_PROVIDER), on the summary endpoint when one is set and no provider is named,
    else asked of the host; then the summary routes, so a route that refuses the override
    (an unknown model, a provider not configured) is retried without it."""
    effort = config.expansion_reasoning_effort or config.summary_reasoning_effort
    model, provider = config.expansion_model, config.expansion_provider
    if config.summary_provider == "extractive":
        return []
    own: list[Any] = []
    endpoint = config.summary_base_url if config.summary_provider in ("auto", "openai") else ""
    if model and endpoint and not provider:
        own = build_routes(model, endpoint, config.summary_api_key, [], None, effort=effort)
    elif (model or provider) and host_call_llm is not None:
        own = [HostAuxiliaryRoute(host_call_llm, model or None, effort, provider)]
    if effort != config.summary_reasoning_effort:
        summary_routes = routes_for(
            dataclasses.replace(config, summary_reasoning_effort=effort), host_call_llm
        )
    return [*own, *summary_routes]


class Summarizer:
    """``summarizer(sources, depth, target, focus, deadline)``: a summary through the routes."""

    def __init__(
        self,
        config: LcmConfig,
        routes: list[Any],
        guard: CallGuard,
        redactor: Redactor | None,
    ) -> None:
        self.config, self.routes, self.guard, self.redactor = config, routes, guard, redactor

    @property
    def name(self) -> str:
        return ",".join(r.name for r in self.routes) or "extractive (offline)"

    def __call__(
        self,
        sources: Sequence[SourceItem],
        depth: int,
        target: int,
        focus: str | None,
        deadline: float | None,
    ) -> SummaryOutcome:
        """A summary of ``sources``. With redaction on, the summarizer's input is redacted too (rows
        stored before it was turned on still hold their secrets, and the input may go to a remote
        model), and so is what it answers, before it is stored."""
        redactor = self.redactor
        if redactor is not None:
            sources = [SourceItem(s.label, redactor.redact(s.text)) for s in sources]
            focus = redactor.redact(focus) if focus else focus
        outcome = summarize(
            sources,
            depth=depth,
            target_tokens=target,
            focus=focus,
            routes=self.routes,
            guard=self.guard,
            deadline=deadline,
            timeout_s=self.config.summary_timeout_ms / 1000,
            instructions=self.config.custom_instructions,
        )
        if redactor is None:
            return outcome
        return dataclasses.replace(outcome, text=redactor.redact(outcome.text))

    def text(self, sources: Sequence[tuple[str, str]], target: int) -> str:
        """A summary of ``(label, text)`` sources within ``target`` tokens, bounded by
        LCM_COMPACTION_MAX_SECONDS (maintenance rebuilds a summary with it)."""
        deadline = time.monotonic() + self.config.compaction_max_seconds
        return self(
            [SourceItem(label, text) for label, text in sources], 0, target, None, deadline
        ).text

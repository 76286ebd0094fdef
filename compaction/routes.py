"""The ways to reach a model, and the guard that keeps calling them cheap and bounded.

A route is the host's auxiliary LLM or an OpenAI-compatible endpoint over httpx; every call goes
through one shared :class:`CallGuard` (a per-route circuit breaker and a global spend window), so a
dead endpoint does not cost a timeout on every compaction and a loop cannot burn unbounded calls.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import httpx

from ..base.httpcall import CallTimeout, CallTooLarge, post_json
from ..base.redact import clip, redact, remember

DEFAULT_TIMEOUT_S = 60.0
TEMPERATURE = 0.2
_ERROR_CHARS = 300


class LlmRoute(Protocol):
    """One way to reach a model. ``complete`` raises on any transport or protocol failure."""

    name: str

    def complete(self, messages: list[dict[str, str]], timeout_s: float) -> str: ...


MAX_ANSWER_BYTES = 8 << 20  # a summary is a few KB; a model's answer this large is no summary


class RouteError(RuntimeError):
    """The endpoint answered, but not with something usable (HTTP error, bad JSON, no content)."""


# --------------------------------------------------------------------------- call guard


@dataclass
class _RouteState:
    consecutive_failures: int = 0
    open_until: float | None = None
    last_error: str | None = None
    calls: int = 0
    failures: int = 0


class CallGuard:
    """Per-route circuit breaker plus a global spend window, shared by every summarize() call.

    A dead endpoint must not cost a timeout on every compaction, and a misbehaving loop must not burn
    an unbounded number of paid calls; both are refused here before any request is made.
    """

    def __init__(
        self,
        *,
        failure_threshold: int = 2,
        cooldown_s: float = 300.0,
        max_calls: int = 60,
        window_s: float = 3600.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.failure_threshold = max(1, failure_threshold)
        self.cooldown_s = cooldown_s
        self.max_calls = max_calls
        self.window_s = window_s
        self._clock = clock
        self._lock = threading.Lock()
        self._routes: dict[str, _RouteState] = {}
        self._calls: deque[float] = deque()
        self._errors: deque[str] = deque(maxlen=10)

    def acquire(self, route: str) -> str | None:
        """Reserve one call; returns why it is refused, or None when it may go ahead.

        The reservation counts against the spend window even if the call then fails, since a failed
        call is still paid for. After a cooldown one probe is let through (half-open) and others are
        held off until it reports.
        """
        with self._lock:
            now = self._clock()
            self._prune(now)
            state = self._routes.setdefault(route, _RouteState())
            if state.open_until is not None and now < state.open_until:
                return f"circuit breaker open ({state.open_until - now:.0f}s left)"
            if len(self._calls) >= self.max_calls:
                return f"spend guard: {len(self._calls)} calls in the last {self.window_s:.0f}s"
            if state.open_until is not None:
                state.open_until = now + self.cooldown_s
            self._calls.append(now)
            state.calls += 1
            return None

    def record_success(self, route: str) -> None:
        with self._lock:
            state = self._routes.setdefault(route, _RouteState())
            state.consecutive_failures = 0
            state.open_until = None

    def record_failure(self, route: str, reason: str) -> None:
        reason = redact(reason)  # kept for status: whatever a caller passes, no credential stays
        with self._lock:
            state = self._routes.setdefault(route, _RouteState())
            state.consecutive_failures += 1
            state.failures += 1
            state.last_error = reason
            self._errors.append(f"{route}: {reason}")
            if state.consecutive_failures >= self.failure_threshold:
                state.open_until = self._clock() + self.cooldown_s

    def snapshot(self) -> dict[str, Any]:
        """Plain-data view for status/doctor: open breakers, spend in window, recent errors."""
        with self._lock:
            now = self._clock()
            self._prune(now)
            routes = {
                name: self._route_view(state, now) for name, state in sorted(self._routes.items())
            }
            return {
                "calls_in_window": len(self._calls),
                "max_calls": self.max_calls,
                "window_s": self.window_s,
                "open_breakers": [name for name, view in routes.items() if view["open"]],
                "routes": routes,
                "last_errors": list(self._errors),
            }

    def _route_view(self, state: _RouteState, now: float) -> dict[str, Any]:
        left = 0.0 if state.open_until is None else max(0.0, state.open_until - now)
        return {
            "open": left > 0,
            "reopens_in_s": round(left, 1),
            "consecutive_failures": state.consecutive_failures,
            "calls": state.calls,
            "failures": state.failures,
            "last_error": state.last_error,
        }

    def _prune(self, now: float) -> None:
        while self._calls and now - self._calls[0] >= self.window_s:
            self._calls.popleft()


# --------------------------------------------------------------------------- routes


def _field(obj: Any, name: str) -> Any:
    return obj[name] if isinstance(obj, Mapping) else getattr(obj, name)


def _extract_content(response: Any) -> str:
    """``choices[0].message.content`` from an SDK object or a JSON dict; text parts are joined."""
    try:
        content = _field(_field(_field(response, "choices")[0], "message"), "content")
    except (KeyError, IndexError, TypeError, AttributeError) as exc:
        raise RouteError(
            f"response has no choices[0].message.content ({type(exc).__name__})"
        ) from exc
    if isinstance(content, list):
        content = "".join(
            part.get("text", "")
            for part in content
            if isinstance(part, Mapping) and part.get("type") == "text"
        )
    if not isinstance(content, str):
        raise RouteError("response message content is missing")
    return content


class HostAuxiliaryRoute:
    """The host's auxiliary LLM (``agent.auxiliary_client.call_llm``), passed in so this module
    works without Hermes installed. The host drops ``max_tokens`` on OpenAI-compatible endpoints,
    which is why length is enforced after the call rather than requested."""

    def __init__(
        self,
        call_llm: Callable[..., Any],
        model: str | None = None,
        effort: str = "",
        provider: str = "",
    ) -> None:
        self._call_llm = call_llm
        self.model = model
        self.effort = effort
        self.provider = provider
        named = "/".join(p for p in (provider, model or "") if p)
        self.name = f"auxiliary:{named}" if named else "auxiliary"

    def complete(self, messages: list[dict[str, str]], timeout_s: float) -> str:
        kwargs: dict[str, Any] = {
            "task": "compression",
            "messages": messages,
            "temperature": TEMPERATURE,
            "timeout": timeout_s,
        }
        if self.model:
            kwargs["model"] = self.model
        if self.provider:
            kwargs["provider"] = self.provider
        if self.effort:  # the host's own form: it maps it to each provider's reasoning fields
            kwargs["reasoning_config"] = (
                {"enabled": False}
                if self.effort == "none"
                else {"enabled": True, "effort": self.effort}
            )
        return _extract_content(self._call_llm(**kwargs))


class OpenAICompatibleRoute:
    """A model on any OpenAI-compatible ``/chat/completions`` endpoint, over httpx."""

    def __init__(
        self,
        base_url: str,
        api_key: str | None,
        model: str,
        client: httpx.Client | None = None,
        effort: str = "",
    ) -> None:
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self.effort = effort
        self.name = f"openai:{model}"
        self._api_key = api_key
        self._client = client
        remember(api_key)

    def complete(self, messages: list[dict[str, str]], timeout_s: float) -> str:
        payload: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "temperature": TEMPERATURE,
        }
        if self.effort:  # OpenAI's chat-completions field; compatible servers take it or ignore it
            payload["reasoning_effort"] = self.effort
        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        # the whole call within timeout_s, however slowly the body trickles in, and at most MAX_ANSWER_BYTES
        if self._client is not None:
            response = post_json(
                self._client,
                self.url,
                payload,
                headers,
                seconds=timeout_s,
                max_bytes=MAX_ANSWER_BYTES,
            )
        else:
            with httpx.Client() as client:
                response = post_json(
                    client,
                    self.url,
                    payload,
                    headers,
                    seconds=timeout_s,
                    max_bytes=MAX_ANSWER_BYTES,
                )
        if not response.ok:
            # The body may echo the request (Authorization header, key in the JSON): redact first.
            raise RouteError(
                f"HTTP {response.status:d}: {clip(response.text(), 120, [self._api_key])}"
            )
        try:
            data = response.json()
        except ValueError as exc:
            raise RouteError("response is not valid JSON") from exc
        return _extract_content(data)


def build_routes(
    model: str | None,
    base_url: str | None,
    api_key: str | None,
    fallback_models: Sequence[str],
    host_call_llm: Callable[..., Any] | None,
    client: httpx.Client | None = None,
    effort: str = "",
) -> list[LlmRoute]:
    """Routes in the order they are tried. A configured model without a base URL is asked of the
    host (``call_llm(model=...)``); with neither a base URL nor a host, summarization is offline."""
    fallbacks = [m for m in dict.fromkeys(fallback_models) if m and m != model]
    routes: list[LlmRoute] = []
    if model and base_url:
        routes += [
            OpenAICompatibleRoute(base_url, api_key, m, client, effort) for m in [model, *fallbacks]
        ]
    elif host_call_llm is not None:
        routes += [
            HostAuxiliaryRoute(host_call_llm, m, effort) for m in [model or None, *fallbacks]
        ]
    return routes


def describe_failure(exc: Exception, timeout_s: float) -> str:
    """One short line on why a call failed, for the outcome's errors and status.

    Redacted before it is cut: a host's SDK error (``AuthenticationError``) quotes its request too."""
    if isinstance(exc, CallTooLarge):
        return f"answer too large ({exc})"
    if (
        isinstance(exc, httpx.TimeoutException | CallTimeout)
        or "timeout" in type(exc).__name__.lower()
    ):
        return f"timeout after {timeout_s:.1f}s ({type(exc).__name__})"
    if isinstance(exc, RouteError):
        return clip(str(exc), _ERROR_CHARS)
    return clip(f"{type(exc).__name__}: {exc}", _ERROR_CHARS)

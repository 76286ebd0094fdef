"""What the engine borrows from the running host: its LLM call, its home, its built-in compressor.

Each is looked up only when needed and each falls back to nothing when Hermes is not installed
(tests, the demo, benchmarks), so the rest of the library never imports the host.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any


def host_call_llm() -> Callable[..., Any] | None:
    """The host's auxiliary LLM call (``call_llm(task="compression")``), or None without a host."""
    try:
        from agent.auxiliary_client import call_llm
    except Exception:  # noqa: BLE001 - no host: offline summarizer
        return None
    return call_llm


def host_result_chars(context_length: int) -> int | None:
    """The size above which the running host saves a tool result to a file and shows the model a
    preview (Hermes' ``tools.budget_config``, scaled to the model's window), or None without a host."""
    budget = sys.modules.get("tools.budget_config")
    if budget is None or context_length <= 0:
        return None
    try:
        return int(budget.budget_for_context_window(int(context_length)).default_result_size)
    except Exception:  # noqa: BLE001 - another host version: no limit known
        return None


def host_session_id() -> str:
    """The session the running host serves on this task: whoever sent the message being handled.
    The gateway binds it per message in a ContextVar (concurrent chats each see their own), read
    through the host's own ``get_session_env`` (which falls back to ``HERMES_SESSION_ID`` for the
    CLI). Looked up where the host loaded it, never imported: a host that never loaded it bound no
    session this way, and importing the gateway package would pull in the whole gateway. ""
    when nothing is bound (no host, a test, a cron without one)."""
    context = sys.modules.get("gateway.session_context")
    if context is None:
        return ""
    try:
        return str(context.get_session_env("HERMES_SESSION_ID", "") or "")
    except Exception:  # noqa: BLE001 - another host version: unknown
        return ""


def host_home() -> str:
    """The host's home (its per-request override first), else HERMES_HOME, else ~/.hermes."""
    try:
        from hermes_constants import get_hermes_home

        return str(get_hermes_home())
    except Exception:  # noqa: BLE001 - no host
        return os.environ.get("HERMES_HOME") or str(Path.home() / ".hermes")


class BuiltinCompressor:
    """Hermes' own ContextCompressor, for a session hermes-lcm stores nothing of (LCM-X's way).

    It is used only inside a running host and only while summaries go to the host's auxiliary LLM
    (:meth:`usable`): an operator who routes summaries to an endpoint of their own, or asks for the
    offline summarizer, gets the engine's own summary instead. It aims at the engine's compaction
    goal, not at the budget's edge, so it is not due again a turn later, and it is built again after
    a model change. Called as ``(messages, budget, focus) -> list | None``.
    """

    def __init__(self) -> None:
        self.model = ""
        self.context_length = 0
        self._endpoint: dict[str, str] = {}  # never shown: it holds the host's key
        self._compressor: Any = None

    def update(
        self,
        model: str,
        context_length: int,
        base_url: str = "",
        api_key: str = "",
        provider: str = "",
        api_mode: str = "",
    ) -> None:
        """What the host's update_model said: the compressor is built again for it when next needed."""
        self.model, self.context_length = model, context_length
        self._endpoint = {
            "base_url": base_url or "",
            "api_key": api_key or "",
            "provider": provider or "",
            "api_mode": api_mode or "",
        }
        self._compressor = None

    @staticmethod
    def usable(routes: Sequence[Any]) -> bool:
        """Inside a running host, with summaries going to its auxiliary LLM first."""
        return (
            "run_agent" in sys.modules
            and bool(routes)
            and str(routes[0].name).startswith("auxiliary")
        )

    def __call__(
        self, messages: list[dict[str, Any]], budget: Any, focus: str | None
    ) -> list[dict[str, Any]] | None:
        if self._compressor is None:
            try:
                from agent.context_compressor import ContextCompressor
            except Exception:  # noqa: BLE001 - no host: the core's own summary
                return None
            window = self.context_length or budget.total * 4
            self._compressor = ContextCompressor(
                model=self.model,
                threshold_percent=max(0.05, min(0.95, budget.goal / window)),
                protect_first_n=1,
                protect_last_n=2,
                quiet_mode=True,
                config_context_length=window,
                **self._endpoint,
            )
        result = self._compressor.compress(messages, focus_topic=focus)
        return list(result) if isinstance(result, list) else None

"""Host hooks. Each finds the live engine copy for its session and hands it the
messages; none may raise into the host."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from .core import LcmCore
from .registry import live_engine

log = logging.getLogger("hermes_lcm")


def _safe(fn: Callable[..., None]) -> Callable[..., None]:
    def run(*args: Any, **kwargs: Any) -> None:
        try:
            fn(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - hooks must never break a turn
            log.warning("hermes-lcm hook %s failed: %s", fn.__name__, exc)
            engine = live_engine(kwargs.get("session_id"))
            if engine is not None:
                engine.record_error(f"hook {fn.__name__}: {exc}")

    run.__name__ = fn.__name__
    return run


@_safe
def post_llm_call(**kwargs: Any) -> None:
    engine = live_engine(kwargs.get("session_id"))
    if engine is not None:
        engine.ingest_host(kwargs.get("conversation_history") or [])


def pre_llm_call(**kwargs: Any) -> dict[str, str] | None:
    """Proactive recall (proactive.py): the host appends the returned context to the API copy of
    the turn's user message, once per turn. Off unless LCM_PROACTIVE_RECALL_ENABLED."""
    engine = None
    try:
        engine = live_engine(kwargs.get("session_id"))
        core: LcmCore | None = getattr(engine, "core", None)  # LcmEngine.core: opened on first need
        if engine is None or core is None or not core.config.proactive_recall_enabled:
            return None
        block = core.recall_block(kwargs.get("user_message"), core.config.shared_memory)
        return {"context": block} if block else None
    except Exception as exc:  # noqa: BLE001 - hooks must never break a turn
        log.warning("hermes-lcm hook pre_llm_call failed: %s", exc)
        if engine is not None:
            engine.record_error(f"hook pre_llm_call: {exc}")
        return None


@_safe
def pre_api_request(**kwargs: Any) -> None:
    engine = live_engine(kwargs.get("session_id"))
    if engine is None:
        return
    body = (kwargs.get("request") or {}).get("body") or {}
    engine.observe_request(kwargs.get("request_messages") or [], body.get("tools"))


@_safe
def on_session_end(**kwargs: Any) -> None:
    engine = live_engine(kwargs.get("session_id"))
    messages = kwargs.get("messages") or kwargs.get("conversation_history")
    if engine is not None and messages:
        engine.ingest_host(messages)


HOOKS: dict[str, Callable[..., Any]] = {
    "pre_llm_call": pre_llm_call,
    "post_llm_call": post_llm_call,
    "pre_api_request": pre_api_request,
    "on_session_end": on_session_end,
}


def register_hooks(ctx: Any) -> None:
    for name, fn in HOOKS.items():
        ctx.register_hook(name, fn)

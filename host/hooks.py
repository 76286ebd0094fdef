"""Host hooks. Each finds the live engine copy for its session and hands it the
messages; none may raise into the host.

A hook fired by one of the host's own forks (a memory/skill review, the curator) reaches no
engine: the review fork carries the user's session id, and its harness prompt stored as the
user's words is what made the model take it for a standing instruction (hostagents.py)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from ..base.hostagents import is_fork_hook
from ..base.registry import LiveEngine, bound_engine, live_engine
from . import turncontext

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


def _engine_for(kwargs: dict[str, Any]) -> LiveEngine | None:
    """The live engine of the agent that fired the hook; None for the host's forks."""
    if is_fork_hook(kwargs):
        return None
    return live_engine(kwargs.get("session_id"))


@_safe
def post_llm_call(**kwargs: Any) -> None:
    engine = _engine_for(kwargs)
    if engine is not None:
        engine.after_reply(kwargs.get("conversation_history") or [])


def pre_llm_call(**kwargs: Any) -> dict[str, str] | None:
    """Context for the turn's user message, once per turn: the host appends the returned text to
    the API copy of that message (turncontext.py: proactive recall, the pre-answer brief)."""
    try:
        engine = _engine_for(kwargs)
        core = getattr(engine, "core", None) if engine is not None else None  # opened on first need
        if engine is None or core is None:
            return None
        text = turncontext.context(core, kwargs.get("user_message"), engine.record_error)
    except Exception as exc:  # noqa: BLE001 - hooks must never break a turn
        log.warning("hermes-lcm hook pre_llm_call failed: %s", exc)
        return None
    return {"context": text} if text else None


@_safe
def pre_api_request(**kwargs: Any) -> None:
    engine = _engine_for(kwargs)
    if engine is None:
        return
    body = (kwargs.get("request") or {}).get("body") or {}
    engine.observe_request(kwargs.get("request_messages") or [], body.get("tools"))


@_safe
def on_session_end(**kwargs: Any) -> None:
    engine = _engine_for(kwargs)
    messages = kwargs.get("messages") or kwargs.get("conversation_history")
    if engine is not None and messages:
        engine.ingest_host(messages)


@_safe
def on_session_finalize(**kwargs: Any) -> None:
    """The host ends a session for good (the CLI's exit, a gateway reset or expiry), just before it
    hands the engine the final messages and, in the CLI, leaves by ``os._exit``: merge the WAL."""
    engine = _engine_for(kwargs)
    core = getattr(engine, "core", None) if engine is not None else None
    if core is not None:
        core.finalize()


@_safe
def subagent_start(**kwargs: Any) -> None:
    """The host names a delegated subagent's parent before the child runs: link the child's engine."""
    child = bound_engine(kwargs.get("child_session_id"))
    link = getattr(child, "link_parent", None)
    parent = kwargs.get("parent_session_id")
    if link is not None and parent:
        link(str(parent))


HOOKS: dict[str, Callable[..., Any]] = {
    "pre_llm_call": pre_llm_call,
    "post_llm_call": post_llm_call,
    "pre_api_request": pre_api_request,
    "on_session_end": on_session_end,
    "on_session_finalize": on_session_finalize,
    "subagent_start": subagent_start,
}


def register_hooks(ctx: Any) -> None:
    for name, fn in HOOKS.items():
        ctx.register_hook(name, fn)

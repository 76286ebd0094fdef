"""Host hooks. Each finds the live engine copy for its session and hands it the
messages; none may raise into the host."""

from __future__ import annotations

import logging
import time
import weakref
from collections.abc import Callable
from typing import Any

from .core import MODE_NORMAL, LcmCore
from .evidence import preanswer
from .registry import live_engine
from .tokens import content_text
from .visible import visible_now

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
    """Context for the turn's user message, once per turn: the host appends the returned text to
    the API copy of that message. Two sealed blocks, each off by default and within its own
    budget: proactive recall's (proactive.py, LCM_PROACTIVE_RECALL_ENABLED) and the pre-answer
    evidence brief (evidence/preanswer.py, LCM_PREANSWER_EVIDENCE_ENABLED), which reuses the
    first's search when both are on. A failure of one leaves the other."""
    try:
        engine = live_engine(kwargs.get("session_id"))
        core: LcmCore | None = getattr(engine, "core", None) if engine is not None else None
    except Exception as exc:  # noqa: BLE001 - hooks must never break a turn
        log.warning("hermes-lcm hook pre_llm_call failed: %s", exc)
        return None
    if engine is None or core is None:  # LcmEngine.core: opened on first need
        return None
    blocks = []
    for name, make in (("recall", _recall_block), ("evidence", _evidence_block)):
        try:
            block = make(core, kwargs.get("user_message"))
        except Exception as exc:  # noqa: BLE001 - hooks must never break a turn
            log.warning("hermes-lcm hook pre_llm_call (%s) failed: %s", name, exc)
            engine.record_error(f"hook pre_llm_call {name}: {exc}")
            continue
        if block:
            blocks.append(block)
    return {"context": "\n\n".join(blocks)} if blocks else None


def _recall_block(core: LcmCore, user_message: Any) -> str | None:
    if not core.config.proactive_recall_enabled:
        return None
    return core.recall_block(user_message, core.config.shared_memory)


_PREANSWER: weakref.WeakKeyDictionary[LcmCore, preanswer.PreAnswer] = weakref.WeakKeyDictionary()


def _evidence_block(core: LcmCore, user_message: Any) -> str | None:
    config = core.config
    if not preanswer.active(config) or core.binding.mode != MODE_NORMAL:
        return None
    text = content_text(user_message)
    recalled = core.proactive.last(text) if config.proactive_recall_enabled else None
    conversation_id = core.binding.conversation_id
    visible = visible_now(core.store, core.dag, conversation_id) if conversation_id is not None else None
    brief = _PREANSWER.setdefault(core, preanswer.PreAnswer(core.store, core.dag, core.seal.recall())).brief(
        text, conversation_id=conversation_id, reach=core.reach(config.shared_memory), visible=visible,
        budget_tokens=config.preanswer_evidence_budget_tokens, anchor=time.time(),
        tz=str(getattr(config, "timezone", "") or ""), pool=recalled.pool if recalled is not None else None,
        exclude=frozenset(h.id for h in recalled.hits if h.kind == "message") if recalled is not None
        else frozenset())
    return brief.block


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

"""Helpers of the evidence tests: real engines on one SQLite file, messages with host times."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hermes_lcm.engine import LcmEngine


def at(*parts: int) -> float:
    return datetime(*parts, tzinfo=UTC).timestamp()


def engine_for(home: Path, session: str, chat: str | None = None, **env: str) -> LcmEngine:
    """An engine copy as the host makes one; ``chat`` is a gateway key (another owner)."""
    base = {"HERMES_HOME": str(home), "LCM_SUMMARY_PROVIDER": "extractive", **env}
    engine = copy.deepcopy(LcmEngine(env=base))
    engine.update_model("fake-model", 64000)
    engine.threshold_tokens = 6000
    start: dict[str, Any] = {"hermes_home": str(home), "platform": "telegram" if chat else "cli"}
    if chat:
        start["conversation_id"] = f"agent:main:telegram:dm:{chat}"
    engine.on_session_start(session, **start)
    return engine


def said(engine: LcmEngine, *turns: tuple[str, float]) -> list[int]:
    """Store user/assistant turns (text, host timestamp) in order; returns their store ids."""
    core = engine.core
    assert core is not None
    messages = []
    for i, (text, when) in enumerate(turns):
        messages.append({"role": "user" if i % 2 == 0 else "assistant", "content": text, "timestamp": when})
    engine.ingest_host(messages)
    conv = core.binding.conversation_id
    assert conv is not None
    rows = core.store.messages_after(conv, 0)
    return [r.id for r in rows][-len(turns):]


def reach(engine: LcmEngine) -> tuple[int, ...] | None:
    core = engine.core
    assert core is not None
    return core.reach(False)

"""Helpers of the evidence tests: real engines on one SQLite file, messages with host times."""

from __future__ import annotations

from datetime import UTC, datetime

from hermes_lcm.engine import LcmEngine

from .security.test_scope import engine_for

__all__ = ["at", "engine_for", "reach", "said"]


def at(*parts: int) -> float:
    return datetime(*parts, tzinfo=UTC).timestamp()


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

"""Helpers of the evidence tests: real engines on one database (a SQLite file, or PostgreSQL for a
home placed there with ``place``), messages with host times."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from hermes_lcm.engine import LcmEngine

from .security import test_scope

__all__ = ["at", "engine_for", "place", "reach", "said"]

_PLACED: dict[Path, dict[str, str]] = {}


def place(home: Path, where: dict[str, str] | None) -> None:
    """Engines built for ``home`` use the settings ``where`` (conftest.database_env); None: undo."""
    if where is None:
        _PLACED.pop(Path(home), None)
    else:
        _PLACED[Path(home)] = dict(where)


def engine_for(home: Path, session: str, chat: str | None = None, **env: str) -> LcmEngine:
    """security.test_scope.engine_for on the database ``home`` was placed on (SQLite by default)."""
    return test_scope.engine_for(home, session, chat, **{**_PLACED.get(Path(home), {}), **env})


def at(*parts: int) -> float:
    return datetime(*parts, tzinfo=UTC).timestamp()


def said(engine: LcmEngine, *turns: tuple[str, float]) -> list[int]:
    """Store user/assistant turns (text, host timestamp) in order; returns their store ids."""
    core = engine.core
    assert core is not None
    messages = []
    for i, (text, when) in enumerate(turns):
        messages.append(
            {"role": "user" if i % 2 == 0 else "assistant", "content": text, "timestamp": when}
        )
    engine.ingest_host(messages)
    conv = core.binding.conversation_id
    assert conv is not None
    rows = core.store.messages_after(conv, 0)
    return [r.id for r in rows][-len(turns) :]


def reach(engine: LcmEngine) -> tuple[int, ...] | None:
    core = engine.core
    assert core is not None
    return core.reach(False)

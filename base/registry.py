"""The live-engine registry: which engine copy serves which session in this process.

Hooks, ``/lcm`` and lcm_doctor reach the live engines here. The engine registers itself when
it binds a session and waits here after ``/new``; the registry holds engines as weak
references and knows them only by the :class:`LiveEngine` protocol, so it imports nothing of
the engine and anything may import it.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Sequence
from typing import Any, Protocol


class LiveEngine(Protocol):
    """What the registry and its callers (hooks) use of a live engine."""

    session_id: str

    def adopt_session(self, session_id: str) -> None: ...

    def record_error(self, text: str) -> None: ...

    def ingest_host(self, messages: Sequence[Any]) -> int: ...

    def after_reply(self, messages: Sequence[Any]) -> int: ...

    def observe_request(
        self, request_messages: Sequence[Any], tools: Sequence[Any] | None
    ) -> None: ...


_live_lock = threading.Lock()
_live: weakref.WeakValueDictionary[str, LiveEngine] = weakref.WeakValueDictionary()
_awaiting_session: weakref.WeakSet[LiveEngine] = weakref.WeakSet()


def register(session_id: str, engine: LiveEngine) -> None:
    """``engine`` now serves ``session_id`` (and no longer waits for a new one)."""
    with _live_lock:
        _live[session_id] = engine
        _awaiting_session.discard(engine)


def await_session(engine: LiveEngine) -> None:
    """After ``/new``: ``engine`` takes the next session id never seen before."""
    with _live_lock:
        _awaiting_session.add(engine)


def live_engine(session_id: str | None) -> LiveEngine | None:
    """The live engine copy bound to ``session_id`` (hooks and /lcm reach it here).

    A session id never seen before goes to the one engine waiting after ``/new``,
    since the host announces the new id only through hook payloads.
    """
    with _live_lock:
        if session_id and session_id in _live:
            return _live[session_id]
        waiting = list(_awaiting_session)
    if session_id and len(waiting) == 1:
        waiting[0].adopt_session(session_id)
        return waiting[0]
    return None


def bound_engine(session_id: str | None) -> LiveEngine | None:
    """The live engine bound to ``session_id``, never one waiting after ``/new`` (which would adopt
    the id): for a hook that names another agent's session (``subagent_start``'s child)."""
    with _live_lock:
        return _live.get(session_id) if session_id else None


def live_engines() -> list[LiveEngine]:
    with _live_lock:
        return list(dict.fromkeys(_live.values()))


def live_session_ids() -> list[str]:
    """The sessions live engines serve in this process (lcm_doctor and ``/lcm doctor`` show them)."""
    return [e.session_id for e in live_engines() if e.session_id]

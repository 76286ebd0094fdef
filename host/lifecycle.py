"""The host's session lifecycle calls on the engine: start, adopt after ``/new``, end, reset.

They bind the engine's copy to the host's session id (the live-engine registry the hooks read)
and hand the binding to the core; a fork of the user's agent never takes the user's session.
LcmEngine inherits them; what they read of the engine is declared below for the type checker.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..base import registry
from ..base.hostagents import current_kind
from ..base.setting_rules import parse_threshold_overrides
from ..base.tokens import count_messages
from ..sessions.binding import ROLE_FORK
from . import presets
from .guard import guarded

if TYPE_CHECKING:
    from ..config import LcmConfig
    from ..core import LcmCore


class SessionCalls:
    """The lifecycle half of the context-engine interface (mixed into LcmEngine)."""

    if TYPE_CHECKING:
        core: LcmCore | None
        session_id: str
        platform: str
        user_id: str
        role: str
        model: str
        hermes_home: str | None
        last_prompt_tokens: int
        last_completion_tokens: int
        last_total_tokens: int
        compression_count: int
        pressure_tokens: int
        context_length: int

        @property
        def config(self) -> LcmConfig: ...

        def ensure_core(self) -> LcmCore | None: ...
        def record_error(self, text: str) -> None: ...
        def _load_settings(self) -> None: ...
        def _set_window(self, context_length: int) -> None: ...
        def ingest_host(self, messages: Sequence[Any]) -> int: ...
        def _threshold(self) -> int: ...
        def overhead(self, messages: Sequence[Any], current_tokens: int | None) -> int: ...
        def observe_request(
            self, request_messages: Sequence[Any], tools: Sequence[Any] | None
        ) -> None: ...

    def _who(self) -> tuple[str, str]:
        """The bound session's id and platform (a threshold rule may name them)."""
        return self.session_id or "", self.platform or ""

    def preset_suggestion(self) -> dict[str, Any]:
        """The shipped settings preset nearest this model's window (``/lcm preset suggest``)."""
        return presets.suggest(int(self.context_length or 0), self.model)

    @guarded(lambda self, *a, **k: 0)
    def after_reply(self, messages: Sequence[Any]) -> int:
        """The host's ``post_llm_call``: store the turn, then, past the preparation point, ask for
        the next compaction to be prepared (deferred mode) while the user reads the reply."""
        stored = self.ingest_host(messages)
        core, tokens = self.core, self.last_prompt_tokens
        # The host compacts when its own measure of a request (what it hands should_compress
        # before each call) reaches the threshold: the preparation counts the turns in it.
        pressure = self.pressure_tokens or tokens
        before, count = getattr(self, "_reply_sizes", (pressure, len(messages))), len(messages)
        self._reply_sizes = (pressure, count)
        if pressure > before[0]:  # the turn's growth, for this and later replies' preparation
            self._turn_growth = (pressure - before[0], max(0, count - before[1]))
        # A prompt that did not grow was compacted during the turn (or is the first seen): what
        # the turn added is unknown, so the last turn's that is known stands for it.
        growth: tuple[int, int] = getattr(self, "_turn_growth", (0, 0))
        if core is not None and core.preparer is not None:
            threshold = self._threshold()
            if core.preparer.due(pressure, threshold):
                # the budget compress will compute from the same list and prompt tokens: the
                # prompt figure is the request that the reply answered, so the reply is not in it
                # (no usage reported: the host's own figure for that request)
                figure = tokens or pressure
                core.prepare_soon(
                    pressure,
                    threshold,
                    lambda: core.budget(threshold, self.overhead(_request(messages), figure)),
                    growth,
                    _last_user_tokens(messages),
                )
        return stored

    def _bind(self, session_id: str, **kwargs: Any) -> None:
        core = self.ensure_core()
        self.session_id = session_id
        if (
            self.role != ROLE_FORK
        ):  # a fork's hooks carry the user's session id: none may reach it here
            registry.register(session_id, self)
        if core is not None:
            core.bind(
                session_id,
                platform=self.platform,
                user_id=self.user_id or None,
                role=self.role,
                linked_parent=core.binding.parent_session_id,
                **kwargs,
            )

    def link_parent(self, parent_session_id: str) -> None:  # hooks.subagent_start
        if self.core is not None:
            self.core.link_parent(parent_session_id)

    def adopt_session(self, session_id: str) -> None:
        """Take over the new session id a hook revealed after ``/new``."""
        core = self.ensure_core()
        old = self.session_id
        self._bind(session_id, parent_session_id=old or None, reason="new")
        if core is not None:
            core.start_fresh_context()

    @guarded(lambda self, *a, **k: None)
    def on_session_start(self, session_id: str, **kwargs: Any) -> None:
        self.hermes_home = str(kwargs.get("hermes_home") or self.hermes_home or "") or None
        self._load_settings()
        self.platform = str(kwargs.get("platform") or self.platform or "")
        self.user_id = str(kwargs.get("user_id") or kwargs.get("sender_id") or self.user_id or "")
        if kwargs.get("model"):
            self.model = str(kwargs["model"])
        if kwargs.get("context_length"):
            self._set_window(int(kwargs["context_length"]))
        old = kwargs.get("old_session_id")
        self.role = (
            self.role if old else current_kind(self.platform, session_id).value
        )  # whose agent, at its start
        if old and old != session_id:
            self.ingest_host(kwargs.get("messages") or [])
        self._bind(
            session_id,
            conversation_key=kwargs.get("conversation_id"),
            wait_for_parent=True,
            parent_session_id=old if old != session_id else None,
            reason=kwargs.get("boundary_reason"),
        )
        if any(rule.session for rule in parse_threshold_overrides(self.config.threshold_overrides)):
            self._set_window(self.context_length)  # a threshold rule names sessions: now known

    @guarded(lambda self, *a, **k: None)
    def bind_session_state(
        self, session_db: Any = None, session_id: str | None = None, *args: Any, **kwargs: Any
    ) -> None:
        if session_id and not self.session_id:
            self.session_id = str(session_id)

    @guarded(lambda self, *a, **k: None)
    def on_session_end(self, session_id: str, messages: Sequence[Any] | None = None) -> None:
        if messages and (not self.session_id or session_id == self.session_id):
            self.ingest_host(messages)

    @guarded(lambda self, *a, **k: None)
    def on_session_reset(self) -> None:
        """``/new``: the next session keeps deep summaries only; it announces itself via hooks."""
        self.last_prompt_tokens = self.last_completion_tokens = self.last_total_tokens = (
            self.compression_count
        ) = 0
        core = self.ensure_core()
        if core is not None:
            core.start_fresh_context()
        registry.await_session(self)


def _request(messages: Sequence[Any]) -> Sequence[Any]:
    """The list as the last request had it: without the reply that ends it. An overhead inferred
    from the whole list would take the reply's tokens off it, and a preparation planned under
    that larger budget condenses later than the compaction will, making summaries it never takes."""
    if messages and isinstance(messages[-1], dict) and messages[-1].get("role") == "assistant":
        return messages[:-1]
    return messages


def _last_user_tokens(messages: Sequence[Any]) -> int:
    """The tokens of the list's newest user message: the guess for the next one's."""
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "user":
            return count_messages([message])
    return 0

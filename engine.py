"""The host adapter: Hermes Agent's context-engine slot, mapped onto LcmCore.

Thin by design: it translates host calls and keeps host-specific facts
(deep copies per agent, its entry in the live-engine registry that hooks and
commands read, token accounting from usage). No SQL, prompt text or ranking
lives here; the lcm_* tools run through tools.dispatch.
No exception leaves a host-facing method: on internal error the engine
records it where status and doctor show it and degrades to a bounded,
valid prompt.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from .base.redact import redact, remember, remember_env
from .base.sensitive import redaction_patterns
from .base.startup import Opening, locate
from .config import (
    LoadedConfig,
    announce,
    compute_threshold,
    load_config,
    load_for_home,
)
from .core import LcmCore, trim
from .handlers.status import engine_status
from .host.calls import BuiltinCompressor, host_call_llm, host_home
from .host.guard import guarded
from .host.lifecycle import SessionCalls
from .host.overhead import OverheadMeter
from .importers.lcmx import prepare as prepare_path
from .ingest.externalize import ActiveReplay
from .prompt.budget import budget_for, reserve_for, reserve_problem
from .schemas import tool_schemas
from .sessions.binding import MODE_NORMAL, ROLE_USER
from .store import StoreError
from .tools import dispatch

log = logging.getLogger("hermes_lcm")

try:  # the host's base class when running inside Hermes; a local stand-in otherwise
    from agent.context_engine import ContextEngine as _Base
except Exception:  # noqa: BLE001 - no host installed: tests, demo, benchmarks
    from .host.base import ContextEngine as _Base

ENGINE_NAME = "lcm"


class LcmEngine(SessionCalls, _Base):
    """hermes-lcm as a Hermes context engine. The registered object is a template."""

    def __init__(
        self,
        env: Mapping[str, str] | None = None,
        host_call_llm: Callable[..., Any] | None = None,
        *,
        hermes_home: str | None = None,
    ) -> None:
        self._env = dict(os.environ if env is None else env)
        remember_env(self._env)  # keys in the environment are masked in every status, log and event
        self._host_call_llm = host_call_llm
        self.core: LcmCore | None = None
        self.hermes_home: str | None = hermes_home or self._env.get("HERMES_HOME")
        self.session_id = ""
        self.platform = ""
        self.user_id = (
            ""  # the person the host names for this agent, if it does (owner of new conversations)
        )
        self.role = ROLE_USER  # whose agent this copy serves (hostagents.py): the user's, a fork, a subagent
        self.model = ""
        self.context_length = 0
        self.builtin = (
            BuiltinCompressor()
        )  # for a session that stores nothing (update_model sets it up)
        self.last_prompt_tokens = self.last_completion_tokens = self.last_total_tokens = (
            self.compression_count
        ) = 0
        self.pressure_tokens = 0  # the host's last should_compress figure (deferred compaction)
        # Read by the host (getattr) after each compress: did the list change, did we abort.
        self._last_compression_made_progress = self._last_compress_aborted = False
        self.protect_first_n = 0
        self.meter = OverheadMeter()
        self.startup_error: str | None = (
            None  # why the database cannot be used (``opening`` decides retries)
        )
        self.opening = Opening()
        self.errors: list[str] = []
        self._last_summary_error: str | None = None
        self._window_problems: tuple[str, ...] = ()
        self._replay = ActiveReplay()  # LCM_LARGE_OUTPUT_ACTIVE_REPLAY_STUBBING_ENABLED
        self._config_home: str | None = None
        self._loaded: LoadedConfig = load_config({})
        self._set_window(0)
        self._load_settings()

    @property
    def name(self) -> str:
        return ENGINE_NAME

    def __deepcopy__(self, memo: dict[int, Any]) -> LcmEngine:
        """A fresh copy for a new agent: settings carried over, no connection or lock.

        The copy reads config.yaml afresh (an edit since the template was made applies to the
        next agent); a threshold the host tuned on the original is kept while the settings agree.
        """
        copy = type(self)(self._env, self._host_call_llm, hermes_home=self.hermes_home)
        copy.model, copy.platform = self.model, self.platform
        copy._set_window(self.context_length)
        if copy.config == self.config:
            copy.threshold_tokens = self.threshold_tokens
        return copy

    # -- errors -----------------------------------------------------------------

    def record_error(self, text: str) -> None:
        text = redact(text)  # kept for status and the events table; may quote a provider's answer
        self.errors.append(text)
        del self.errors[:-20]
        if self.core is not None:
            self.core.stats.error(text)
        self.note("error", "engine", text)

    def note(self, level: str, kind: str, text: str) -> None:
        """Into the host's log and the events table (where ``lcm doctor`` reads it, engine or not)."""
        log.warning("hermes-lcm: %s", text)
        if self.core is not None:
            with contextlib.suppress(Exception):  # the store itself may be what failed
                self.core.store.record_event(level, kind, text, self.core.binding.conversation_id)

    # -- the core, created on first need ------------------------------------------

    def database_path(self) -> Path | str:
        return self._located()[0]

    def _located(self) -> tuple[Path | str, str]:
        """The database (a file or a postgresql:// URL) and the setting that chose it (for a startup error)."""
        return locate(self._env, self.config, self._loaded.sources, self.hermes_home or host_home())

    @property
    def config(self) -> Any:
        return self._loaded.config

    @property
    def config_problems(self) -> tuple[str, ...]:
        return (*self._loaded.problems, *self._window_problems)

    def _load_settings(self) -> None:
        """Read ``LCM_*`` env and config.yaml's ``lcm:`` block for the current Hermes home.

        Called at construction and whenever the host names the home, so every setting is in
        force from the first host call. Once the core exists its settings are fixed (the
        database is open); a change of settings recomputes the window.
        """
        home = self.hermes_home or host_home()
        if self.core is not None or home == self._config_home:
            return
        loaded = load_for_home(self._env, home)
        remember(loaded.config.summary_api_key)
        self._config_home = home
        changed = loaded.config != self._loaded.config
        self._loaded = loaded
        announce(loaded)  # settings notes: once per process in the host log
        self.protect_last_n = loaded.config.fresh_tail_count
        if changed:
            self._set_window(self.context_length)

    def ensure_core(self) -> LcmCore | None:
        """The core, opened on first need. A failed open is one startup error (status, doctor and the
        host log show it), tried again only when the path's setting changes or after a back-off."""
        if self.core is not None:
            return self.core
        self._load_settings()
        path, setting = self._located()
        if not self.opening.due(path, setting):
            return None
        try:
            self.opening.begin(path, setting)
            if upgraded := prepare_path(
                path, self.config.migrate_on_start, redaction_patterns(self.config)
            ):
                log.warning(
                    "hermes-lcm upgraded the LCM-X database %s (original kept as %s)",
                    path,
                    upgraded["backup"],
                )
            self.core = LcmCore(
                self.config, path, host_call_llm=self._resolve_call_llm(), env=self._env
            )
            self.core.unstored_compressor = (
                self.builtin if self.builtin.usable(self.core.routes) else None
            )
        except Exception as exc:  # noqa: BLE001 - whatever the open raised, it is one startup error
            self.startup_error = self.opening.failed(exc, for_good=isinstance(exc, StoreError))
            log.error("%s", self.startup_error)
        else:
            self.opening.opened()
            self.startup_error = None
        return self.core

    def _resolve_call_llm(self) -> Callable[..., Any] | None:
        return self._host_call_llm if self._host_call_llm is not None else host_call_llm()

    # -- model and usage ---------------------------------------------------------------

    def _set_window(self, context_length: int) -> None:
        """Threshold for this model and window, from the one function that computes it."""
        threshold = compute_threshold(self.config, self.model, context_length, self._who())
        self.context_length = context_length
        self.threshold_tokens = threshold.tokens
        self.threshold_rule = threshold.rule
        self.threshold_percent = (
            threshold.tokens / context_length
            if context_length > 0
            else self.config.threshold_ratio_for(self.model)
        )
        reserve = reserve_problem(self.config, threshold.tokens)
        self._window_problems = (*threshold.problems, *([reserve] if reserve else []))

    @guarded(lambda self, *a, **k: None)
    def update_model(
        self,
        model: str,
        context_length: int,
        base_url: str = "",
        api_key: str = "",
        provider: str = "",
        api_mode: str = "",
        **kwargs: Any,
    ) -> None:
        self.model = model or ""
        remember(api_key)  # the host's key: never shown, whatever a provider's error quotes
        self.builtin.update(
            self.model, int(context_length or 0), base_url, api_key, provider, api_mode
        )
        self._load_settings()
        self._set_window(int(context_length or 0))

    @guarded(lambda self, *a, **k: None)
    def update_from_response(self, usage: Mapping[str, Any] | None) -> None:
        usage = usage or {}
        prompt = int(usage.get("prompt_tokens") or usage.get("input_tokens") or 0)
        completion = int(usage.get("completion_tokens") or usage.get("output_tokens") or 0)
        if prompt:
            self.last_prompt_tokens = prompt
            self.meter.observe_usage(prompt)
        self.last_completion_tokens = completion
        self.last_total_tokens = int(usage.get("total_tokens") or prompt + completion)
        if prompt and self.core is not None:  # the provider's prompt-cache counts, if any
            self.core.record_cache_usage(prompt, usage, self.record_error)

    def observe_request(self, request_messages: Sequence[Any], tools: Sequence[Any] | None) -> None:
        self.meter.observe_request(request_messages, tools)
        self._replay.observe(request_messages, self.config)
        watch, reserve = self.meter.watch, reserve_for(self.config, self.threshold_tokens)
        if watch.observe(
            self.threshold_tokens, self.meter.measured(), reserve, self.context_length
        ):
            self.note(
                "warning" if watch.problem else "info", "threshold", watch.problem or watch.fine
            )

    def overhead(self, messages: Sequence[Any], current_tokens: int | None) -> int:
        return self.meter.overhead(self.threshold_tokens, messages, current_tokens)

    @guarded(lambda self, *a, **k: False)
    def should_compress(self, prompt_tokens: int | None = None) -> bool:
        if prompt_tokens:  # the host's own measure of its next request: when it will compact
            self.pressure_tokens = prompt_tokens
        tokens = prompt_tokens if prompt_tokens is not None else self.last_prompt_tokens
        if bool(self.threshold_tokens) and tokens is not None and tokens >= self.threshold_tokens:
            return True
        core = self.core  # or a large answered tool result the host could hold as its stub
        return core is not None and core.writable and self._replay.due(core.normalizer)

    # -- ingest and compaction -----------------------------------------------------------

    def ingest_host(self, messages: Sequence[Any]) -> int:
        core = self.ensure_core()
        if core is None or (core.binding.conversation_id is None and not self._bind_lazily(core)):
            return 0
        return core.ingest(messages, source=self.platform)

    def _bind_lazily(self, core: LcmCore) -> bool:
        if core.binding.session_id and core.binding.mode != MODE_NORMAL:
            return False  # a bound session that stores nothing stays as it is
        self._bind(self.session_id or f"anon-{uuid.uuid4().hex[:12]}")
        return core.binding.conversation_id is not None

    def _fallback_compress(
        self, messages: Sequence[Any], *args: Any, **kwargs: Any
    ) -> list[dict[str, Any]]:
        """After an error: a bounded prompt that still holds every message not yet stored.

        Without a core nothing is known to be stored, so the list stays as it is, except when
        the database is another program's or newer (``opening.refused``) and nothing is stored, like
        an ignored session.
        """
        budget = budget_for(self.config, self._threshold(), self.overhead(messages, None))
        if self.core is not None:
            return self._told(self.core.fallback(messages, budget), self.core.kept_reason)
        if self.opening.refused:
            return trim(messages, budget)
        last = (
            f" ({self.startup_error or self.errors[-1]})"
            if self.startup_error or self.errors
            else ""
        )
        return self._told(
            list(messages), f"hermes-lcm store unavailable{last}; no message was dropped"
        )

    def _told(self, result: list[dict[str, Any]], kept_reason: str | None) -> list[dict[str, Any]]:
        """Tell the host (it reads these attributes after compress) that its list came back unchanged
        because messages could not be stored: it keeps the list and warns instead of a silent no-op."""
        self._last_compress_aborted = kept_reason is not None
        self._last_summary_error = kept_reason
        return result

    def _threshold(self) -> int:
        """The threshold in force: the host may have lowered ``threshold_tokens`` itself."""
        return (
            self.threshold_tokens
            or compute_threshold(self.config, self.model, self.context_length, self._who()).tokens
        )

    @guarded(_fallback_compress)
    def compress(
        self,
        messages: list[dict[str, Any]],
        current_tokens: int | None = None,
        focus_topic: str | None = None,
        force: bool = False,
        memory_context: str = "",
    ) -> list[dict[str, Any]]:
        started = (
            time.monotonic()
        )  # the time bound covers the whole host call (metering the list included)
        core = self.ensure_core()
        if core is None:
            return self._fallback_compress(messages)
        if core.binding.conversation_id is None and core.binding.mode == MODE_NORMAL:
            self._bind_lazily(core)
        budget = core.budget(self._threshold(), self.overhead(messages, current_tokens))
        self._last_compression_made_progress = False
        result = core.compress(
            messages,
            budget,
            force=force,
            focus=focus_topic or None,
            deadline=started + core.config.compaction_max_seconds,
        )
        self._count_compression(result != messages)
        return self._told(result, core.kept_reason)

    def _count_compression(self, changed: bool) -> None:
        """Only a compress that changed the host's list is one: the host then rewrites or
        rotates its session, and that is what ``compression_count`` and the progress flag
        report. An unchanged list is the host's "no progress" case (nothing rotates)."""
        self._last_compression_made_progress = changed
        if changed:
            self.compression_count += 1

    def has_content_to_compress(self, messages: list[dict[str, Any]]) -> bool:
        return bool(messages)

    # -- tools ---------------------------------------------------------------------

    def get_tool_schemas(self) -> list[dict[str, Any]]:
        try:
            return tool_schemas(self.config.disabled_tool_names)
        except Exception as exc:  # noqa: BLE001
            self.record_error(f"get_tool_schemas: {exc}")
            return []

    def handle_tool_call(self, name: str, args: Mapping[str, Any] | None, **kwargs: Any) -> str:
        try:
            if kwargs.get("messages"):
                self.ingest_host(kwargs["messages"])
            return dispatch(self, name, args)
        except Exception as exc:  # noqa: BLE001 - a tool error is an answer, not a crash
            self.record_error(f"handle_tool_call {name}: {exc.__class__.__name__}: {exc}")
            return json.dumps({"error": redact(f"{name} failed: {exc.__class__.__name__}: {exc}")})

    def get_status(self) -> dict[str, Any]:
        try:
            return engine_status(self)
        except Exception as exc:  # noqa: BLE001
            return {
                "error": redact(str(exc)),
                "last_prompt_tokens": max(0, self.last_prompt_tokens),
            }

"""The lcm_* tools' front door: name -> body, argument checking, scope and bounded JSON answers.

Every call returns a JSON object, never an exception into the host: wrong argument types, an
unknown id, an ignored session or a call before anything was stored all come back as
``{"error": ...}`` saying what to do instead. Answers are bounded by
``LCM_TOOL_RESPONSE_MAX_CHARS``; limits are clamped and the clamp is reported; unknown
arguments are reported as ignored. The tool bodies live in the ``handlers`` package; this
module builds the :class:`handlers.toolkit.Ctx` they run on from the live engine.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from .base.times import TimeError
from .core import MODE_IGNORED
from .handlers import describe, diagnostics, evidence, evidence_retrieve, expand, expand_query, grep
from .handlers.status import EngineFacts, engine_status
from .handlers.toolkit import Args, Ctx, Handler, ToolError, dumps
from .host.calls import host_result_chars
from .schemas import tool_names, tool_parameters
from .search.searcher import SearchError
from .store import StoreFault

if TYPE_CHECKING:
    from .core import LcmCore

log = logging.getLogger("hermes_lcm")
CHARS_PER_TOKEN = 4  # the host's own estimate (agent/model_metadata.py)
MIN_ANSWER_CHARS = 4000  # below this a page of text is mostly its JSON frame
RECOVERY_TOOLS = frozenset({"lcm_expand", "lcm_describe", "lcm_load_session"})


class ToolHost(EngineFacts, Protocol):
    """What the dispatcher uses of the live engine: its settings, its core, its error log."""

    @property
    def config(self) -> Any: ...

    def ensure_core(self) -> LcmCore | None: ...

    def record_error(self, text: str) -> None: ...


HANDLERS: dict[str, Handler] = {
    "lcm_grep": grep.lcm_grep,
    "lcm_recall": grep.lcm_recall,
    "lcm_expand": expand.lcm_expand,
    "lcm_load_session": expand.lcm_load_session,
    "lcm_expand_query": expand_query.lcm_expand_query,
    "lcm_describe": describe.lcm_describe,
    "lcm_recent": describe.lcm_recent,
    "lcm_status": diagnostics.lcm_status,
    "lcm_inspect": diagnostics.lcm_inspect,
    "lcm_doctor": diagnostics.lcm_doctor,
    **{tool: evidence.disabled_tool(tool) for tool in evidence.EVIDENCE_TOOLS},
    "lcm_retrieve": evidence_retrieve.lcm_retrieve,
    "lcm_query_state": evidence.lcm_query_state,
}
# Tools that still answer (read-only) for an ignored session or without a stored conversation.
READ_ONLY_DIAGNOSTICS = frozenset({"lcm_status", "lcm_inspect", "lcm_doctor"})


def answer_cap(config: Any, context_length: int, threshold_tokens: int, tool: str = "") -> int:
    """The most characters one answer may have, so that it reaches the model as it is.

    ``LCM_TOOL_RESPONSE_MAX_CHARS``, and below the limits a larger answer would hit: the host's
    own per-result limit (a larger result is saved to a file and the model gets a preview: Hermes'
    ``budget_for_context_window``, 15% of the window), the large-output threshold when
    externalization is on (our answers are never externalized, but a page that big would crowd the
    prompt the threshold protects), and for the tools that page text back (``RECOVERY_TOOLS``) a
    quarter of the prompt's threshold (a page must not itself cause the compaction that summarizes
    it away; the next page is one call away). These never take it below ``MIN_ANSWER_CHARS``."""
    own = int(getattr(config, "tool_response_max_chars", 24000))
    caps = [own]
    host = host_result_chars(context_length)
    if host:
        caps.append(host)
    if getattr(config, "large_output_externalization_enabled", False):
        caps.append(int(config.large_output_externalization_threshold_chars) - 1)
    if threshold_tokens > 0 and tool in RECOVERY_TOOLS:
        caps.append(threshold_tokens * CHARS_PER_TOKEN // 4)
    return min(
        own, max(MIN_ANSWER_CHARS, min(caps))
    )  # the floor never lifts the operator's own cap


def dispatch(engine: ToolHost, name: str, args: Mapping[str, Any] | None) -> str:
    """Run one tool call; always a JSON object string within the size cap."""
    cap = answer_cap(
        engine.config, int(engine.context_length or 0), int(engine.threshold_tokens or 0), name
    )
    try:
        return finish(_run(engine, name, args, cap), cap)
    except ToolError as exc:
        return finish({"error": str(exc), "tool": name}, cap)
    except (SearchError, TimeError) as exc:
        return finish({"error": str(exc), "tool": name}, cap)
    except StoreFault as exc:
        log.warning("hermes-lcm: %s database error: %s", name, exc)
        return finish(
            {"error": f"database error: {exc}", "tool": name, "hint": "run lcm_doctor"}, cap
        )
    except Exception as exc:  # noqa: BLE001 - a tool failure is an answer, never an exception into the host
        engine.record_error(f"tool {name}: {exc.__class__.__name__}: {exc}")
        return finish(
            {"error": f"{name} failed: {exc.__class__.__name__}: {exc}", "tool": name}, cap
        )


def _run(engine: ToolHost, name: str, raw: Mapping[str, Any] | None, cap: int) -> dict[str, Any]:
    if name not in tool_names():
        raise ToolError(f"unknown tool {name!r}")
    if name in engine.config.disabled_tool_names:
        raise ToolError(f"{name} is disabled by LCM_DISABLED_TOOLS")
    if raw is not None and not isinstance(raw, Mapping):
        raise ToolError("arguments must be a JSON object")
    core = engine.ensure_core()
    if core is None:
        raise ToolError(
            engine.startup_error or "the hermes-lcm store is unavailable; run lcm_doctor"
        )
    if core.binding.mode == MODE_IGNORED and name not in READ_ONLY_DIAGNOSTICS:
        raise ToolError(
            f"this session matches LCM_IGNORE_SESSION_PATTERNS ({core.binding.matched_pattern}): "
            "LCM stores nothing for it and serves no recall"
        )
    args = Args(name, dict(raw or {}))
    answer = HANDLERS[name](_context(engine, core, cap), args)
    if args.clamped:
        answer["clamped"] = args.clamped
    ignored = sorted(set(args.raw) - tool_parameters(name))
    if ignored:
        answer["ignored_arguments"] = ignored
    return answer


def _context(engine: ToolHost, core: LcmCore, cap: int) -> Ctx:
    """What the bodies may know of the engine, read once per call; the status report on demand."""
    return Ctx(
        core,
        cap,
        engine.config,
        engine.config_problems,
        engine.last_prompt_tokens,
        engine.threshold_tokens,
        functools.partial(engine_status, engine),
    )


def finish(answer: dict[str, Any], cap: int) -> str:
    """The answer as JSON within ``cap`` characters; bodies fit themselves, this is the backstop."""
    text = dumps(answer)
    if len(text) <= cap:
        return text
    return dumps(
        {
            "error": "answer over the size cap (LCM_TOOL_RESPONSE_MAX_CHARS); narrow the request",
            "cap_chars": cap,
            "tool": answer.get("tool"),
        }
    )

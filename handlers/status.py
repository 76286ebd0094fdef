"""What status surfaces show about a live engine: host-side token accounting
plus the core's store, DAG and summarizer health.

It reads the engine through the :class:`EngineFacts` protocol, so the engine, /lcm and the
tool dispatcher all use it and it imports none of them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from ..base.outputs import settings_view as outputs_view
from ..base.peer_settings import is_settings_note
from ..base.provenance import plugin_identity
from ..base.redact import redact_value
from ..base.stats import cache_view
from ..base.tokens import backend_name
from ..maintenance import backups, rotate
from ..sessions.binding import ROLE_SUBAGENT
from ..version import __version__

if TYPE_CHECKING:
    from ..core import LcmCore
    from ..host.overhead import OverheadMeter


class EngineFacts(Protocol):
    """What a status report reads of a live engine."""

    last_prompt_tokens: int
    threshold_tokens: int
    threshold_rule: str
    context_length: int
    compression_count: int
    model: str
    meter: OverheadMeter
    startup_error: str | None
    errors: list[str]
    core: LcmCore | None

    @property
    def name(self) -> str: ...

    @property
    def config_problems(self) -> tuple[str, ...]: ...

    def preset_suggestion(self) -> dict[str, Any]:
        """The shipped settings preset nearest this model's window (``/lcm preset suggest``)."""
        ...


def engine_status(engine: EngineFacts) -> dict[str, Any]:
    """The status report, with every credential masked: it reaches the model (``lcm_status``), the
    operator (``/lcm status``) and logs, and holds error texts that came from outside."""
    report: dict[str, Any] = redact_value(_status(engine))
    return report


def _status(engine: EngineFacts) -> dict[str, Any]:
    last_prompt = max(0, engine.last_prompt_tokens)
    info: dict[str, Any] = {
        "engine": engine.name,
        "version": __version__,
        "last_prompt_tokens": last_prompt,
        "threshold_tokens": engine.threshold_tokens,
        "threshold_rule": engine.threshold_rule,
        "context_length": engine.context_length,
        "usage_percent": round(min(100.0, last_prompt / engine.context_length * 100), 1)
        if engine.context_length
        else 0,
        "compression_count": engine.compression_count,
        "model": engine.model,
        "overhead_tokens": engine.meter.snapshot(),
        "threshold_problem": engine.meter.watch.problem,
        "over_threshold": _over(engine, last_prompt),
        "token_counter": backend_name(),
        "config_problems": [
            p for p in engine.config_problems if not is_settings_note(p)
        ],  # notes: below
        # peer settings read as ours, or ignored (LCM-X, lossless-claw, typos): docs/guide/import-and-migrate.md
        "settings_notes": [p for p in engine.config_problems if is_settings_note(p)],
        "startup_error": engine.startup_error,
        "engine_errors": list(engine.errors),
        "preset_suggestion": _suggestion(engine),
        **plugin_identity(),
    }
    if engine.core is not None:
        try:
            info["payload_problem"] = (
                engine.core.guard.problem
            )  # a refused (symlinked) payload directory
            info.update(core_status(engine.core))
        except Exception as exc:  # noqa: BLE001 - status must work when the store does not
            info["store_error"] = (
                f"{exc.__class__.__name__}: {exc}"  # masked with the rest by engine_status
            )
    return info


def _suggestion(engine: EngineFacts) -> dict[str, Any] | None:
    """The preset suggestion in brief (its name, how sure, why); None when it cannot be made."""
    try:
        found = engine.preset_suggestion()
    except Exception:  # noqa: BLE001 - a suggestion is advice; status stands without it
        return None
    return {k: found[k] for k in ("suggestion", "confidence", "reasons") if k in found}


def _over(engine: EngineFacts, last_prompt: int) -> dict[str, Any] | None:
    """How far the last prompt went over the threshold, and why (None when it did not)."""
    if not engine.threshold_tokens or last_prompt <= engine.threshold_tokens:
        return None
    cause = (
        f"the host's own tokens: {engine.meter.watch.problem}"
        if engine.meter.watch.problem
        else "a turn crossed it: the prompt is rebuilt under the threshold at the compaction that follows"
    )
    return {"tokens": last_prompt - engine.threshold_tokens, "cause": cause}


def core_privacy(core: LcmCore) -> dict[str, Any]:
    """What status and doctor show of the ingest filters: redaction's policy and counts, the
    message patterns; never a secret or a message."""
    redaction = (
        core.redactor.describe()
        if core.redactor is not None
        else {
            "enabled": False,
            "note": "off (LCM_SENSITIVE_PATTERNS_ENABLED): messages are stored as sent",
        }
    )
    return {
        "redaction": redaction,
        "ignore_message_patterns": len(core.message_patterns.compiled),
        "ignore_message_pattern_problems": list(core.message_patterns.problems),
        "ignored_messages_this_process": core.normalizer.ignored_count,
    }


def deferred_view(core: LcmCore) -> dict[str, Any]:
    """LCM_COMPACTION_MODE and, when deferred, the preparer's runs and what waits prepared for the
    bound conversation (published by its next compaction without a call)."""
    if core.preparer is None:
        return {"mode": core.config.compaction_mode}
    conversation = core.binding.conversation_id
    waiting = core.store.prepared_counts().get(conversation, (0, 0)) if conversation else (0, 0)
    return {
        "mode": core.config.compaction_mode,
        **core.preparer.view(),
        "prepared_waiting": waiting[0],
        "prepared_waiting_tokens": waiting[1],
    }


def _backups_view(core: LcmCore) -> dict[str, Any]:
    """Where backups go and the last rotate's: the one backup rotate keeps, for its undo."""
    directory = backups.backup_dir(core.store.path, core.config.backup_dir)
    return {**rotate.last_rotate(core.store, directory), "backup_dir": str(directory)}


def core_status(core: LcmCore) -> dict[str, Any]:
    """The core's part of the report: the bound session, the process counters, each job's health
    and, when a conversation is bound, what its store and DAG hold."""
    state = core.conversation_state()
    binding, stats = core.binding, core.stats
    info: dict[str, Any] = {
        "database_path": core.store.path,
        "session_id": binding.session_id or None,
        "session_mode": binding.mode,
        "matched_session_pattern": binding.matched_pattern,
        "agent_role": binding.role,
        "summarizer": core.summarizer_name,
        "summarizer_guard": core.call_guard.snapshot(),
        "ingest_calls": stats.ingest_calls,
        "messages_stored_this_process": stats.stored,
        "ignored_messages_this_process": core.normalizer.ignored_count,
        "compactions_this_process": stats.compactions,
        "last_compaction": stats.last_compaction,
        "payload_write_failures": core.guard.failures,
        "store_write_failures": stats.write_failures,
        "last_store_write_failure": stats.last_write_failure or None,
        "unstored_messages": stats.unstored_messages,
        "ingest_backlog_messages": stats.ingest_backlog,
        "errors": list(stats.errors),
        "privacy": core_privacy(core),
        "embeddings": core.semantic.status(),
        "temporal_rollups": core.rollups.status(),
        "assertions": core.assertions.status(),
        "proactive_recall": core.proactive.status(core.config.proactive_recall_enabled),
        "large_outputs": outputs_view(core.config),
        "deferred_compaction": deferred_view(core),
        **_backups_view(core),
    }
    if binding.role == ROLE_SUBAGENT:
        info["linked_parent"] = core.binder.linked_parent()
    if state is not None:
        context = core.dag.context(state.id)
        info.update(
            {
                "conversation_id": state.id,
                "conversation_key": state.key,
                "messages_in_conversation": core.store.message_count(state.id),
                "frontier_seq": state.frontier_seq,
                "last_seq": state.last_seq,
                "context_summaries": [n.node_id for n in context],
                "context_summary_tokens": sum(n.tokens for n in context),
                "summaries_by_depth": core.dag.depth_counts(state.id),
                "prompt_cache": cache_view(core.cache_usage(state.id)),
            }
        )
    return info

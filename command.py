"""``/lcm``: the in-session operator command (off unless ``LCM_ENABLE_SLASH_COMMAND=1``).

The host calls the handler on the engine *template*; the work happens on the
live engine copy (the one bound to a session), found through the live-engine
registry. Read-only verbs come first; every ``apply`` is narrow, backup-first
and a no-op when re-run (see maintenance/doctor.py).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from .base.redact import redact
from .base.registry import live_engines, live_session_ids
from .compaction.rollups import command as rollup_command
from .embed import Embedder
from .engine import LcmEngine
from .handlers.status import engine_status
from .host import presets
from .host.calls import host_session_id
from .maintenance import (
    backups,
    cleanup,
    doctor,
    fork_turns,
    repairs,
    retention,
    rotate,
    scrub,
    summary_health,
)
from .store import Store, StoreError, is_url, redacted
from .viewer import ViewError, write_page

log = logging.getLogger("hermes_lcm")

HELP = """\
/lcm [--json] <command>   (read-only unless the command ends in 'apply')
  status                          runtime, session and store status
  doctor                          read-only health checks with guidance
  doctor clean [apply]            conversations stored before their sessions matched LCM_IGNORE_SESSION_PATTERNS
  doctor clean lifecycle [apply]  session rows that never stored anything
  doctor clean harness [apply]    turns of the host's review forks stored as the user's (earlier versions);
                                  apply removes them and rebuilds the summaries made from them
  doctor repair [apply]           full-text index and trigger repair
  doctor repair summaries [ID] [apply]
                                  broken summaries (empty, an error text, a refusal, ...); apply makes
                                  them again from their sources (backup first, the old text kept)
  doctor source [apply]           legacy blank-source rows -> 'unknown'
  doctor retention                what the database holds by conversation and age, and how to bound it
  backup                          timestamped, verified SQLite backup (online backup API)
  gc-payloads [apply]             payload files no message or summary references (apply: backup, then remove)
  rotate [apply]                  move the frontier past raw rows before the fresh tail (rows stay stored)
  redact [apply]                  secrets stored before redaction was on: counts; apply rewrites them (backup first)
  embed [warmup | apply]           semantic recall's vectors: the backlog (dry run) and the job; warmup loads
                                  the model; apply has the background job work through the backlog
  rollups [build | rebuild day|week|month|all [YYYY-MM-DD]]
                                  temporal rollups: status by state; build stale ones now; mark some stale
  view [ID]                       write this conversation's page (summary DAG, compactions, search, growth): the path
  preset show [NAME] | preset suggest | preset apply NAME --dry-run
  help
Every apply takes a backup first. 'clean apply', 'clean lifecycle apply' and 'clean harness
apply' also need LCM_DOCTOR_CLEAN_APPLY_ENABLED=true. Add session=<id> to act on a specific live session."""


class UsageError(ValueError):
    """Bad /lcm arguments."""


@dataclass
class Target:
    """What a command acts on: the live engine (if any), its store and settings."""

    engine: LcmEngine | None
    template: LcmEngine
    db_path: Path | str  # a file, or a postgresql:// URL
    asked: str | None = None  # the command's session=<id>
    caller: str = (
        ""  # the session the command came from (the host's HERMES_SESSION_ID); "" when unnamed
    )
    caller_engine: LcmEngine | None = None  # the live engine of ``caller``

    @property
    def viewer(self) -> LcmEngine | None:
        """Whose owner rule applies: the caller's engine when the host names the caller (a gateway
        serves many people, and any of them may type /lcm), else the engine acted on (the operator's)."""
        return self.caller_engine if self.caller else self.engine

    @property
    def db_exists(self) -> bool:
        """Whether there is a database to read (a server's answers for itself when opened)."""
        return isinstance(self.db_path, str) or self.db_path.exists()

    @property
    def config(self) -> Any:
        return (self.engine or self.template).config

    def store(self) -> Store:
        engine = self.engine or self.template
        if self.engine is None and not self.db_exists:
            raise UsageError(
                f"no database yet at {shown(self.db_path)} (send one normal message first)"
            )
        core = engine.ensure_core()
        if core is None:
            raise UsageError(engine.startup_error or "hermes-lcm store unavailable")
        return core.store

    @property
    def backup_dir(self) -> Path:
        return backups.backup_dir(self.db_path, self.config.backup_dir)

    @property
    def live_sessions(self) -> list[str]:
        return live_session_ids()


def handle_command(raw_args: str = "") -> str:
    """The host's entry point: raw argument text in, text out; never raises. The text is
    redacted: it shows error texts that came from outside (a provider's answer)."""
    return redact(_handle(raw_args))


def _handle(raw_args: str) -> str:
    words = (raw_args or "").split()
    as_json = "--json" in words
    words = [w for w in words if w != "--json"]
    try:
        result = run(words)
    except (UsageError, backups.MaintenanceError, presets.PresetError, StoreError, KeyError) as exc:
        return f"hermes-lcm: {exc}"
    except Exception as exc:  # a slash command answers; it never breaks the session
        log.warning("hermes-lcm /lcm %s failed: %s", raw_args, exc, exc_info=True)
        return f"hermes-lcm: /lcm {' '.join(words)} failed: {exc.__class__.__name__}: {exc}"
    if isinstance(result, str):
        return result
    return render(result, as_json)


def shown(db: Path | str) -> str:
    """A database as /lcm shows it: a file's path, or a URL without its password."""
    return redacted(str(db)) if is_url(db) else str(db)


def render(result: dict[str, Any], as_json: bool = False) -> str:
    plain = json.loads(json.dumps(result, default=str))
    if as_json:
        return json.dumps(plain, indent=2, ensure_ascii=False)
    return yaml.safe_dump(plain, sort_keys=False, allow_unicode=True, width=110).rstrip()


def run(words: Sequence[str]) -> dict[str, Any] | str:
    session = next((w.split("=", 1)[1] for w in words if w.startswith("session=")), None)
    words = [w for w in words if not w.startswith("session=")]
    verb, rest = (words[0], list(words[1:])) if words else ("status", [])
    handler = VERBS.get(verb)
    if handler is None:
        return f"unknown /lcm command {verb!r}\n\n{HELP}"
    return handler(target(session), rest)


def target(session: str | None) -> Target:
    """The engine acted on: ``session``'s, else the caller's (the session the host says sent this),
    else the newest live one."""
    engines = [
        e for e in live_engines() if isinstance(e, LcmEngine)
    ]  # the registry knows engines by protocol
    caller = host_session_id()
    caller_engine = next((e for e in reversed(engines) if caller and e.session_id == caller), None)
    if session is not None:
        chosen = [e for e in engines if e.session_id == session]
        if (
            chosen and caller
        ):  # the owner rule of every verb: another owner's session reads as a missing one
            reach = reach_of(caller_engine)
            chosen = [
                e
                for e in chosen
                if reach is None or (e.core is not None and e.core.binding.conversation_id in reach)
            ]
        if not chosen:
            raise UsageError(no_session(session, engines, caller, caller_engine))
        engine: LcmEngine | None = chosen[-1]
    else:
        engine = caller_engine or (engines[-1] if engines else None)
    template = engine if engine is not None else LcmEngine()
    return Target(engine, template, template.database_path(), session, caller, caller_engine)


def reach_of(engine: LcmEngine | None) -> tuple[int, ...] | None:
    """The conversations ``engine``'s owner may read (None: every one, LCM_SHARED_MEMORY); none at
    all for an engine not bound to a stored conversation yet."""
    if engine is None or engine.core is None or engine.core.binding.conversation_id is None:
        return ()
    return engine.core.reach(bool(engine.config.shared_memory))


def no_session(
    session: str, engines: Sequence[LcmEngine], caller: str, caller_engine: LcmEngine | None
) -> str:
    """The answer for a session that is not live, or (the same words) one the caller may not see:
    the live sessions listed are the caller's owner's only, when the host names the caller."""
    reach = reach_of(caller_engine) if caller else None
    live = [
        e.session_id
        for e in engines
        if reach is None or (e.core is not None and e.core.binding.conversation_id in reach)
    ]
    return f"no live engine for session {session!r}; live: {live}"


# -- verbs -------------------------------------------------------------------------------------


def _status(t: Target, rest: list[str]) -> dict[str, Any]:
    if t.engine is None:
        return {
            "session_id": "(unbound)",
            "threshold_tokens": "(uninitialized)",
            "note": "no live engine in this process yet: send one normal message, then /lcm status again",
            "database_path": shown(t.db_path),
            "database_exists": t.db_exists,
            "slash_command": True,
            "doctor_clean_apply_enabled": t.config.doctor_clean_apply_enabled,
        }
    info = engine_status(t.engine)
    info["backup_dir"] = str(t.backup_dir)
    info["doctor_clean_apply_enabled"] = t.config.doctor_clean_apply_enabled
    return info


def _doctor(t: Target, rest: list[str]) -> dict[str, Any] | str:
    if rest:
        sub = DOCTOR.get(rest[0])
        if sub is None:
            raise UsageError(f"unknown doctor command {rest[0]!r}; try: {', '.join(DOCTOR)}")
        return sub(t, rest[1:])
    engine = t.engine or t.template
    store = t.store()
    return doctor.doctor_report(
        store,
        deep=True,
        config=t.config,
        config_problems=engine.config_problems,
        live_sessions=t.live_sessions,
        semantic=engine.core.semantic if engine.core else None,
    )


def _apply_flag(rest: list[str], allowed: tuple[str, ...] = ()) -> bool:
    extra = [w for w in rest if w != "apply" and w not in allowed]
    if extra:
        raise UsageError(f"unexpected arguments {extra}")
    return "apply" in rest


def _clean(t: Target, rest: list[str]) -> dict[str, Any]:
    if rest[:1] == ["lifecycle"]:
        return _lifecycle(t, rest[1:])
    if rest[:1] == ["harness"]:
        return _harness(t, rest[1:])
    store, patterns = t.store(), t.config.ignore_session_patterns
    if _apply_flag(rest):
        return cleanup.clean_apply(
            store,
            t.backup_dir,
            patterns,
            t.live_sessions,
            allowed=t.config.doctor_clean_apply_enabled,
        )
    return cleanup.clean_scan(store, patterns, t.live_sessions)


def _lifecycle(t: Target, rest: list[str]) -> dict[str, Any]:
    store, age = t.store(), t.config.empty_lifecycle_min_age_hours
    if _apply_flag(rest):
        return cleanup.lifecycle_apply(
            store, t.backup_dir, age, t.live_sessions, allowed=t.config.doctor_clean_apply_enabled
        )
    return cleanup.public_plan(cleanup.lifecycle_scan(store, age, t.live_sessions))


def _harness(t: Target, rest: list[str]) -> dict[str, Any]:
    """The host's review-fork turns stored as the user's; apply rebuilds their summaries with the live
    engine's summarizer when there is one (else offline)."""
    store = t.store()
    if not _apply_flag(rest):
        return fork_turns.public(fork_turns.scan(store))
    core = t.engine.core if t.engine is not None else None
    rebuild = None
    if core is not None:

        def rebuild(sources: Sequence[tuple[str, str]], target: int) -> str:
            return core.summarize_text(sources, target)

    return cleanup.harness_apply(
        store, t.backup_dir, allowed=t.config.doctor_clean_apply_enabled, rebuild=rebuild
    )


def _repair(t: Target, rest: list[str]) -> dict[str, Any]:
    store = t.store()
    if rest[:1] == ["summaries"]:  # broken summaries made again from their sources
        numbers = [w for w in rest[1:] if w.isdigit()]
        write = _apply_flag(rest[1:], tuple(numbers))
        core = t.engine.core if t.engine is not None else None
        return summary_health.repair(
            store,
            t.backup_dir,
            conversation_id=int(numbers[0]) if numbers else None,
            write=write,
            rebuild=core.summarize_text if core is not None else None,
        )
    return (
        repairs.repair_apply(store, t.backup_dir)
        if _apply_flag(rest)
        else repairs.repair_scan(store)
    )


def _source(t: Target, rest: list[str]) -> dict[str, Any]:
    store = t.store()
    return (
        repairs.source_apply(store, t.backup_dir)
        if _apply_flag(rest)
        else repairs.source_scan(store)
    )


def _retention(t: Target, rest: list[str]) -> dict[str, Any]:
    _apply_flag(rest)
    if "apply" in rest:
        raise UsageError(
            "retention is read-only; its guidance names the commands that change things"
        )
    return retention.retention_report(t.store())


def _backup(t: Target, rest: list[str]) -> dict[str, Any]:
    if rest:
        raise UsageError(f"unexpected arguments {rest}")
    saved = backups.backup(t.store(), t.backup_dir)
    return {"status": "ok", "backup": saved.path, "bytes": saved.bytes, "seconds": saved.seconds}


def _redact(t: Target, rest: list[str]) -> dict[str, Any]:
    """Secrets stored before redaction was on (scrub.py): counts, or with ``apply`` the rewrite."""
    c = t.config
    return scrub.command(
        t.store(),
        c.sensitive_patterns,
        c.large_output_preview_chars,
        t.backup_dir,
        _apply_flag(rest),
        c.sensitive_patterns_enabled,
        c.sensitive_patterns,
    )


def _gc_payloads(t: Target, rest: list[str]) -> dict[str, Any]:
    store = t.store()
    return (
        repairs.gc_payloads_apply(store, t.backup_dir)
        if _apply_flag(rest)
        else repairs.gc_payloads_scan(store)
    )


def _rotate(t: Target, rest: list[str]) -> dict[str, Any]:
    apply = _apply_flag(rest)
    engine = t.engine
    core = engine.core if engine is not None else None
    if engine is None or core is None or not core.binding.session_id:
        raise UsageError("rotate acts on the live session: send one normal message first")
    binding = core.binding
    if binding.mode != "normal":
        raise backups.MaintenanceError(
            f"rotate refuses session {binding.session_id!r}: it is {binding.mode} "
            f"(matched {binding.matched_pattern!r}) and stores nothing of its own"
        )
    if binding.conversation_id is None:
        raise UsageError("this session has no stored conversation yet")
    config = t.config
    if apply:
        return rotate.rotate_apply(
            core.store,
            binding.conversation_id,
            binding.mode,
            t.backup_dir,
            config.fresh_tail_count,
            config.fresh_tail_max_tokens,
        )
    plan = rotate.rotate_scan(
        core.store, binding.conversation_id, config.fresh_tail_count, config.fresh_tail_max_tokens
    )
    return {**plan, "apply": "/lcm rotate apply" if plan["status"] == "ready" else None}


def _preset(t: Target, rest: list[str]) -> dict[str, Any]:
    sub = rest[0] if rest else "show"
    engine = t.engine or t.template
    if sub == "show":
        return presets.show(rest[1] if len(rest) > 1 else None)
    if sub == "suggest":
        return engine.preset_suggestion()
    if sub == "apply":
        names = [w for w in rest[1:] if w != "--dry-run"]
        if "--dry-run" not in rest:
            raise UsageError(
                "presets are never applied live: use /lcm preset apply NAME --dry-run and copy the "
                "lines it prints"
            )
        if len(names) != 1:
            raise UsageError("usage: /lcm preset apply NAME --dry-run")
        return presets.dry_run(names[0], engine.config, engine._loaded.sources, engine._env)
    raise UsageError("usage: /lcm preset show [NAME] | suggest | apply NAME --dry-run")


def _embed(t: Target, rest: list[str]) -> dict[str, Any]:
    """``/lcm embed``: the dry run and the job's state; ``warmup``; ``apply`` asks the background job
    to work through the backlog in bounded runs (the chat never waits; ``/lcm embed`` shows progress)."""
    if rest not in ([], ["warmup"], ["apply"]):
        raise UsageError("usage: /lcm embed [warmup | apply]")
    store = t.store()
    engine = t.engine or t.template
    semantic = engine.core.semantic if engine.core is not None else None
    if semantic is None or semantic.embedder is None:
        note = semantic.problem if semantic is not None and semantic.problem else None
        return {
            "enabled": False,
            **(
                {"problem": note}
                if note
                else {"note": "off: set LCM_EMBEDDINGS_ENABLED=true and LCM_EMBEDDING_PROVIDER"}
            ),
        }
    live = semantic.embedder
    if rest == ["warmup"]:
        try:
            return {"warmup": "ok", **live.warmup()}
        except Exception as exc:  # noqa: BLE001 - a provider's failure is the answer
            return {"warmup": "failed", "error": f"{type(exc).__name__}: {exc}"}
    if rest == ["apply"]:
        if semantic.job is None:
            raise UsageError("the database is read-only here: nothing can be embedded")
        semantic.job.request_backfill()
    plan = Embedder(
        store, live.provider, t.config
    )  # a view of its own: the dry run calls no provider
    plan.adopt_known_model()
    out: dict[str, Any] = {
        "backlog": plan.backlog().as_dict(),
        "provider_copy_redacted": live.redactor is not None,
    }
    job = semantic.job
    if job is not None:
        progress = job.progress()
        out["job"] = {
            "backfilling": job.backfilling,
            "runs": job.runs,
            "errors": list(job.errors),
            "progress": progress.line() if progress is not None else None,
        }
    out["next"] = (
        "/lcm embed (progress)" if job is not None and job.backfilling else "/lcm embed apply"
    )
    return out


def _rollups(t: Target, rest: list[str]) -> dict[str, Any]:
    """``/lcm rollups``: status; ``build`` now; ``rebuild day|week|month|all [YYYY-MM-DD]``."""
    t.store()
    engine = t.engine or t.template
    if engine.core is None:
        raise UsageError(engine.startup_error or "hermes-lcm store unavailable")
    try:
        return rollup_command(engine.core.rollups, rest)
    except ValueError as exc:
        raise UsageError(str(exc)) from exc


def _view(t: Target, rest: list[str]) -> dict[str, Any] | str:
    """``/lcm view [ID] [session=S]``: the page for this session's conversation (or one of its owner's),
    path answered. One owner rule for both forms: the caller's owner (``Target.viewer``) must own the
    conversation, whether named by id or by a session; another owner's reads as a missing one."""
    viewer = t.viewer
    if (
        t.engine is None
        or t.engine.core is None
        or t.engine.core.binding.conversation_id is None
        or viewer is None
        or viewer.core is None
        or viewer.core.binding.conversation_id is None
    ):
        raise UsageError("no live session yet: send one normal message, then /lcm view")
    core = t.engine.core
    reach = reach_of(viewer)
    wanted = core.binding.conversation_id
    if t.asked is not None and reach is not None and wanted not in reach:
        raise UsageError(
            no_session(
                t.asked,
                [e for e in live_engines() if isinstance(e, LcmEngine)],
                t.caller,
                t.caller_engine,
            )
        )
    if rest:
        if len(rest) > 1 or not rest[0].isdigit():
            raise UsageError("usage: /lcm view [conversation id]")
        wanted = int(rest[0])
    if (
        reach is not None and wanted not in reach
    ):  # another owner's conversation reads as a missing one
        raise UsageError(f"no conversation {wanted}")
    try:
        written = write_page(core.store, None, wanted, growth_of=reach)
    except ViewError as exc:
        raise UsageError(str(exc)) from exc
    return (
        f"Wrote {written['path']} ({written['messages']:,} messages, {written['summaries']:,} summaries, "
        f"{written['bytes'] / 1024:,.0f} KB). Open it in a browser: {Path(written['path']).as_uri()}"
    )


def _help(t: Target, rest: list[str]) -> str:
    return HELP


Verb = Callable[[Target, list[str]], "dict[str, Any] | str"]

DOCTOR: dict[str, Verb] = {
    "clean": _clean,
    "repair": _repair,
    "source": _source,
    "retention": _retention,
}

VERBS: dict[str, Verb] = {
    "status": _status,
    "doctor": _doctor,
    "backup": _backup,
    "gc-payloads": _gc_payloads,
    "rotate": _rotate,
    "redact": _redact,
    "preset": _preset,
    "embed": _embed,
    "rollups": _rollups,
    "view": _view,
    "help": _help,
}

# What the host's command list shows beside /lcm: every verb, so none is found only by reading help.
ARGS_HINT = "[" + "|".join(VERBS) + "]"
DESCRIPTION = "hermes-lcm: " + ", ".join(v for v in VERBS if v != "help") + " (/lcm help)"

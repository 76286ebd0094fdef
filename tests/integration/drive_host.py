"""Drive the real Hermes host in this process, the way its one-shot CLI path builds an agent.

Run as ``python drive_host.py SPEC.json`` with ``HERMES_HOME`` pointing at a prepared home
(see harness.py). The spec is a JSON object:

``turns``           list of user messages, one ``run_conversation`` call each
``report``          where to write the JSON report
``expect_engine``   the context-engine name that must be active (else exit code 3)
``history``         ``"api"`` (default): feed ``result["messages"]`` back as
                    ``conversation_history`` every turn (gateway style: the host reloads the
                    compacted transcript);
                    ``"client"``: pass the raw user/assistant transcript an OpenAI client would
                    resend (the API server's /v1/chat/completions style: never compacted);
                    ``"none"``: pass no history (the agent keeps its own state);
                    ``"db"``: reload the transcript from the host's session database every
                    turn (the gateway's resume path: no private keys survive)
``agent_per_turn``  build a fresh AIAgent for every turn, same session id (gateway style)
``toolsets``        explicit ``enabled_toolsets``; default: the config's toolsets for "cli"
``host_defaults``   build the agent as the CLI does for a user: memory and context files
                    read (no ``skip_memory``), so the host's background memory/skill review
                    forks run at their default intervals, and the session title is made after
                    each exchange as the CLI makes it; the driver then waits for every fork
                    to finish before it ends the session
``curator``         after the turns, run one curator pass with consolidation (the host's
                    ``run_curator_review``, on its ``curator-review`` thread) and wait for it
``think_seconds``   a pause after each turn but the last (a user reading the reply and typing
                    the next message), not counted in any turn's ``seconds``
``think_until_idle`` the pause ends early once the engine's preparer (deferred compaction) is
                    idle: a longer pause would give it nothing more to do, so a benchmark of long
                    think times need not sleep them out
``branch_before``   turn indexes before which the session is forked the way the gateway's
                    ``/branch`` does it: the transcript copied into a new session in the host's
                    session database, a new agent on the new session id, the history reloaded
                    from the database

The agent is built from config.yaml like ``hermes -z`` does (resolve_runtime_provider,
platform toolsets for "cli", SessionDB), with quiet mode, no memory and no context files.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any


def _think(seconds: float, agent: Any, until_idle: bool) -> None:
    """The user's pause between turns (see ``think_until_idle``)."""
    end = time.monotonic() + seconds
    core = getattr(agent.context_compressor, "core", None)
    preparer = getattr(core, "preparer", None) if until_idle else None
    if until_idle and preparer is None:
        return  # inline compaction: nothing works between turns, so nothing to wait for
    while time.monotonic() < end:
        if preparer is not None and preparer.busy_with is None and not preparer.job.pending():
            return
        time.sleep(min(0.05, max(0.0, end - time.monotonic())))


def _plugin_summary() -> list[dict[str, Any]]:
    from hermes_cli.plugins import get_plugin_manager

    out = []
    for key, loaded in get_plugin_manager()._plugins.items():
        if getattr(loaded.manifest, "source", "") == "bundled":
            continue  # the host's own plugins; not interesting here
        module = getattr(loaded, "module", None)
        out.append(
            {
                "key": key,
                "name": loaded.manifest.name,
                "source": loaded.manifest.source,
                "kind": loaded.manifest.kind,
                "path": loaded.manifest.path,
                "enabled": bool(loaded.enabled),
                "error": loaded.error,
                "module": getattr(module, "__name__", None),
                "module_file": getattr(module, "__file__", None),
                "hooks": list(getattr(loaded, "hooks_registered", []) or []),
            }
        )
    return out


def _build_agent(spec: dict[str, Any], session_db: Any, session_id: str | None) -> Any:
    from hermes_cli.config import load_config
    from hermes_cli.runtime_provider import resolve_runtime_provider
    from hermes_cli.tools_config import _get_platform_tools
    from run_agent import AIAgent

    cfg = load_config()
    model_cfg = cfg.get("model") or {}
    model = model_cfg.get("default") if isinstance(model_cfg, dict) else str(model_cfg)
    runtime = resolve_runtime_provider(requested=None, target_model=model or None)
    toolsets = spec.get("toolsets")
    if toolsets is None:
        toolsets = sorted(_get_platform_tools(cfg, "cli"))
    return AIAgent(
        api_key=runtime.get("api_key"),
        base_url=runtime.get("base_url"),
        provider=runtime.get("provider"),
        api_mode=runtime.get("api_mode"),
        model=model,
        enabled_toolsets=toolsets,
        quiet_mode=True,
        platform="cli",
        session_db=session_db,
        session_id=session_id,
        skip_memory=not spec.get("host_defaults"),
        skip_context_files=not spec.get("host_defaults"),
    )


def _branch(session_db: Any, parent_id: str) -> str:
    """Fork ``parent_id`` as gateway/slash_commands.py ``_handle_branch_command`` does."""
    import uuid

    from agent.turn_context import extract_api_content_sidecar

    new_id = f"branch_{uuid.uuid4().hex[:8]}"
    history = session_db.get_messages_as_conversation(parent_id)
    session_db.create_session(
        session_id=new_id,
        source="cli",
        model_config={"_branched_from": parent_id},
        parent_session_id=parent_id,
    )
    for msg in history:
        session_db.append_message(
            session_id=new_id,
            role=msg.get("role", "user"),
            content=msg.get("content"),
            tool_name=msg.get("tool_name") or msg.get("name"),
            tool_calls=msg.get("tool_calls"),
            tool_call_id=msg.get("tool_call_id"),
            finish_reason=msg.get("finish_reason"),
            reasoning=msg.get("reasoning"),
            reasoning_content=msg.get("reasoning_content"),
            reasoning_details=msg.get("reasoning_details"),
            codex_reasoning_items=msg.get("codex_reasoning_items"),
            codex_message_items=msg.get("codex_message_items"),
            api_content=extract_api_content_sidecar(msg),
        )
    return new_id


def _engine_state(engine: Any) -> dict[str, Any]:
    keys = (
        "name",
        "context_length",
        "threshold_tokens",
        "compression_count",
        "last_prompt_tokens",
        "protect_first_n",
        "protect_last_n",
    )
    out: dict[str, Any] = {}
    for k in keys:
        try:
            v = getattr(engine, k)
            json.dumps(v)
            out[k] = v
        except Exception:
            out[k] = None
    out["class"] = f"{type(engine).__module__}.{type(engine).__qualname__}"
    try:  # our engine's status report (what /lcm status and lcm_status show)
        out["status"] = (
            json.loads(json.dumps(engine.get_status(), default=str))
            if hasattr(engine, "get_status")
            else None
        )
    except Exception as exc:
        out["status"] = {"error": str(exc)}
    return out


def main(argv: list[str]) -> int:
    spec_path = argv[1]
    with open(spec_path, encoding="utf-8") as fh:
        spec = json.load(fh)
    report: dict[str, Any] = {
        "hermes_home": os.environ.get("HERMES_HOME"),
        "turns": [],
        "error": None,
    }
    write_report = report_writer(spec, report)

    code = 0
    agent = None
    session_db = None
    history: list[dict[str, Any]] = []
    client_transcript: list[dict[str, Any]] = []
    try:
        import hermes_state
        from hermes_cli.plugins import discover_plugins

        discover_plugins()
        report["plugins"] = _plugin_summary()
        session_db = hermes_state.SessionDB()
        agent = _build_agent(spec, session_db, None)
        engine = agent.context_compressor
        report["engine"] = _engine_state(engine)
        report["tools"] = sorted(t["function"]["name"] for t in (agent.tools or []))
        report["context_engine_tools"] = sorted(getattr(agent, "_context_engine_tool_names", set()))
        report["session_id_initial"] = agent.session_id
        print(f"ENGINE {engine.name}", flush=True)
        expect = spec.get("expect_engine")
        if expect and engine.name != expect:
            report["error"] = f"context engine is {engine.name!r}, expected {expect!r}"
            write_report()
            return 3
        for i, message in enumerate(spec["turns"]):
            if i and spec.get("think_seconds"):
                _think(float(spec["think_seconds"]), agent, bool(spec.get("think_until_idle")))
            if spec.get("agent_per_turn") and i > 0:
                sid = agent.session_id
                agent.close()
                agent = _build_agent(spec, session_db, sid)
            mode = spec.get("history", "api")
            hist = {"api": history, "client": list(client_transcript)}.get(mode)
            if i in (spec.get("branch_before") or []):
                sid = _branch(session_db, agent.session_id)
                report.setdefault("branches", []).append(sid)
                agent.close()
                agent = _build_agent(spec, session_db, sid)
                hist = session_db.get_messages_as_conversation(sid, repair_alternation=True)
            elif mode == "db" and i > 0:
                hist = session_db.get_messages_as_conversation(
                    agent.session_id, repair_alternation=True
                )
            t0 = time.time()
            result = agent.run_conversation(message, conversation_history=hist)
            dt = time.time() - t0
            history = list(result.get("messages") or [])
            if spec.get("host_defaults"):
                _title(session_db, agent, message, result, history)
            client_transcript.append({"role": "user", "content": message})
            client_transcript.append(
                {"role": "assistant", "content": result.get("final_response") or ""}
            )
            engine = agent.context_compressor
            report["turns"].append(
                {
                    "i": i,
                    "seconds": round(dt, 3),
                    "started_at": t0,
                    "ended_at": time.time(),
                    "final_response": result.get("final_response"),
                    "api_calls": result.get("api_calls"),
                    "completed": result.get("completed"),
                    "failed": result.get("failed"),
                    "exit_reason": result.get("turn_exit_reason"),
                    "session_id": result.get("session_id"),
                    "messages": len(history),
                    "roles": "".join((m.get("role") or "?")[0] for m in history),
                    "compression_count": getattr(engine, "compression_count", None),
                    "last_prompt_tokens": result.get("last_prompt_tokens"),
                }
            )
            write_report()
        report["forks_waited"] = _wait_for_forks()
        if spec.get(
            "curator"
        ):  # the curator's pass, as its schedule would start it (its own thread)
            from agent.curator import run_curator_review

            report["curator"] = run_curator_review(consolidate=True)
            report["forks_waited"] += _wait_for_forks()
        report["session_id"] = agent.session_id
        report["engine_final"] = _engine_state(agent.context_compressor)
        report["final_history"] = history
    except Exception as exc:
        report["error"] = f"{type(exc).__name__}: {exc}"
        report["traceback"] = traceback.format_exc()
        code = 2
    finally:
        shut_down(agent, history, session_db, report)
        write_report()
    return code


def _title(
    session_db: Any, agent: Any, message: str, result: dict[str, Any], history: list[Any]
) -> None:
    """What the interactive CLI does after an exchange (cli.py): the host's session title, made by
    its auxiliary LLM on its ``auto-title`` thread (the first exchanges only)."""
    from agent.title_generator import maybe_auto_title

    if result.get("final_response") and not result.get("failed"):
        maybe_auto_title(
            session_db,
            agent.session_id,
            message,
            result["final_response"],
            history,
            main_runtime={
                "model": agent.model,
                "provider": agent.provider,
                "base_url": agent.base_url,
                "api_key": agent.api_key,
                "api_mode": agent.api_mode,
            },
        )


def _wait_for_forks(limit_s: float = 120.0) -> int:
    """Join the host's background review/curator and delegation threads still running (daemons: the
    hard exit below would cut them off mid-turn); returns how many were waited for."""
    import threading

    from tools import async_delegation  # the host's delegations: their pool threads never end

    deadline = time.time() + limit_s
    forks = [
        t
        for t in threading.enumerate()
        if t.is_alive() and t.name in ("bg-review", "curator-review", "auto-title")
    ]
    for thread in forks:
        thread.join(max(0.0, deadline - time.time()))
    delegations = async_delegation.active_count()
    while async_delegation.active_count() and time.time() < deadline:
        time.sleep(0.05)
    return len(forks) + delegations


def report_writer(spec: dict[str, Any], report: dict[str, Any]) -> Callable[[], None]:
    """Writes ``report`` (with the elapsed time) where the test reads it; called after every step."""
    started = time.time()

    def write_report() -> None:
        report["elapsed_s"] = round(time.time() - started, 3)
        with open(spec["report"], "w", encoding="utf-8") as fh:
            json.dump(report, fh, indent=1, default=str)

    return write_report


def shut_down(
    agent: Any, history: list[dict[str, Any]], session_db: Any, report: dict[str, Any]
) -> None:
    """End the session the way the host does at exit; a failure is reported, never raised."""
    if agent is not None:
        try:
            agent.shutdown_memory_provider(history)  # engine.on_session_end(sid, messages)
        except Exception:
            report.setdefault("shutdown_errors", []).append(traceback.format_exc())
        try:
            agent.close()
        except Exception:
            report.setdefault("shutdown_errors", []).append(traceback.format_exc())
    if session_db is not None:
        with contextlib.suppress(Exception):
            session_db.close()


if __name__ == "__main__":
    rc = main(sys.argv)
    sys.stdout.flush()
    sys.stderr.flush()
    # Like `hermes -z`: hard exit so host worker threads cannot keep the process alive.
    os._exit(rc)

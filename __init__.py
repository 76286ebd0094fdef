"""hermes-lcm: lossless context management for Hermes Agent.

Hermes imports this package as ``hermes_plugins.hermes_lcm`` (a plugin dir) or
``hermes_lcm`` (pip entry point) and calls :func:`register` once per process.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from pathlib import Path
from typing import Any


def __getattr__(name: str) -> str:
    """``hermes_lcm.__version__``, from version.py: this entry point imports nothing at load time
    (test runners may load it outside its package), and version.py imports nothing of the engine."""
    if name == "__version__":
        from .version import __version__

        return __version__
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def register(ctx: Any) -> None:
    """Give the host an engine template, the ingest hooks and (opt-in) ``/lcm``.

    A plugin the host cannot import is only a line in Hermes' log, and the agent goes on with the
    built-in compressor: so a failed import, or a config that does not select this engine, is also
    said on stderr, where the person starting Hermes sees it, with the command that fixes it.
    """
    try:
        from .engine import LcmEngine
        from .host.hooks import register_hooks
    except ImportError as exc:
        message = _not_loaded(exc)
        _tell(message)
        raise ImportError(message) from exc

    engine = LcmEngine()
    ctx.register_context_engine(engine)
    register_hooks(ctx)
    check_host_config()
    if engine.config.enable_slash_command and hasattr(ctx, "register_command"):
        from .command import ARGS_HINT, DESCRIPTION, handle_command

        ctx.register_command("lcm", handle_command, description=DESCRIPTION, args_hint=ARGS_HINT)


def _not_loaded(exc: ImportError) -> str:
    from .host import install as hostinstall

    missing = hostinstall.missing_dependencies(_checkout())
    lacks = f" (this Python lacks {', '.join(missing)})" if missing else ""
    return (
        f"hermes-lcm: plugin installed but not loaded: {exc}{lacks}. Hermes falls back to its built-in "
        f"compressor and stores nothing. Fix: {hostinstall.fix_command(sys.executable, _checkout())}  "
        f"(or run scripts/install.sh in the checkout), then restart Hermes."
    )


def _checkout() -> Path:
    return Path(__file__).resolve().parent


def check_host_config() -> None:
    """Say on stderr when the host's config keeps this engine from being used (once per process)."""
    global _CONFIG_CHECKED
    if _CONFIG_CHECKED:
        return
    _CONFIG_CHECKED = True
    try:
        from .host import install as hostinstall
        from .host.calls import host_home

        home = Path(host_home())
        problems = [
            p
            for p in hostinstall.config_problems(home, hostinstall.host_engines())
            if "plugins." not in p
        ]  # we are loaded: the plugin settings are fine
    except Exception:  # noqa: BLE001 - a check, never a reason to fail loading
        return
    for problem in problems:
        _tell(f"hermes-lcm: loaded but not in use: {problem} ({home / 'config.yaml'})")


def _tell(message: str) -> None:
    logging.getLogger("hermes_lcm").error(message)
    with contextlib.suppress(
        OSError, ValueError
    ):  # no usable stderr (a service): the log line is the record
        print(message, file=sys.stderr, flush=True)


_CONFIG_CHECKED = False

"""hermes-lcm: lossless context management for Hermes Agent.

Hermes imports this package as ``hermes_plugins.hermes_lcm`` (a plugin dir) or
``hermes_lcm`` (pip entry point) and calls :func:`register` once per process.
"""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> str:
    """``hermes_lcm.__version__``, from version.py: this entry point imports nothing at load time
    (test runners may load it outside its package), and version.py imports nothing of the engine."""
    if name == "__version__":
        from .version import __version__

        return __version__
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def register(ctx: Any) -> None:
    """Give the host an engine template, the ingest hooks and (opt-in) ``/lcm``."""
    from .engine import LcmEngine
    from .hooks import register_hooks

    engine = LcmEngine()
    ctx.register_context_engine(engine)
    register_hooks(ctx)
    if engine.config.enable_slash_command and hasattr(ctx, "register_command"):
        from .command import handle_command

        ctx.register_command("lcm", handle_command,
                             description="hermes-lcm: status, doctor (clean, repair, source, retention), backup, "
                                         "rotate, preset",
                             args_hint="[status|doctor|backup|rotate|preset|help]")

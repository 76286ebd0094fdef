"""``lcm rollups`` for the ``lcm`` CLI: the temporal rollups' status, ``build`` and ``rebuild``.

A layer of its own just below the surfaces (like cli_embed.py), so cli.py registers it with one
line. ``status`` reads; ``build`` and ``rebuild`` open a writable connection of their own and run
the same service the background job runs (rollups.py), with the standalone summary route.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from ..base import progress as pg
from ..store import Store, open_store, writable_target

Add = Callable[..., argparse.ArgumentParser]
Fail = Callable[..., Exception]  # cli.CliError(message, code)
EXIT_USAGE = 2


def register(add: Add, config: Callable[[argparse.Namespace], Any], fail: Fail) -> None:
    """Add the ``rollups`` verb through cli.parser's ``add``; ``config`` gives the settings in force."""

    def handler(store: Store, args: argparse.Namespace) -> dict[str, Any]:
        from ..compaction.rollups import (
            Rollups,
            command,
            standalone_summarizer,
        )  # lazy: the summarizer's httpx

        if args.json:
            args.format = "json"
        settings = config(args)
        words = [args.action, *args.rest]
        target = store if args.action == "status" else open_store(writable_target(store))
        rollups = Rollups(settings, target, standalone_summarizer(settings), retry_after_s=0.0)
        try:
            with pg.start(f"rollups {args.action}", unit="periods") as line:
                return command(rollups, words, line.update)
        except ValueError as exc:
            raise fail(str(exc), EXIT_USAGE) from exc

    cmd = add(
        "rollups",
        handler,
        "temporal rollups (day/week/month summaries): status; WRITES with build "
        "(builds every stale period now) or rebuild day|week|month|all [YYYY-MM-DD] (marks them stale)",
    )
    cmd.add_argument("action", nargs="?", default="status", choices=("status", "build", "rebuild"))
    cmd.add_argument(
        "rest", nargs="*", help="for rebuild: day|week|month|all, then an optional YYYY-MM-DD"
    )
    cmd.add_argument("--json", action="store_true", help="JSON output (the default format)")

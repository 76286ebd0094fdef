"""``lcm rollups`` for the ``lcm`` CLI: the temporal rollups' status, ``build`` and ``rebuild``.

``status`` reads; ``build`` and ``rebuild`` open a writable connection of their own and run
the same service the background job runs (rollups.py), with the standalone summary route.
"""

from __future__ import annotations

import argparse
from typing import Any

from ..base import progress as pg
from ..store import Store, open_store, writable_target
from . import common
from .common import Subparsers
from .output import EXIT_USAGE, CliError


def register(subparsers: Subparsers) -> None:
    cmd = common.verb(
        subparsers,
        "rollups",
        handler,
        "temporal rollups (day/week/month summaries): status; WRITES with build "
        "(builds every stale period now) or rebuild day|week|month|all [YYYY-MM-DD] (marks them stale)",
    )
    cmd.add_argument(
        "action",
        nargs="?",
        default="status",
        choices=("status", "build", "rebuild"),
        metavar="status|build|rebuild",
        help="status reads; build and rebuild write",
    )
    cmd.add_argument(
        "rest", nargs="*", help="for rebuild: day|week|month|all, then an optional YYYY-MM-DD"
    )
    common.json_flag(cmd)


def handler(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    # lazy: the summarizer's httpx
    from ..compaction.rollups import Rollups, command, standalone_summarizer

    settings = common.settings()
    words = [args.action, *args.rest]
    target = store if args.action == "status" else open_store(writable_target(store))
    rollups = Rollups(settings, target, standalone_summarizer(settings), retry_after_s=0.0)
    try:
        with pg.start(f"rollups {args.action}", unit="periods") as line:
            return command(rollups, words, line.update)
    except ValueError as exc:
        raise CliError(str(exc), EXIT_USAGE) from exc

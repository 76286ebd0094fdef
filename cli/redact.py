"""``lcm redact``: find and (``--apply``) rewrite the secrets stored before redaction was on; its
arguments and handler (the work is maintenance/scrub.py)."""

from __future__ import annotations

import argparse
from typing import Any

from ..base import progress as pg
from ..store import Store, open_store
from . import common
from . import pg as cli_pg
from .common import Subparsers


def register(subparsers: Subparsers) -> None:
    cmd = common.verb(
        subparsers,
        "redact",
        handler,
        "secrets stored before redaction was on: rows and secrets per table and kind "
        "(a dry run, no secret shown); WRITES with --apply: a backup, then the rewrite",
    )
    common.apply_flag(
        cmd,
        "back up, then rewrite rows, FTS and payload files; VACUUM (the backup keeps the secrets)",
    )
    cmd.add_argument(
        "--patterns", help="the policy to use instead of LCM_SENSITIVE_PATTERNS (same syntax)"
    )


def handler(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    # lazy: registering a verb must not import its work (`lcm status` speed)
    from ..maintenance import backups, scrub

    settings = common.settings()
    patterns = args.patterns if args.patterns is not None else settings.sensitive_patterns
    # the CLI's own view is read-only
    target = open_store(cli_pg.target_of(store)) if args.apply else store
    with pg.start("redact") as line:  # rows rewritten; the total is unknown until the walk ends
        return scrub.command(
            target,
            patterns,
            settings.large_output_preview_chars,
            backups.backup_dir(store.path, settings.backup_dir),
            args.apply,
            settings.sensitive_patterns_enabled,
            settings.sensitive_patterns,
            on_row=lambda _table, _row: line.advance(),
        )

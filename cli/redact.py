"""``lcm redact`` for the ``lcm`` CLI: its arguments and handler (the work is scrub.py).

A layer of its own just below the surfaces, so cli.py registers it with one line."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from ..base import progress as pg
from ..store import Store, open_store
from . import pg as cli_pg

Add = Callable[..., argparse.ArgumentParser]


def register(add: Add, config: Callable[[argparse.Namespace], Any]) -> None:
    """Add the ``redact`` verb through cli.parser's ``add``; ``config`` gives the settings in force."""

    def handler(store: Store, args: argparse.Namespace) -> dict[str, Any]:
        # lazy: registering a verb must not import its work (`lcm status` speed)
        from ..maintenance import backups, scrub

        settings = config(args)
        patterns = args.patterns if args.patterns is not None else settings.sensitive_patterns
        target = (
            open_store(cli_pg.target_of(store)) if args.apply else store
        )  # the CLI's own view is read-only
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

    cmd = add(
        "redact",
        handler,
        "secrets stored before redaction was on: rows and secrets per table and kind "
        "(a dry run, no secret shown); WRITES with --apply: a backup, then the rewrite",
    )
    cmd.add_argument(
        "--apply",
        action="store_true",
        help="back up, then rewrite rows, FTS and payload files; VACUUM (the backup keeps the secrets)",
    )
    cmd.add_argument(
        "--patterns", help="the policy to use instead of LCM_SENSITIVE_PATTERNS (same syntax)"
    )

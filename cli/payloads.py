"""``lcm gc-payloads`` and ``lcm backfill-outputs``: the operator's tools for payload files.

Both preview by default and write only with ``--apply``, after a verified backup of the database.
They open their own writable connection (the rest of ``lcm`` is read-only); progress goes to stderr
through progress.py (one live line on a terminal; the backfill's plain ``lcm: ...`` lines when stderr
is not one, which scripts read; ``--quiet`` or ``LCM_PROGRESS=never``: nothing), the result to stdout.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ..base import progress as pg
from ..store import Store, open_store
from . import common
from . import pg as cli_pg
from .common import Subparsers
from .output import CliError


def reporter(label: str, quiet: bool = False, notes: bool = True) -> pg.Reporter:
    """The verb's progress on stderr (``quiet``: none at all)."""
    return pg.start(label, env={pg.ENV: "never"} if quiet else None, notes=notes)


def register(subparsers: Subparsers) -> None:
    g = common.verb(
        subparsers,
        "gc-payloads",
        gc,
        "payload files no message or summary references: preview, or --apply (WRITES: "
        "a backup, then removes them)",
    )
    common.apply_flag(g, "back the database up, then remove the orphan files")
    g.add_argument(
        "--grace-seconds",
        type=float,
        default=600.0,
        help="keep files younger than this (a writer may be about to reference them; default 600)",
    )
    b = common.verb(
        subparsers,
        "backfill-outputs",
        fill,
        "move large inline tool results to payload files: dry run, --apply --manifest "
        "PATH (WRITES, backup first), --rollback PATH [--apply]",
    )
    b.add_argument(
        "--threshold-chars",
        type=int,
        help="rows of at least this many characters (default: large_output_externalization_threshold_chars)",
    )
    common.apply_flag(b, "write (default: a dry run)")
    b.add_argument(
        "--manifest", help="the manifest to write (resumable: the same path continues a run)"
    )
    b.add_argument(
        "--rollback",
        metavar="PATH",
        help="restore the rows a manifest lists (dry run without --apply)",
    )
    b.add_argument("--quiet", action="store_true", help="no progress lines on stderr")


def gc(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    # lazy: registering a verb must not import its work (`lcm status` speed)
    from ..maintenance import backups, repairs

    grace = float(args.grace_seconds)
    if not args.apply:
        return repairs.gc_payloads_scan(store, grace)
    writable = open_store(cli_pg.target_of(store))
    try:
        with reporter("gc-payloads: backup", notes=False) as line:
            return repairs.gc_payloads_apply(
                writable,
                backups.backup_dir(store.path, common.settings().backup_dir),
                grace,
                line.update,
            )
    except backups.MaintenanceError as exc:
        raise CliError(str(exc)) from exc


def fill(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    from ..base.sensitive import redactor_for
    from ..maintenance import backfill, backups

    config = common.settings()
    threshold = (
        config.large_output_externalization_threshold_chars
        if args.threshold_chars is None
        else args.threshold_chars
    )
    if threshold < 1:
        raise CliError("--threshold-chars must be at least 1")
    preview = config.large_output_preview_chars
    directory = backups.backup_dir(store.path, config.backup_dir)
    try:
        with reporter("backfill-outputs", args.quiet) as line:
            if args.rollback:
                return backfill.rollback(
                    open_store(cli_pg.target_of(store)),
                    Path(args.rollback),
                    directory,
                    do_apply=args.apply,
                    progress=line.note,
                    tick=line.update,
                )
            if not args.apply:
                return backfill.scan(store, threshold, preview, line.note, line.update)
            if not args.manifest:
                raise CliError(
                    "--apply needs --manifest PATH (where the rewritten rows are listed for --rollback)"
                )
            writable = open_store(cli_pg.target_of(store))
            redactor = (
                redactor_for(
                    config.sensitive_patterns_enabled,
                    config.sensitive_patterns,
                    writable.secret("redaction"),
                )
                if config.sensitive_patterns_enabled
                else None
            )
            return backfill.apply(
                writable,
                Path(args.manifest),
                directory,
                threshold,
                preview,
                redactor,
                line.note,
                line.update,
            )
    except backups.MaintenanceError as exc:
        raise CliError(str(exc)) from exc

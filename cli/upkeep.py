"""``lcm doctor``, ``backup`` and ``retention``: looking after the database. ``doctor`` runs the
checks with guidance, even when there is no database yet (whether Hermes can make one is then the
news); ``backup`` WRITES one verified backup file; ``retention`` says what the database holds by
conversation and age, and what bounds its growth."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from ..base import progress as pg
from ..store import Store, open_store
from . import common
from . import pg as cli_pg
from .common import ID, PAGE_MAX, Subparsers, bounded
from .database import no_database
from .output import EXIT_DATABASE, EXIT_NOT_FOUND, EXIT_USAGE, EXIT_WRITE, CliError


def register(subparsers: Subparsers) -> None:
    d = common.verb(
        subparsers, "doctor", doctor, "read-only health checks with guidance", store="if-present"
    )
    d.add_argument(
        "--deep", action="store_true", help="also run FTS5 integrity-check (writable, rolled back)"
    )
    d.add_argument(
        "repair",
        nargs="*",
        metavar="repair summaries",
        help="broken summaries (empty, an error text, a refusal, ...): a dry run; WRITES with "
        "--apply (a backup, then each made again from its sources offline, the old text kept)",
    )
    d.add_argument("--conversation", type=ID, metavar="ID", help="repair only this conversation")
    common.apply_flag(d, "write the repair (default: a dry run)")
    b = common.verb(
        subparsers,
        "backup",
        backup,
        "WRITES one verified backup file (online backup API); the database is untouched",
    )
    b.add_argument("--dest", help="directory (default LCM_BACKUP_DIR or <db dir>/lcm-backups)")
    r = common.verb(
        subparsers,
        "retention",
        retention,
        "what the database holds by conversation and age, and how to bound it",
    )
    r.add_argument(
        "--top",
        type=bounded(1, PAGE_MAX),
        default=20,
        help=f"list this many of the largest conversations (1-{PAGE_MAX})",
    )


def doctor(store: Store | None, args: argparse.Namespace) -> dict[str, Any]:
    from ..host import install as hostinstall
    from ..maintenance import doctor as mt
    from ..maintenance.checks import Check

    if args.repair:
        return _repair_summaries(store, args)

    host = hostinstall.install_report(common.hermes_home(dict(os.environ)), dict(os.environ))
    if store is None:  # no database yet: whether Hermes can make one is the news
        missing = no_database(Path(args.db_path), args.db_origin)
        args.exit_code = EXIT_DATABASE
        # the one stderr line every failure has
        args.error_line = f"{missing} ({missing.extra['hint']})"
        report = mt.checks_report(
            [
                Check("host", **host),
                Check("database", "fail", str(missing), str(missing.extra["hint"])),
            ],
            {"path": cli_pg.scrubbed(str(args.db_path)), "exists": False},
        )
        return {"error": str(missing), "exit_code": EXIT_DATABASE, **report}
    report_store = store
    if args.deep:
        report_store = open_store(cli_pg.target_of(store))
    loaded = common.loaded()
    report = mt.doctor_report(
        report_store,
        deep=args.deep,
        config=loaded.config,
        config_problems=loaded.problems,
        host=host,
    )
    if report["status"] == "fail":
        args.exit_code = EXIT_NOT_FOUND
    return report


def _repair_summaries(store: Store | None, args: argparse.Namespace) -> dict[str, Any]:
    from ..maintenance import backups, summary_health

    if args.repair != ["repair", "summaries"]:
        raise CliError(
            f"unknown doctor command {' '.join(args.repair)!r}; try: repair summaries", EXIT_USAGE
        )
    if store is None:
        raise no_database(Path(args.db_path), args.db_origin)
    target = open_store(cli_pg.target_of(store)) if args.apply else store
    directory = backups.backup_dir(store.path, common.settings().backup_dir)
    return summary_health.repair(
        target, directory, conversation_id=args.conversation, write=args.apply
    )


def backup(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    from ..maintenance import backups

    directory = (
        Path(args.dest)
        if args.dest
        else backups.backup_dir(store.path, common.settings().backup_dir)
    )
    blocker = next(
        (p for p in (directory, *directory.parents) if p.exists() and not p.is_dir()), None
    )
    if blocker is not None:
        raise CliError(f"cannot write the backup: {blocker} is not a directory", EXIT_WRITE)
    if cli_pg.is_url(store.path):
        result, args.exit_code = cli_pg.backup(store, directory)
        return result
    # Ctrl-C mid-copy: the temp file goes, no backup is left
    with pg.start("backup", unit="pages") as line:
        saved = backups.backup(store, directory, progress=line.update)
    return {
        "status": "ok",
        "backup": saved.path,
        "bytes": saved.bytes,
        "seconds": saved.seconds,
        "restore": "stop Hermes, move lcm.db, lcm.db-wal, lcm.db-shm aside, copy the backup to lcm.db, start it",
    }


def retention(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    from ..maintenance.retention import retention_report

    return retention_report(store, top=args.top)

"""``lcm import lcm-x``: bring an LCM-X database into hermes-lcm (the work is importers/lcmx.py).

A dry run with the reconciliation report unless ``--apply``; without ``--target-db`` the source is
upgraded in place and the original kept as ``<db>.lcm-x-backup``. The verb opens no ``--db``: its
source is usually not a hermes-lcm database yet."""

from __future__ import annotations

import argparse
from typing import Any

from ..base import progress as pg
from . import common
from .common import Subparsers
from .output import EXIT_DATABASE, EXIT_NOT_FOUND, CliError


def register(subparsers: Subparsers) -> None:
    i = common.verb(
        subparsers,
        "import",
        run,
        "import an LCM-X database (dry run unless --apply; WRITES with --apply): without "
        "--target-db it is upgraded in place, the original kept as <db>.lcm-x-backup",
        store="none",
    )
    i.add_argument("kind", choices=("lcm-x",), metavar="lcm-x", help="what the source is")
    i.add_argument("--source-db", required=True, help="the LCM-X database")
    i.add_argument(
        "--target-db",
        help="a hermes-lcm database to import into (default: upgrade the source in place)",
    )
    common.apply_flag(i, "write (default: a dry run with the reconciliation report)")
    common.json_flag(i)


def run(_store: None, args: argparse.Namespace) -> dict[str, Any]:
    from ..base import sensitive
    from ..importers.lcmx import ImportFailure
    from ..importers.lcmx import run_import as run_lcmx_import

    try:
        settings = common.settings()
        with pg.start("import lcm-x", unit="msgs") as line:
            out = run_lcmx_import(
                args.source_db,
                args.target_db,
                apply=args.apply,
                backup_dir=settings.backup_dir,
                redact_patterns=sensitive.redaction_patterns(settings),
                progress=line.update,
            )
    except ImportFailure as exc:
        raise CliError(str(exc), EXIT_DATABASE) from exc
    if not out.get("balanced", True) or not out.get("verify", {"ok": True})["ok"]:
        args.exit_code = EXIT_NOT_FOUND
    return out

"""``lcm migrate-to-postgres``: the verb's arguments and handler (the work is importers/postgres.py).

A dry run unless ``--apply``; ``--verify`` alone compares a finished copy with its file. The verb
runs without opening ``--db`` (the source is named by ``--source-db``); progress goes to stderr
through progress.py, Ctrl-C exits 130 with the resume hint (every batch commits whole).
"""

from __future__ import annotations

import argparse
from typing import Any

from ..base import progress as pg
from . import common
from .common import Subparsers
from .output import EXIT_DATABASE, EXIT_NOT_FOUND, EXIT_USAGE, CliError

VERB = "migrate-to-postgres"


def register(subparsers: Subparsers) -> None:
    m = common.verb(
        subparsers,
        VERB,
        run,
        "copy a hermes-lcm SQLite file into PostgreSQL, ids kept: dry run, --apply (WRITES the "
        "target only; resumable), --verify",
        store="none",
    )
    m.add_argument(
        "--source-db", required=True, help="the hermes-lcm SQLite file (opened read-only)"
    )
    m.add_argument("--url", required=True, help="postgresql://... of an empty database or schema")
    common.apply_flag(m, "copy (default: a dry run); verifies at the end")
    m.add_argument(
        "--verify", action="store_true", help="compare counts, checksums and a search sample"
    )
    m.add_argument("--batch", type=int, default=2000, help="rows per transaction (default 2000)")


def run(_store: None, args: argparse.Namespace) -> dict[str, Any]:
    from ..importers import postgres as mp  # lazy: `lcm status` never imports the migration
    from ..store import is_url

    if not is_url(args.url):
        raise CliError("--url must be a postgresql:// URL", EXIT_USAGE)
    if not 1 <= args.batch <= 100_000:
        raise CliError("--batch must be between 1 and 100000", EXIT_USAGE)
    try:
        if args.apply:
            with pg.start("migrate-to-postgres", unit="rows") as line:
                out = mp.apply(args.source_db, args.url, args.batch, line.update, line.note)
        elif args.verify:
            out = mp.verify(args.source_db, args.url)
        else:
            out = mp.plan(args.source_db, args.url)
    except mp.MigrateError as exc:
        raise CliError(str(exc), EXIT_DATABASE) from exc
    checked = out.get("verify", out) if args.apply or args.verify else {"ok": True}
    if not checked.get("ok", True):
        args.exit_code = EXIT_NOT_FOUND
    return out

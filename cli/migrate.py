"""``lcm migrate-to-postgres``: the verb's arguments and handler (the work is migrate_pg.py).

A dry run unless ``--apply``; ``--verify`` alone compares a finished copy with its file. The verb
runs without opening ``--db`` (the source is named by ``--source-db``); progress goes to stderr
through progress.py, Ctrl-C exits 130 with the resume hint (every batch commits whole).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from ..base import progress as pg

Add = Callable[..., argparse.ArgumentParser]
Fail = Callable[..., Exception]
VERB = "migrate-to-postgres"


def register(add: Add, _config_of: Callable[[argparse.Namespace], Any], fail: Fail) -> None:
    def run(_store: Any, args: argparse.Namespace) -> dict[str, Any]:
        from ..importers import postgres as mp  # lazy: `lcm status` never imports the migration
        from ..store import is_url

        if not is_url(args.url):
            raise fail("--url must be a postgresql:// URL", 2)
        if not 1 <= args.batch <= 100_000:
            raise fail("--batch must be between 1 and 100000", 2)
        try:
            if args.apply:
                with pg.start("migrate-to-postgres", unit="rows") as line:
                    out = mp.apply(args.source_db, args.url, args.batch, line.update, line.note)
            elif args.verify:
                out = mp.verify(args.source_db, args.url)
            else:
                out = mp.plan(args.source_db, args.url)
        except mp.MigrateError as exc:
            raise fail(str(exc), 3) from exc
        checked = out.get("verify", out) if args.apply or args.verify else {"ok": True}
        if not checked.get("ok", True):
            args.exit_code = 1
        return out

    m = add(
        VERB,
        run,
        "copy a hermes-lcm SQLite file into PostgreSQL, ids kept: dry run, --apply (WRITES the "
        "target only; resumable), --verify",
    )
    m.add_argument(
        "--source-db", required=True, help="the hermes-lcm SQLite file (opened read-only)"
    )
    m.add_argument("--url", required=True, help="postgresql://... of an empty database or schema")
    m.add_argument(
        "--apply", action="store_true", help="copy (default: a dry run); verifies at the end"
    )
    m.add_argument(
        "--verify", action="store_true", help="compare counts, checksums and a search sample"
    )
    m.add_argument("--batch", type=int, default=2000, help="rows per transaction (default 2000)")

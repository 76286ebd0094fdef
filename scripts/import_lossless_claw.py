#!/usr/bin/env python3
"""Import OpenClaw history (a lossless-claw SQLite database, or OpenClaw JSONL session
files) into a hermes-lcm database.

Dry-run by default: prints what would be imported and writes nothing. --apply backs
the target up first (SQLite online backup), then imports; re-running with the same
--import-id imports only what is new. --json prints the reconciliation report
(scanned, eligible, would_import, imported, skipped_existing, skipped_empty,
invalid_rows, warnings, summary counters).

Exit codes: 0 ok; 2 usage; 3 the import is refused (a source or target that cannot be
used); 4 a file to write cannot be written (the backup directory, the target); 5 an
internal error (a bug: please report it). A failure is one line on stderr (a JSON object
with --json), never a traceback, and nothing is written.

Examples:
  python scripts/import_lossless_claw.py --source-db ~/.openclaw/lcm.db --include-summaries --json
  python scripts/import_lossless_claw.py --source-jsonl-dir ~/.openclaw/agents/main/sessions \\
      --agent main --import-id main-jsonl-2026-07 --apply
  python scripts/import_lossless_claw.py --state-dir ~/.openclaw --since 2026-07-01 --limit 50
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from datetime import UTC, datetime
from pathlib import Path

from checkout import load_package  # this folder is on sys.path when a script runs


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    src = p.add_argument_group("source (one family)")
    src.add_argument("--source-db", help="lossless-claw / OpenClaw lcm.db")
    src.add_argument(
        "--source-jsonl",
        action="append",
        default=[],
        help="OpenClaw session .jsonl file (repeatable)",
    )
    src.add_argument(
        "--source-jsonl-dir",
        action="append",
        default=[],
        help="directory of OpenClaw session .jsonl files (repeatable)",
    )
    src.add_argument(
        "--state-dir",
        help="an OpenClaw state directory: its agents/<id>/sessions/*.jsonl (as lossless-claw's "
        "migration reads ${OPENCLAW_STATE_DIR:-~/.openclaw})",
    )
    p.add_argument(
        "--since",
        help="JSONL only: session files modified at this ISO date or later (2026-07-01)",
    )
    p.add_argument(
        "--limit", type=int, help="JSONL only: at most this many session files, oldest first"
    )
    p.add_argument(
        "--target-db",
        help="hermes-lcm database (default: LCM_DATABASE_PATH or $HERMES_HOME/lcm.db)",
    )
    p.add_argument(
        "--agent", default="", help="OpenClaw agent id, recorded in the imported session ids"
    )
    p.add_argument(
        "--import-id",
        help="stable id that makes re-runs idempotent (default: derived from the paths)",
    )
    p.add_argument(
        "--include-summaries",
        action="store_true",
        help="also import the summary DAG (SQLite source)",
    )
    p.add_argument(
        "--apply", action="store_true", help="write (after a backup); default is a dry run"
    )
    p.add_argument(
        "--backup-dir",
        default="",
        help="where the pre-import backup goes (default <target dir>/lcm-backups)",
    )
    p.add_argument("--json", action="store_true", help="print the reconciliation report as JSON")
    args = p.parse_args(argv)
    if not (args.source_db or args.source_jsonl or args.source_jsonl_dir or args.state_dir):
        p.error("give --source-db, --state-dir or --source-jsonl / --source-jsonl-dir")
    if args.limit is not None and args.limit < 1:
        p.error("--limit must be at least 1")
    since = None
    if args.since:
        try:
            when = datetime.fromisoformat(args.since)
        except ValueError:
            p.error(f"--since {args.since!r} is not an ISO date (2026-07-01 or 2026-07-01T08:00)")
        since = (when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp()

    load_package()
    from hermes_lcm.base import progress
    from hermes_lcm.cli.database import resolve_db
    from hermes_lcm.cli.main import failure
    from hermes_lcm.cli.output import CliError
    from hermes_lcm.importers.claw import ImportFailure, run_import

    try:
        found = (
            Path(args.target_db).expanduser()
            if args.target_db
            else resolve_db(None, dict(os.environ))[0]
        )
        if not isinstance(found, Path):  # LCM_DATABASE_URL: the importer writes a SQLite file
            raise CliError(
                "the importer writes a SQLite file: give --target-db (a postgresql:// URL is set)",
                2,
            )
        target = found
        _check_writable(target, args.backup_dir, CliError)
        with progress.start(
            "import lossless-claw", unit="msgs"
        ) as line:  # a live line on a terminal only
            report = run_import(
                target_db=target,
                source_db=args.source_db,
                jsonl=args.source_jsonl,
                jsonl_dirs=args.source_jsonl_dir,
                import_id=args.import_id,
                include_summaries=args.include_summaries,
                apply=args.apply,
                agent=args.agent,
                backup_dir=args.backup_dir,
                redact_patterns=_redaction(),
                progress=line.update,
                state_dir=args.state_dir,
                since=since,
                limit=args.limit,
            )
    except KeyboardInterrupt:  # the import is one transaction: nothing of it was written
        return _fail(
            "interrupted; the import is one transaction, so nothing was written: run the same "
            "command again",
            130,
            args.json,
        )
    except ImportFailure as exc:
        return _fail(f"import refused: {exc}", 3, args.json)
    except Exception as exc:  # noqa: BLE001 - every failure is one line and an exit code, never a traceback
        error = failure(exc)
        return _fail(str(error), error.code, args.json)
    if args.json:
        print(json.dumps(report, indent=2, ensure_ascii=False))
        return 0
    if report["dry_run"]:
        mode = "DRY RUN (nothing written; add --apply)"
    elif report.get("note"):
        mode = "UP TO DATE (nothing new: nothing written, no backup)"
    else:
        mode = "APPLIED"
    print(
        f"{mode}: {report['source_kind']} -> {report['target']} (import id {report['import_id']})"
    )
    if report["backup_path"]:
        print(f"backup: {report['backup_path']}")
    for key in (
        "conversations",
        "scanned",
        "eligible",
        "would_import",
        "imported",
        "skipped_existing",
        "skipped_empty",
        "skipped_unsupported",
        "invalid_rows",
        "thinking_kept",
        "compactions_reported",
        "balanced",
    ):
        print(f"  {key:20} {report[key]}")
    print("  summaries           " + ", ".join(f"{k}={v}" for k, v in report["summaries"].items()))
    for key in ("parts_kept", "parts_reported"):  # lossless-claw message_parts per part_type
        if report.get(key):
            print(f"  {key:20} " + ", ".join(f"{k}={v}" for k, v in sorted(report[key].items())))
    for warning in report["warnings"][:20]:
        print(f"  warning: {warning}")
    if len(report["warnings"]) > 20:
        print(f"  ... {len(report['warnings']) - 20} more warnings (use --json)")
    return 0


def _redaction() -> str | None:
    """LCM_SENSITIVE_PATTERNS when redaction is on in the settings the engine would use here."""
    from hermes_lcm.base.sensitive import redaction_patterns
    from hermes_lcm.cli.common import settings

    return redaction_patterns(settings())


def _check_writable(target: Path, backup_dir: str, error: type[Exception]) -> None:
    """Refuse, before anything is written, a target or backup directory that cannot be one
    (a dry run says so too: it must not promise an apply that cannot run)."""
    if target.exists() and not target.is_file():
        raise error(f"target {target} is not a regular file", 4)
    for where in (target.parent, Path(backup_dir).expanduser() if backup_dir else None):
        if where is None:
            continue
        blocker = next((p for p in (where, *where.parents) if p.exists() and not p.is_dir()), None)
        if blocker is not None:
            raise error(f"cannot write under {where}: {blocker} is not a directory", 4)


def _fail(message: str, code: int, as_json: bool) -> int:
    text = " ".join(message.split())
    print(
        json.dumps({"error": text, "exit_code": code})
        if as_json
        else f"import_lossless_claw: error: {text}",
        file=sys.stderr,
    )
    return code


if __name__ == "__main__":
    raise SystemExit(main())

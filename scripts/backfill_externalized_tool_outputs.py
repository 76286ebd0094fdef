#!/usr/bin/env python3
"""Move large tool results stored inline into payload files (the same as ``lcm backfill-outputs``).

Dry run by default: the rows, characters and estimated tokens a backfill would move out, nothing
written. ``--apply --manifest PATH`` backs the database up, then rewrites the rows batch by batch
(the same PATH resumes a killed run). ``--rollback PATH`` previews restoring the rows a manifest
lists; add ``--apply`` to restore them. Progress goes to stderr, the report (JSON) to stdout.

Examples:
  python scripts/backfill_externalized_tool_outputs.py --db ~/.hermes/lcm.db
  python scripts/backfill_externalized_tool_outputs.py --apply --manifest ~/lcm-backfill.json
  python scripts/backfill_externalized_tool_outputs.py --rollback ~/lcm-backfill.json --apply
"""

from __future__ import annotations

import sys

from checkout import load_package  # this folder is on sys.path when a script runs


def main(argv: list[str] | None = None) -> int:
    load_package()
    from hermes_lcm.cli.main import main as lcm

    return lcm(["backfill-outputs", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    raise SystemExit(main())

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

import importlib.util
import sys
from pathlib import Path
from types import ModuleType


def _package() -> ModuleType:
    """hermes_lcm when installed; else this checkout loaded as the package (relative imports)."""
    try:
        import hermes_lcm

        return hermes_lcm
    except ImportError:
        root = Path(__file__).resolve().parents[1]
        spec = importlib.util.spec_from_file_location("hermes_lcm", root / "__init__.py",
                                                      submodule_search_locations=[str(root)])
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules["hermes_lcm"] = module
        spec.loader.exec_module(module)
        return module


def main(argv: list[str] | None = None) -> int:
    _package()
    from hermes_lcm.cli import main as lcm

    return lcm(["backfill-outputs", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    raise SystemExit(main())

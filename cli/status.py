"""``lcm status``: the fast overview (the database, its sizes and counts, the sidecars' state, the
engine's recent events). It is the verb people run first and scripts poll, so it must answer in
well under 150 ms: it reads headers and counts only, never a page-by-page walk of the file."""

from __future__ import annotations

import argparse
from typing import Any

from .. import __version__
from ..base.display import iso
from ..base.provenance import plugin_identity
from ..base.stats import cache_view
from ..dag import Dag
from ..store import Store
from . import assertions as cli_assertions
from . import common
from . import embed as cli_embed
from . import pg as cli_pg
from .common import Subparsers


def register(subparsers: Subparsers) -> None:
    common.verb(subparsers, "status", status, "database path, sizes, counts, recent engine events")


def _prepared(store: Store) -> dict[str, int]:
    """Summaries prepared between turns that no compaction has published yet (deferred mode)."""
    counts = store.prepared_counts()
    return {
        "conversations": len(counts),
        "summaries": sum(n for n, _ in counts.values()),
        "tokens": sum(t for _, t in counts.values()),
    }


def status(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    dag = Dag(store)
    facts = store.database_header()
    counts = store.table_counts()
    depth = store.depth_counts(None)
    newest = store.recent_events(5)
    settings = common.settings()
    return {
        "database_path": store.path,
        "chosen_by": args.db_origin,
        "lcm_version": __version__,
        **plugin_identity(ask_git=False),  # git's start would double the verb's time
        **cli_pg.sizes(store, facts),
        "schema_version": facts["schema_version"],
        "journal_mode": facts["journal_mode"],
        "counts": counts,
        "summaries_by_depth": depth,
        "lineage_problems": sorted(dag.lineage_problems()),
        "embeddings": cli_embed.status(store, settings),
        "temporal_rollups": store.rollup_stats(),
        "prepared_summaries": _prepared(store),
        "prompt_cache": cache_view(store.cache_usage(None)),
        "assertions": cli_assertions.status(store, settings),
        "recent_events": [
            {"at": iso(a), "level": lv, "kind": k, "detail": d[:300]} for a, lv, k, d in newest
        ],
    }

"""The doctor's report: every read-only check behind ``/lcm doctor`` and ``lcm doctor``, one verdict.

The checks themselves live by what they read: the database (checks.py) and the settings in force
(config_checks.py). The commands the report points to live beside it: backups (backups.py), the
narrow repairs (repairs.py), the cleanups (cleanup.py), rotate (rotate.py) and the retention
report (retention.py).

The rule everywhere: read-only first, apply second, backup before any mutation.
Each ``*_scan`` only reads. Each ``*_apply`` re-plans, returns ``status: noop``
without writing anything (not even a backup) when there is nothing to do, else
takes a verified backup, makes the one narrow change the scan described, and
re-scans so the caller can see the result. Running an apply twice is therefore
a no-op the second time.

Nothing here deletes a message or a summary node that belongs to a live
conversation: rotate only moves a frontier, repair only rebuilds indexes and
recreates triggers, source only relabels, lifecycle only removes empty rows.
Only ``clean`` removes data, whole conversations matched by the operator's own
ignore patterns, and only with ``LCM_DOCTOR_CLEAN_APPLY_ENABLED=true``.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import asdict
from typing import Any

from ..base.display import file_sizes
from ..base.peer_settings import is_settings_note
from ..base.redact import redact_value
from ..dag import Dag
from ..store import Store, is_url
from . import checks as ck
from . import config_checks as cc
from .checks import Check

_RANK = {"ok": 0, "skip": 0, "warn": 1, "fail": 2}


def doctor_report(
    store: Store,
    *,
    deep: bool = True,
    config: Any = None,
    config_problems: Iterable[str] = (),
    live_sessions: Iterable[str] = (),
    semantic: Any = None,
    host: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Every read-only check with a status, and guidance for each warning or failure. ``host``: whether
    Hermes' own Python loads the plugin and its config selects it (``hostinstall.install_report``)."""
    dag = Dag(store)
    facts = store.database_facts()
    checks = [ck.database_check(store, facts)]
    checks.extend(ck.fts_checks(ck.fts_scan(store, deep)))
    checks.append(ck.lineage_check(dag))
    checks.append(ck.source_check(store))
    checks.append(ck.tool_link_check(store))
    min_age = float(getattr(config, "empty_lifecycle_min_age_hours", 24.0))
    checks.append(ck.lifecycle_check(store, min_age, live_sessions))
    patterns = str(getattr(config, "ignore_session_patterns", "") or "")
    checks.append(ck.clean_check(store, patterns, live_sessions))
    checks.append(ck.harness_check(store))
    checks.append(ck.summaries_check(store))
    checks.append(ck.payload_check(store))
    notes = list(config_problems)
    checks.append(cc.config_check([p for p in notes if not is_settings_note(p)]))
    checks.append(cc.settings_check([p for p in notes if is_settings_note(p)]))
    checks.append(cc.privacy_check(config))
    checks.append(cc.embeddings_check(config, store, semantic))
    checks.append(cc.rollups_check(config, store))
    checks.append(ck.events_check(store))
    checks.append(ck.threshold_check(store))
    checks.append(ck.preparer_check(store, time.time()))
    if host is not None:
        checks.insert(0, Check("host", **host))
    database = {
        "path": store.path,
        **({} if is_url(store.path) else file_sizes(store.path)),
        **{k: v for k, v in facts.items() if k != "bytes_by_table"},
    }
    return checks_report(checks, database)


def checks_report(checks: list[Check], database: dict[str, Any]) -> dict[str, Any]:
    """The doctor's report of ``checks``: the worst status, each check, and guidance for each problem."""
    status = max((c.status for c in checks), key=lambda s: _RANK.get(s, 0))
    report: dict[str, Any] = redact_value(
        {  # events stored by older versions may quote a provider's error
            "status": status,
            "database": database,
            "checks": [
                {k: v for k, v in asdict(c).items() if v or k in ("name", "status")} for c in checks
            ],
            "guidance": [
                f"{c.name}: {c.action}"
                + (f" -> {c.command}" if c.command else "")
                + f" ({c.detail})"
                for c in checks
                if c.status in ("warn", "fail")
            ],
        }
    )
    return report

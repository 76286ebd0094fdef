"""The doctor's checks of the settings in force: problems in them, settings of other plugins,
redaction, semantic recall and temporal rollups.

Apart from the database checks (checks.py) because they read the configuration first and the
store only for what a feature has recorded; semantic recall's provider is built lazily here.
"""

from __future__ import annotations

import os
import time
from typing import Any

from ..base.peer_settings import is_ignored_note
from ..base.sensitive import Policy
from ..store import Store
from .checks import INSPECT, Check


def config_check(problems: list[str]) -> Check:
    """Problems found while loading the settings (a value out of range, an unreadable file)."""
    return Check(
        "config",
        "warn" if problems else "ok",
        "; ".join(problems) or "no problems",
        INSPECT if problems else None,
        data={"problems": problems},
    )


def privacy_check(config: Any) -> Check:
    """Whether secrets are redacted before storage, and by which kinds (never a secret)."""
    if not getattr(config, "sensitive_patterns_enabled", False):
        return Check(
            "privacy",
            "ok",
            "redaction off (LCM_SENSITIVE_PATTERNS_ENABLED): messages are stored as sent",
            data={"redaction": False},
        )
    policy = Policy.parse(str(config.sensitive_patterns))
    return Check(
        "privacy",
        "warn" if policy.problems else "ok",
        f"redaction on: {', '.join(policy.names)}"
        + (f"; {'; '.join(policy.problems)}" if policy.problems else ""),
        "fix LCM_SENSITIVE_PATTERNS" if policy.problems else None,
        data={"redaction": True, "kinds": list(policy.names), "problems": list(policy.problems)},
    )


def embeddings_check(config: Any, store: Store, semantic: Any) -> Check:
    """Semantic recall: off is fine; on, the provider must be buildable and answer (semantic.py)."""
    if not getattr(config, "embeddings_enabled", False):
        return Check("embeddings", "ok", "off (LCM_EMBEDDINGS_ENABLED)", data={"enabled": False})
    if semantic is None:  # the CLI: a view of its own over its read-only store
        from ..embed import (
            Semantic,
        )  # lazily: numpy and httpx load only when the doctor reads an enabled provider

        semantic = Semantic(config, store, os.environ)
    status, detail, data = semantic.doctor()
    action = (
        "fix the LCM_EMBEDDING_* settings or the provider; search runs on full text meanwhile"
        if status != "ok"
        else None
    )
    return Check(
        "embeddings", status, detail, action, "lcm embed" if status != "ok" else None, data=data
    )


def rollups_check(config: Any, store: Store) -> Check:
    """Temporal rollups: off is fine; on, failed builds and periods stale for over an hour warn."""
    if not getattr(config, "temporal_rollups_enabled", False):
        return Check(
            "temporal_rollups", "ok", "off (LCM_TEMPORAL_ROLLUPS_ENABLED)", data={"enabled": False}
        )
    stats = store.rollup_stats()
    counts = stats.get("counts") or {}
    failed = sum(c.get("failed", 0) for c in counts.values())
    oldest = stats.get("oldest_stale_at")
    late = oldest is not None and time.time() - oldest > 3600
    detail = (
        f"{failed} failed, counts {counts}"
        + (f"; last failure {stats['last_failure']}" if failed else "")
        + ("; stale for over an hour" if late else "")
    )
    bad = bool(failed) or late
    return Check(
        "temporal_rollups",
        "warn" if bad else "ok",
        detail,
        "check the summary route; failed periods are retried" if bad else None,
        "lcm rollups build" if bad else None,
        data={"enabled": True, **stats},
    )


def settings_check(notes: list[str]) -> Check:
    """Settings of LCM-X or lossless-claw and unknown keys: ignored ones warn, aliases read are only listed."""
    ignored = [n for n in notes if is_ignored_note(n)]
    if not notes:
        return Check("settings", "ok", "every LCM_* variable and lcm: key is a hermes-lcm setting")
    return Check(
        "settings",
        "warn" if ignored else "ok",
        "; ".join(notes),
        "rename or remove them (docs/guide/import-and-migrate.md, Migration)" if ignored else None,
        data={"notes": notes},
    )

"""Temporal rollups over LoCoMo: the seven conversations replayed with their session date-times
as host timestamps (one LoCoMo session per host step, compacting as a host would), then every
rollup built with the offline extractive summarizer.

One command: ``.venv/bin/python bench/locomo_rollups.py [--files conv-30] [--timezone Asia/Tokyo]``.
Prints, per conversation: messages, days/weeks/months with content, rollups ready, and the time
per day rollup; checks that every day with a message has exactly one ready day rollup.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from locomo_inuse import CONTEXT, LiveSession
from locomo_recall import add_data_arguments, load_selected

ROOT = Path(__file__).resolve().parents[1]


def run(conversation: Any, home: Path, timezone: str) -> dict[str, Any]:
    import locomo_inuse

    env = {"LCM_TEMPORAL_ROLLUPS_ENABLED": "true", "LCM_TIMEZONE": timezone}
    original = locomo_inuse.make_engine

    def make(home_: Path, session: str, context: int) -> Any:
        import copy

        from hermes_lcm.engine import LcmEngine

        engine = copy.deepcopy(
            LcmEngine(env={"HERMES_HOME": str(home_), "LCM_SUMMARY_PROVIDER": "extractive", **env})
        )
        engine.update_model("bench-model", context)
        engine.on_session_start(session, hermes_home=str(home_), platform="locomo")
        return engine

    locomo_inuse.make_engine = make
    try:
        live = LiveSession(home, conversation, CONTEXT)
        core = live.engine.core
        if core.rollups.job is not None:
            core.rollups.job.stop()
        core.rollups.job = None  # built below, timed, on this thread
        started = time.perf_counter()
        live.replay()
        replay_s = time.perf_counter() - started
        built = core.rollups.drain()
    finally:
        locomo_inuse.make_engine = original
    days = {
        datetime.fromtimestamp(t["timestamp"] // 1, UTC).date().isoformat()
        for t in conversation.turns
    }
    with sqlite3.connect(home / "lcm.db") as con:
        ready = con.execute(
            "SELECT kind, tz, count(*), sum(tokens) FROM rollups WHERE status='ready' GROUP BY 1, 2"
        ).fetchall()
        utc_days = [
            r[0]
            for r in con.execute(
                "SELECT period_start FROM rollups WHERE kind='day' AND tz='UTC' AND status='ready'"
            )
        ]
    day_seconds = [b.seconds for b in built if b.kind == "day" and b.status == "ready"]
    return {
        "conversation": conversation.name,
        "messages": len(conversation.turns),
        "compactions": live.compactions,
        "replay_s": round(replay_s, 2),
        "utc_days_with_messages": len(days),
        "exactly_one_day_rollup_per_day": sorted(utc_days) == sorted(days),
        "ready": {f"{kind}/{tz}": {"count": n, "tokens": tokens} for kind, tz, n, tokens in ready},
        "builds": len(built),
        "failed": sum(b.status == "failed" for b in built),
        "day_rollup_ms_median": round(statistics.median(day_seconds) * 1000, 2)
        if day_seconds
        else None,
        "day_rollup_ms_max": round(max(day_seconds) * 1000, 2) if day_seconds else None,
        "all_builds_s": round(sum(b.seconds for b in built), 3),
    }


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_data_arguments(parser)
    parser.add_argument("--timezone", default="", help="LCM_TIMEZONE (default: UTC only)")
    args = parser.parse_args(argv)
    out = []
    for conversation in load_selected(args.data, args.files):
        with tempfile.TemporaryDirectory() as tmp:
            row = run(conversation, Path(tmp), args.timezone)
        from hermes_lcm import store as store_module

        store_module.close_all()
        print(json.dumps(row), flush=True)
        out.append(row)
    return out


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT / ".pyroot"))
    main()

"""Temporal rollups inside the real Hermes host: with LCM_TEMPORAL_ROLLUPS_ENABLED the background
job builds today's day rollup from what the host's turns stored (the host sends no timestamps:
ingest time), and lcm_recent, called by the model, serves it."""

from __future__ import annotations

import json
import random
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest

from .harness import make_home, require_host, run_host
from .stub_llm import StubLLM, make_directive_policy

pytestmark = pytest.mark.host

WORDS = "ledger shard replica quota tenant socket parser queue retry budget canary schema rollback".split()


def test_the_model_reads_a_day_rollup_built_in_the_host(tmp_path: Path) -> None:
    require_host()
    rng = random.Random(5)
    turns = [
        f"turn {i}: the heron note. " + " ".join(rng.choice(WORDS) for _ in range(200))
        for i in range(8)
    ]
    turns += ["what happened today? [[tool lcm_recent @today]]", "thanks"]
    policy = make_directive_policy({"today": {"period": "today"}})
    with StubLLM(policy, context_length=64_000) as stub:
        hh = make_home(
            tmp_path,
            stub,
            env={
                "LCM_TEMPORAL_ROLLUPS_ENABLED": "true",
                "LCM_CONTEXT_THRESHOLD": "0.08",
                "LCM_FRESH_TAIL_COUNT": "4",
                "LCM_LEAF_CHUNK_TOKENS": "1200",
            },
        )
        run = run_host(hh, turns, timeout=200)
        mains = stub.requests_of("main")
    assert all(t["completed"] and not t["failed"] for t in run.report["turns"]), run.describe()
    today = datetime.now(UTC).date().isoformat()
    with sqlite3.connect(f"file:{hh.lcm_db}?mode=ro", uri=True) as db:
        got = db.execute(
            "SELECT kind, status FROM rollups WHERE period_start<=? ORDER BY kind", (today,)
        ).fetchall()
    assert ("day", "ready") in got or ("day", "stale") in got, got
    answers = [
        json.loads(m["content"])
        for r in mains
        for m in r.messages
        if m.get("role") == "tool" and '"period"' in str(m.get("content"))
    ]
    assert answers, "the model never saw lcm_recent's answer"
    last = answers[-1]
    # Each ingest re-stales today, and the job rebuilds it within milliseconds: the tool call sees
    # the rebuilt rollup, or (if it came first) leaves with today named stale; never silence.
    assert last["source"] in ("rollups", "rollups+leaves") or last.get("stale_days") == [today], (
        last
    )
    if last["source"] != "leaves":
        assert last["rollups"][0]["kind"] == "day" and last["rollups"][0]["start"] == today

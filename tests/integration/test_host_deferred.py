"""Compaction off the turn through the real host: with a summary model that takes its time and a
user who pauses between turns, no compaction after the first makes the user wait for a summary.

The stub's summary requests (the engine's summarizer, through the host's auxiliary client) sleep
before they answer; the driver pauses between turns as a user reading the reply does (the pause
ends once the preparer is idle). A summary request is inside a turn when it started within that
turn's ``run_conversation``.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from ..convo import assert_lineage_complete
from .harness import make_home, require_host, run_host
from .stub_llm import Recorded, Reply, StubLLM, directive_policy

pytestmark = pytest.mark.host

SUMMARY_SECONDS = 0.4


def message(i: int) -> str:
    body = " ".join(f"detail{(i * 11 + k) % 97}x{k % 7}" for k in range(160))
    return f"turn {i}: please keep these notes for later. {body}"


def _policy(req: Recorded) -> Reply:
    if req.kind == "summary":
        time.sleep(SUMMARY_SECONDS)
    return directive_policy(req)


def test_no_summary_call_inside_a_turn_after_the_first_compaction(tmp_path: Path) -> None:
    """And no more calls than inline compaction makes over the same turns: a reply after a
    compaction (its prompt shrank) must not be taken for the last before the threshold."""
    require_host()
    with StubLLM(_policy) as stub:
        home = make_home(
            tmp_path / "deferred", stub, env={"LCM_ABSOLUTE_THRESHOLD_TOKENS": "10000"}
        )
        run = run_host(
            home,
            [message(i) for i in range(36)],
            think_seconds=20,
            think_until_idle=True,
            timeout=600,
        )
        summaries = [r for r in stub.requests if r.kind == "summary"]
    with StubLLM(_policy) as stub:
        inline_home = make_home(
            tmp_path / "inline",
            stub,
            env={"LCM_ABSOLUTE_THRESHOLD_TOKENS": "10000", "LCM_COMPACTION_MODE": "inline"},
        )
        run_host(inline_home, [message(i) for i in range(36)], timeout=600)
        inline_calls = sum(1 for r in stub.requests if r.kind == "summary")
    waiting = run.report["engine_final"]["status"]["deferred_compaction"]["prepared_waiting"]
    assert len(summaries) - waiting <= inline_calls, (len(summaries), waiting, inline_calls)
    rows = run.report["turns"]
    counts = [int(r.get("compression_count") or 0) for r in rows]
    compactions = [i for i in range(1, len(rows)) if counts[i] > counts[i - 1]]
    assert len(compactions) >= 2, counts
    first = rows[compactions[0]]
    inside_after = [
        q
        for q in summaries
        if any(r["started_at"] <= q.at <= r["ended_at"] for r in rows[first["i"] + 1 :])
    ]
    assert summaries, "no summary was made"
    assert inside_after == [], f"{len(inside_after)} summary calls made inside later turns"
    assert_lineage_complete(str(home.lcm_db))

"""Three processes ingesting and compacting one database, plus a reader running tools.

All three write one logical conversation (the host's conversation id is shared): A is a CLI
session (its list is the last compressed prompt plus new turns, so it carries B's rows), B a
gateway session re-sending its whole history every turn, and R a second process on A's session
re-sending A's transcript as soon as each turn exists (a dashboard or a session-end hook racing
the CLI's own ingest), so the same messages arrive from two processes in either order. Each compacts as it goes. A
reader process runs lcm_grep / lcm_expand / lcm_status against the conversation throughout.
Afterwards: no exception or lock error reached any host, every message is stored exactly once,
integrity_check is ok and the DAG is sound. Both tests run on SQLite and on PostgreSQL
(``both_backends``: the processes share one URL, serialized by the server's advisory write lock).
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from ..conftest import database_env
from .helpers import (
    dag_problems,
    expected_markers,
    integrity,
    lock_errors,
    marker_counts,
    publication_problems,
    result_of,
    start,
)

TURNS = 120
ENV = {
    "LCM_ABSOLUTE_THRESHOLD_TOKENS": "5000",
    "LCM_LEAF_CHUNK_TOKENS": "800",
    "LCM_FRESH_TAIL_COUNT": "8",
    "LCM_CONDENSE_MIN_NODES": "2",
}


pytestmark = pytest.mark.both_backends


def test_three_writers_and_a_reader(tmp_path: Path, backend: str) -> None:
    where = database_env(backend)
    env = {**ENV, **where}
    common = {"conversation": "shared", "stop": TURNS, "env": env}
    progress = tmp_path / "a.progress"
    procs: dict[str, subprocess.Popen[str]] = {
        "A": start(
            "writer", tmp_path, "a", shape="cli", compact_every=4, progress=progress, **common
        ),
        "B": start("writer", tmp_path, "b", shape="api", compact_every=5, **common),
        "R": start(
            "writer", tmp_path, "a", shape="api", compact_every=3, follow=progress, **common
        ),
        "reader": start("reader", tmp_path, "b", conversation="shared", seconds=8, env=env),
    }
    results = {}
    for name, proc in procs.items():
        out, err = proc.communicate(timeout=240)
        assert proc.returncode == 0, f"{name} exited {proc.returncode}: {err[-3000:]}"
        results[name] = result_of(out)
    problems = []
    for name, result in results.items():
        if result["escaped"]:
            problems.append(f"{name}: exceptions reached the host: {result['escaped'][:3]}")
        surfaced = lock_errors(
            result["errors"] + result["engine_errors"] + result.get("tool_errors", [])
        )
        if surfaced:
            problems.append(f"{name}: lock errors: {surfaced[:3]}")
        if result["errors"] or result["engine_errors"]:
            problems.append(
                f"{name}: engine errors: {(result['errors'] + result['engine_errors'])[:3]}"
            )
    if results["reader"]["tool_error_count"]:
        problems.append(
            f"reader: {results['reader']['tool_error_count']} tool errors, e.g. "
            f"{results['reader']['tool_errors'][:3]}"
        )
    assert results["reader"]["calls"] > 20
    db = where.get("LCM_DATABASE_URL") or tmp_path / "lcm.db"
    assert integrity(db) == "ok"
    counts = marker_counts(db)
    assert {m: n for m, n in counts.items() if n > 1} == {}
    expected = expected_markers("a", range(TURNS)) | expected_markers("b", range(TURNS))
    assert set(counts) == expected
    assert dag_problems(db) == []
    assert problems == []
    a_rows = len(expected_markers("a", range(TURNS)))
    assert (
        results["A"]["stored"] + results["R"]["stored"] == a_rows
    )  # each message stored by exactly one process


def test_two_preparing_writers_never_publish_overlapping_summaries(
    tmp_path: Path, backend: str
) -> None:
    """Deferred compaction in two processes on one conversation: each prepares between its turns
    and publishes at its threshold. A publication is checked against the context it was planned
    on in the transaction that writes it, so neither ever publishes over what the other did."""
    where = database_env(backend)
    env = {**ENV, "LCM_ABSOLUTE_THRESHOLD_TOKENS": "3000", **where}
    common = {"conversation": "shared", "stop": 80, "env": env, "prepare": 1}
    procs = {
        "A": start("writer", tmp_path, "a", shape="cli", **common),
        "B": start("writer", tmp_path, "b", shape="cli", **common),
    }
    results = {}
    for name, proc in procs.items():
        out, err = proc.communicate(timeout=240)
        assert proc.returncode == 0, f"{name} exited {proc.returncode}: {err[-3000:]}"
        results[name] = result_of(out)
        assert results[name]["escaped"] == [], results[name]
        assert results[name]["errors"] == results[name]["engine_errors"] == [], results[name]
    assert sum(r["published"] for r in results.values()) > 0, results
    assert all(r["compactions"] > 0 for r in results.values()), results
    db = where.get("LCM_DATABASE_URL") or tmp_path / "lcm.db"
    assert integrity(db) == "ok"
    counts = marker_counts(db)
    assert {m: n for m, n in counts.items() if n > 1} == {}
    assert set(counts) == expected_markers("a", range(80)) | expected_markers("b", range(80))
    assert dag_problems(db) == []
    assert publication_problems(db, one_writer=False) == []


@pytest.mark.parametrize("seed", [34, 1, 2, 3, 4, 5])
def test_interleaved_writers_in_one_process_store_each_message_once(
    tmp_path: Path, seed: int, backend: str
) -> None:
    """The three writers above, interleaved deterministically by ``seed`` (seed 34 once stored two of
    A's messages twice: A's compressed list had gaps, a pinned request and rows behind the frontier,
    that content alignment could not see across). The replayer may send a turn before A's own ingest."""
    import random

    from hermes_lcm.base.tokens import count_messages
    from hermes_lcm.store import close_all

    from .worker import make_engine, turn_messages

    rng = random.Random(seed)
    where = database_env(backend)
    engines = {
        w: make_engine(str(tmp_path), "b" if w == "B" else "a", {**ENV, **where}, "shared")
        for w in "ARB"
    }
    hosts: dict[str, list[dict[str, Any]]] = {w: [] for w in "ARB"}
    every, turn, turns = {"A": 4, "R": 3, "B": 5}, dict.fromkeys("ARB", 0), 40
    try:
        while min(turn.values()) < turns:
            who = rng.choice(
                [w for w in "ARB" if turn[w] < turns and (w != "R" or turn["R"] <= turn["A"])]
            )
            t, session = turn[who], "b" if who == "B" else "a"
            if who == "A":
                hosts[who].extend(turn_messages(session, t))
            else:  # API shape: the whole history every turn
                hosts[who] = [m for k in range(t + 1) for m in turn_messages(session, k)]
            engines[who].ingest_host(hosts[who])
            if t % every[who] == 0:
                out = engines[who].compress(
                    list(hosts[who]), current_tokens=count_messages(hosts[who]) + 500
                )
                if who == "A":
                    hosts[who] = list(out)
            turn[who] += 1
        assert all(not e.errors for e in engines.values())
    finally:
        close_all()
    counts = marker_counts(where.get("LCM_DATABASE_URL") or tmp_path / "lcm.db")
    assert {m: n for m, n in counts.items() if n > 1} == {}
    assert set(counts) == expected_markers("a", range(turns)) | expected_markers("b", range(turns))

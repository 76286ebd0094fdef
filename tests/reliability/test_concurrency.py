"""Three processes ingesting and compacting one database, plus a reader running tools.

All three write one logical conversation (the host's conversation id is shared): A is a CLI
session (its list is the last compressed prompt plus new turns, so it carries B's rows), B a
gateway session re-sending its whole history every turn, and R a second process on A's session
re-sending A's transcript as soon as each turn exists (a dashboard or a session-end hook racing
the CLI's own ingest), so the same messages arrive from two processes in either order. Each compacts as it goes. A
reader process runs lcm_grep / lcm_expand / lcm_status against the conversation throughout.
Afterwards: no exception or lock error reached any host, every message is stored exactly once,
integrity_check is ok and the DAG is sound.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from .helpers import dag_problems, expected_markers, integrity, lock_errors, marker_counts, result_of, start

TURNS = 120
ENV = {"LCM_ABSOLUTE_THRESHOLD_TOKENS": "5000", "LCM_LEAF_CHUNK_TOKENS": "800", "LCM_FRESH_TAIL_COUNT": "8",
       "LCM_CONDENSE_MIN_NODES": "2"}


def test_three_writers_and_a_reader(tmp_path: Path) -> None:
    common = {"conversation": "shared", "stop": TURNS, "env": ENV}
    progress = tmp_path / "a.progress"
    procs: dict[str, subprocess.Popen[str]] = {
        "A": start("writer", tmp_path, "a", shape="cli", compact_every=4, progress=progress, **common),
        "B": start("writer", tmp_path, "b", shape="api", compact_every=5, **common),
        "R": start("writer", tmp_path, "a", shape="api", compact_every=3, follow=progress, **common),
        "reader": start("reader", tmp_path, "b", conversation="shared", seconds=8, env=ENV),
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
        surfaced = lock_errors(result["errors"] + result["engine_errors"] + result.get("tool_errors", []))
        if surfaced:
            problems.append(f"{name}: lock errors: {surfaced[:3]}")
        if result["errors"] or result["engine_errors"]:
            problems.append(f"{name}: engine errors: {(result['errors'] + result['engine_errors'])[:3]}")
    if results["reader"]["tool_error_count"]:
        problems.append(f"reader: {results['reader']['tool_error_count']} tool errors, e.g. "
                        f"{results['reader']['tool_errors'][:3]}")
    assert results["reader"]["calls"] > 20
    db = tmp_path / "lcm.db"
    assert integrity(db) == "ok"
    counts = marker_counts(db)
    assert {m: n for m, n in counts.items() if n > 1} == {}
    expected = expected_markers("a", range(TURNS)) | expected_markers("b", range(TURNS))
    assert set(counts) == expected
    assert dag_problems(db) == []
    assert problems == []
    a_rows = len(expected_markers("a", range(TURNS)))
    assert results["A"]["stored"] + results["R"]["stored"] == a_rows  # each message stored by exactly one process

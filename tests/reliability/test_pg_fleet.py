"""A fleet on one PostgreSQL database: 3 hosts (3 HERMES_HOMEs) x 2 agents, for 60 s.

On the shared conversation: host 1 runs a CLI session (its list is the last compressed prompt
plus new turns), host 2 a gateway session re-sending its whole history every turn, and host 3
replays host 1's session from another machine as soon as each turn exists, so the same messages
arrive from two hosts in either order. Each host's second agent writes a conversation of its
own, in the CLI or the gateway shape. Every agent compacts as it goes (compaction_slot keeps
one writer per conversation), and checks each prompt it gets (fleet_worker.py).

Afterwards, read past our code: no error in any engine, every prompt within its budget and a
valid sequence, no (conversation_id, seq) twice, each message stored exactly once, nothing an
agent sent is missing, no seq gaps, lineage complete, and each conversation's context valid.
The attack run kills one agent with SIGKILL mid-run (it restarts and re-sends) and restarts the
server mid-run: the engines record the failure, keep returning bounded prompts, and recover. While
the server is down a compress can neither store the turn's messages nor read what is stored: the
engine then hands the host's list back unchanged and flagged (``_last_compress_aborted``, the host
keeps its list and warns), which only the attack run allows (``kept_whole``).

``FLEET_TEST_SECONDS`` shortens the run locally; CI runs the full 60 s.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ..convo import assert_lineage_complete, assert_valid_sequence
from ..pgserver import Server, Unavailable
from .helpers import MARK, child_env, expected_markers, result_of

SECONDS = float(os.environ.get("FLEET_TEST_SECONDS", "60"))
WORKER = Path(__file__).resolve().parent / "fleet_worker.py"
ENV = {
    "LCM_ABSOLUTE_THRESHOLD_TOKENS": "5000",
    "LCM_LEAF_CHUNK_TOKENS": "800",
    "LCM_FRESH_TAIL_COUNT": "8",
    "LCM_CONDENSE_MIN_NODES": "2",
}
# (name, host, session, conversation, shape, transcript, compact every): agents 1-3 share a conversation.
AGENTS = [
    ("cli1", 1, "s1", "shared", "cli", "s1", 4),
    ("api2", 2, "s2", "shared", "api", "s2", 5),
    ("replay3", 3, "s1", "shared", "api", "s1", 3),
    ("own1", 1, "o1", "own-1", "api", "o1", 3),
    ("own2", 2, "o2", "own-2", "cli", "o2", 4),
    ("own3", 3, "o3", "own-3", "api", "o3", 3),
]


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    """A server of this module's own: the attack restarts it, which no other test may see."""
    try:
        srv = Server()
    except Unavailable as exc:
        pytest.skip(str(exc))
    yield srv
    srv.stop()


def _fresh_url(srv: Server) -> str:
    import psycopg

    name = "fleet_" + uuid.uuid4().hex[:12]
    with psycopg.connect(srv.url(), autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {name}")
    return srv.url(schema=name)


def _spawn(
    tmp_path: Path, url: str, agent: tuple[Any, ...], seconds: float, start: int = 0
) -> subprocess.Popen[str]:
    name, host, session, conversation, shape, transcript, every = agent
    cmd = [
        sys.executable,
        str(WORKER),
        "--home",
        str(tmp_path / f"host{host}"),
        "--session",
        session,
        "--conversation",
        conversation,
        "--shape",
        shape,
        "--transcript",
        transcript,
        "--compact-every",
        str(every),
        "--seconds",
        str(seconds),
        "--start",
        str(start),
        "--env",
        json.dumps({**ENV, "LCM_DATABASE_URL": url}),
    ]
    if name == "cli1":
        cmd += ["--progress", str(tmp_path / "cli1.progress")]
    if name == "replay3":
        cmd += ["--follow", str(tmp_path / "cli1.progress")]
    return subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env()
    )


def _finish(procs: dict[str, subprocess.Popen[str]]) -> dict[str, dict[str, Any]]:
    results = {}
    for name, proc in procs.items():
        out, err = proc.communicate(timeout=SECONDS + 300)
        assert proc.returncode == 0, f"{name} exited {proc.returncode}: {err[-3000:]}"
        results[name] = result_of(out)
    print(
        {
            n: {
                k: r[k]
                for k in (
                    "turns",
                    "stored",
                    "compactions",
                    "skipped",
                    "write_failures",
                    "kept_whole",
                )
            }
            for n, r in results.items()
        }
    )
    return results


def _query(url: str, sql: str, args: tuple[Any, ...] = ()) -> list[Any]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(sql, args).fetchall()


def _check_database(url: str, results: dict[str, dict[str, Any]], tmp_path: Path) -> None:
    """What the database holds after the run, read with plain SQL (and one assembly per conversation)."""
    assert (
        _query(url, "SELECT conversation_id, seq FROM messages GROUP BY 1, 2 HAVING count(*) > 1")
        == []
    )
    counts: Counter[tuple[str, int, int]] = Counter()
    for (content,) in _query(url, "SELECT content FROM messages"):
        for session, turn, k in MARK.findall(content or ""):
            counts[(session, int(turn), int(k))] += 1
    assert {m: n for m, n in counts.items() if n > 1} == {}
    expected: set[tuple[str, int, int]] = set()
    for name, _, _, _, _, transcript, _ in AGENTS:
        expected |= expected_markers(transcript, range(results[name]["turns"]))
    assert expected - set(counts) == set()  # nothing any agent sent is lost
    assert set(counts) - expected == set()
    gaps = _query(
        url,
        "SELECT c.id, c.last_seq, count(m.id), coalesce(max(m.seq), 0) FROM conversations c "
        "LEFT JOIN messages m ON m.conversation_id=c.id GROUP BY c.id, c.last_seq "
        "HAVING NOT (count(m.id) = coalesce(max(m.seq), 0) AND count(m.id) = c.last_seq) "
        "OR c.frontier_seq > c.last_seq",
    )
    assert gaps == []
    assert _query(
        url,
        "SELECT count(*) FROM context_items c WHERE NOT EXISTS "
        "(SELECT 1 FROM summaries s WHERE s.id=c.summary_id)",
    ) == [(0,)]
    assert _query(url, "SELECT count(*) FROM summaries")[0][0] > 0
    assert_lineage_complete(url)
    from .worker import make_engine

    for conversation in sorted({a[3] for a in AGENTS}):
        engine = make_engine(
            str(tmp_path / "checker"),
            "check-" + conversation,
            {**ENV, "LCM_DATABASE_URL": url},
            conversation,
        )
        core = engine.ensure_core()
        assert core is not None
        budget = core.budget(engine.threshold_tokens, 0)
        prompt = core.assemble(budget)
        assert prompt and sum(1 for m in prompt if MARK.search(str(m.get("content")))) > 0
        assert_valid_sequence(prompt)


def _check_agents(results: dict[str, dict[str, Any]], errors_allowed: bool) -> None:
    problems = []
    for name, result in results.items():
        if result["escaped"]:
            problems.append(f"{name}: exceptions reached the host: {result['escaped'][:3]}")
        if result["violations"]:
            problems.append(f"{name}: {result['violations'][:3]}")
        if not errors_allowed and (
            result["errors"]
            or result["engine_errors"]
            or result["write_failures"]
            or result["kept_whole"]
        ):
            problems.append(
                f"{name}: engine errors: {(result['errors'] + result['engine_errors'])[:3]}"
            )
        if result["compactions"] < 3:
            problems.append(f"{name}: only {result['compactions']} compactions")
    assert problems == []


def test_six_agents_on_three_hosts_share_one_database(tmp_path: Path, server: Server) -> None:
    url = _fresh_url(server)
    procs = {a[0]: _spawn(tmp_path, url, a, SECONDS) for a in AGENTS}
    results = _finish(procs)
    _check_agents(results, errors_allowed=False)
    assert results["replay3"]["turns"] == results["cli1"]["turns"]
    # Host 1 and host 3 sent the same session: each message was stored by exactly one of them.
    assert results["cli1"]["stored"] + results["replay3"]["stored"] == len(
        expected_markers("s1", range(results["cli1"]["turns"]))
    )
    _check_database(url, results, tmp_path)


def _acked(proc: subprocess.Popen[str], at_least: int, lines: list[str]) -> None:
    """Read the agent's output until it has acknowledged ``at_least`` turns (kept in ``lines``)."""
    assert proc.stdout is not None
    while sum(1 for line in lines if line.startswith("ACK ")) < at_least:
        line = proc.stdout.readline()
        assert line, "the agent ended before it was killed"
        lines.append(line)


def test_a_killed_agent_and_a_server_restart_mid_run(tmp_path: Path, server: Server) -> None:
    seconds = max(20.0, SECONDS / 2)
    url = _fresh_url(server)
    procs = {a[0]: _spawn(tmp_path, url, a, seconds) for a in AGENTS}
    victim = next(a for a in AGENTS if a[0] == "own3")
    lines: list[str] = []
    _acked(procs["own3"], 5, lines)
    procs["own3"].send_signal(signal.SIGKILL)  # mid-turn: it acknowledges turns back to back
    procs["own3"].wait()
    last = max(int(line.split()[1]) for line in lines if line.startswith("ACK "))
    restarted = _spawn(tmp_path, url, victim, seconds * 0.7, start=last + 1)
    procs["own3"] = restarted
    time.sleep(seconds * 0.3)  # let the fleet run before the server goes away (not a timing assert)
    restart = threading.Thread(target=server.restart)
    restart.start()
    restart.join(timeout=120)
    results = _finish(procs)
    _check_agents(results, errors_allowed=True)
    failed = [name for name, r in results.items() if r["write_failures"]]
    assert failed, "the restart went unnoticed: no engine recorded a failed write"
    for name in failed:  # recovered: turns after the last failure went through cleanly
        assert results[name]["last_error_turn"] < results[name]["turns"] - 2, (name, results[name])
    _check_database(url, results, tmp_path)

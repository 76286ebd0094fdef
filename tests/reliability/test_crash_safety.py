"""SIGKILL at random points during ingest and compaction, many times, on one real database file.

After every kill: ``PRAGMA integrity_check`` is ok, every message acknowledged before the kill
(the worker prints ``ACK <turn>`` only after ``ingest_host`` returned) is stored exactly once,
nothing is stored twice, and the DAG is structurally sound. The next run re-sends its history
(as a restarted host does) and continues. At the end one more compaction must complete cleanly.
Both tests run on SQLite and on PostgreSQL (``backend``): there a kill drops the client's
connection mid-transaction and the server must roll it back and free the advisory write lock.
"""

from __future__ import annotations

import copy
import random
import signal
import time
from pathlib import Path

import pytest

from hermes_lcm.base.tokens import count_messages
from hermes_lcm.engine import LcmEngine
from hermes_lcm.store import close_all

from ..backends import raw_sql
from ..conftest import database_env
from .helpers import (
    dag_problems,
    expected_markers,
    integrity,
    marker_counts,
    prepared_count,
    publication_problems,
    start,
)
from .worker import CONTEXT_LENGTH, history

SESSION = "crash"
ROUNDS = 50  # half aimed at ingest, half at compaction
INGEST_ENV = {"LCM_ABSOLUTE_THRESHOLD_TOKENS": "12000", "LCM_FRESH_TAIL_COUNT": "8"}
COMPACT_ENV = {
    "LCM_ABSOLUTE_THRESHOLD_TOKENS": "3000",
    "LCM_LEAF_CHUNK_TOKENS": "500",
    "LCM_FRESH_TAIL_COUNT": "6",
    "LCM_CONDENSE_MIN_NODES": "2",
}


def run_and_kill(
    home: Path,
    rng: random.Random,
    first_turn: int,
    aim: str,
    where: dict[str, str] | None = None,
    prepare: bool = False,
) -> tuple[int, bool, bool]:
    """One child run killed at a random point; returns (last acknowledged turn, killed
    mid-compaction, killed mid-preparation). ``prepare``: replies through ``after_reply`` with the
    preparer waited for between turns (deferred compaction), compactions at the threshold only;
    ``aim`` "prepare" kills during a preparation."""
    env = {**(INGEST_ENV if aim == "ingest" else COMPACT_ENV), **(where or {})}
    errors = home / "worker-stderr.txt"
    with errors.open(
        "w"
    ) as err_file:  # a file, not a pipe: a chatty child must never block on stderr
        proc = start(
            "writer",
            home,
            SESSION,
            stderr=err_file,
            start=first_turn,
            stop=first_turn + 400,
            shape=rng.choice(["api", "cli"]),
            compact_every=1 if aim == "compact" and not prepare else 0,
            prepare=int(prepare),
            env=env,
        )
    assert proc.stdout is not None
    acked, acks_wanted, seen_acks = first_turn - 1, rng.randint(1, 6), 0
    in_compaction = in_preparation = False
    for line in proc.stdout:
        word, _, rest = line.strip().partition(" ")
        if word == "ACK":
            acked, seen_acks = int(rest), seen_acks + 1
            if aim == "ingest" and seen_acks >= acks_wanted:
                time.sleep(rng.uniform(0, 0.004))
                break
        elif word == "COMPACT":
            in_compaction = True
            if aim == "compact" and seen_acks >= acks_wanted:
                # a compaction that publishes prepared summaries lasts a few milliseconds: a kill
                # within 30 ms of its start mostly landed after it
                time.sleep(rng.uniform(0, 0.004 if prepare else 0.03))
                break
        elif word == "COMPACTED":
            in_compaction = False
        elif word == "PREPARE":
            in_preparation = True
            if aim == "prepare" and seen_acks >= acks_wanted:
                time.sleep(rng.uniform(0, 0.02))
                break
        elif word == "PREPARED":
            in_preparation = False
        elif word == "RESULT":
            raise AssertionError(f"worker finished before it was killed: {line}")
    proc.send_signal(signal.SIGKILL)
    rest_out = (
        proc.stdout.read()
    )  # through the same buffered reader, so no line already read ahead is lost
    proc.stdout.close()
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL, errors.read_text()[-2000:]
    for line in rest_out.splitlines():  # printed before the kill, so acknowledged
        word, _, value = line.partition(" ")
        if word == "ACK":
            acked = int(value)
        elif word == "COMPACT":
            in_compaction = True
        elif word == "COMPACTED":
            in_compaction = False
        elif word == "PREPARE":
            in_preparation = True
        elif word == "PREPARED":
            in_preparation = False
    return acked, in_compaction, in_preparation


def check_after_kill(db: Path | str, acked: int) -> None:
    assert integrity(db) == "ok"
    counts = marker_counts(db)
    duplicated = {m: n for m, n in counts.items() if n > 1}
    assert not duplicated, f"stored more than once: {sorted(duplicated)[:5]}"
    missing = expected_markers(SESSION, range(acked + 1)) - set(counts)
    assert not missing, f"acknowledged but not stored: {sorted(missing)[:5]}"
    assert dag_problems(db) == []


@pytest.mark.both_backends
def test_sigkill_during_ingest_and_compaction(tmp_path: Path, backend: str) -> None:
    rng = random.Random(20240611)
    where = database_env(backend)
    db = where.get("LCM_DATABASE_URL") or tmp_path / "lcm.db"
    acked = -1
    mid_compaction = 0
    for round_no in range(ROUNDS):
        aim = "compact" if round_no % 2 else "ingest"
        acked, inside, _ = run_and_kill(tmp_path, rng, acked + 1, aim, where)
        mid_compaction += inside
        check_after_kill(db, acked)
    assert acked > ROUNDS, "the workers made too little progress to mean anything"
    assert mid_compaction >= 3, f"only {mid_compaction} kills landed inside a compaction"
    finish_cleanly(tmp_path, acked, where)


PREPARE_ROUNDS = 24  # half aimed at a preparation, half at the compaction that publishes it


@pytest.mark.both_backends
def test_sigkill_during_preparation_and_publication(tmp_path: Path, backend: str) -> None:
    """Deferred compaction killed while it prepares summaries between turns, or while a compaction
    publishes them: after every kill nothing acknowledged is lost, nothing is stored or published
    twice, no prepared summary is half-written, and the next run goes on from there."""
    rng = random.Random(20261203)
    where = database_env(backend)
    db = where.get("LCM_DATABASE_URL") or tmp_path / "lcm.db"
    acked, mid_compaction, mid_preparation, seen_prepared = -1, 0, 0, 0
    for round_no in range(PREPARE_ROUNDS):
        aim = "compact" if round_no % 2 else "prepare"
        acked, compacting, preparing = run_and_kill(
            tmp_path, rng, acked + 1, aim, where, prepare=True
        )
        mid_compaction += compacting
        mid_preparation += preparing
        check_after_kill(db, acked)
        assert publication_problems(db) == [], f"after kill {round_no + 1}"
        seen_prepared += bool(prepared_count(db))
    assert seen_prepared >= 3, f"prepared summaries waited after only {seen_prepared} kills"
    published = raw_sql(str(db), "SELECT count(*) FROM summaries")[0][0]
    assert published > 0, "nothing was compacted"
    assert mid_preparation >= 3, f"only {mid_preparation} kills landed inside a preparation"
    assert mid_compaction >= 3, f"only {mid_compaction} kills landed inside a compaction"
    finish_cleanly(tmp_path, acked, where)
    assert publication_problems(db) == []


def finish_cleanly(home: Path, acked: int, where: dict[str, str] | None = None) -> None:
    """A fresh engine re-sends the whole transcript and compacts: it completes, no errors."""
    close_all()
    engine = copy.deepcopy(
        LcmEngine(
            env={
                "HERMES_HOME": str(home),
                "LCM_SUMMARY_PROVIDER": "extractive",
                **COMPACT_ENV,
                **(where or {}),
            }
        )
    )
    engine.update_model("reliability-model", CONTEXT_LENGTH)
    engine.on_session_start(SESSION, hermes_home=str(home), platform="cli")
    transcript = history(SESSION, acked + 1)
    engine.ingest_host(transcript)
    tokens = count_messages(transcript)
    out = engine.compress(transcript, current_tokens=tokens)
    status = engine.get_status()
    assert status["errors"] == [] and status["engine_errors"] == []
    assert status["last_compaction"]["errors"] == []
    assert (
        "pass limit" not in status["last_compaction"]["stop_reason"]
        or status["last_compaction"]["leaf_passes"]
    )
    assert out and count_messages(out) <= engine.threshold_tokens
    check_after_kill((where or {}).get("LCM_DATABASE_URL") or home / "lcm.db", acked)
    close_all()


SHORT_ROUNDS = 16
SHORT_TURNS = 2000  # the transcript's length; the runs get through a few hundred turns


def run_short_and_kill(
    home: Path, rng: random.Random, first_turn: int, shape: str, where: dict[str, str] | None = None
) -> int:
    """One ``short`` worker run SIGKILLed after a random step line; returns the last acknowledged turn."""
    errors = home / "worker-stderr.txt"
    with errors.open("w") as err_file:
        proc = start(
            "short",
            home,
            SESSION,
            stderr=err_file,
            start=first_turn,
            stop=SHORT_TURNS,
            seed=19,
            shape=shape,
            **({"env": where} if where else {}),
        )
    assert proc.stdout is not None
    acked, lines_wanted = first_turn - 1, rng.randint(2, 40)
    for lines, line in enumerate(proc.stdout, 1):
        word, _, rest = line.strip().partition(" ")
        if word in (
            "ACK",
            "RESUME",
        ):  # RESUME: the host persisted turns a kill kept from being acknowledged
            acked = max(acked, int(rest) - (word == "RESUME"))
        elif word == "RESULT":
            raise AssertionError(f"worker finished before it was killed: {line}")
        if lines >= lines_wanted:
            time.sleep(rng.uniform(0, 0.01))  # lands inside the next step: an ingest, a compaction
            break
    proc.send_signal(signal.SIGKILL)
    rest_out = proc.stdout.read()
    proc.stdout.close()
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL, errors.read_text()[-2000:]
    for line in rest_out.splitlines():
        word, _, value = line.partition(" ")
        if word in ("ACK", "RESUME"):
            acked = max(acked, int(value) - (word == "RESUME"))
    return acked


@pytest.mark.both_backends
def test_sigkill_with_short_replies_and_reused_call_ids_stores_each_message_once(
    tmp_path: Path, backend: str
) -> None:
    """Crash safety with real SIGKILLs: "ok"/"done" replies, tool calls reusing call_0. After every kill
    the store holds the transcript up to the acknowledged turn, and at most the next, each once."""
    from .crashplay import stored_prefix, transcript

    rng = random.Random(19)
    turns = transcript(19, SHORT_TURNS)
    where = database_env(backend)
    db = where.get("LCM_DATABASE_URL") or tmp_path / "lcm.db"
    acked = -1
    for round_no in range(SHORT_ROUNDS):
        acked = run_short_and_kill(
            tmp_path, rng, acked + 1, "cli" if round_no % 2 else "api", where
        )
        assert integrity(db) == "ok"
        problem = stored_prefix(db, turns, acked)
        assert problem == "", f"after kill {round_no + 1} (acknowledged turn {acked}): {problem}"
        assert dag_problems(db) == []
    assert acked > SHORT_ROUNDS, "the workers made too little progress to mean anything"

"""``lcm embed``, ``/lcm embed``, and the embeddings block of status and doctor, on real databases
against the stub embeddings server on 127.0.0.1 (tests/embedstub.py). The tests marked
``both_backends`` also run on PostgreSQL (pgvector); a file's mode and SQLite's exclusive lock
stay SQLite-only."""

from __future__ import annotations

import io
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from hermes_lcm import store as store_module
from hermes_lcm.cli.main import main
from hermes_lcm.command import handle_command

from .backends import raw_sql, table_names
from .conftest import new_engine
from .embedstub import Stub, openai_ok, stub

__all__ = ["stub"]

ROOT = Path(__file__).resolve().parents[1]


WHERE: dict[
    str, str
] = {}  # the running test's database settings (empty: a SQLite file in its home)


@pytest.fixture(autouse=True)
def on_backend(
    clean_home: Path, backend_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> Any:
    """The test's engines, ``lcm`` and ``/lcm`` all use its backend (LCM_DATABASE_URL for PostgreSQL)."""
    WHERE.update(backend_env)
    for key, value in backend_env.items():
        monkeypatch.setenv(key, value)
    yield
    WHERE.clear()


def populate(home: Path, turns: int) -> Path | str:
    engine = new_engine(home, **WHERE)
    messages: list[dict[str, Any]] = []
    for t in range(turns):
        messages += [
            {"role": "user", "content": f"question {t} about the parser"},
            {"role": "assistant", "content": f"answer {t}: the cache index moved"},
        ]
    engine.ingest_host(messages)
    store_module.close_all()
    return WHERE.get("LCM_DATABASE_URL") or home / "lcm.db"


def turn_on(monkeypatch: pytest.MonkeyPatch, stub: Stub, **extra: str) -> None:
    for key, value in {
        "LCM_EMBEDDINGS_ENABLED": "true",
        "LCM_EMBEDDING_PROVIDER": "openai",
        "LCM_EMBEDDING_BASE_URL": stub.base_url + "/v1",
        "LCM_EMBEDDING_BACKFILL_BATCH_SIZE": "4",
        **extra,
    }.items():
        monkeypatch.setenv(key, value)


def lcm(*argv: str) -> tuple[int, dict[str, Any], str]:
    """Run the verb; its error line and its progress (written to the process's stderr) both come back."""
    out, err, progress = io.StringIO(), io.StringIO(), io.StringIO()
    saved, sys.stderr = sys.stderr, progress
    try:
        code = main(list(argv), out=out, err=err)
    finally:
        sys.stderr = saved
    return code, json.loads(out.getvalue() or "{}"), progress.getvalue() + err.getvalue()


def vectors(db: Path | str) -> list[int]:
    if "vectors" not in table_names(str(db)):
        return []
    return [
        r[0]
        for r in raw_sql(str(db), "SELECT item_id FROM vectors WHERE kind='m' ORDER BY item_id")
    ]


def message_ids(db: Path | str) -> list[int]:
    return [r[0] for r in raw_sql(str(db), "SELECT id FROM messages ORDER BY id")]


@pytest.mark.both_backends
def test_not_enabled_is_exit_2(clean_home: Path) -> None:
    populate(clean_home, 1)
    code, out, err = lcm("embed")
    assert code == 2 and "LCM_EMBEDDINGS_ENABLED" in err and "error" in out


@pytest.mark.both_backends
def test_dry_run_calls_no_provider_and_estimates(
    clean_home: Path, stub: Stub, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = populate(clean_home, 5)
    turn_on(monkeypatch, stub)
    code, out, _ = lcm("embed")
    assert code == 0 and out["dry_run"] is True
    assert (
        out["rows"] == 10 and out["estimated_tokens"] > 0 and out["estimated_cost_usd"] is not None
    )
    assert out["sent_off_this_machine"] is True and out["model"] == "openai:text-embedding-3-small"
    assert stub.requests == [] and vectors(db) == []


@pytest.mark.both_backends
def test_apply_embeds_everything_once_with_progress_then_nothing(
    clean_home: Path, stub: Stub, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = populate(clean_home, 6)
    turn_on(monkeypatch, stub)
    code, out, err = lcm("embed", "--apply")
    assert code == 0 and out["embedded"] == 12 and out["remaining"] == 0
    assert "embedded 12/12 rows" in err and "rows/s" in err and "ETA" in err
    assert vectors(db) == message_ids(db)
    code, again, _ = lcm("embed", "--apply")
    assert code == 0 and again["embedded"] == 0
    code, plan, _ = lcm("embed")
    assert plan["rows"] == 0 and plan["model_id"] == out["model_id"]
    assert vectors(db) == message_ids(db)


@pytest.mark.both_backends
def test_limit_and_warmup(clean_home: Path, stub: Stub, monkeypatch: pytest.MonkeyPatch) -> None:
    db = populate(clean_home, 6)
    turn_on(monkeypatch, stub)
    code, out, _ = lcm("embed", "--warmup")
    assert (
        code == 0
        and out["warmup"] == "ok"
        and out["backlog_rows"] == 12
        and len(stub.requests) == 1
    )
    assert vectors(db) == []
    code, out, _ = lcm("embed", "--apply", "--limit", "3")
    assert code == 0 and out["embedded"] == 3 and len(vectors(db)) == 3


@pytest.mark.both_backends
@pytest.mark.parametrize(
    ("env", "answer"),
    [
        ({"LCM_EMBEDDING_PROVIDER": "voyage"}, None),
        ({}, lambda r, p: (500, {"error": "down"}, 0.0)),
    ],
    ids=["voyage-without-key", "http500"],
)
def test_a_provider_problem_is_exit_6(
    clean_home: Path, stub: Stub, monkeypatch: pytest.MonkeyPatch, env: dict[str, str], answer: Any
) -> None:
    db = populate(clean_home, 2)
    turn_on(monkeypatch, stub, **env)
    if answer is not None:
        stub.answer = answer
    code, _, err = lcm("embed", "--apply")
    assert code == 6 and "provider" in err and vectors(db) == []


def test_a_read_only_database_is_exit_3(
    clean_home: Path, stub: Stub, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = populate(clean_home, 2)
    turn_on(monkeypatch, stub)
    os.chmod(db, 0o444)
    if os.access(db, os.W_OK):
        os.chmod(db, 0o644)
        pytest.skip(
            "running as root: a file mode does not make the database read-only (the locked test covers exit 3)"
        )
    try:
        code, _, err = lcm("embed", "--apply")
    finally:
        os.chmod(db, 0o644)
    assert code == 3 and "read-only" in err and stub.requests == []


def test_a_locked_database_is_exit_3(
    clean_home: Path, stub: Stub, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = populate(clean_home, 2)
    turn_on(monkeypatch, stub)
    holder = sqlite3.connect(db, timeout=0)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        started = time.monotonic()
        code, _, err = lcm("embed", "--apply")
    finally:
        holder.rollback()
        holder.close()
    assert code == 3 and "database" in err and time.monotonic() - started < 60
    assert vectors(db) == []


@pytest.mark.both_backends
def test_ctrl_c_stops_after_the_batch_and_a_rerun_resumes(
    clean_home: Path, stub: Stub, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = populate(clean_home, 30)
    stub.answer = lambda r, p: (*openai_ok(r, p)[:2], 0.1)
    turn_on(monkeypatch, stub, LCM_EMBEDDING_BACKFILL_BATCH_SIZE="2")
    env = {**os.environ, "PYTHONPATH": str(ROOT / ".pyroot")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "hermes_lcm.cli.main", "embed", "--apply"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 30
    while len(stub.requests) < 4 and time.monotonic() < deadline:
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert "lcm embed --apply" in err and "resume" in err
    partial = len(vectors(db))
    assert 0 < partial < 60
    assert len(sent := [t for p, b, _ in stub.requests[1:] for t in b["input"]]) == partial, sent
    stub.answer = openai_ok
    code, result, _ = lcm("embed", "--apply")
    assert code == 0 and result["embedded"] == 60 - partial
    assert vectors(db) == message_ids(db)


@pytest.mark.both_backends
def test_status_and_doctor_show_embeddings(
    clean_home: Path, stub: Stub, monkeypatch: pytest.MonkeyPatch
) -> None:
    populate(clean_home, 2)
    _, status, _ = lcm("status")
    assert status["embeddings"]["enabled"] is False
    _, doctor, _ = lcm("doctor")
    check = next(c for c in doctor["checks"] if c["name"] == "embeddings")
    assert check["status"] == "ok" and "off" in check["detail"]
    turn_on(monkeypatch, stub)
    _, status, _ = lcm("status")
    assert (
        status["embeddings"]["backlog_rows"] == 4
        and status["embeddings"]["sent_off_this_machine"] is True
    )
    _, doctor, _ = lcm("doctor")
    check = next(c for c in doctor["checks"] if c["name"] == "embeddings")
    assert check["status"] == "ok" and check["data"]["backlog_rows"] == 4
    stub.answer = lambda r, p: (500, {"error": "down"}, 0.0)
    _, doctor, _ = lcm("doctor")
    check = next(c for c in doctor["checks"] if c["name"] == "embeddings")
    assert check["status"] == "warn" and "does not answer" in check["detail"]
    monkeypatch.setenv("LCM_EMBEDDING_PROVIDER", "voyage")
    _, doctor, _ = lcm("doctor")
    check = next(c for c in doctor["checks"] if c["name"] == "embeddings")
    assert check["status"] == "warn" and "key" in check["detail"]
    # the probe sends the fixed warmup text, never a stored message
    assert all(b["input"] == ["hermes-lcm warmup"] for _, b, _ in stub.requests)


# --------------------------------------------------------------------------- /lcm embed


def slash(args: str) -> dict[str, Any]:
    text = handle_command(f"{args} --json")
    assert not text.startswith("hermes-lcm:"), text
    return json.loads(text)


@pytest.mark.both_backends
def test_slash_embed_dry_run_warmup_apply_and_progress(clean_home: Path, stub: Stub) -> None:
    env = {
        "LCM_EMBEDDINGS_ENABLED": "true",
        "LCM_EMBEDDING_PROVIDER": "openai",
        "LCM_EMBEDDING_BASE_URL": stub.base_url + "/v1",
        "LCM_EMBEDDING_BACKFILL_BATCH_SIZE": "4",
    }
    engine = new_engine(clean_home, LCM_ENABLE_SLASH_COMMAND="1", **WHERE, **env)
    core = engine.ensure_core()
    assert core is not None and core.semantic.job is not None
    core.semantic.job.ROWS_PER_RUN = 4  # small runs: the backfill must chain them
    gate = {"hold": True}
    stub.answer = lambda r, p: (
        *openai_ok(r, p)[:2],
        0.0 if not gate["hold"] else 5.0,
    )  # the job's runs hang
    messages = []
    for t in range(10):
        messages += [
            {"role": "user", "content": f"question {t}"},
            {"role": "assistant", "content": f"answer {t}"},
        ]
    started = time.monotonic()
    engine.ingest_host(messages)
    assert time.monotonic() - started < 2.0  # the ingest only requested the job
    plan = slash("embed")
    assert plan["backlog"]["rows"] == 20 and plan["backlog"]["sent_off_this_machine"] is True
    gate["hold"] = False
    assert slash("embed warmup")["warmup"] == "ok"
    out = slash("embed apply")
    assert out["job"]["backfilling"] is True or out["backlog"]["rows"] == 0
    deadline = time.monotonic() + 30
    while slash("embed")["backlog"]["rows"] and time.monotonic() < deadline:
        time.sleep(0.05)
    final = slash("embed")
    assert final["backlog"]["rows"] == 0 and final["job"]["errors"] == []
    assert final["job"]["progress"] is not None and "rows/s" in final["job"]["progress"]
    assert final["job"]["runs"] >= 5  # 20 rows, 4 per bounded run: the job chained its own runs
    status = slash("status")
    assert status["embeddings"]["enabled"] is True and status["embeddings"]["vectors"]["models"]
    doctor = slash("doctor")
    assert next(c for c in doctor["checks"] if c["name"] == "embeddings")["status"] == "ok"


@pytest.mark.both_backends
def test_slash_embed_when_off(clean_home: Path) -> None:
    engine = new_engine(clean_home, LCM_ENABLE_SLASH_COMMAND="1", **WHERE)
    engine.ensure_core()
    out = slash("embed")
    assert out["enabled"] is False and "LCM_EMBEDDINGS_ENABLED" in out["note"]
    assert handle_command("embed bogus").startswith("hermes-lcm: usage")


@pytest.mark.parametrize("backend", ["postgres"], indirect=True)
def test_a_missing_vector_index_is_reported_and_built_by_embed_apply(
    clean_home: Path, stub: Stub, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PostgreSQL: a model whose HNSW index is gone (dropped, refused, an interrupted build) is named
    by doctor and status, and the next ``lcm embed --apply`` builds it outside the write lock."""
    db = str(populate(clean_home, 6))
    turn_on(monkeypatch, stub)
    code, result, _ = lcm("embed", "--apply")
    assert (
        code == 0 and result["embedded"] == 12 and result["indexes_built"] == []
    )  # made with the first rows
    [index] = [
        r[0]
        for r in raw_sql(
            db,
            "SELECT indexname FROM pg_indexes WHERE schemaname = current_schema() "
            "AND position('vectors_hnsw_' in indexname) = 1",
        )
    ]
    raw_sql(db, f"DROP INDEX {index}")
    _, doctor, _ = lcm("doctor")
    check = next(c for c in doctor["checks"] if c["name"] == "embeddings")
    assert (
        check["status"] == "warn"
        and index in check["detail"]
        and check["data"]["indexes_missing"] == [index]
    )
    code, result, _ = lcm("embed", "--apply")
    assert code == 0 and result["embedded"] == 0 and result["indexes_built"] == [index]
    _, doctor, _ = lcm("doctor")
    check = next(c for c in doctor["checks"] if c["name"] == "embeddings")
    assert check["status"] == "ok" and check["data"]["indexes_missing"] == []

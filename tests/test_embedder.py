"""embedder.py and semantic.py on real SQLite files against a real provider: the stub
OpenAI-compatible server on 127.0.0.1 (tests/embedstub.py), and the local model when installed.

What matters: every row is embedded exactly once (a second run, a killed run, a failing provider
lose nothing and duplicate nothing), a cloud provider never gets a stored secret unless privacy is
turned off, a changed model is a new id, and Semantic degrades instead of raising.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections import deque
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from hermes_lcm import store as store_module
from hermes_lcm.config import LcmConfig
from hermes_lcm.embed import OpenAIProvider, provider_for
from hermes_lcm.embed.embedder import Embedder, EmbedJob
from hermes_lcm.embed.semantic import Semantic

from .backends import raw_sql
from .conftest import database_env, new_engine
from .embedstub import Stub, openai_ok, stub

__all__ = ["stub"]

SECRET = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"  # a GitHub token shape the catalog knows


def cfg(stub: Stub, **changes: Any) -> LcmConfig:
    base = dict(
        embeddings_enabled=True,
        embedding_provider="openai",
        embedding_base_url=stub.base_url + "/v1",
        embedding_model="text-embedding-3-small",
        embedding_backfill_batch_size=4,
    )
    base.update(changes)
    return replace(LcmConfig(), **base)


_DATABASE: dict[str, str] = {}  # the running test's database setting (a fresh schema on PostgreSQL)


@pytest.fixture(autouse=True)
def _database(backend: str) -> Any:
    _DATABASE.update(database_env(backend))
    yield
    _DATABASE.clear()


def populate(home: Path, turns: int, secret: str = "") -> Any:
    """A real database with ``turns`` user/assistant pairs stored by the engine (embeddings off):
    its file, or its URL when the test runs on PostgreSQL."""
    engine = new_engine(home, **_DATABASE)
    messages: list[dict[str, Any]] = []
    for t in range(turns):
        messages.append(
            {"role": "user", "content": f"question {t} about the parser {secret if t == 0 else ''}"}
        )
        messages.append({"role": "assistant", "content": f"answer {t}: the cache index moved"})
    engine.ingest_host(messages)
    return _DATABASE.get("LCM_DATABASE_URL") or home / "lcm.db"


def embedder(db: Path, config: LcmConfig) -> Embedder:
    store = store_module.open_store(db)
    provider = provider_for(config, {})
    assert provider is not None
    return Embedder(store, provider, config, store.secret("redaction"))


def vector_rows(db: Path) -> list[tuple[int, str, int]]:
    return raw_sql(str(db), "SELECT model_id, kind, item_id FROM vectors ORDER BY kind, item_id")  # type: ignore[return-value]


def message_ids(db: Path) -> list[int]:
    return [r[0] for r in raw_sql(str(db), "SELECT id FROM messages ORDER BY id")]


def sent_texts(stub: Stub) -> list[str]:
    return [
        t for path, body, _ in stub.requests if path.endswith("/embeddings") for t in body["input"]
    ]


@pytest.fixture(autouse=True)
def _close() -> Any:
    yield
    store_module.close_all()


# --------------------------------------------------------------------------- backfill


@pytest.mark.both_backends
def test_backfill_embeds_every_row_once_and_a_second_run_nothing(
    stub: Stub, tmp_path: Path
) -> None:
    db = populate(tmp_path, 9)
    config = cfg(stub)
    emb = embedder(db, config)
    assert emb.backlog().rows == 18 and emb.backlog().cost_usd is not None
    seen: list[int] = []
    progress = emb.backfill(on_progress=lambda p: seen.append(p.done))
    assert progress.done == 18 and seen == sorted(seen) and seen[-1] == 18
    rows = vector_rows(db)
    assert [r[2] for r in rows] == message_ids(db) and len(set(rows)) == len(rows)
    assert len(sent_texts(stub)) == 1 + 18  # the warmup, then each row once
    again = embedder(db, config)
    assert again.backfill().done == 0 and again.backlog().rows == 0
    assert len(sent_texts(stub)) == 1 + 18 + 1  # only the second warmup


@pytest.mark.both_backends
def test_should_stop_then_resume_loses_and_duplicates_nothing(stub: Stub, tmp_path: Path) -> None:
    db = populate(tmp_path, 10)
    config = cfg(stub)
    calls = iter(range(100))
    first = embedder(db, config).backfill(should_stop=lambda: next(calls) >= 2)
    assert 0 < first.done < 20
    assert embedder(db, config).backfill().done == 20 - first.done
    assert [r[2] for r in vector_rows(db)] == message_ids(db)


KILLED = """
import sys, time
from dataclasses import replace
from hermes_lcm import store as store_module
from hermes_lcm.config import LcmConfig
from hermes_lcm.embed import provider_for
from hermes_lcm.embed.embedder import Embedder
config = replace(LcmConfig(), embeddings_enabled=True, embedding_provider="openai", embedding_base_url=sys.argv[2],
                 embedding_backfill_batch_size=2)
store = store_module.open_store(sys.argv[1])
def progress(p):
    print(p.done, flush=True)
Embedder(store, provider_for(config, {}), config).backfill(on_progress=progress)
"""


@pytest.mark.both_backends
def test_a_killed_backfill_resumes_with_nothing_missed_or_doubled(
    stub: Stub, tmp_path: Path
) -> None:
    db = populate(tmp_path, 20)
    store_module.close_all()
    stub.answer = lambda r, p: (*openai_ok(r, p)[:2], 0.05)  # slow enough to be killed mid-way
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / ".pyroot")}
    proc = subprocess.Popen(
        [sys.executable, "-c", KILLED, str(db), stub.base_url + "/v1"],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        if int(line) >= 6:
            break
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(10)
    partial = len(vector_rows(db))
    assert 6 <= partial < 40
    stub.answer = openai_ok
    assert embedder(db, cfg(stub)).backfill().done == 40 - partial
    assert [r[2] for r in vector_rows(db)] == message_ids(db)


@pytest.mark.both_backends
def test_the_step_cursor_reads_only_newer_rows(stub: Stub, tmp_path: Path) -> None:
    db = populate(tmp_path, 3)
    emb = embedder(db, cfg(stub))
    assert emb.step(100) == 6
    first_cursor = emb.after["m"]
    assert first_cursor == message_ids(db)[-1]
    # a row behind the cursor loses its vector: the step does not look back
    raw_sql(str(db), "DELETE FROM vectors WHERE item_id=?", (message_ids(db)[0],))
    assert emb.step(100) == 0
    assert embedder(db, cfg(stub)).step(100) == 1  # a fresh embedder starts from the first row


# --------------------------------------------------------------------------- failing providers


@pytest.mark.parametrize(
    "answer",
    [
        lambda r, p: (500, {"error": "boom"}, 0.0),
        lambda r, p: (*openai_ok(r, p)[:2], 3.0),
        lambda r, p: (
            200,
            {"data": [{"index": i, "embedding": [1.0] * 5} for i in range(len(r["input"]))]},
            0.0,
        ),
    ],
    ids=["http500", "timeout", "wrong-dim"],
)
@pytest.mark.both_backends
def test_a_failing_provider_is_a_job_error_and_loses_nothing(
    stub: Stub, tmp_path: Path, answer: Any
) -> None:
    db = populate(tmp_path, 4)
    config = cfg(stub, embedding_query_timeout_s=0.5)
    emb = embedder(db, config)
    emb.warmup()  # dim 8 learned from a good answer
    stub.answer = answer
    job = EmbedJob(emb)
    job.SECONDS_PER_RUN = 0.5
    emb.batch_timeout = 0.5
    job.request()
    deadline = time.monotonic() + 40
    while not job.errors and time.monotonic() < deadline:
        time.sleep(0.05)
    job.stop()
    assert job.errors and "ProviderError" in job.errors[0]
    assert vector_rows(db) == []
    stub.answer = openai_ok
    assert embedder(db, config).backfill().done == 8


# --------------------------------------------------------------------------- what leaves the machine


@pytest.mark.both_backends
def test_a_cloud_provider_never_gets_a_stored_secret(stub: Stub, tmp_path: Path) -> None:
    db = populate(tmp_path, 2, secret=SECRET)
    assert raw_sql(str(db), "SELECT count(*) FROM messages WHERE content LIKE ?", (f"%{SECRET}%",))[
        0
    ][0]
    emb = embedder(db, cfg(stub))
    assert emb.provider.local is False
    emb.backfill()
    assert len(sent_texts(stub)) == 5
    assert not any(SECRET in t for t in sent_texts(stub))
    assert any("[lcm-redacted:" in t for t in sent_texts(stub))
    assert not any(SECRET in str(h) or SECRET in str(b) for _, b, h in stub.requests)


@pytest.mark.both_backends
def test_privacy_off_sends_the_text_as_stored_to_a_cloud_provider(
    stub: Stub, tmp_path: Path
) -> None:
    db = populate(tmp_path, 2, secret=SECRET)
    embedder(db, cfg(stub, embedding_privacy_enabled=False)).backfill()
    assert any(SECRET in t for t in sent_texts(stub))


@pytest.mark.both_backends
def test_privacy_off_from_the_environment(stub: Stub, tmp_path: Path) -> None:
    from hermes_lcm.config import load_config

    config = load_config(
        {
            "LCM_EMBEDDINGS_ENABLED": "true",
            "LCM_EMBEDDING_PROVIDER": "openai",
            "LCM_EMBEDDING_BASE_URL": stub.base_url + "/v1",
            "LCM_EMBEDDING_PRIVACY_ENABLED": "false",
        },
        {},
    ).config
    assert config.embedding_privacy_enabled is False
    db = populate(tmp_path, 2, secret=SECRET)
    embedder(db, config).backfill()
    assert any(SECRET in t for t in sent_texts(stub))


@pytest.mark.both_backends
def test_a_local_provider_with_redaction_off_gets_the_text_as_stored(
    stub: Stub, tmp_path: Path
) -> None:
    db = populate(tmp_path, 2, secret=SECRET)
    config = replace(
        cfg(stub),
        embedding_provider="ollama",
        ollama_base_url=stub.base_url,
        embedding_model="nomic-embed-text",
        sensitive_patterns_enabled=False,
    )
    stub.answer = lambda r, p: (
        200,
        {"embeddings": [[float(len(t) % 7 + 1), 1.0, 2.0] for t in r["input"]]},
        0.0,
    )
    emb = embedder(db, config)
    assert emb.provider.local is True and emb.redactor is None
    emb.backfill()
    sent = [t for _, body, _ in stub.requests for t in body["input"]]
    assert any(SECRET in t for t in sent)


# --------------------------------------------------------------------------- model changes


@pytest.mark.parametrize(
    "change",
    [
        {"embedding_model": "text-embedding-3-large"},
        {"embedding_storage_dtype": "int8"},
        {"embedding_store_dim": 4},
    ],
    ids=["name", "dtype", "store_dim"],
)
@pytest.mark.both_backends
def test_a_changed_model_is_a_new_id_and_is_re_embedded(
    stub: Stub, tmp_path: Path, change: dict[str, Any]
) -> None:
    db = populate(tmp_path, 3)
    first = embedder(db, cfg(stub))
    first.backfill()
    second = embedder(db, cfg(stub, **change))
    assert second.backlog().rows == 6 or second.model_id is None
    assert second.backfill().done == 6
    assert second.model_id != first.model_id
    assert len(vector_rows(db)) == 12


@pytest.mark.both_backends
def test_a_changed_provider_dimension_is_a_new_id(stub: Stub, tmp_path: Path) -> None:
    db = populate(tmp_path, 2)
    first = embedder(db, cfg(stub))
    first.backfill()
    stub.answer = lambda r, p: (
        200,
        {
            "data": [
                {"index": i, "embedding": [1.0 + i, 2.0, 3.0, 4.0]} for i in range(len(r["input"]))
            ]
        },
        0.0,
    )
    second = embedder(db, cfg(stub))
    assert second.backfill().done == 4 and second.dim == 4 and second.model_id != first.model_id


# --------------------------------------------------------------------------- Semantic


def semantic(db: Path, config: LcmConfig, env: dict[str, str] | None = None) -> Semantic:
    return Semantic(config, store_module.open_store(db), env or {})


def test_the_index_appends_new_rows_and_reloads_after_a_delete(stub: Stub, tmp_path: Path) -> None:
    db = populate(tmp_path, 3)
    sem = semantic(db, cfg(stub))
    assert sem.embedder is not None
    assert sem.index("m") is None  # before any warmup: nothing to search
    sem.embedder.backfill()
    first = sem.index("m")
    assert first is not None and len(first.ids) == 6
    assert sem.index("m") is first  # unchanged: cached
    engine = new_engine(tmp_path)
    engine.ingest_host(
        [
            {"role": "user", "content": "question 0 about the parser "},
            {"role": "assistant", "content": "answer 0: the cache index moved"},
            {"role": "user", "content": "a new question"},
        ]
    )
    assert sem.embedder.step(100) >= 1
    grown = sem.index("m")
    assert grown is not None and len(grown.ids) == len(vector_rows(db))
    assert grown.ids.tolist() == sorted(grown.ids.tolist())
    victim = int(grown.ids[1])
    with sqlite3.connect(db) as conn:
        conn.execute(
            "UPDATE messages SET content = content || ' edited' WHERE id=?", (victim,)
        )  # trigger drops it
    reloaded = sem.index("m")
    assert reloaded is not None and victim not in reloaded.ids.tolist()
    assert len(reloaded.ids) == len(vector_rows(db))
    # the cache keeps the index only: no second copy of the rows beside it
    held = [v for v in vars(sem._cache["m"]).values() if isinstance(v, np.ndarray)]
    assert held == [] and sem._cache["m"].index is reloaded


@pytest.mark.both_backends
def test_a_broken_provider_setting_is_a_problem_not_an_exception(tmp_path: Path) -> None:
    db = populate(tmp_path, 1)
    config = replace(LcmConfig(), embeddings_enabled=True, embedding_provider="voyage")
    sem = semantic(db, config)
    assert sem.embedder is None and sem.problem and "key" in sem.problem
    assert sem.query_vector("x") is None and sem.index("m") is None
    assert sem.status()["enabled"] is False and "problem" in sem.status()
    sem.after_ingest()
    sem.close()


@pytest.mark.both_backends
def test_a_failing_query_is_recorded_and_returns_none(stub: Stub, tmp_path: Path) -> None:
    db = populate(tmp_path, 1)
    sem = semantic(db, cfg(stub))
    stub.answer = lambda r, p: (500, {"error": "down"}, 0.0)
    assert sem.query_vector("parser") is None
    assert sem.query_failures == 1 and "HTTP 500" in (sem.last_query_error or "")
    stub.answer = openai_ok
    vector = sem.query_vector("parser")
    assert vector is not None and vector.shape == (8,)


def test_a_read_only_store_has_no_job_and_never_writes(stub: Stub, tmp_path: Path) -> None:
    db = populate(tmp_path, 2)
    store_module.close_all()
    os.chmod(db, 0o444)
    try:
        ro = store_module.open_readonly(db)
        sem = Semantic(cfg(stub), ro, {})
        assert sem.job is None
        sem.after_ingest()
        assert (
            sem.query_vector("parser") is None
        )  # the warmup cannot create tables: recorded, not raised
        assert isinstance(sem.status(), dict)
    finally:
        os.chmod(db, 0o644)
    with sqlite3.connect(db) as conn:
        assert not conn.execute("SELECT name FROM sqlite_master WHERE name='vectors'").fetchall()


@pytest.mark.both_backends
def test_the_local_provider_embeds_the_backlog(tmp_path: Path) -> None:
    try:
        import onnxruntime  # noqa: F401
        import tokenizers  # noqa: F401
    except ImportError as exc:
        pytest.skip(f"the local extra is not installed: {exc}")
    db = populate(tmp_path, 3, secret=SECRET)
    config = replace(
        LcmConfig(),
        embeddings_enabled=True,
        embedding_provider="local",
        embedding_storage_dtype="int8",
    )
    emb = embedder(db, config)
    assert emb.provider.local and emb.backlog().cost_usd == 0.0
    assert emb.backfill().done == 6 and emb.dim == 384
    assert [r[2] for r in vector_rows(db)] == message_ids(db)


@pytest.mark.both_backends
def test_openai_provider_on_loopback_is_still_a_cloud_provider(stub: Stub) -> None:
    assert OpenAIProvider(stub.base_url + "/v1", "m", None, 4).local is False


@pytest.mark.both_backends
def test_a_row_re_embedded_between_two_searches_is_not_served_stale(
    stub: Stub, tmp_path: Path
) -> None:
    """Edit a row (the trigger drops its vector) and re-embed it before the index is read again:
    the count and newest id are what they were, yet the cached vector is of the old text."""
    db = populate(tmp_path, 3)
    sem = semantic(db, cfg(stub))
    assert sem.embedder is not None
    sem.embedder.backfill()
    assert sem.index("m") is not None
    victim = message_ids(db)[1]
    raw_sql(
        str(db),
        "UPDATE messages SET content = 'zq wholly different words now' WHERE id=?",
        (victim,),
    )
    assert embedder(db, cfg(stub)).backfill().done == 1
    index = sem.index("m")
    assert index is not None
    hits = index.search(sem.embedder.query("zq wholly different words now"), 1)
    assert hits[0][0] == victim and hits[0][1] > 0.999


@pytest.mark.both_backends
def test_a_requested_backfill_chains_bounded_runs_and_a_failure_ends_it(
    stub: Stub, tmp_path: Path
) -> None:
    db = populate(tmp_path, 6)
    emb = embedder(db, cfg(stub))
    job = EmbedJob(emb)
    job.ROWS_PER_RUN = 3
    job.request_backfill()
    deadline = time.monotonic() + 20
    while job.backfilling and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not job.backfilling and job.runs >= 4 and job.errors == deque()
    assert [r[2] for r in vector_rows(db)] == message_ids(db)
    progress = job.progress()
    assert progress is not None and progress.done == 12 and progress.total == 12
    # two rows change: their vectors are dropped
    raw_sql(
        str(db),
        "UPDATE messages SET content = content || ' again' WHERE id IN (?, ?)",
        tuple(message_ids(db)[:2]),
    )
    stub.answer = lambda r, p: (500, {"error": "down"}, 0.0)
    job.request_backfill()
    while job.backfilling and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not job.backfilling and job.errors and "HTTP 500" in job.errors[-1]
    stub.answer = openai_ok
    job.request_backfill()  # from the first row again: the rows behind the cursor are found
    while job.backfilling and time.monotonic() < deadline:
        time.sleep(0.02)
    job.stop()
    assert [r[2] for r in vector_rows(db)] == message_ids(db)


def test_a_backfill_sends_texts_shortest_first_and_reports_from_the_start(
    stub: Stub, tmp_path: Path
) -> None:
    """A batch is padded to its longest text: the rows of a window go out sorted by length, so
    long messages share batches with long ones; progress is told before the first batch and
    after each one."""
    engine = new_engine(tmp_path, **_DATABASE)
    lengths = [5, 400, 12, 900, 30, 3, 250, 60, 700, 8, 120, 40]
    engine.ingest_host(
        [
            {"role": "user" if i % 2 == 0 else "assistant", "content": ("w " * n).strip() or "w"}
            for i, n in enumerate(lengths)
        ]
    )
    db = _DATABASE.get("LCM_DATABASE_URL") or tmp_path / "lcm.db"
    seen: list[tuple[int, int]] = []
    done = embedder(db, cfg(stub)).backfill(on_progress=lambda p: seen.append((p.done, p.total)))
    assert done.done == len(lengths)
    batches = [[len(t) for t in body["input"]] for _, body, _ in stub.requests if "input" in body][
        -3:
    ]
    flat = [n for b in batches for n in b]
    assert len(batches) == 3 and flat == sorted(flat), (
        batches
    )  # 12 rows in batches of 4, shortest first
    assert seen[0] == (0, len(lengths)) and [d for d, _ in seen] == [0, 4, 8, 12]
    assert [r[2] for r in vector_rows(db)] == message_ids(db)

"""Shared fixtures: real engines on real SQLite files under tmp_path, or on a real PostgreSQL
server (tests/pgserver.py) for the contract tests marked ``both_backends``, which run on each."""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from hermes_lcm import store as store_module
from hermes_lcm.engine import LcmEngine

from .reliability.stub_summarizer import StubSummarizer


def new_engine(home: Path, threshold: int = 6000, session: str = "s1", **env: str) -> LcmEngine:
    """An engine copy as the host makes one: template, deepcopy, model, session start."""
    base = {"HERMES_HOME": str(home), "LCM_SUMMARY_PROVIDER": "extractive", **env}
    engine = copy.deepcopy(LcmEngine(env=base))
    engine.update_model("fake-model", 64000)
    engine.threshold_tokens = threshold
    engine.on_session_start(session, hermes_home=str(home), platform="cli")
    return engine


BACKENDS = ("sqlite", "postgres")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "both_backends: the test runs on SQLite and on PostgreSQL (make_engine)"
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "backend" in metafunc.fixturenames and metafunc.definition.get_closest_marker(
        "both_backends"
    ):
        metafunc.parametrize("backend", BACKENDS, indirect=True)


@pytest.fixture
def backend(request: pytest.FixtureRequest) -> str:
    """The store a test's engines use: SQLite unless the test is a contract test on both."""
    return str(getattr(request, "param", "sqlite"))


def database_env(backend: str) -> dict[str, str]:
    """The setting that puts an engine on ``backend`` (a fresh schema of the test server for PostgreSQL)."""
    if backend == "postgres":
        from .pgserver import fresh_url

        return {"LCM_DATABASE_URL": fresh_url()}
    return {}


@contextlib.contextmanager
def fresh_database(backend: str) -> Iterator[dict[str, str]]:
    """The settings for one hypothesis example on ``backend``: a database of its own (a new schema
    on PostgreSQL, the example's home on SQLite), every store closed after it. A function-scoped
    fixture is shared by all examples of a test, so an example that wants a clean database asks here."""
    try:
        yield database_env(backend)
    finally:
        store_module.close_all()


@pytest.fixture
def make_engine(tmp_path: Path, backend: str) -> Iterator[Callable[..., LcmEngine]]:
    where = database_env(backend)

    def make(threshold: int = 6000, session: str = "s1", **env: Any) -> LcmEngine:
        return new_engine(tmp_path, threshold, session, **{**where, **env})

    yield make
    store_module.close_all()


@pytest.fixture
def backend_env(backend: str) -> Iterator[dict[str, str]]:
    """The settings that put engines a test builds itself (its own home, user, platform) on
    ``backend``, one database for the whole test; every store is closed after it."""
    yield database_env(backend)
    store_module.close_all()


@pytest.fixture
def stub(backend_env: dict[str, str]) -> Iterator[StubSummarizer]:
    """An OpenAI-compatible summarizer on 127.0.0.1 (reliability/stub_summarizer.py) whose
    :meth:`~StubSummarizer.engine` builds engines on the test's backend."""
    server = StubSummarizer()
    server.env = dict(backend_env)
    yield server
    server.close()
    store_module.close_all()


@pytest.fixture
def clean_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    """HERMES_HOME is this test's tmp_path and no LCM_* setting comes from outside; no engine or
    store outlives the test (the template, the CLI and /lcm all read the home it names)."""
    import gc
    import os

    gc.collect()
    monkeypatch.setenv("HERMES_HOME", str(tmp_path))
    for key in [k for k in os.environ if k.startswith("LCM_")]:
        monkeypatch.delenv(key)
    yield tmp_path
    store_module.close_all()
    gc.collect()

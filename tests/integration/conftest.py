"""Fixtures for driving the real Hermes host (hermes-agent) against the stub model.

These tests need ``hermes-agent`` importable by ``sys.executable``: the test command installs
it next to hermes-lcm, so its absence is a failure, not a skip.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from .harness import HostHome, make_home, require_host
from .stub_llm import StubLLM


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "host: drives the real Hermes host in a subprocess")


@pytest.fixture
def stub() -> Iterator[StubLLM]:
    require_host()
    with StubLLM() as server:
        yield server


@pytest.fixture
def host_defaults(tmp_path: Path, stub: StubLLM) -> HostHome:
    """A HERMES_HOME with the host at its own defaults (every CLI toolset, memory on, the memory
    and skill reviews every 10 turns), hermes-lcm as its engine. Run it with
    ``run_host(..., host_defaults=True)``. The one setting of ours: a threshold low enough that a
    few dozen turns compact under the ~14k tokens of system prompt and tool schemas."""
    return make_home(tmp_path, stub, host_defaults=True, env={"LCM_CONTEXT_THRESHOLD": "0.3"})

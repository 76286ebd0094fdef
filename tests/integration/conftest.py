"""Fixtures for driving the real Hermes host (hermes-agent) against the stub model.

These tests need ``hermes-agent`` importable by ``sys.executable``: the test command installs
it next to hermes-lcm, so its absence is a failure, not a skip.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .harness import require_host
from .stub_llm import StubLLM


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "host: drives the real Hermes host in a subprocess")


@pytest.fixture
def stub() -> Iterator[StubLLM]:
    require_host()
    with StubLLM() as server:
        yield server

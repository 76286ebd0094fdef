"""LCM_SUMMARY_REASONING_EFFORT through the real host: the engine's summary calls go through the
host's auxiliary client (``call_llm``) with Hermes' own reasoning config, which the host turns into
the provider's request fields; the stub on 127.0.0.1 sees them on every summary request and on no
request of the user's own model."""

from __future__ import annotations

from pathlib import Path

import pytest

from .harness import make_home, require_host, run_host
from .stub_llm import StubLLM, directive_policy

pytestmark = pytest.mark.host


def message(i: int) -> str:
    body = " ".join(f"note{(i * 13 + k) % 89}x{k % 5}" for k in range(160))
    return f"turn {i}: keep these for later. {body}"


def test_summary_calls_carry_the_reasoning_effort(tmp_path: Path) -> None:
    require_host()
    with StubLLM(directive_policy) as stub:
        home = make_home(
            tmp_path,
            stub,
            env={
                "LCM_ABSOLUTE_THRESHOLD_TOKENS": "10000",
                "LCM_COMPACTION_MODE": "inline",
                "LCM_SUMMARY_REASONING_EFFORT": "high",
            },
        )
        run_host(home, [message(i) for i in range(30)], timeout=600)
        summaries = [r for r in stub.requests if r.kind == "summary"]
        others = [r for r in stub.requests if r.kind != "summary"]
    assert summaries, "no summary was made"
    for request in summaries:
        effort = request.body.get("reasoning") or {}
        assert effort == {"enabled": True, "effort": "high"}, request.body.keys()
    assert all(r.body.get("reasoning", {}).get("effort") != "high" for r in others)

"""A real HTTP summarizer that times out, rate-limits, errors or answers garbage.

The engine talks to a stub OpenAI-compatible server on 127.0.0.1 (LCM_SUMMARY_PROVIDER=openai).
Whatever the endpoint does, the session keeps going: every turn is stored, compaction still
moves the frontier (falling back to the deterministic summary), each prompt handed back fits the
budget, no bad answer is stored as a summary, and the failure is visible in ``get_status()``.
On SQLite and PostgreSQL (``both_backends``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hermes_lcm.base.tokens import count_messages
from hermes_lcm.engine import LcmEngine

from ..backends import raw_sql
from .stub_summarizer import INJECTION, StubSummarizer
from .worker import turn_messages

pytestmark = pytest.mark.both_backends
TURNS = 40
FAULTS = {
    # mode: text expected in the status' summarizer errors
    "timeout": "timeout",
    "429": "HTTP 429",
    "500": "HTTP 500",
    "malformed": "not valid JSON",
    "empty": "empty answer",
    "reasoning": "reasoning-only",
    "overlong": "over-long",
    "injected": "too short",
    "echo": "nonce",
    "refusal": "refusal",
}


def engine_for(home: Path, stub: StubSummarizer, **extra: str) -> LcmEngine:
    return stub.engine(home, "faults", LCM_SUMMARY_TIMEOUT_MS="300", **extra)


def play(engine: LcmEngine, turns: int = TURNS) -> dict[str, Any]:
    """Host turns in CLI shape; returns what happened. Every compress result is checked against its budget."""
    host: list[dict[str, Any]] = []
    compactions, worst_over = 0, 0
    core = engine.ensure_core()
    assert core is not None
    for turn in range(turns):
        new = turn_messages("faults", turn)
        if turn % 5 == 1:
            new[0] = {**new[0], "content": f"{new[0]['content']} {INJECTION}"}
        host.extend(new)
        engine.ingest_host(host)
        tokens = count_messages(host) + 400
        if engine.should_compress(tokens):
            budget = core.budget(engine.threshold_tokens, engine.overhead(host, tokens))
            host = engine.compress(host, current_tokens=tokens)
            compactions += 1
            worst_over = max(worst_over, count_messages(host) - budget.total)
    return {"compactions": compactions, "worst_over_budget": worst_over}


def summaries(home: Path, stub: StubSummarizer) -> list[tuple[str, str, str]]:
    db = stub.database(home)
    return [
        (str(a), str(b), str(c))
        for a, b, c in raw_sql(db, "SELECT level, route, content FROM summaries")
    ]


def test_healthy_endpoint_is_used(tmp_path: Path, stub: StubSummarizer) -> None:
    engine = engine_for(tmp_path, stub)
    result = play(engine)
    assert result["compactions"] > 3 and result["worst_over_budget"] <= 0
    stored = summaries(tmp_path, stub)
    assert stored and all(
        route == "openai:stub-model" and level == "normal" for level, route, _ in stored
    )
    status = engine.get_status()
    assert status["summarizer_guard"]["last_errors"] == [] and status["errors"] == []


@pytest.mark.parametrize("mode", sorted(FAULTS))
def test_faulty_endpoint_never_stalls_or_pollutes(
    tmp_path: Path, stub: StubSummarizer, mode: str
) -> None:
    stub.mode = mode
    engine = engine_for(tmp_path, stub)
    result = play(
        engine
    )  # never stalls: the open breaker bounds the calls (asserted below), not a clock
    assert result["compactions"] > 3
    assert result["worst_over_budget"] <= 0, (
        f"{mode}: prompt over budget by {result['worst_over_budget']} tokens"
    )
    status = engine.get_status()
    assert status["errors"] == [] and status["engine_errors"] == [], status["errors"]
    assert status["messages_in_conversation"] == sum(
        len(turn_messages("faults", t)) for t in range(TURNS)
    )
    assert status["frontier_seq"] > 0, "compaction made no progress"
    guard = status["summarizer_guard"]
    seen = (
        " ".join(guard["last_errors"]) + " " + " ".join(status["last_compaction"].get("errors", []))
    )
    assert FAULTS[mode].lower() in seen.lower(), f"{mode}: failure not visible in status: {guard}"
    assert guard["open_breakers"] == ["openai:stub-model"], (
        "two failures must open the circuit breaker"
    )
    stored = summaries(tmp_path, stub)
    assert stored and all(level != "normal" and level != "aggressive" for level, _, _ in stored), (
        stored[:2]
    )
    garbage = ("goes on and on", "<think>", "I'm sorry, but I can't", "<transcript-")
    assert not any(
        content.strip() == "PWNED" or any(g in content for g in garbage) for _, _, content in stored
    )
    assert len(stub.requests) <= 4, (
        f"{mode}: the open breaker should stop calls, saw {len(stub.requests)}"
    )


def test_flaky_endpoint_recovers(tmp_path: Path, stub: StubSummarizer) -> None:
    """Failures alternate with good answers; with no cooldown the good ones are used again."""
    stub.mode = "flaky"
    engine = engine_for(tmp_path, stub, LCM_SUMMARY_CIRCUIT_BREAKER_COOLDOWN_SECONDS="0")
    result = play(engine)
    assert result["worst_over_budget"] <= 0
    levels = {level for level, _, _ in summaries(tmp_path, stub)}
    assert "normal" in levels, levels
    assert any("HTTP 500" in e for e in engine.get_status()["summarizer_guard"]["last_errors"])

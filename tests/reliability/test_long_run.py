"""5,000 turns through the engine with the offline summarizer, as a CLI host plays them.

Every turn: ingest the host's list (post_llm_call), should_compress, and one assembly from the
store; compress when the engine asks. Throughout: every prompt (assembled or handed back by
compress) fits its budget, the summary prefix stays bounded by its share of the budget however
long the history, nothing is lost, and the per-turn overhead does not grow with the history
(counted as work, lines of the package's Python and SQLite VM steps, so other load on the machine
cannot make the test flaky: tests/workcount.py). On SQLite and PostgreSQL (``both_backends``; on
PostgreSQL the work counted is our Python's lines: the server's steps are not ours to count).
"""

from __future__ import annotations

import copy
import functools
import statistics
from pathlib import Path
from typing import Any

import pytest

from hermes_lcm.base.tokens import count_messages
from hermes_lcm.engine import LcmEngine
from hermes_lcm.handlers.status import core_status
from hermes_lcm.store import close_all, is_url

from ..workcount import measure
from .helpers import grow, msg

TURNS = 5000
SAMPLED = 40  # turns whose work is counted, early and late (tracing makes a turn ~10x slower)
THRESHOLD = 8000
OVERHEAD = 600  # what the host adds (system prompt, tool schemas), reported through usage

pytestmark = pytest.mark.both_backends


def vm(store: Any) -> Any:
    """The connection whose SQLite VM steps count too (none on PostgreSQL)."""
    return None if is_url(store.path) else store.conn


def turn(t: int) -> list[dict[str, Any]]:
    ask = {
        "role": "user",
        "content": f"t{t}: fix the parser bug number {t * 31 % 997} in src/p{t % 50}.py please",
    }
    if t % 5:
        return [
            ask,
            {"role": "assistant", "content": f"t{t}: done, the parser now handles case {t % 13}."},
        ]
    call = f"c{t}"
    run = {"name": "run", "arguments": f'{{"cmd": "pytest -k {t}"}}'}
    return [
        ask,
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": call, "type": "function", "function": run}],
        },
        {
            "role": "tool",
            "tool_call_id": call,
            "name": "run",
            "content": f"t{t}: " + "PASSED test_case\n" * 20,
        },
        {"role": "assistant", "content": f"t{t}: tests pass."},
    ]


def _one_turn(
    engine: LcmEngine, host: list[dict[str, Any]], tokens: int, budget: Any
) -> tuple[bool, list[dict[str, Any]]]:
    """What the host does around one model call: ingest its list, ask, and assemble from the store."""
    engine.ingest_host(host)
    core = engine.ensure_core()
    assert core is not None
    return engine.should_compress(tokens), core.assemble(budget)


def test_five_thousand_turns_stay_bounded_and_flat(
    tmp_path: Path, backend_env: dict[str, str]
) -> None:
    engine = copy.deepcopy(
        LcmEngine(
            env={
                "HERMES_HOME": str(tmp_path),
                "LCM_SUMMARY_PROVIDER": "extractive",
                "LCM_ABSOLUTE_THRESHOLD_TOKENS": str(THRESHOLD),
                **backend_env,
            }
        )
    )
    engine.update_model("long-run-model", 128_000)
    engine.on_session_start("long", hermes_home=str(tmp_path), platform="cli")
    core = engine.ensure_core()
    assert core is not None
    host: list[dict[str, Any]] = []
    per_turn: dict[int, int] = {}
    prefix: list[int] = []
    over_budget: list[tuple[int, int]] = []
    expected_rows = 0
    compactions = 0
    for t in range(TURNS):
        new = turn(t)
        host.extend(new)
        expected_rows += len(new)
        tokens = count_messages(host) + OVERHEAD
        budget = core.budget(engine.threshold_tokens, OVERHEAD)
        one_turn = functools.partial(_one_turn, engine, host, tokens, budget)
        if 300 <= t < 300 + SAMPLED or t >= TURNS - SAMPLED:
            (wants, prompt), work = measure(one_turn, vm(core.store))
            per_turn[t] = work.total
        else:
            wants, prompt = one_turn()
        if count_messages(prompt) > budget.total:
            over_budget.append((t, count_messages(prompt) - budget.total))
        if wants:
            real = core.budget(engine.threshold_tokens, engine.overhead(host, tokens))
            host = engine.compress(host, current_tokens=tokens)
            compactions += 1
            if count_messages(host) > real.total:
                over_budget.append((t, count_messages(host) - real.total))
            status = core_status(core)
            prefix.append(status["context_summary_tokens"])
    status = engine.get_status()
    close_all()
    assert status["errors"] == [] and status["engine_errors"] == []
    assert status["messages_in_conversation"] == expected_rows
    assert over_budget == [], f"prompts over budget (turn, tokens over): {over_budget[:5]}"
    assert compactions > 60
    assert max(status["summaries_by_depth"]) >= 2, "the DAG should have condensed deeper by now"
    # Bounded: never above the compaction goal, and flat once the DAG reaches its depth cap (it ramps
    # up over the first ~2,500 turns, then settles; it may exceed its nominal share, budget.summaries,
    # because nothing is evicted while the whole prompt is under the goal).
    goal = core.budget(THRESHOLD, OVERHEAD).goal
    assert max(prefix) <= goal, (
        f"summary prefix reached {max(prefix)} tokens, the compaction goal is {goal}"
    )
    quarter = len(prefix) // 4
    third_q, last_q = max(prefix[2 * quarter : 3 * quarter]), max(prefix[3 * quarter :])
    assert last_q <= 1.1 * third_q + 50, (
        f"summary prefix still growing: max {third_q} -> {last_q} tokens"
    )
    early = statistics.median(w for t, w in per_turn.items() if t < TURNS // 2)
    late = statistics.median(w for t, w in per_turn.items() if t >= TURNS // 2)
    print(f"per-turn work: {early:.0f} early, {late:.0f} late")
    assert late <= 1.5 * early, f"per-turn work grew: {early:.0f} -> {late:.0f} (lines + VM steps)"


def test_api_shape_ingest_does_not_grow_with_history(
    tmp_path: Path, backend_env: dict[str, str]
) -> None:
    """The API server re-sends the whole history every turn; ingest must not pay for its length.

    (It did: the whole list was filtered twice per call, 11 ms at 40k messages against 0.4 ms at 1k.)
    """
    engine = copy.deepcopy(
        LcmEngine(
            env={"HERMES_HOME": str(tmp_path), "LCM_SUMMARY_PROVIDER": "extractive", **backend_env}
        )
    )
    engine.update_model("long-run-model", 128_000)
    engine.on_session_start("api-long", hermes_home=str(tmp_path), platform="api")

    def median_turn_work(history: list[dict[str, Any]], start: int) -> float:
        core = engine.ensure_core()
        assert core is not None
        samples = []
        for k in range(start, start + 40, 2):
            history.extend([msg(k), msg(k + 1)])
            samples.append(measure(lambda: engine.ingest_host(history), vm(core.store))[1].total)
        return statistics.median(samples)

    grow(engine, 0, 40_000)
    long_history = [msg(i) for i in range(40_000)]
    late = median_turn_work(long_history, 40_000)
    engine.on_session_start("api-short", hermes_home=str(tmp_path), platform="api")
    grow(engine, 0, 1000)
    early = median_turn_work([msg(i) for i in range(1000)], 1000)
    print(f"per-turn ingest work: {early:.0f} at 1k messages, {late:.0f} at 40k")
    assert late <= 1.5 * early, (
        f"per-turn ingest work: {early:.0f} at 1k messages, {late:.0f} at 40k"
    )
    close_all()

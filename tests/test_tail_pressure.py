"""Fresh-tail pressure (LCM-X's LCM_CRITICAL_BUDGET_PRESSURE_RATIO and tail yield): a session whose
protected fresh tail alone is larger than the budget. No setting is needed here: the tail yields
to the budget on every prompt (its newest group whole, older tail messages left out of the prompt
and kept stored), and a deferred compaction never waits for a preparation once the prompt is past
halfway from its goal to the budget."""

from __future__ import annotations

from pathlib import Path

import pytest

from hermes_lcm.base.tokens import count_messages

from .conftest import new_engine
from .convo import assert_valid_sequence

pytestmark = pytest.mark.both_backends


def big_turn(i: int) -> list[dict[str, str]]:
    body = " ".join(f"t{i}w{k}" for k in range(900))  # about 2,700 tokens a message
    return [
        {"role": "user", "content": f"question {i}: {body}"},
        {"role": "assistant", "content": f"answer {i}: {body}"},
    ]


def test_a_fresh_tail_larger_than_the_budget_yields_to_it(tmp_path: Path, backend_env) -> None:
    engine = new_engine(
        tmp_path,
        20_000,
        "s1",
        LCM_FRESH_TAIL_COUNT="64",
        LCM_FRESH_TAIL_MAX_TOKENS="1000000",
        **backend_env,
    )
    core = engine.core
    assert core is not None
    host: list[dict[str, str]] = []
    for i in range(16):  # 32 messages of ~2.7k tokens: the tail alone is ~86k, the budget ~20k
        host += big_turn(i)
    host.append({"role": "user", "content": "the newest question, which must reach the model"})
    tokens = count_messages(host)
    budget = core.budget(engine.threshold_tokens, engine.overhead(host, tokens))
    assert tokens > 4 * budget.total
    out = engine.compress(list(host), current_tokens=tokens)
    assert count_messages(out) <= budget.total
    assert_valid_sequence(out)
    assert out[-1]["content"] == host[-1]["content"]
    assert core.binding.conversation_id is not None
    assert core.store.message_count(core.binding.conversation_id) == len(host)  # nothing lost
    status = engine.get_status()
    assert status["engine_errors"] == [] and status["messages_in_conversation"] == len(host)

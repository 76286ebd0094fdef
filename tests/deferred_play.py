"""Host turns played against an engine as Hermes plays them, for deferred compaction's tests and
benchmark (bench/prepare_point.py): turn shapes, and :func:`play`, which counts the summary calls
the stub summarizer answered inside each compress (the user's turn) and between turns."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from hermes_lcm.base.tokens import count_messages
from hermes_lcm.engine import LcmEngine

from .convo import assert_valid_sequence
from .reliability.stub_summarizer import StubSummarizer

TURNS = 40
OVERHEAD = 400


def turn(i: int) -> list[dict[str, Any]]:
    words = " ".join(f"w{i}x{k}" for k in range(60))
    return [
        {"role": "user", "content": f"Question {i}: what about module m{i}? {words}"},
        {"role": "assistant", "content": f"Answer {i}: module m{i} is fine. {words}"},
    ]


def working_turn(i: int) -> list[dict[str, Any]]:
    """A turn shaped like work: its length varies, and every third one reads a file by a tool."""
    words = " ".join(f"v{i}y{k}" for k in range(20 + (i * 37) % 90))
    messages: list[dict[str, Any]] = [{"role": "user", "content": f"Task {i}: {words}"}]
    if i % 3 == 0:
        call = {"id": f"call_{i}", "type": "function"}
        call["function"] = {"name": "read_file", "arguments": json.dumps({"path": f"m{i}.py"})}
        messages += [
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"call_{i}", "content": f"def f{i}(): {words}"},
        ]
    return [*messages, {"role": "assistant", "content": f"Done {i}. {words}"}]


def play(
    engine: LcmEngine,
    stub: StubSummarizer,
    *,
    think: float | None,
    shape: Any = turn,
    turns: int = TURNS,
    history: Sequence[dict[str, Any]] = (),
    done: bool = True,
) -> dict[str, Any]:
    """Host turns in CLI shape, in the host's order: the user's message joins the list, the host
    compresses if that prompt reaches the threshold (the calls each compress made are counted and
    its prompt checked), then the turn's other messages and the reply, whose prompt is the
    request before it; then ``post_llm_call``, and the user's pause: up to ``think`` seconds for
    the preparer to finish (None: no pause; a test that passes a number expects it to finish in
    that time unless ``done`` is False). ``history``: what the host's list holds before the first
    turn (a resumed session's). Returns the calls each compress made (``inside``), the frontier
    after it, all calls, and how many prepared summaries waited after each turn."""
    core = engine.ensure_core()
    assert core is not None
    host: list[dict[str, Any]] = list(history)
    inside: list[int] = []
    frontiers: list[int] = []  # how far the conversation was summarized after each compress
    waiting: list[int] = []
    first = len(stub.requests)
    for i in range(turns):
        user, *rest = shape(i)
        host.append(user)
        tokens = count_messages(host) + OVERHEAD
        if engine.should_compress(tokens):
            budget = core.budget(engine.threshold_tokens, engine.overhead(host, tokens))
            before = len(stub.requests)
            host = engine.compress(host, current_tokens=tokens)
            inside.append(len(stub.requests) - before)
            frontiers.append(core.store.conversation(core._conversation()).frontier_seq)
            assert count_messages(host) <= budget.total
            assert_valid_sequence(host)
        host.extend(rest)
        request = count_messages(host[:-1]) + OVERHEAD
        engine.update_from_response({"prompt_tokens": request, "completion_tokens": 50})
        engine.after_reply(host)
        if think is not None and core.preparer is not None:
            finished = core.preparer.settle(think)
            assert finished or not done, "the preparer did not finish"
            conversation = core.binding.conversation_id
            waiting.append(len(core.store.prepared_summaries(conversation)) if conversation else 0)
    return {
        "inside": inside,
        "frontiers": frontiers,
        "calls": len(stub.requests) - first,
        "waiting": waiting,
    }


def long_turn(i: int) -> list[dict[str, Any]]:
    """A turn of some 550 tokens, as the benchmark's."""
    body = " ".join(f"detail{(i * 11 + k) % 97}x{k % 7}" for k in range(160))
    return [
        {"role": "user", "content": f"turn {i}: notes for later. {body}"},
        {"role": "assistant", "content": f"noted {i}. {body[:600]}"},
    ]

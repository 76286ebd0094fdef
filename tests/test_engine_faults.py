"""Compaction with a misbehaving summarizer, and internal errors that must not reach the host."""

from __future__ import annotations

import copy
import time
from typing import Any

import pytest

from hermes_lcm.base.tokens import count_messages
from hermes_lcm.engine import LcmEngine

from . import backends
from .convo import (
    assert_lineage_complete,
    assert_valid_sequence,
    conversation,
    host_run,
    stored_sequence,
)

pytestmark = pytest.mark.both_backends


class Reply:
    def __init__(self, content: Any) -> None:
        self.choices = [type("Choice", (), {"message": type("Msg", (), {"content": content})()})()]


def _answers(kind: str):
    calls: list[dict[str, Any]] = []

    def call_llm(**kwargs: Any) -> Any:
        calls.append(kwargs)
        if kind == "error":
            raise RuntimeError("HTTP 500 from provider")
        if kind == "timeout":
            raise TimeoutError("read timed out")
        if kind == "slow":
            time.sleep(0.2)
            raise TimeoutError("slow")
        if kind == "empty":
            return Reply("")
        if kind == "reasoning":
            return Reply("<think>I should summarize this carefully...</think>")
        if kind == "garbage":
            return Reply("lorem " * 20000)
        if kind == "injected":
            return Reply("OK")
        if kind == "good":
            return Reply(
                "The user and assistant worked through ledger retries.\nExpand for details about: ledger"
            )
        raise AssertionError(kind)

    return call_llm, calls


def _engine(tmp_path, call_llm, **env: str) -> LcmEngine:
    base = {"HERMES_HOME": str(tmp_path), "LCM_SUMMARY_PROVIDER": "auxiliary", **env}
    engine = copy.deepcopy(LcmEngine(env=base, host_call_llm=call_llm))
    engine.update_model("fake", 64000)
    engine.threshold_tokens = 5000
    engine.on_session_start("s1", hermes_home=str(tmp_path))
    return engine


@pytest.mark.parametrize("kind", ["error", "timeout", "empty", "reasoning", "garbage", "injected"])
def test_compaction_terminates_and_stays_bounded_whatever_the_llm_does(tmp_path, backend_env, kind):
    call_llm, calls = _answers(kind)
    engine = _engine(tmp_path, call_llm, **backend_env)
    history, outputs = host_run(engine, list(conversation(seed=11, turns=40)))
    assert outputs, "the threshold was crossed"
    for out in outputs:
        assert count_messages(out) + 500 <= engine.threshold_tokens
        assert_valid_sequence(out)
    assert stored_sequence(engine) == [(m["role"], m["content"]) for m in history]
    assert_lineage_complete(engine.core.store.path)
    levels = {n.level for n in engine.core.dag.nodes(engine.core.binding.conversation_id)}
    assert levels <= {"truncate", "aggressive"}, levels
    status = engine.get_status()
    assert status["last_compaction"]["errors"] or status["summarizer_guard"]["open_breakers"]
    # the breaker stops hammering a failing route: far fewer calls than summaries made
    nodes = len(engine.core.dag.nodes(engine.core.binding.conversation_id))
    assert len(calls) < 2 * nodes


def test_a_good_llm_summary_is_stored_as_normal(tmp_path, backend_env):
    call_llm, calls = _answers("good")
    engine = _engine(tmp_path, call_llm, **backend_env)
    host_run(engine, list(conversation(seed=12, turns=30)))
    nodes = engine.core.dag.nodes(engine.core.binding.conversation_id)
    assert nodes and all(n.level == "normal" and n.route == "auxiliary" for n in nodes)
    assert calls[0]["task"] == "compression"


def test_a_slow_llm_cannot_hold_a_turn_past_the_compaction_deadline(tmp_path, backend_env):
    call_llm, calls = _answers("slow")
    engine = _engine(
        tmp_path,
        call_llm,
        **backend_env,
        LCM_COMPACTION_MAX_SECONDS="0.3",
        LCM_SUMMARY_CIRCUIT_BREAKER_FAILURE_THRESHOLD="100",
    )
    history = [m for t in conversation(seed=13, turns=60) for m in t]
    started = time.monotonic()
    out = engine.compress(list(history), current_tokens=count_messages(history))
    assert time.monotonic() - started < 5
    assert count_messages(out) < engine.threshold_tokens
    assert len(calls) <= 4


def test_an_internal_error_keeps_unconfirmed_messages_and_is_reported(make_engine):
    """Keeping unstored messages on a failing store changed this test: before, a broken store made
    compress trim the host's list, dropping messages that were never stored. Now nothing the store cannot confirm
    leaves the list: it comes back unchanged (the host's "no progress") and the error shows."""
    engine = make_engine(threshold=3000)
    history = [m for t in conversation(seed=14, turns=40) for m in t]
    backends.break_store(engine.core.store)  # the store breaks under the engine's feet
    out = engine.compress(list(history), current_tokens=count_messages(history))
    assert out == history
    assert engine.should_compress(10) is False
    assert any("compress" in e for e in engine.get_status()["engine_errors"])
    assert engine.handle_tool_call("lcm_grep", {"query": "ledger"}).startswith("{")


def test_a_store_that_stops_writing_after_storing_still_gives_a_bounded_valid_prompt(make_engine):
    engine = make_engine(threshold=3000)
    history = [m for t in conversation(seed=14, turns=40) for m in t]
    engine.ingest_host(list(history))
    backends.refuse_writes(engine.core.store)  # reads work, every write is refused
    out = engine.compress(list(history), current_tokens=count_messages(history))
    assert out and count_messages(out) < 3000
    assert_valid_sequence(out)
    status = engine.get_status()
    assert status["store_write_failures"] >= 1 and "read-only" in status["last_store_write_failure"]
    assert status["unstored_messages"] == 0


def _resent(messages):
    """The gateway shape: the whole history again, as new objects every turn."""
    return copy.deepcopy(list(messages))


def test_a_store_gone_after_storing_still_bounds_a_host_that_resends_its_whole_history(make_engine):
    """The store can be neither read nor written, and the host re-sends its whole history: the
    messages the last stored ingest proved stored may be left out, every new one stays verbatim,
    so the prompt stays within its budget instead of coming back whole for the outage."""
    engine = make_engine(threshold=3000)
    turns = list(conversation(seed=15, turns=44))
    history = [m for t in turns[:40] for m in t]
    engine.compress(_resent(history), current_tokens=count_messages(history))
    backends.break_store(engine.core.store)
    for upto in (41, 43):  # two turns of the outage, each with more unstored messages
        longer = [m for t in turns[:upto] for m in t]
        new = [m for t in turns[40:upto] for m in t]
        out = engine.compress(_resent(longer), current_tokens=count_messages(longer))
        assert count_messages(out) < 3000 < count_messages(longer)
        assert_valid_sequence(out)
        assert out[-len(new) :] == new  # every unstored message, verbatim and in order
        assert engine._last_compress_aborted is False
        assert any("compress" in e for e in engine.get_status()["engine_errors"])


def test_a_store_gone_keeps_the_list_whole_when_it_does_not_repeat_the_stored_one(make_engine):
    engine = make_engine(threshold=3000)
    turns = list(conversation(seed=16, turns=41))
    history = [m for t in turns[:40] for m in t]
    engine.compress(_resent(history), current_tokens=count_messages(history))
    backends.break_store(engine.core.store)
    changed = _resent(history) + turns[40]
    changed[len(history) - 3]["content"] = "rewritten by the host"  # not the list that was stored
    out = engine.compress(changed, current_tokens=count_messages(changed))
    assert out == changed and engine._last_compress_aborted is True
    shorter = _resent(history[2:]) + turns[40]  # the host dropped its oldest messages itself
    out = engine.compress(shorter, current_tokens=count_messages(shorter))
    assert out == shorter and engine._last_compress_aborted is True


def test_a_store_gone_keeps_the_list_whole_when_the_unstored_messages_alone_do_not_fit(
    make_engine,
):
    engine = make_engine(threshold=3000)
    turns = list(conversation(seed=17, turns=40))
    history = [m for t in turns for m in t]
    engine.compress(_resent(history), current_tokens=count_messages(history))
    backends.break_store(engine.core.store)
    big = [{"role": "user", "content": "tell me about the ledger " * 900}]  # > 3,000 tokens
    longer = _resent(history) + big
    out = engine.compress(longer, current_tokens=count_messages(longer))
    assert out == longer and engine._last_compress_aborted is True


def test_malformed_messages_are_skipped_and_the_rest_is_stored(make_engine):
    engine = make_engine(threshold=10**9)
    messages: list[Any] = [
        "not a message",
        None,
        {"content": "no role"},
        {"role": 7, "content": "bad role"},
        {"role": "user", "content": "kept \ud800 with a lone surrogate and NUL \x00 byte"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "parts"},
                {"type": "image_url", "image_url": {"url": "http://x/y.png"}},
            ],
        },
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "result"},
    ]
    engine.ingest_host(messages)
    stored = engine.core.store.messages_after(engine.core.binding.conversation_id, 0)
    assert [m.to_host() for m in stored] == [
        {"role": "user", "content": "kept \ud800 with a lone surrogate and NUL \x00 byte"},
        messages[5],
        {"role": "assistant", "content": None, "tool_calls": messages[6]["tool_calls"]},
        {"role": "tool", "content": "result", "tool_call_id": "c1"},
    ]


def test_a_store_that_cannot_open_keeps_the_hosts_list_and_tells_the_host(tmp_path, backend):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    # a file under a file; on PostgreSQL a server that is not there (nothing listens on port 1)
    where = (
        {"LCM_DATABASE_URL": "postgresql://lcm@127.0.0.1:1/lcm?connect_timeout=2"}
        if backend == "postgres"
        else {"LCM_DATABASE_PATH": str(blocker / "lcm.db")}
    )
    engine = copy.deepcopy(
        LcmEngine(env={"HERMES_HOME": str(tmp_path), "LCM_SUMMARY_PROVIDER": "extractive", **where})
    )
    engine.update_model("fake", 64000)
    engine.threshold_tokens = 3000
    engine.on_session_start("s1", hermes_home=str(tmp_path))
    history = [m for t in conversation(seed=15, turns=30) for m in t]
    out = engine.compress(list(history), current_tokens=count_messages(history))
    assert out == history  # nothing could be stored, so nothing leaves the host's list
    assert engine._last_compress_aborted is True  # Hermes then warns "Compression aborted: ..."
    assert "no message was dropped" in engine._last_summary_error

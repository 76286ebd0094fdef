"""The engine's promises, checked on real databases driven the way Hermes drives them."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hermes_lcm.base.tokens import count_messages

from .conftest import fresh_database, new_engine
from .convo import (
    assert_lineage_complete,
    assert_valid_sequence,
    conversation,
    host_run,
    stored_sequence,
    turn,
)

pytestmark = pytest.mark.both_backends


def _expected(history: list[dict[str, Any]]) -> list[tuple[str, Any]]:
    return [(m["role"], m["content"]) for m in history]


def test_replaying_the_same_transcript_three_times_stores_each_message_once(make_engine):
    """The API/gateway shape: every turn re-sends the whole history so far; then twice more."""
    engine = make_engine(threshold=10**9)
    turns = list(conversation(seed=1, turns=12))
    history = [m for t in turns for m in t]
    for _ in range(3):
        sent: list[dict[str, Any]] = []
        for t in turns:
            sent += t
            engine.ingest_host(list(sent))
    assert stored_sequence(engine) == _expected(history)


def test_a_repeated_greeting_in_a_new_list_is_not_mistaken_for_a_replay(make_engine):
    engine = make_engine(threshold=10**9)
    first = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
        {"role": "user", "content": "bye"},
        {"role": "assistant", "content": "see you"},
    ]
    engine.ingest_host(first)
    engine.ingest_host([{"role": "user", "content": "hi"}])
    assert stored_sequence(engine)[-1] == ("user", "hi") and len(stored_sequence(engine)) == 5


def test_repeated_identical_user_messages_are_all_kept(make_engine):
    engine = make_engine(threshold=10**9)
    history: list[dict[str, Any]] = []
    for _ in range(5):
        history += [{"role": "user", "content": "continue"}, {"role": "assistant", "content": "ok"}]
        engine.ingest_host(history)
        engine.ingest_host(history)
    assert stored_sequence(engine) == _expected(history)


@pytest.mark.parametrize("api_mode", [False, True], ids=["cli", "api"])
def test_long_session_is_lossless_bounded_and_valid(make_engine, api_mode):
    engine = make_engine(threshold=6000)
    history, outputs = host_run(engine, list(conversation(seed=2, turns=70)), api_mode=api_mode)
    assert stored_sequence(engine) == _expected(history)
    assert len(outputs) >= 3
    for out in outputs:
        assert count_messages(out) + 500 <= engine.threshold_tokens
        assert_valid_sequence(out)
        assert out[-1] == history[-1] or out[-1]["role"] in ("assistant", "tool", "user")
    depths = engine.core.dag.depth_counts(engine.core.binding.conversation_id)
    assert depths.get(0, 0) > 0 and depths.get(1, 0) > 0
    assert_lineage_complete(engine.core.store.path)


def test_compress_keeps_the_newest_message_and_the_newest_user_request(make_engine):
    engine = make_engine(threshold=5000)
    rng = random.Random(3)
    history: list[dict[str, Any]] = []
    for t in range(20):
        history += turn(rng, t, size=80)
    # a long tool loop after the last user request: the request itself must survive
    history += turn(rng, 99, size=120, tool_loops=12)[:-1]
    out = engine.compress(list(history), current_tokens=count_messages(history))
    assert out[-1] == history[-1]
    last_user = [m for m in history if m["role"] == "user"][-1]
    assert last_user in out
    assert_valid_sequence(out)


def test_one_giant_message_is_cut_to_fit_and_stays_recoverable(make_engine):
    engine = make_engine(threshold=4000)
    giant = {"role": "user", "content": "HEAD-MARK " + "x y z " * 60000 + " TAIL-MARK"}
    out = engine.compress([giant], current_tokens=200000)
    budget = engine.core.budget(engine.threshold_tokens, engine.overhead([giant], None))
    assert count_messages(out) <= budget.total
    assert out and out[-1]["role"] == "user" and "lcm_expand store_id=" in out[-1]["content"]
    stored = engine.core.store.messages_after(engine.core.binding.conversation_id, 0)
    assert [m.content for m in stored] == [giant["content"]]


def test_a_session_that_is_all_tool_calls_stays_valid(make_engine):
    engine = make_engine(threshold=3000)
    rng = random.Random(4)
    history = turn(rng, 0, size=200, tool_loops=30)
    out = engine.compress(list(history), current_tokens=count_messages(history))
    assert_valid_sequence(out)
    assert count_messages(out) < engine.threshold_tokens
    assert stored_sequence(engine) == _expected(history)


def test_forced_compress_with_focus_makes_a_summary(make_engine):
    engine = make_engine(threshold=10**6)
    history = [m for t in conversation(seed=5, turns=50) for m in t]
    engine.compress(list(history), current_tokens=1000, force=True, focus_topic="ledger")
    assert engine.core.dag.depth_counts(engine.core.binding.conversation_id).get(0, 0) >= 1


def test_new_session_keeps_deep_nodes_and_every_lineage(make_engine):
    engine = make_engine(threshold=5000, LCM_NEW_SESSION_RETAIN_DEPTH="1")
    history, _ = host_run(engine, list(conversation(seed=6, turns=80)))
    before = engine.core.dag.nodes(engine.core.binding.conversation_id)
    engine.on_session_end("s1", history)
    engine.on_session_reset()
    from hermes_lcm.host import hooks

    fresh = [{"role": "user", "content": "new topic"}, {"role": "assistant", "content": "sure"}]
    hooks.post_llm_call(session_id="s2", conversation_history=fresh)
    assert engine.session_id == "s2"
    after = engine.core.dag.nodes(engine.core.binding.conversation_id)
    assert [n.id for n in after] == [n.id for n in before]
    context = engine.core.dag.context(engine.core.binding.conversation_id)
    assert all(n.depth >= 1 for n in context)
    assert stored_sequence(engine)[-2:] == [("user", "new topic"), ("assistant", "sure")]
    assert len(stored_sequence(engine)) == len(history) + 2
    assert_lineage_complete(engine.core.store.path)
    out = engine.compress(fresh, current_tokens=100)
    assert out[-1] == fresh[-1] and not any(m.get("content") == history[-1]["content"] for m in out)


def test_compression_boundary_session_continues_the_conversation(make_engine, tmp_path):
    engine = make_engine(threshold=5000)
    history, _ = host_run(engine, list(conversation(seed=7, turns=30)))
    conv = engine.core.binding.conversation_id
    engine.on_session_start(
        "s1-b", hermes_home=str(tmp_path), boundary_reason="compression", old_session_id="s1"
    )
    assert engine.core.binding.conversation_id == conv
    extra = turn(random.Random(8), 31)
    engine.ingest_host(history + extra)
    assert len(stored_sequence(engine)) == len(history) + len(extra)


def test_resume_in_a_new_process_finds_the_same_conversation(make_engine):
    first = make_engine(threshold=5000)
    history, _ = host_run(first, list(conversation(seed=9, turns=20)))
    second = make_engine(threshold=5000)  # same session id: a resume
    second.ingest_host(history)
    assert second.core.binding.conversation_id == first.core.binding.conversation_id
    assert len(stored_sequence(second)) == len(history)


def test_ignored_session_stores_nothing_but_still_gets_a_bounded_prompt(make_engine):
    engine = make_engine(threshold=3000, session="cron:job1", LCM_IGNORE_SESSION_PATTERNS="cron:*")
    history = [m for t in conversation(seed=10, turns=30) for m in t]
    engine.ingest_host(history)
    out = engine.compress(list(history), current_tokens=count_messages(history))
    assert count_messages(out) < 3000
    assert_valid_sequence(out)
    assert engine.core.store.message_count() == 0


def test_subagent_copy_gets_its_own_conversation(make_engine):
    parent = make_engine(threshold=10**9)
    child = make_engine(threshold=10**9, session="child-1")
    parent.ingest_host([{"role": "user", "content": "parent says"}])
    child.ingest_host([{"role": "user", "content": "child says"}])
    assert parent.core.binding.conversation_id != child.core.binding.conversation_id
    assert stored_sequence(parent) == [("user", "parent says")]
    assert stored_sequence(child) == [("user", "child says")]


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    seed=st.integers(0, 10**6),
    turns=st.integers(1, 40),
    size=st.integers(5, 150),
    api_mode=st.booleans(),
    threshold=st.integers(1500, 12000),
    replays=st.integers(1, 2),
)
def test_random_conversations_keep_every_invariant(
    tmp_path_factory, backend, seed, turns, size, api_mode, threshold, replays
):
    with fresh_database(backend) as where:
        _keeps_every_invariant(
            new_engine(tmp_path_factory.mktemp("prop"), threshold=threshold, **where),
            seed,
            turns,
            size,
            api_mode,
            threshold,
            replays,
        )


def _keeps_every_invariant(
    engine: Any, seed: int, turns: int, size: int, api_mode: bool, threshold: int, replays: int
) -> None:
    turn_list = list(conversation(seed=seed, turns=turns, size=size))
    history: list[dict[str, Any]] = []
    # Only the API shape can replay: it re-sends the whole history; the CLI shape continues
    # from what compress returned, which already reflects everything stored.
    for _ in range(replays if api_mode else 1):
        history, outputs = host_run(engine, turn_list, api_mode=api_mode)
    budget_ok = [count_messages(o) + 500 <= max(threshold, 64 + 500) for o in outputs]
    assert all(budget_ok)
    for out in outputs:
        assert_valid_sequence(out)
    assert stored_sequence(engine) == _expected(history)
    assert_lineage_complete(engine.core.store.path)


def test_a_message_cut_to_fit_is_recognized_after_a_restart(make_engine):
    """A resumed host sends back the list we returned, with a message we cut: it is the stored row."""
    first = make_engine(threshold=3000)
    host = [
        {"role": "user", "content": "first question " * 5},
        {"role": "assistant", "content": "answer " * 5},
        {"role": "user", "content": "BIG " + "lorem ipsum dolor sit amet " * 2000},
    ]
    first.ingest_host(host)
    host = first.compress(host, current_tokens=20_000)
    assert any("cut to fit" in str(m.get("content")) for m in host)
    resumed = make_engine(threshold=3000)  # a new process: no memory of the last list
    resumed.ingest_host([*host, {"role": "assistant", "content": "that was a big one"}])
    assert len(stored_sequence(resumed)) == 4


def test_first_compress_over_a_huge_backlog_is_bounded_and_valid(make_engine):
    """Enabling the engine on a long existing session: one compress sees 20k raw messages."""
    engine = make_engine(threshold=20000)
    rng = random.Random(31)
    history = [m for t in range(4000) for m in turn(rng, t, size=40, tool_loops=0)]
    engine.ingest_host(history)
    out = engine.compress(list(history[-10:]), current_tokens=10**6)
    assert count_messages(out) + 500 <= engine.threshold_tokens
    assert_valid_sequence(out)
    assert out[-1] == history[-1]
    last = engine.get_status()["last_compaction"]
    assert last["leaf_passes"] > 0 and "pass limit" in last["stop_reason"]
    assert "older messages after these summaries are not shown" in out[0]["content"]


def test_an_image_moved_to_a_payload_file_is_replayed_as_a_valid_text_part(make_engine):
    """A placeholder is not a URL a provider accepts; the replay names the stored row instead."""
    import base64

    image = "data:image/png;base64," + base64.b64encode(bytes(range(256)) * 40).decode()
    shot = {
        "role": "user",
        "content": [
            {"type": "text", "text": "what is in this screenshot?"},
            {"type": "image_url", "image_url": {"url": image}},
        ],
    }
    first = make_engine(threshold=10**6)
    host = [
        *[m for t in conversation(seed=41, turns=3) for m in t],
        shot,
        {"role": "assistant", "content": "a login form"},
    ]
    first.ingest_host(host)
    out = first.compress(list(host), current_tokens=100, force=True)
    replayed = next(m for m in out if isinstance(m.get("content"), list))
    assert replayed["content"][0] == shot["content"][0]
    assert (
        replayed["content"][1]["type"] == "text"
        and "lcm_expand store_id=" in replayed["content"][1]["text"]
    )
    assert "lcm-payload" not in json.dumps(out)
    stored = first.core.store.messages_after(first.core.binding.conversation_id, 0)
    assert [m.to_host() for m in stored if m.role == "user"][-1]["content"][1]["image_url"][
        "url"
    ].startswith(
        "[lcm-payload ref="
    )  # the row keeps the placeholder; the payload file keeps the bytes
    resumed = make_engine(threshold=10**6)  # a restart: the host sends our replay back
    resumed.ingest_host([*out, {"role": "user", "content": "thanks"}])
    assert len(stored_sequence(resumed)) == len(host) + 1


def test_the_hosts_session_end_after_compress_does_not_blur_what_comes_next(make_engine):
    """Hermes calls on_session_end(sid, pre-compression list) right after compress; the next
    turn still extends the list compress returned, even when the content repeats."""
    engine = make_engine(threshold=700)
    history: list[dict[str, Any]] = []
    live: list[dict[str, Any]] = []
    compressions = 0
    for _ in range(200):
        pair = [{"role": "user", "content": "continue"}, {"role": "assistant", "content": "ok"}]
        history += pair
        live += pair
        engine.ingest_host(list(live))
        if engine.should_compress(count_messages(live) + 200):
            before = list(live)
            live = engine.compress(list(live), current_tokens=count_messages(live) + 200)
            engine.on_session_end("s1", before)
            engine.on_session_start("s1", boundary_reason="compression", old_session_id="s1")
            compressions += 1
    assert compressions >= 3
    assert stored_sequence(engine) == _expected(history)

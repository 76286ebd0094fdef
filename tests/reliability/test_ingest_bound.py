"""Ingest of a huge number of new messages is bounded in time, and loses nothing.

A host call stores new messages in order, one chunk per transaction, and stops after the chunk
during which its time bound (``LCM_COMPACTION_MAX_SECONDS``) ran out; the next call resumes at the
first message not stored. With the bound at 0 every call stores exactly one chunk, so the cut
points are set by the chunk size (``LcmCore.ingest_chunk_rows``), not by the clock: no timing is
asserted. What must hold whatever the cuts: every message is stored exactly once and in order,
no compress drops a message from the host's list before it is stored, and every prompt is valid.
"""

from __future__ import annotations

import itertools
import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hermes_lcm.base.wire import problems
from hermes_lcm.core import LcmCore
from hermes_lcm.engine import LcmEngine
from hermes_lcm.host import hooks

from ..fuzzmsgs import valid_history

NO_TIME = {"LCM_COMPACTION_MAX_SECONDS": "0"}
MakeEngine = Callable[..., LcmEngine]
# One conversation per example (examples share the test's database; hypothesis seeds ``random``).
SESSIONS = itertools.count()


def _core(engine: LcmEngine) -> LcmCore:
    core = engine.ensure_core()
    assert core is not None and core.binding.conversation_id is not None
    return core


def _stored(engine: LcmEngine) -> list[dict[str, Any]]:
    core = _core(engine)
    return [m.to_host() for m in core.store.messages_after(core.binding.conversation_id or 0, 0)]


def _wide_turn(calls: int) -> list[dict[str, Any]]:
    """One request, one assistant message with ``calls`` tool calls, their short results, an answer."""
    tool_calls = [
        {
            "id": f"c{i}",
            "type": "function",
            "function": {"name": "read_file", "arguments": json.dumps({"path": f"f{i}.py"})},
        }
        for i in range(calls)
    ]
    return [
        {"role": "user", "content": "read every file"},
        {"role": "assistant", "content": "", "tool_calls": tool_calls},
        *(
            {"role": "tool", "tool_call_id": f"c{i}", "name": "read_file", "content": "ok"}
            for i in range(calls)
        ),
        {"role": "assistant", "content": "read them all"},
    ]


def _without_blocks(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m for m in messages if not m.get("_lcm_synthetic")]


def _holds_unstored(out: list[dict[str, Any]], history: list[dict[str, Any]], stored: int) -> bool:
    """Does ``out`` keep every message not stored yet (history[stored:]), verbatim and in order, at its end?"""
    rest = history[stored:]
    return not rest or _without_blocks(out)[-len(rest) :] == rest


def test_a_huge_first_ingest_is_stored_over_several_calls_exactly_once_in_order(
    make_engine: MakeEngine,
) -> None:
    """20,000 new messages with no time at all: each hook call and each compress stores one chunk,
    compress hands back a list that still holds every message not stored, and after enough calls
    the store holds the list exactly once, in order; the backlog is status, not an error."""
    engine = make_engine(threshold=8000, **NO_TIME)
    history = _wide_turn(20_000)
    core = _core(engine)
    core.ingest_chunk_rows = 3000
    calls, outs = 0, []
    while len(_stored(engine)) < len(history):
        assert calls < 20, "the backlog must shrink by a chunk per call"
        if calls % 2 == 0:
            hooks.post_llm_call(session_id="s1", conversation_history=history)
        else:
            out = engine.compress(history, current_tokens=500_000)
            assert _holds_unstored(out, history, len(_stored(engine))), (
                "an unstored message left the list"
            )
            assert problems(_without_blocks(out)) == []
            outs.append(out)
        calls += 1
        assert _stored(engine) == history[: len(_stored(engine))]
        if len(_stored(engine)) < len(history):
            assert engine.get_status()["ingest_backlog_messages"] > 0
    assert calls == 7  # 20,003 messages in chunks of 3,000
    assert _stored(engine) == history
    assert any(
        out is not history and out == history for out in outs
    )  # handed back unchanged: it did not fit
    assert engine._last_compress_aborted is True and "still storing" in (
        engine._last_summary_error or ""
    )
    out = engine.compress(history, current_tokens=500_000)  # now every message is stored: compacted
    assert len(out) < len(history) and problems(_without_blocks(out)) == []
    assert engine._last_compress_aborted is False
    status = engine.get_status()
    assert status["ingest_backlog_messages"] == 0 and status["store_write_failures"] == 0
    assert engine.errors == [] and _stored(engine) == history


def test_the_rest_of_a_cut_ingest_rides_in_the_compressed_prompt_and_is_stored_next(
    make_engine: MakeEngine,
) -> None:
    """A backlog small enough to fit: compress returns the store's context followed by the messages
    not stored yet, verbatim; the host goes on with that list and the next calls store the rest once."""
    engine = make_engine(threshold=60_000, **NO_TIME)
    history = valid_history(random.Random(5), 90)
    turn_60 = [i for i, m in enumerate(history) if m["role"] == "user"][60]
    engine.ingest_host(history[:turn_60])
    core = _core(engine)
    core.ingest_chunk_rows = 40
    out = engine.compress(history, current_tokens=1000)
    stored = len(_stored(engine))
    assert stored < len(history)
    assert _holds_unstored(out, history, stored) and problems(_without_blocks(out)) == []
    assert engine._last_compress_aborted is False  # the host's list changed: nothing to warn about
    host = [*out, {"role": "user", "content": "ok"}, {"role": "assistant", "content": "ok"}]
    for _ in range(10):
        engine.ingest_host(host)
    assert _stored(engine) == [*history, *host[-2:]]


def _chunked(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[int]]:
    """A history of short, often repeated messages ("ok") and the chunk size of each call."""
    words = ["ok", "ok", "continue", "yes", "done"]
    history: list[dict[str, Any]] = []
    for turn in range(draw(st.integers(5, 40))):
        history.append({"role": "user", "content": draw(st.sampled_from(words))})
        if draw(st.booleans()):
            cid = f"t{turn}"
            history.append(
                {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [
                        {
                            "id": cid,
                            "type": "function",
                            "function": {"name": "run", "arguments": "{}"},
                        }
                    ],
                }
            )
            history.append({"role": "tool", "tool_call_id": cid, "content": "ok"})
        history.append({"role": "assistant", "content": draw(st.sampled_from(words))})
    return history, draw(st.lists(st.integers(1, 7), min_size=40, max_size=40))


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    case=st.composite(_chunked)(),
    steps=st.lists(st.sampled_from(["hook", "compress", "tool"]), min_size=40, max_size=40),
)
def test_random_cut_points_store_every_message_once_in_order(
    make_engine: MakeEngine, case: tuple[list[dict[str, Any]], list[int]], steps: list[str]
) -> None:
    """Whatever the chunk sizes (the cut points), and whatever host call comes next, the store
    ends up holding the history exactly once and in order, never more than a prefix of it
    before, even when the messages at the cuts repeat ("ok", "ok")."""
    history, chunks = case
    _drive(make_engine, history, chunks, steps)


def _drive(
    make_engine: MakeEngine, history: list[dict[str, Any]], chunks: list[int], steps: list[str]
) -> None:
    """Store ``history`` through the host calls ``steps``, each storing at most its chunk of rows."""
    engine = make_engine(threshold=60_000, session=f"s{next(SESSIONS)}", **NO_TIME)
    core = _core(engine)
    for step, chunk in zip(steps, chunks, strict=True):
        core.ingest_chunk_rows = chunk
        if step == "hook":
            hooks.post_llm_call(session_id=engine.session_id, conversation_history=history)
        elif step == "tool":
            engine.handle_tool_call("lcm_status", {}, messages=history)
        else:
            out = engine.compress(history, current_tokens=1000)
            assert _holds_unstored(out, history, len(_stored(engine)))
            assert problems(_without_blocks(out)) == []
        stored = _stored(engine)
        assert stored == history[: len(stored)]
    engine.ingest_host(history)
    core.ingest_chunk_rows = len(history)
    engine.ingest_host(history)
    assert _stored(engine) == history
    assert engine.errors == []


def test_a_prompt_the_host_discards_does_not_move_where_its_own_list_resumes(
    make_engine: MakeEngine,
) -> None:
    """A case the test above found (kept as data: discarded_prompt_case.json). A compress that
    keeps unstored messages hands back a list of its own and remembered only that list as the
    one the host goes on with. The host went on with its own list, so ingest aligned by content
    while messages waited, and "continue" (held once in the store, said twice in the list)
    anchored at its newer copy: the message after that copy was stored out of place. Both lists
    are remembered now, and the host's own list, stored up to a prefix, extends exactly."""
    case = json.loads(
        (Path(__file__).parent / "discarded_prompt_case.json").read_text(encoding="utf-8")
    )
    _drive(make_engine, case["history"], case["chunks"], case["steps"])

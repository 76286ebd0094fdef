"""Compaction off the turn: what a reply's preparation makes, a compaction publishes without a call.

An OpenAI-compatible stub on 127.0.0.1 (tests/reliability/stub_summarizer.py) answers the summary
calls and counts them, so each test can tell the calls made inside ``compress`` (the user's turn)
from the calls the preparer made between turns. The host is driven as Hermes drives it: the reply's
usage (``update_from_response``), the ``post_llm_call`` ingest (``after_reply``), then at the
threshold ``compress``. Between turns the test waits for the preparer, as a user reading the reply
gives it time to; without that wait, compaction stays inline and the prompt stays bounded.
"""

from __future__ import annotations

import copy
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hermes_lcm.base.tokens import count_messages
from hermes_lcm.engine import LcmEngine
from hermes_lcm.store import close_all

from .backends import raw_sql
from .convo import assert_lineage_complete, assert_valid_sequence
from .reliability.stub_summarizer import StubSummarizer

TURNS = 40
OVERHEAD = 400
WHERE: dict[str, str] = {}


@pytest.fixture
def stub(backend_env: dict[str, str]) -> Iterator[StubSummarizer]:
    WHERE.update(backend_env)
    server = StubSummarizer()
    yield server
    server.close()
    close_all()
    WHERE.clear()


def engine_for(home: Path, stub: StubSummarizer, **extra: str) -> LcmEngine:
    env = {
        "HERMES_HOME": str(home),
        "LCM_SUMMARY_PROVIDER": "openai",
        "LCM_SUMMARY_MODEL": "stub-model",
        "LCM_SUMMARY_BASE_URL": stub.base_url,
        "LCM_SUMMARY_API_KEY": "x",
        "LCM_ABSOLUTE_THRESHOLD_TOKENS": "4000",
        "LCM_FRESH_TAIL_COUNT": "6",
        "LCM_LEAF_CHUNK_TOKENS": "1000",
        **extra,
        **WHERE,
    }
    engine = copy.deepcopy(LcmEngine(env=env))
    engine.update_model("main-model", 64000)
    engine.on_session_start("deferred", hermes_home=str(home), platform="cli")
    return engine


def turn(i: int) -> list[dict[str, Any]]:
    words = " ".join(f"w{i}x{k}" for k in range(60))
    return [
        {"role": "user", "content": f"Question {i}: what about module m{i}? {words}"},
        {"role": "assistant", "content": f"Answer {i}: module m{i} is fine. {words}"},
    ]


def play(engine: LcmEngine, stub: StubSummarizer, *, settle: bool) -> dict[str, Any]:
    """Host turns in CLI shape; the calls each compress made, and every prompt checked."""
    core = engine.ensure_core()
    assert core is not None
    host: list[dict[str, Any]] = []
    inside: list[int] = []
    for i in range(TURNS):
        host.extend(turn(i))
        tokens = count_messages(host) + OVERHEAD
        engine.update_from_response({"prompt_tokens": tokens, "completion_tokens": 50})
        engine.after_reply(host)
        if settle and core.preparer is not None:
            assert core.preparer.settle(30), "the preparer did not finish"
        if engine.should_compress(tokens):
            budget = core.budget(engine.threshold_tokens, engine.overhead(host, tokens))
            before = len(stub.requests)
            host = engine.compress(host, current_tokens=tokens)
            inside.append(len(stub.requests) - before)
            assert count_messages(host) <= budget.total
            assert_valid_sequence(host)
    return {"inside": inside, "calls": len(stub.requests)}


def _db(home: Path) -> str:
    return WHERE.get("LCM_DATABASE_URL") or str(home / "lcm.db")


@pytest.mark.both_backends
def test_a_prepared_compaction_makes_no_call_inside_the_turn(
    tmp_path: Path, stub: StubSummarizer
) -> None:
    engine = engine_for(tmp_path, stub)
    played = play(engine, stub, settle=True)
    inside = played["inside"]
    assert len(inside) >= 3, inside
    # The first compaction may come before any preparation; after it, none calls the model.
    assert sum(inside[1:]) == 0, inside
    core = engine.core
    assert core is not None and core.preparer is not None
    view = core.preparer.view()
    assert view["published"] > 0 and view["prepared"] >= view["published"], view
    assert_lineage_complete(_db(tmp_path))
    # Every node's sources are stored rows: a published prepared leaf covers exactly its rows.
    edges = raw_sql(
        _db(tmp_path),
        "SELECT count(*) FROM edges e JOIN messages m ON m.id = e.child_id WHERE e.child_kind = 0",
    )
    assert int(edges[0][0]) > 0


@pytest.mark.both_backends
def test_inline_mode_prepares_nothing_and_compacts_inside_the_turn(
    tmp_path: Path, stub: StubSummarizer
) -> None:
    engine = engine_for(tmp_path, stub, LCM_COMPACTION_MODE="inline")
    played = play(engine, stub, settle=False)
    core = engine.core
    assert core is not None and core.preparer is None
    assert sum(played["inside"]) == played["calls"] > 0


@pytest.mark.both_backends
def test_without_time_to_prepare_compaction_stays_inline_and_bounded(
    tmp_path: Path, stub: StubSummarizer
) -> None:
    """No pause between turns: whatever the preparer has not made, compress makes (the prompt
    is checked against its budget on every compaction in ``play``)."""
    engine = engine_for(tmp_path, stub)
    played = play(engine, stub, settle=False)
    assert played["inside"], "no compaction"


def _prepare_once(engine: LcmEngine, host: list[dict[str, Any]]) -> None:
    core = engine.core
    assert core is not None and core.preparer is not None
    tokens = count_messages(host) + OVERHEAD
    engine.update_from_response({"prompt_tokens": tokens})
    engine.after_reply(host)
    assert core.preparer.settle(30)


def _history(turns: int) -> list[dict[str, Any]]:
    return [m for i in range(turns) for m in turn(i)]


@pytest.mark.both_backends
def test_a_prepared_summary_is_neither_in_a_prompt_nor_found_before_it_is_published(
    tmp_path: Path, stub: StubSummarizer
) -> None:
    engine = engine_for(tmp_path, stub)
    host = _history(14)
    _prepare_once(engine, host)
    core = engine.core
    assert core is not None and core.binding.conversation_id is not None
    prepared = core.store.prepared_summaries(core.binding.conversation_id)
    assert prepared, "nothing was prepared past the preparation point"
    assert int(raw_sql(_db(tmp_path), "SELECT count(*) FROM summaries")[0][0]) == 0
    assert core.dag.context(core.binding.conversation_id) == []
    # The stub's summaries speak of a "retry limit"; no stored message does.
    found = json.loads(engine.handle_tool_call("lcm_grep", {"query": "retry limit"}))
    assert found.get("hits") == [], found
    assert all("retry limit" in p.content for p in prepared)
    assert "retry" not in str(core.assemble(core.budget(engine.threshold_tokens, OVERHEAD)))


@pytest.mark.both_backends
def test_a_rewritten_source_drops_its_prepared_summaries(
    tmp_path: Path, stub: StubSummarizer
) -> None:
    """A rewrite (``lcm redact``, a repair) drops the conversation's prepared summaries in its own
    transaction: their text may quote what was rewritten, and they no longer match their rows."""
    engine = engine_for(tmp_path, stub)
    host = _history(14)
    _prepare_once(engine, host)
    core = engine.core
    assert core is not None and core.binding.conversation_id is not None
    conversation = core.binding.conversation_id
    assert core.store.prepared_summaries(conversation)
    first = core.store.messages_after(conversation, 0, 1)[0]
    rows = core.store.message_rows_after(first.id - 1, 1)
    assert rows and rows[0][0].id == first.id
    core.store.rewrite_text("summaries", 10**9, "nothing")  # no such summary: nothing dropped
    assert core.store.prepared_summaries(conversation)
    fields = {
        "content": "rewritten",
        "parts": None,
        "tool_calls": None,
        "extra": None,
        "tokens": 2,
        "fingerprint": rows[0][1],
    }
    core.store.rewrite_message(first.id, fields)
    assert core.store.prepared_summaries(conversation) == []


@pytest.mark.both_backends
def test_a_changed_source_is_never_published_from_its_prepared_summary(
    tmp_path: Path, stub: StubSummarizer
) -> None:
    """A row changed behind the store's back (no rewrite call) keeps its prepared summary, whose
    key no longer matches the row: compress summarizes it again, inside the turn."""
    engine = engine_for(tmp_path, stub)
    host = _history(14)
    _prepare_once(engine, host)
    core = engine.core
    assert core is not None and core.binding.conversation_id is not None
    conversation = core.binding.conversation_id
    first = core.store.messages_after(conversation, 0, 1)[0]
    raw_sql(_db(tmp_path), "UPDATE messages SET content = 'changed' WHERE id = ?", (first.id,))
    before = len(stub.requests)
    tokens = count_messages(host) + OVERHEAD
    engine.compress(list(host), current_tokens=tokens, force=True)
    assert len(stub.requests) > before, "a prepared summary of a changed row was published"
    published = raw_sql(
        _db(tmp_path),
        "SELECT count(*) FROM edges WHERE child_kind = 0 AND child_id = ?",
        (first.id,),
    )
    assert int(published[0][0]) == 1


@pytest.mark.both_backends
def test_other_settings_do_not_use_what_was_prepared(tmp_path: Path, stub: StubSummarizer) -> None:
    engine = engine_for(tmp_path, stub)
    host = _history(14)
    _prepare_once(engine, host)
    other = engine_for(tmp_path, stub, LCM_SUMMARY_MODEL="another-model")
    before = len(stub.requests)
    tokens = count_messages(host) + OVERHEAD
    other.compress(list(host), current_tokens=tokens, force=True)
    assert len(stub.requests) > before


def _cli(where: str, *argv: str) -> Any:
    from hermes_lcm.cli.main import main

    out = io.StringIO()
    assert main(["--db", where, "--format", "json", *argv], out=out) == 0, out.getvalue()
    return json.loads(out.getvalue())


@pytest.mark.both_backends
def test_status_and_lcm_status_show_what_waits_prepared(
    tmp_path: Path, stub: StubSummarizer
) -> None:
    engine = engine_for(tmp_path, stub)
    _prepare_once(engine, _history(14))
    status = json.loads(engine.handle_tool_call("lcm_status", {}))
    deferred = status["deferred_compaction"]
    assert deferred["mode"] == "deferred" and deferred["runs"] >= 1, deferred
    assert deferred["prepared_waiting"] > 0 and deferred["prepared_waiting_tokens"] > 0
    assert deferred["last_error"] is None
    cli = _cli(_db(tmp_path), "status")["prepared_summaries"]
    assert cli["conversations"] == 1 and cli["summaries"] == deferred["prepared_waiting"]


@pytest.mark.both_backends
def test_a_preparer_that_keeps_failing_keeps_nothing_and_the_doctor_warns(
    tmp_path: Path, stub: StubSummarizer
) -> None:
    stub.mode = "500"
    engine = engine_for(tmp_path, stub)
    host = _history(14)
    for extra in range(3):
        host += turn(100 + extra)
        _prepare_once(engine, host)
    core = engine.core
    assert core is not None and core.binding.conversation_id is not None
    assert core.store.prepared_summaries(core.binding.conversation_id) == []
    doctor = {c["name"]: c for c in _cli(_db(tmp_path), "doctor")["checks"]}
    assert doctor["preparer"]["status"] == "warn", doctor["preparer"]
    assert "summary route" in doctor["preparer"]["action"]
    # Compaction still happens, inline, and the prompt is bounded.
    tokens = count_messages(host) + OVERHEAD
    budget = core.budget(engine.threshold_tokens, engine.overhead(host, tokens))
    out = engine.compress(list(host), current_tokens=tokens)
    assert count_messages(out) <= budget.total
    assert_valid_sequence(out)

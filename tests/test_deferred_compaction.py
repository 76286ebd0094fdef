"""Compaction off the turn: what a reply's preparation makes, a compaction publishes without a call.

An OpenAI-compatible stub on 127.0.0.1 (tests/reliability/stub_summarizer.py) answers the summary
calls and counts them, so each test can tell the calls made inside ``compress`` (the user's turn)
from the calls the preparer made between turns. The host is driven as Hermes drives it: the reply's
usage (``update_from_response``), the ``post_llm_call`` ingest (``after_reply``), then at the
threshold ``compress``. Between turns the test waits for the preparer, as a user reading the reply
gives it time to; without that wait, compaction stays inline and the prompt stays bounded.
"""

from __future__ import annotations

import io
import itertools
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from hermes_lcm.base.tokens import count_messages
from hermes_lcm.compaction.prepare import ahead_of
from hermes_lcm.engine import LcmEngine

from .backends import raw_sql
from .convo import assert_lineage_complete, assert_valid_sequence
from .deferred_play import OVERHEAD, TURNS, long_turn, play, turn, working_turn
from .reliability.stub_summarizer import StubSummarizer

LCMX_FIXTURE = Path(__file__).resolve().parent / "peers" / "lcm_x" / "lcmx.db"


def engine_for(home: Path, stub: StubSummarizer, **extra: str) -> LcmEngine:
    return stub.engine(home, "deferred", **extra)


@pytest.mark.both_backends
def test_a_prepared_compaction_makes_no_call_inside_the_turn(
    tmp_path: Path, stub: StubSummarizer
) -> None:
    engine = engine_for(tmp_path, stub)
    played = play(engine, stub, think=30)
    inside = played["inside"]
    assert len(inside) >= 3, inside
    # The first compaction may come before any preparation; after it, none calls the model.
    assert sum(inside[1:]) == 0, inside
    core = engine.core
    assert core is not None and core.preparer is not None
    view = core.preparer.view()
    assert view["published"] > 0 and view["prepared"] >= view["published"], view
    assert_lineage_complete(stub.database(tmp_path))
    # Every node's sources are stored rows: a published prepared leaf covers exactly its rows.
    edges = raw_sql(
        stub.database(tmp_path),
        "SELECT count(*) FROM edges e JOIN messages m ON m.id = e.child_id WHERE e.child_kind = 0",
    )
    assert int(edges[0][0]) > 0


def _spent(tmp_path: Path, stub: StubSummarizer, shape: Any, **extra: str) -> dict[str, Any]:
    """The same turns deferred, then inline: deferred's play, its summaries waiting and published,
    the calls that summarized the conversation as far as it got (``used``: the waiting ones are
    for a compaction still to come), and the calls inline compaction needed to get at least as
    far over the same turns (``inline_needed``, counted at the first compaction that did, the
    turns played on past deferred's end when it takes more)."""
    engine = stub.engine(tmp_path / "deferred", "deferred", **extra)
    played = play(engine, stub, think=30, shape=shape)
    core = engine.core
    assert core is not None and core.preparer is not None
    assert core.binding.conversation_id is not None
    waiting = len(core.store.prepared_summaries(core.binding.conversation_id))
    summarized = core.store.conversation(core.binding.conversation_id).frontier_seq
    inline = stub.engine(tmp_path / "inline", "inline", LCM_COMPACTION_MODE="inline", **extra)
    by_inline = play(inline, stub, think=None, shape=shape, turns=2 * TURNS)
    needed = itertools.accumulate(by_inline["inside"])
    reached = [n for n, f in zip(needed, by_inline["frontiers"], strict=True) if f >= summarized]
    assert reached, (summarized, by_inline)
    return {
        **played,
        "waiting": waiting,
        "published": core.preparer.view()["published"],
        "used": played["calls"] - waiting,
        "summarized": summarized,
        "inline_needed": reached[0],
        "inline_inside": sum(by_inline["inside"][: len(played["inside"])]),
    }


@pytest.mark.both_backends
@pytest.mark.parametrize(
    ("shape", "settings"),
    [
        (turn, {}),
        (
            long_turn,
            {
                "LCM_LEAF_CHUNK_TOKENS": "20000",
                "LCM_FRESH_TAIL_COUNT": "32",
                "LCM_ABSOLUTE_THRESHOLD_TOKENS": "10000",
            },
        ),
    ],
    ids=["small-chunks", "default-chunk"],
)
def test_preparing_spends_no_more_calls_than_inline_compaction(
    tmp_path: Path, stub: StubSummarizer, shape: Any, settings: dict[str, str]
) -> None:
    """Over the same turns, every call the preparer made was published or waits for the next
    compaction (none made twice, none thrown away), what summarized the conversation took no more
    calls than inline compaction needed to summarize it as far, and after the first compaction none was made
    inside a turn: with leaf chunks smaller than a compaction (whole chunks) and with the
    default, larger than one (the chunk the fresh tail cuts, made by the last preparation)."""
    run = _spent(tmp_path, stub, shape, **settings)
    assert sum(run["inside"][1:]) == 0, run
    assert run["calls"] == sum(run["inside"]) + run["published"] + run["waiting"], run
    assert run["used"] <= run["inline_needed"], run


@pytest.mark.both_backends
def test_turns_of_changing_size_cost_no_more_calls_and_waste_none(
    tmp_path: Path, stub: StubSummarizer
) -> None:
    """Turns whose size and tool calls vary: the last preparation guesses where the fresh tail
    will cut the chunk from the last turn's size, and a wrong guess leaves the rest of that chunk
    for a leaf of its own (inside the turn when the prompt needs it). Nothing is thrown away,
    summarizing as far costs no more calls than inline compaction, and the turns wait for a
    fraction of the calls inline compaction makes inside them."""
    run = _spent(tmp_path, stub, working_turn)
    assert run["calls"] == sum(run["inside"]) + run["published"] + run["waiting"], run
    assert run["used"] <= run["inline_needed"], run
    assert sum(run["inside"][1:]) * 4 <= run["inline_inside"], run


@pytest.mark.both_backends
def test_inline_mode_prepares_nothing_and_compacts_inside_the_turn(
    tmp_path: Path, stub: StubSummarizer
) -> None:
    engine = engine_for(tmp_path, stub, LCM_COMPACTION_MODE="inline")
    played = play(engine, stub, think=None)
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
    played = play(engine, stub, think=None)
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
    assert int(raw_sql(stub.database(tmp_path), "SELECT count(*) FROM summaries")[0][0]) == 0
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
    raw_sql(
        stub.database(tmp_path), "UPDATE messages SET content = 'changed' WHERE id = ?", (first.id,)
    )
    before = len(stub.requests)
    tokens = count_messages(host) + OVERHEAD
    engine.compress(list(host), current_tokens=tokens, force=True)
    assert len(stub.requests) > before, "a prepared summary of a changed row was published"
    published = raw_sql(
        stub.database(tmp_path),
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
    cli = _cli(stub.database(tmp_path), "status")["prepared_summaries"]
    assert cli["conversations"] == 1 and cli["summaries"] == deferred["prepared_waiting"]
    from hermes_lcm.command import handle_command

    slash = json.loads(handle_command("status --json"))["deferred_compaction"]
    assert slash["prepared_waiting"] == deferred["prepared_waiting"], slash


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
    doctor = {c["name"]: c for c in _cli(stub.database(tmp_path), "doctor")["checks"]}
    assert doctor["preparer"]["status"] == "warn", doctor["preparer"]
    assert "summary route" in doctor["preparer"]["action"]
    # Compaction still happens, inline, and the prompt is bounded.
    tokens = count_messages(host) + OVERHEAD
    budget = core.budget(engine.threshold_tokens, engine.overhead(host, tokens))
    out = engine.compress(list(host), current_tokens=tokens)
    assert count_messages(out) <= budget.total
    assert_valid_sequence(out)


def _reply(engine: LcmEngine, host: list[dict[str, Any]]) -> None:
    """The host's post_llm_call after a reply whose prompt held ``host``; no wait."""
    engine.update_from_response({"prompt_tokens": count_messages(host) + OVERHEAD})
    engine.after_reply(host)


def _calling(engine: LcmEngine, stub: StubSummarizer) -> bool:
    """Whether the engine's preparer got as far as a summary call the stub received (the run
    holds the slot some time before its request arrives)."""
    core = engine.core
    assert core is not None and core.preparer is not None
    for _ in range(500):
        if core.preparer.busy_with is not None and stub.requests:
            return True
        time.sleep(0.01)
    return False


@pytest.mark.both_backends
def test_one_preparer_per_conversation_however_many_engines(
    tmp_path: Path, stub: StubSummarizer
) -> None:
    """A second engine on the conversation (another process, another host on PostgreSQL) finds
    the preparation slot taken and makes no call: the first one's run is the conversation's."""
    stub.mode, stub.delay_s = "timeout", 1.0  # every summary call takes a second, then answers
    host = _history(14)
    first, second = engine_for(tmp_path, stub), engine_for(tmp_path, stub)
    _reply(first, host)
    assert _calling(first, stub)
    calls = len(stub.requests)
    _reply(second, host)
    core = second.core
    assert core is not None and core.preparer is not None
    assert core.preparer.settle(30)
    assert core.preparer.view()["last_stop"] == "another preparer is preparing this conversation"
    assert len(stub.requests) == calls
    other = first.core
    assert other is not None and other.preparer is not None and other.preparer.settle(60)
    assert other.preparer.view()["last_stop"].startswith("ready"), other.preparer.view()


@pytest.mark.both_backends
def test_a_head_compress_publishes_what_was_prepared_within_the_head(
    tmp_path: Path, stub: StubSummarizer
) -> None:
    """``/compress here N``: the head is compacted from what was prepared, without a call, and
    nothing after the head is summarized. (The host counts the kept exchanges in the prompt's
    tokens, so the head's budget is smaller than the preparation's; at this threshold the
    summaries' sizes do not depend on it, as at any threshold of real models.)"""
    engine = engine_for(tmp_path, stub, LCM_ABSOLUTE_THRESHOLD_TOKENS="12000")
    host = _history(40)
    _prepare_once(engine, host)
    core = engine.core
    assert core is not None and core.binding.conversation_id is not None
    prepared = core.store.prepared_summaries(core.binding.conversation_id)
    assert prepared
    head = host[:-4]
    calls = len(stub.requests)
    out = engine.compress(list(head), current_tokens=count_messages(host) + OVERHEAD, force=True)
    assert len(stub.requests) == calls, "the head compress called the model"
    assert_valid_sequence([*out, *host[-4:]])
    nodes = core.dag.context(core.binding.conversation_id)
    assert nodes and max(n.last_seq for n in nodes) <= len(head)
    last = engine.get_status()["last_compaction"]
    assert last["prepared_published"] >= len(nodes) and last["errors"] == [], last


@pytest.mark.both_backends
def test_a_new_session_drops_what_was_prepared_and_compacts_on(
    tmp_path: Path, stub: StubSummarizer
) -> None:
    """``/new`` takes the raw history out of the context: what was prepared for it is dropped
    (never published over rows the context no longer holds), and the next session compacts."""
    engine = engine_for(tmp_path, stub)
    _prepare_once(engine, _history(16))
    core = engine.core
    assert core is not None and core.binding.conversation_id is not None
    conversation = core.binding.conversation_id
    assert core.store.prepared_summaries(conversation)
    engine.on_session_reset()
    engine.on_session_start("deferred-2", hermes_home=str(tmp_path), platform="cli")
    assert core.store.prepared_summaries(conversation) == []
    host = [m for i in range(100, 116) for m in turn(i)]
    _prepare_once(engine, host)
    tokens = count_messages(host) + OVERHEAD
    budget = core.budget(engine.threshold_tokens, engine.overhead(host, tokens))
    out = engine.compress(list(host), current_tokens=tokens)
    assert count_messages(out) <= budget.total
    assert_valid_sequence(out)
    assert_lineage_complete(stub.database(tmp_path))


EXIT_SCRIPT = """
import copy, json, sys, time
from hermes_lcm.engine import LcmEngine
from hermes_lcm.host import hooks
env, how = json.loads(sys.argv[1]), sys.argv[2]
engine = copy.deepcopy(LcmEngine(env=env))
engine.update_model("main-model", 64000)
engine.on_session_start("exit", hermes_home=env["HERMES_HOME"], platform="cli")
host = json.loads(sys.argv[3])
engine.update_from_response({"prompt_tokens": int(sys.argv[4])})
engine.after_reply(host)
while engine.core.preparer.busy_with is None:
    time.sleep(0.01)
print("BUSY", flush=True)
sys.stdin.readline()  # the test saw the summary call reach the model
hooks.on_session_finalize(session_id="exit", platform="cli", reason="shutdown")
engine.on_session_end("exit", host)
if how == "close":  # every store closed first, as a gateway does on its way out
    from hermes_lcm.store import close_all
    close_all()
"""


@pytest.mark.parametrize("how", ["exit", "close"])
def test_the_process_exits_while_a_preparation_is_under_way(
    tmp_path: Path, stub: StubSummarizer, how: str
) -> None:
    """A session's end and the interpreter's exit never wait for a summary call the preparer is
    making (here one that would take a minute): the unfinished run is simply redone later."""
    stub.mode, stub.delay_s = "timeout", 60.0
    host = _history(16)
    env = {
        "HERMES_HOME": str(tmp_path),
        "LCM_SUMMARY_PROVIDER": "openai",
        "LCM_SUMMARY_MODEL": "stub-model",
        "LCM_SUMMARY_BASE_URL": stub.base_url,
        "LCM_SUMMARY_API_KEY": "x",
        "LCM_ABSOLUTE_THRESHOLD_TOKENS": "4000",
        "LCM_FRESH_TAIL_COUNT": "6",
        "LCM_LEAF_CHUNK_TOKENS": "1000",
        **stub.env,
    }
    argv = [json.dumps(env), how, json.dumps(host), str(count_messages(host) + OVERHEAD)]
    proc = subprocess.Popen(
        [sys.executable, "-c", EXIT_SCRIPT, *argv],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None and proc.stdin is not None
        assert proc.stdout.readline().strip() == "BUSY", proc.stderr
        for _ in range(1000):
            if stub.requests:
                break
            time.sleep(0.01)
        assert stub.requests, "the preparer's summary call never reached the model"
        started = time.monotonic()
        proc.stdin.write("go\n")
        proc.stdin.flush()
        _, err = proc.communicate(timeout=50)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err[-2000:]
    assert time.monotonic() - started < 30, "the exit waited for the summary call"


@pytest.mark.both_backends
def test_lcm_view_shows_what_waits_prepared(tmp_path: Path, stub: StubSummarizer) -> None:
    from hermes_lcm.viewer import build_page
    from hermes_lcm.viewer.data import collect

    from .test_view import page_data

    engine = engine_for(tmp_path, stub)
    _prepare_once(engine, _history(14))
    core = engine.core
    assert core is not None and core.binding.conversation_id is not None
    conversation = core.binding.conversation_id
    waiting = core.store.prepared_summaries(conversation)
    assert waiting
    view = _cli(stub.database(tmp_path), "view", "--output", str(tmp_path / "page.html"))
    assert view["prepared_waiting"] == len(waiting)
    meta = collect(
        core.store, conversation, generated_at=0.0, database_path=str(core.store.path)
    ).meta["prepared"]
    assert [row[1:3] for row in meta["waiting"]] == [[p.first_seq, p.last_seq] for p in waiting]
    assert meta["last_error"] is None
    stub.mode = "500"
    _prepare_once(engine, [*_history(14), *turn(50), *turn(51)])
    failed = collect(
        core.store, conversation, generated_at=0.0, database_path=str(core.store.path)
    ).meta["prepared"]["last_error"]
    assert failed is not None and "summary call failed" in failed["detail"]
    page = page_data(build_page(core.store, conversation)[0])["meta"]
    assert page["prepared"]["last_error"]["detail"] == failed["detail"]


def test_an_imported_conversation_goes_on_compacting_from_prepared_summaries(
    tmp_path: Path, stub: StubSummarizer
) -> None:
    """An LCM-X database (written by LCM-X's own code) upgraded in place when the engine starts,
    and the user's imported conversation resumed: the turns after it compact from summaries
    prepared over imported and new rows alike, with no call inside a turn after the first
    compaction, and every imported message and summary is still there, its lineage whole."""
    db = tmp_path / "lcm.db"
    shutil.copy(LCMX_FIXTURE, db)  # a copy: opening the fixture itself could leave a -wal beside it
    before = raw_sql(str(db), "SELECT count(*) FROM messages")[0][0]
    engine = stub.engine(tmp_path, "sess-a2")
    core = engine.core
    assert core is not None and core.preparer is not None
    imported = raw_sql(str(db), "SELECT count(*), max(id) FROM messages")[0]
    nodes = raw_sql(str(db), "SELECT count(*), coalesce(max(id), 0) FROM summaries")[0]
    assert imported[0] == before and nodes[0] > 0, (imported, nodes)
    conversation = core.binding.conversation_id
    assert conversation is not None
    resumed = core.store.messages_after(conversation, 0)
    assert resumed, "the session did not resume its imported conversation"
    history = [
        {"role": m.role, "content": m.content}
        for m in resumed[-4:]
        if m.role in ("user", "assistant") and not m.tool_calls
    ]
    played = play(engine, stub, think=30, history=history)
    inside = played["inside"]
    assert len(inside) >= 3 and sum(inside[1:]) == 0, played
    assert core.preparer.view()["published"] > 0
    # nothing imported was lost: the same rows, and the imported nodes, still stored
    assert raw_sql(str(db), "SELECT count(*) FROM messages WHERE id <= ?", (imported[1],)) == [
        (before,)
    ]
    assert raw_sql(str(db), "SELECT count(*) FROM summaries WHERE id <= ?", (nodes[1],)) == [
        (nodes[0],)
    ]
    # the summaries made since cover imported rows: the imported history was compacted on
    first_new = raw_sql(
        str(db),
        "SELECT min(s.first_seq) FROM summaries s WHERE s.id > ? AND s.conversation_id = ?",
        (nodes[1], conversation),
    )[0][0]
    assert first_new is not None and first_new <= len(resumed), (first_new, len(resumed))
    assert_lineage_complete(str(db))


def test_far_from_the_threshold_a_preparation_makes_whole_leaves_only(
    tmp_path: Path, stub: StubSummarizer
) -> None:
    """Past the preparation point but turns before the threshold, each reply's run makes the
    whole leaf chunks outside today's fresh tail (the compaction takes them whatever the turns
    before it add) and nothing it could not be sure of: no condensation, no chunk the tail cuts."""
    engine = engine_for(
        tmp_path, stub, LCM_PREPARE_AT_RATIO="0.3", LCM_ABSOLUTE_THRESHOLD_TOKENS="8000"
    )
    # turns of ~500 tokens: the last reply is 5 turns from the threshold
    played = play(engine, stub, think=30, turns=10)
    core = engine.core
    assert core is not None and core.preparer is not None
    assert core.binding.conversation_id is not None
    assert played["inside"] == [], "the turns reached the threshold: the test proves nothing"
    prepared = core.store.prepared_summaries(core.binding.conversation_id)
    assert len(prepared) >= 2, prepared
    assert {p.depth for p in prepared} == {0}
    # they chain from the first row, chunk after chunk, all outside today's fresh tail
    spans = sorted((p.first_seq, p.last_seq) for p in prepared)
    assert spans[0][0] == 1 and all(b[0] == a[1] + 1 for a, b in itertools.pairwise(spans))
    stored = core.store.messages_after(core.binding.conversation_id, 0)
    assert spans[-1][1] <= len(stored) - 6, (spans, len(stored))


def test_only_the_last_run_makes_a_chunk_the_tail_cuts_and_none_smaller_than_a_turn() -> None:
    """Where the fresh tail will cut is guessed from the last turn's size: the run a turn before
    the threshold makes the cut chunk only when it is at least that size (a smaller one may be a
    sliver of the guess's error), a run further away makes none."""
    last = ahead_of(3600, 4000, (500, 2), user_tokens=120)
    assert last.last and not last.early and last.cut_chunk_tokens == 500
    two = ahead_of(3200, 4000, (500, 2), user_tokens=120)
    assert not two.last and not two.early and two.cut_chunk_tokens is None
    far = ahead_of(1000, 4000, (500, 2))
    assert far.early and far.cut_chunk_tokens is None
    unknown = ahead_of(3990, 4000, (0, 0))  # no turn's size seen: plans as if turns away
    assert unknown.early and unknown.cut_chunk_tokens is None

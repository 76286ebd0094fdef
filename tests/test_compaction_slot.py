"""One compaction of a conversation at a time: ``Store.compaction_slot`` on either backend, and
the engine skipping compaction (still answering with a bounded prompt) while another writer has it."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from hermes_lcm.base.tokens import count_messages
from hermes_lcm.store import open_store

from .convo import assert_valid_sequence, conversation

pytestmark = pytest.mark.both_backends


def _store_of(engine):
    core = engine.ensure_core()
    assert core is not None
    return core.store


def test_a_second_caller_does_not_get_a_held_slot_and_gets_it_once_released(make_engine):
    store = _store_of(make_engine())
    with (
        store.compaction_slot(7) as first,
        store.compaction_slot(7) as second,
        store.compaction_slot(8) as other,
    ):
        assert (first, second, other) == (True, False, True)
    with store.compaction_slot(7) as again:
        assert again


def test_an_engine_skips_compaction_while_another_writer_compacts_and_keeps_the_prompt_bounded(
    make_engine,
):
    engine = make_engine(threshold=3000)
    turns = list(conversation(seed=3, turns=30))
    sent = [m for t in turns for m in t]
    engine.ingest_host(list(sent))
    core = engine.ensure_core()
    assert core is not None and core.binding.conversation_id is not None
    tokens = count_messages(sent) + 500
    with _store_of(engine).compaction_slot(core.binding.conversation_id) as held:
        assert held
        out = engine.compress(list(sent), current_tokens=tokens)
        assert "another writer" in core.stats.last_compaction["stop_reason"]
        assert core.store.summaries(core.binding.conversation_id) == []
    assert count_messages(out) <= 3000 and out
    assert_valid_sequence(out)
    engine.compress(list(sent), current_tokens=tokens)  # released: this one compacts
    assert core.store.summaries(core.binding.conversation_id) != []
    assert not engine.get_status().get("errors")


_HOLDER = """
import sys, time
from hermes_lcm.store import open_store
store = open_store(sys.argv[1])
with store.compaction_slot(5) as held:
    print("HELD" if held else "BUSY", flush=True)
    time.sleep(600)
"""


def test_a_killed_process_never_leaves_its_slot_held(make_engine, backend):
    if backend != "postgres":
        pytest.skip("a SQLite slot is process-local: nothing outlives its process")
    engine = make_engine()
    url = _store_of(
        engine
    ).url  # the PostgreSQL store keeps its full URL (path is the redacted one)
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, url], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "HELD"
        with open_store(url).compaction_slot(5) as held:
            assert not held
        holder.kill()
        holder.wait()
        freed = False
        for _ in range(200):  # the server ends the dead session as soon as it sees the socket close
            with open_store(url).compaction_slot(5) as held:
                if held:
                    freed = True
                    break
            time.sleep(0.05)
        assert freed
    finally:
        holder.kill()

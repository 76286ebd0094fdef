"""What compress gives back to the host.

1. A compress of the head of the history (``/compress here N``) answers only that head: nothing
   stored after its last message is in the result, and nothing after it is summarized.
2. A compress that changes nothing hands the host's own list back (equal, every host field
   included) and is not counted as a compression.
3. The host's other public message fields (reasoning, provider replay items) are stored and come
   back on every message that stays verbatim; the host's private ``_keys`` never do.

The engine tests and the head-compress property (a fresh database per example) run on SQLite and
on PostgreSQL (``both_backends``); the schema-1 upgrade is about the SQLite file's own migration.
"""

from __future__ import annotations

import copy
import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hermes_lcm.base.tokens import count_messages
from hermes_lcm.engine import LcmEngine
from hermes_lcm.ingest.normalize import is_synthetic
from hermes_lcm.prompt.assemble import cut_message
from hermes_lcm.prompt.blocks import Item
from hermes_lcm.storage.sqlite import SqliteStore as Store
from hermes_lcm.store import SCHEMA_VERSION, open_store

from .conftest import fresh_database, new_engine
from .convo import assert_valid_sequence, conversation

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"

REASONING = {
    "reasoning": "I should list the files first.",
    "reasoning_content": "I should list the files first.",
    "reasoning_details": [
        {"type": "reasoning.encrypted", "data": "gAAAAB-opaque", "id": "rs_1", "format": "x"}
    ],
    "codex_reasoning_items": [{"type": "reasoning", "id": "rs_1", "encrypted_content": "enc=="}],
    "anthropic_content_blocks": [
        {"type": "thinking", "thinking": "list files", "signature": "sig"}
    ],
    "finish_reason": "stop",
}


def with_host_fields(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The history as Hermes keeps it: assistant messages carry reasoning and finish_reason, tool
    results tool_name, and some messages private bookkeeping keys."""
    out = []
    for i, m in enumerate(history):
        m = dict(m)
        if m["role"] == "assistant":
            m.update({k: (f"{v} #{i}" if isinstance(v, str) else v) for k, v in REASONING.items()})
            m["finish_reason"] = "tool_calls" if m.get("tool_calls") else "stop"
        if m["role"] == "tool":
            m["tool_name"] = "read_file"
            m["name"] = "read_file"
        if i % 5 == 0:
            m["_db_persisted"] = True
        out.append(m)
    return out


def flat(seed: int, turns: int, size: int = 60) -> list[dict[str, Any]]:
    return [m for t in conversation(seed, turns, size) for m in t]


def split_head(
    history: list[dict[str, Any]], keep_last: int
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """hermes_cli.partial_compress.split_history_for_partial_compress, restated: the tail starts at
    the keep_last-th newest user message."""
    users = [i for i, m in enumerate(history) if m.get("role") == "user"]
    boundary = users[-keep_last]
    return history[:boundary], history[boundary:]


def key(m: dict[str, Any]) -> str:
    return json.dumps(
        [m.get("role"), m.get("content"), m.get("tool_calls"), m.get("tool_call_id")],
        sort_keys=True,
        default=str,
    )


def stored_rows(engine: LcmEngine) -> list[Any]:
    core = engine.core
    assert core is not None and core.binding.conversation_id is not None
    return core.store.messages_after(core.binding.conversation_id, 0)


# -- the head, and only the head -------------------------------------------------------


def partial_compress(
    engine: LcmEngine, history: list[dict[str, Any]], keep_last: int
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """What the CLI and the gateway do for ``/compress here N``: compress the head, re-append the tail."""
    head, tail = split_head(history, keep_last)
    compressed = engine.compress(
        list(head), current_tokens=count_messages(history) + 500, force=True
    )
    return head, tail, compressed


@pytest.mark.both_backends
def test_a_head_compress_returns_nothing_from_after_the_head(make_engine):
    engine = make_engine(threshold=6000, LCM_FRESH_TAIL_COUNT="6", LCM_LEAF_CHUNK_TOKENS="800")
    history = flat(seed=7, turns=16)
    engine.ingest_host(list(history))
    head, tail, compressed = partial_compress(engine, history, keep_last=3)
    tail_keys = {key(m) for m in tail}
    assert not [m for m in compressed if key(m) in tail_keys], (
        "the tail came back from a head compress"
    )
    assert compressed[-1] == head[-1]
    rejoined = compressed + tail
    assert_valid_sequence(rejoined)
    raw = [key(m) for m in rejoined if not is_synthetic(m)]
    assert len(raw) == len(set(raw)), "a message appears twice in the rejoined transcript"
    assert rejoined[-len(tail) :] == tail
    # nothing after the head was summarized: every summary ends inside the head
    core = engine.core
    assert core is not None and core.binding.conversation_id is not None
    head_end = core.position
    assert head_end is not None and head_end == len(head)
    nodes = core.dag.context(core.binding.conversation_id)
    assert nodes and max(n.last_seq for n in nodes) <= head_end
    # the host goes on with the rejoined list: the next turn stores only what is new
    before = len(stored_rows(engine))
    engine.ingest_host([*rejoined, {"role": "user", "content": "turn 99 ask: and now?"}])
    assert len(stored_rows(engine)) == before + 1


@pytest.mark.both_backends
def test_a_head_compress_pins_no_request_from_the_tail(make_engine):
    """The newest user request of the conversation is in the tail the host keeps; the head's
    answer pins the head's own newest request when it pins one."""
    engine = make_engine(threshold=3000, LCM_FRESH_TAIL_COUNT="2", LCM_LEAF_CHUNK_TOKENS="600")
    history = flat(seed=11, turns=10, size=120)
    engine.ingest_host(list(history))
    head, tail, compressed = partial_compress(engine, history, keep_last=2)
    tail_users = {m["content"] for m in tail if m["role"] == "user"}
    assert not tail_users & {m.get("content") for m in compressed}
    head_users = {m["content"] for m in head if m["role"] == "user"}
    shown_users = [m["content"] for m in compressed if m["role"] == "user" and not is_synthetic(m)]
    assert shown_users and set(shown_users) <= head_users
    assert_valid_sequence(compressed + tail)


@pytest.mark.both_backends
@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    turns=st.integers(4, 14),
    keep=st.integers(1, 4),
    seed=st.integers(0, 10_000),
    threshold=st.sampled_from([2500, 6000, 10**6]),
)
def test_any_head_compress_answers_only_its_head(
    tmp_path_factory, backend, turns, keep, seed, threshold
):
    home = tmp_path_factory.mktemp("head")
    with fresh_database(backend) as where:
        engine = new_engine(
            home,
            threshold=threshold,
            LCM_FRESH_TAIL_COUNT="4",
            LCM_LEAF_CHUNK_TOKENS="700",
            **where,
        )
        history = flat(seed=seed, turns=turns, size=50)
        engine.ingest_host(list(history))
        keep = min(keep, turns - 1)
        head, tail, compressed = partial_compress(engine, history, keep_last=keep)
        tail_keys = {key(m) for m in tail}
        assert not [m for m in compressed if key(m) in tail_keys]
        assert_valid_sequence(compressed + tail)
        shown = [key(m) for m in compressed if not is_synthetic(m)]
        head_keys = [key(m) for m in head]
        assert all(k in head_keys for k in shown)
        assert len(stored_rows(engine)) == len(history)  # the head compress stored nothing twice


# -- an unchanged list comes back as given -----------------------------------------------


@pytest.mark.both_backends
def test_a_compress_that_changes_nothing_returns_the_hosts_list(make_engine):
    engine = make_engine(threshold=10**6)
    history = with_host_fields(flat(seed=3, turns=3))
    engine.ingest_host(list(history))
    snapshot = copy.deepcopy(history)
    for force in (False, True):
        out = engine.compress(history, current_tokens=1000, force=force)
        assert out == snapshot  # reasoning, finish_reason, tool_name and the private keys included
        assert engine.compression_count == 0
        assert engine._last_compression_made_progress is False
        assert engine._last_compress_aborted is False
    assert len(stored_rows(engine)) == len(history)


@pytest.mark.both_backends
def test_after_a_compaction_the_adopted_list_is_not_compacted_again(make_engine):
    """The host continues from our answer; a later compress with nothing new to compact hands that
    list back, although each rendering of the summary block draws a new nonce."""
    engine = make_engine(threshold=4000, LCM_FRESH_TAIL_COUNT="6", LCM_LEAF_CHUNK_TOKENS="800")
    history = flat(seed=5, turns=12)
    engine.ingest_host(list(history))
    first = engine.compress(list(history), current_tokens=count_messages(history) + 500)
    assert engine.compression_count == 1 and engine._last_compression_made_progress is True
    assert is_synthetic(first[0])
    again = engine.compress(copy.deepcopy(first), current_tokens=count_messages(first) + 500)
    assert again == first
    assert engine.compression_count == 1 and engine._last_compression_made_progress is False


@pytest.mark.both_backends
def test_trimming_without_compaction_is_a_change(make_engine):
    """Everything is fresh tail, nothing can be summarized, but the list is over budget: the
    trimmed prompt is real progress for the host, so it is returned and counted."""
    engine = make_engine(threshold=2000)
    history = [
        {
            "role": "user",
            "content": "turn 1 ask: " + " ".join(f"word{i}" for i in range(6000)),
            "_db_persisted": True,
        }
    ]
    engine.ingest_host(list(history))
    out = engine.compress(list(history), current_tokens=count_messages(history) + 500)
    assert out != history and count_messages(out) < count_messages(history)
    assert engine.core is not None and engine.core.stats.last_compaction["leaf_passes"] == 0
    assert engine.compression_count == 1 and engine._last_compression_made_progress is True


# -- the host's fields survive the store ------------------------------------------------


@pytest.mark.both_backends
def test_host_fields_are_stored_and_given_back_but_private_keys_are_not(make_engine):
    engine = make_engine(threshold=10**6)
    history = with_host_fields(flat(seed=2, turns=2, size=20))
    engine.ingest_host(list(history))
    for m, row in zip(history, stored_rows(engine), strict=True):
        back = row.to_host()
        public = {k: v for k, v in m.items() if not k.startswith("_")}
        assert back == public
        assert not [k for k in back if k.startswith("_")]


@pytest.mark.both_backends
def test_host_fields_are_not_identity(make_engine):
    """The host may reload a transcript without its reasoning fields (or add them later): the
    same messages are still recognised, nothing is stored twice."""
    engine = make_engine(threshold=10**6)
    plain = flat(seed=4, turns=4)
    engine.ingest_host(with_host_fields(plain))
    again = make_engine(threshold=10**6)  # a restart: no memory of the list seen before
    again.ingest_host([*plain, {"role": "user", "content": "turn 50 ask: one more"}])
    assert len(stored_rows(again)) == len(plain) + 1


@pytest.mark.both_backends
def test_kept_messages_keep_their_fields_across_a_compaction(make_engine):
    engine = make_engine(threshold=4000, LCM_FRESH_TAIL_COUNT="6", LCM_LEAF_CHUNK_TOKENS="800")
    history = with_host_fields(flat(seed=6, turns=12))
    by_key = {key(m): m for m in history}
    engine.ingest_host(list(history))
    out = engine.compress(list(history), current_tokens=count_messages(history) + 500)
    assert is_synthetic(out[0])
    kept = [m for m in out if not is_synthetic(m)]
    assert any(m["role"] == "assistant" for m in kept)
    for m in kept:
        original = by_key[key(m)]
        assert m == {k: v for k, v in original.items() if not k.startswith("_")}


def test_a_cut_message_drops_the_fields_that_restate_its_content():
    message = {
        "role": "user",
        "content": "x " * 5000,
        "api_content": "x " * 5000 + " [prefetched]",
        "anthropic_content_blocks": [{"type": "text", "text": "x " * 5000}],
        "reasoning": "kept",
    }
    cut = cut_message(Item("user", 5000, message, store_id=12), 100)
    assert "api_content" not in cut and "anthropic_content_blocks" not in cut
    assert cut["reasoning"] == "kept" and "lcm_expand store_id=12" in cut["content"]


@pytest.mark.both_backends
def test_an_unanswered_call_removed_from_a_replay_drops_the_anthropic_blocks(make_engine):
    engine = make_engine(threshold=10**6)
    call = {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "a", "arguments": "{}"}},
            {"id": "c2", "type": "function", "function": {"name": "b", "arguments": "{}"}},
        ],
        "anthropic_content_blocks": [
            {"type": "tool_use", "id": "c1"},
            {"type": "tool_use", "id": "c2"},
        ],
    }
    history = [
        {"role": "user", "content": "turn 1 ask: do both"},
        call,
        {"role": "tool", "tool_call_id": "c1", "content": "done a"},
        {"role": "user", "content": "turn 2 ask: and?"},
    ]
    engine.ingest_host(history)
    out = engine.compress(list(history), current_tokens=100)
    replayed = next(m for m in out if m.get("tool_calls"))
    assert [c["id"] for c in replayed["tool_calls"]] == ["c1"]
    assert "anthropic_content_blocks" not in replayed


# -- schema 2: a schema-1 database upgrades in place ------------------------------------------------


def test_a_schema_1_database_upgrades_and_keeps_every_row(tmp_path):
    path = tmp_path / "lcm.db"
    shutil.copy(FIXTURES / "lcm_schema_v1.sqlite3", path)
    with sqlite3.connect(path) as raw:
        assert raw.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == "1"
        rows_before = raw.execute(
            "SELECT id, seq, role, content, tool_calls, fingerprint FROM messages ORDER BY id"
        ).fetchall()
    readonly = Store.open_readonly(
        path
    )  # the operator CLI reads a schema-1 file without migrating it
    assert readonly.schema_version() == 1 and readonly.messages_after(1, 0)[0].extra is None
    readonly.close()

    store = open_store(path)
    assert (
        store.schema_version() == SCHEMA_VERSION == 5
    )  # 3: conversations.owner; 4: compact keys; 5: grants
    with sqlite3.connect(path) as raw:  # schema 4 stores a fingerprint as its 8 digest bytes
        assert (
            raw.execute(
                "SELECT id, seq, role, content, tool_calls, lower(hex(fingerprint)) FROM messages "
                "ORDER BY id"
            ).fetchall()
            == rows_before
        )
    messages = store.messages_after(1, 0)
    assert len(messages) == len(rows_before) and all(m.extra is None for m in messages)
    assert messages[0].to_host()["content"].startswith("turn 0")

    engine = new_engine(tmp_path, threshold=10**6, session="v1-session")
    assert engine.core is not None and engine.core.store is store
    new = {"role": "assistant", "content": "and a reasoned reply", **REASONING}
    assert engine.ingest_host([*[m.to_host() for m in messages], new]) == 1
    assert store.newest_message(1).to_host() == new


@pytest.mark.both_backends
def test_a_list_of_only_our_summaries_gets_no_raw_messages(make_engine):
    """``/compress here N`` whose head is just our summary block: nothing after the frontier
    belongs to that head, so no raw message after it comes back."""
    engine = make_engine(threshold=4000, LCM_FRESH_TAIL_COUNT="6", LCM_LEAF_CHUNK_TOKENS="800")
    history = flat(seed=8, turns=12)
    engine.ingest_host(list(history))
    first = engine.compress(list(history), current_tokens=count_messages(history) + 500)
    assert is_synthetic(first[0])
    core = engine.core
    assert core is not None and core.binding.conversation_id is not None
    frontier = core.store.conversation(core.binding.conversation_id).frontier_seq
    after_frontier = {
        key(m.to_host()) for m in core.store.messages_after(core.binding.conversation_id, frontier)
    }
    out = engine.compress([first[0]], current_tokens=1000, force=True)
    assert out and is_synthetic(out[0])
    assert not [m for m in out if key(m) in after_frontier]


@pytest.mark.both_backends
def test_the_list_end_is_known_on_every_path(make_engine):
    """core.position: new messages, a re-sent unchanged list, a head, a restart (alignment)."""
    engine = make_engine(threshold=10**6)
    core = engine.core
    assert core is not None
    history = flat(seed=12, turns=6)
    engine.ingest_host(list(history))
    assert core.position == len(history)
    engine.ingest_host(history)  # the same list again: no write, same end
    assert core.position == len(history)
    engine.ingest_host(history[:7])
    assert core.position == 7
    restarted = make_engine(threshold=10**6)
    assert restarted.core is not None
    restarted.ingest_host(history[:-3])
    assert restarted.core.position == len(history) - 3
    restarted.ingest_host([*history, {"role": "user", "content": "turn 77 ask: anything else?"}])
    assert restarted.core.position == len(history) + 1

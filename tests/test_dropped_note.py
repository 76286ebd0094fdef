"""The trimmed prompt says only what is true about the turns it leaves out.

A session matching LCM_IGNORE_SESSION_PATTERNS stores nothing and serves no recall; a stateless one
reads stored history but never writes; a prompt trimmed without the store cannot know what was
kept. The note in the summary block must match what the lcm tools then really find.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hermes_lcm.base.tokens import count_message, count_messages
from hermes_lcm.engine import LcmEngine
from hermes_lcm.ingest.normalize import is_synthetic
from hermes_lcm.prompt.assemble import Retention, summary_block

from .backends import raw_sql
from .conftest import new_engine
from .convo import assert_valid_sequence, conversation
from .tooltest import err, ok, tool

PLANTED = "the vault combination is ZEBRA-4471"


def _history() -> list[dict]:
    history = [m for t in conversation(seed=12, turns=40) for m in t]
    history[0] = {"role": "user", "content": PLANTED}
    return history


def _note(out: list[dict]) -> str:
    assert out and is_synthetic(out[0]), "expected a trimmed prompt that opens with the note"
    return str(out[0]["content"])


def _compress(engine: LcmEngine, history: list[dict]) -> list[dict]:
    out = engine.compress(list(history), current_tokens=count_messages(history) + 500)
    assert engine.errors == []
    assert_valid_sequence(out)
    assert count_messages(out) <= engine.threshold_tokens
    assert PLANTED not in str(out[1:])  # the planted turn is among those left out
    return out


@pytest.mark.both_backends
def test_an_ignored_session_says_its_dropped_turns_were_not_kept(make_engine):
    engine = make_engine(threshold=3000, session="cron-9", LCM_IGNORE_SESSION_PATTERNS="cron-*")
    note = _note(_compress(engine, _history()))
    assert "not kept" in note and "LCM_IGNORE_SESSION_PATTERNS" in note
    assert "reach them" not in note and "Summaries of earlier conversation" not in note
    # ... and that is what the tools do: nothing stored, recall refused.
    assert engine.core.store.conversation_by_key("session:cron-9") is None
    assert "LCM_IGNORE_SESSION_PATTERNS" in err(engine, "lcm_grep", query="ZEBRA-4471")


@pytest.mark.both_backends
def test_a_stateless_session_says_only_earlier_stored_history_is_searchable(make_engine):
    writer = make_engine(threshold=10**9, session="main")
    writer.ingest_host([{"role": "user", "content": "the deploy key rotates on fridays"}])
    reader = make_engine(threshold=3000, session="peek-1", LCM_STATELESS_SESSION_PATTERNS="peek-*")
    reader.core.bind("peek-1", conversation_key="session:main")
    note = _note(_compress(reader, _history()))
    assert "did not store them" in note and "LCM_STATELESS_SESSION_PATTERNS" in note
    assert "reach them" not in note
    assert tool(reader, "lcm_grep", query="ZEBRA-4471")["count"] == 0
    assert ok(reader, "lcm_grep", query="deploy key")["hits"]


@pytest.mark.both_backends
def test_a_normal_session_points_at_the_tools_and_they_do_find_the_turn(make_engine):
    engine = make_engine(
        threshold=3000, LCM_MAX_PASSES_PER_COMPRESS="1", LCM_LEAF_CHUNK_TOKENS="500"
    )
    out = _compress(engine, _history())
    assert "lcm_grep and lcm_load_session reach them" in _note(out)
    assert ok(engine, "lcm_grep", query="ZEBRA-4471")["hits"]


@pytest.mark.both_backends
def test_without_its_store_the_engine_claims_nothing_was_kept_for_sure(
    tmp_path: Path, backend_env: dict[str, str]
):
    """The database holds another program's table: the engine refuses it and has no store."""
    foreign = backend_env.get("LCM_DATABASE_URL") or str(tmp_path / "foreign.db")
    raw_sql(foreign, "CREATE TABLE not_ours(x integer)")
    place = {"LCM_DATABASE_URL": foreign} if backend_env else {"LCM_DATABASE_PATH": foreign}
    engine = new_engine(tmp_path, threshold=3000, **place)
    assert engine.core is None
    out = engine.compress(_history(), current_tokens=10**5)
    assert_valid_sequence(out)
    note = _note(out)
    assert "may not have been kept" in note and "reach them" not in note


@pytest.mark.parametrize("retention", list(Retention))
def test_the_note_fits_the_header_allowance(retention):
    block = summary_block([], 0, 12345, retention)
    assert block is not None and retention.value in block["content"]
    assert count_message(block) <= 128

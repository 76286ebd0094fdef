"""Prompt-cache telemetry: the cache counts Hermes hands over after each call
(``cache_read_tokens`` / ``cache_write_tokens`` in update_from_response) are kept per
conversation, and status, lcm status and lcm view show the cached share of input tokens, over all
replies and over the ones right after a compaction."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from hermes_lcm.base.tokens import count_messages
from hermes_lcm.cli.main import main
from hermes_lcm.viewer.data import collect

from .backends import raw_sql
from .conftest import new_engine
from .convo import conversation

pytestmark = pytest.mark.both_backends


def test_cache_counts_are_kept_per_conversation_and_shown(tmp_path: Path, backend_env) -> None:
    engine = new_engine(tmp_path, 4000, "s1", **backend_env)
    core = engine.core
    assert core is not None
    host = [m for turn in conversation(3, 6) for m in turn]
    engine.ingest_host(host)
    for _ in range(2):
        engine.update_from_response(
            {"prompt_tokens": 1000, "cache_read_tokens": 800, "cache_write_tokens": 100}
        )
    engine.update_from_response({"prompt_tokens": 1000})  # a provider without cache counts
    host = [m for turn in conversation(3, 40) for m in turn]
    engine.compress(host, current_tokens=count_messages(host) + 500)
    assert engine.compression_count == 1
    engine.update_from_response({"prompt_tokens": 1000, "cache_read_tokens": 200})
    shown = engine.get_status()["prompt_cache"]
    assert (shown["replies"], shown["replies_after_compaction"]) == (3, 1)
    assert shown["cached_share"] == 0.6 and shown["cached_share_after_compaction"] == 0.2
    assert shown["cache_write_tokens"] == 200
    assert json.loads(engine.handle_tool_call("lcm_status", {}))["prompt_cache"] == shown
    engine.ingest_host(host)  # the turn's end writes what its replies gathered
    where = backend_env.get("LCM_DATABASE_URL") or str(tmp_path / "lcm.db")
    out = io.StringIO()
    assert main(["--db", where, "--format", "json", "status"], out=out) == 0
    assert json.loads(out.getvalue())["prompt_cache"]["cached_share"] == 0.6
    assert core.binding.conversation_id is not None
    page = collect(core.store, core.binding.conversation_id, generated_at=0.0, database_path=where)
    assert page.meta["prompt_cache"]["cached_share_after_compaction"] == 0.2


def _one_reply(tmp_path: Path, cache_read: int, env: dict[str, str]) -> tuple[Any, Any, int]:
    """An engine with a stored turn and one reply's cache counts handed over (not written yet)."""
    engine = new_engine(tmp_path, 10**9, "s1", **env)
    core = engine.core
    assert core is not None
    engine.ingest_host([m for turn in conversation(3, 2) for m in turn])
    cid = core.binding.conversation_id
    assert cid is not None
    engine.update_from_response({"prompt_tokens": 1000, "cache_read_tokens": cache_read})
    return engine, core, cid


def test_a_reply_writes_nothing_and_the_next_ingest_writes_its_counts(
    tmp_path: Path, backend_env
) -> None:
    engine, core, cid = _one_reply(tmp_path, 700, backend_env)
    assert core.store.cache_usage(cid)["all"]["replies"] == 0  # nothing written in the turn
    assert engine.get_status()["prompt_cache"]["cached_share"] == 0.7  # yet status counts it
    engine.ingest_host([m for turn in conversation(3, 3) for m in turn])
    assert core.store.cache_usage(cid)["all"]["cache_read_tokens"] == 700
    assert engine.get_status()["prompt_cache"]["replies"] == 1  # written once, counted once
    engine.update_from_response({"prompt_tokens": 1000, "cache_read_tokens": 100})
    core.finalize()  # the session's end writes the rest
    assert core.store.cache_usage(cid)["all"]["replies"] == 2


def test_a_refused_write_keeps_the_counts_for_the_next_ingest(tmp_path: Path) -> None:
    engine, core, cid = _one_reply(tmp_path, 500, {})
    refuse = "BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END"
    raw_sql(core.store.path, f"CREATE TRIGGER full_i BEFORE INSERT ON meta {refuse}")
    raw_sql(core.store.path, f"CREATE TRIGGER full_u BEFORE UPDATE ON meta {refuse}")
    engine.ingest_host([m for turn in conversation(3, 3) for m in turn])  # the turn goes on
    assert any("cache usage" in e for e in core.stats.errors)
    assert core.store.cache_usage(cid)["all"]["replies"] == 0
    assert engine.get_status()["prompt_cache"]["cache_read_tokens"] == 500  # kept in memory
    raw_sql(core.store.path, "DROP TRIGGER full_i")
    raw_sql(core.store.path, "DROP TRIGGER full_u")
    engine.ingest_host([m for turn in conversation(3, 4) for m in turn])
    assert core.store.cache_usage(cid)["all"]["cache_read_tokens"] == 500


def test_a_stateless_session_keeps_no_counts(tmp_path: Path, backend_env) -> None:
    writer = new_engine(tmp_path, 10**9, "s1", **backend_env)
    writer.ingest_host([m for turn in conversation(3, 2) for m in turn])
    reader = new_engine(tmp_path, 10**9, "s1", LCM_STATELESS_SESSION_PATTERNS="s1", **backend_env)
    reader.update_from_response({"prompt_tokens": 1000, "cache_read_tokens": 900})
    assert reader.get_status()["prompt_cache"]["replies"] == 0


def test_the_summary_block_is_byte_stable_and_a_new_leaf_keeps_its_start(
    tmp_path: Path, backend_env
) -> None:
    """No per-rendering nonce: the same summaries give the same block, byte for byte, and a
    compaction that adds a leaf leaves everything before the new summary as it was (the
    provider's prefix cache keeps the system prompt, the tools and the earlier summaries)."""
    engine = new_engine(tmp_path, 6000, "s1", LCM_INCREMENTAL_MAX_DEPTH="0", **backend_env)
    core = engine.core
    assert core is not None
    host = [m for turn in conversation(5, 30) for m in turn]
    engine.compress(host, current_tokens=count_messages(host) + 500)
    budget = core.budget(engine.threshold_tokens, 500)
    first, again = core.assemble(budget)[0], core.assemble(budget)[0]
    assert first["content"] == again["content"] and first["content"].startswith("[lcm:context")
    before = len(core.dag.context(core.binding.conversation_id or 0))
    host += [m for turn in conversation(6, 12) for m in turn]
    engine.compress(host, current_tokens=count_messages(host) + 500)
    after = core.assemble(budget)[0]
    assert len(core.dag.context(core.binding.conversation_id or 0)) > before
    kept = first["content"].rsplit("\n", 1)[0]  # all but the closing line
    assert after["content"].startswith(kept)

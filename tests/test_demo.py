"""The main job (``python -m hermes_lcm.demo.main``): its fixture, its replay through the engine, its output.

One replay of the shipped coding session is shared by the in-process tests (it takes about a
second); the last test runs the demo as the README does, in a subprocess.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from hermes_lcm.demo.replay import (
    FIXTURE,
    ReplayResult,
    flatten,
    load_fixture,
    make_engine,
    recover,
    replay,
)
from hermes_lcm.engine import LcmEngine

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def fixture() -> dict[str, Any]:
    return load_fixture()


@pytest.fixture(scope="module")
def replayed(
    tmp_path_factory: pytest.TempPathFactory, fixture: dict[str, Any]
) -> tuple[LcmEngine, ReplayResult]:
    engine = make_engine(tmp_path_factory.mktemp("home"))
    return engine, replay(engine, fixture, session_id="test-demo")


def _key(message: dict[str, Any]) -> tuple[Any, ...]:
    return (
        message["role"],
        message.get("content") or "",
        json.dumps(message.get("tool_calls"), sort_keys=True),
        message.get("tool_call_id"),
    )


def test_fixture_is_a_valid_long_openai_transcript(fixture: dict[str, Any]) -> None:
    assert 150 <= len(fixture["turns"]) <= 250
    assert FIXTURE.stat().st_size < 1_500_000
    pending: set[str] = set()
    for message in flatten(fixture):
        if message["role"] == "tool":
            pending.remove(
                message["tool_call_id"]
            )  # answers a call of the assistant message before it
            continue
        assert not pending, f"unanswered tool calls before {message['role']} message"
        for call in message.get("tool_calls") or []:
            assert call["type"] == "function" and isinstance(
                json.loads(call["function"]["arguments"]), dict
            )
            pending.add(call["id"])
    assert not pending
    assert len(fixture["planted"]) >= 5
    assert all(p["turn"] <= len(fixture["turns"]) // 3 for p in fixture["planted"]), (
        "details are planted early"
    )


def test_fixture_is_reproducible_from_its_generator() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "fixtures" / "make_coding_session.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr


def test_every_fixture_message_is_stored_exactly_once_in_order(
    replayed: tuple[LcmEngine, ReplayResult], fixture: dict[str, Any]
) -> None:
    engine, _ = replayed
    core = engine.core
    assert core is not None and core.binding.conversation_id is not None
    stored = core.store.messages_after(core.binding.conversation_id, 0)
    expected = flatten(fixture)
    assert core.store.message_count(core.binding.conversation_id) == len(expected)
    assert [_key(m.to_host()) for m in stored] == [_key(m) for m in expected]
    assert [m.seq for m in stored] == list(range(1, len(expected) + 1))


def test_session_is_compacted_into_a_multi_level_dag(
    replayed: tuple[LcmEngine, ReplayResult],
) -> None:
    engine, result = replayed
    core = engine.core
    assert core is not None and core.binding.conversation_id is not None
    depths = core.dag.depth_counts(core.binding.conversation_id)
    assert depths.get(0, 0) >= 5 and depths.get(1, 0) >= 1
    assert result.compactions >= 5
    assert not engine.errors


def test_every_prompt_returned_by_compress_is_under_the_threshold(
    replayed: tuple[LcmEngine, ReplayResult],
) -> None:
    engine, result = replayed
    assert result.compressed_prompts
    over = [
        (turn, tokens)
        for turn, tokens in result.compressed_prompts
        if tokens > engine.threshold_tokens
    ]
    assert not over
    assert (
        max(t.peak_prompt_tokens for t in result.turns)
        < engine.threshold_tokens
        < result.turns[-1].raw_tokens
    )


def test_planted_details_come_back_exactly_through_grep_and_expand(
    replayed: tuple[LcmEngine, ReplayResult], fixture: dict[str, Any]
) -> None:
    engine, _ = replayed
    core = engine.core
    assert core is not None
    turn_of_seq = [
        n
        for n, turn in enumerate(fixture["turns"], start=1)
        for _ in range(1 + len(turn["messages"]))
    ]
    for planted in fixture["planted"]:
        found = recover(engine, fixture, planted)
        assert found.exact, (planted, found)
        assert found.calls[0].startswith("lcm_grep(") and any(
            c.startswith("lcm_expand(") for c in found.calls
        )
        assert found.line is not None and planted["detail"] in found.line
        stored = core.store.message(found.store_id or 0)
        assert stored is not None and turn_of_seq[stored.seq - 1] == planted["turn"]


def test_demo_script_is_executable_bash() -> None:
    script = ROOT / "scripts" / "demo.sh"
    assert os.access(script, os.X_OK)
    assert subprocess.run(["bash", "-n", str(script)], capture_output=True).returncode == 0
    assert "python -m hermes_lcm.demo" in script.read_text().replace('"$VENV/bin/python"', "python")


def test_demo_command_json(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "hermes_lcm.demo", "--json", "--home", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    report = json.loads(done.stdout)
    assert report["ok"] is True
    assert report["hermes_home"] == str(tmp_path) and (tmp_path / "lcm.db").exists()
    storage = report["storage"]
    assert (
        storage["stored"] == storage["fixture"]
        and storage["duplicates"] == 0
        and storage["identical_sequence"]
    )
    assert report["compactions"] > 0 and report["compacted_prompts_over_threshold"] == []
    assert report["samples"][0]["turn"] == 1 and report["samples"][-1]["turn"] == report["turns"]
    assert report["dag"]["by_depth"]["0"] > 0 and report["dag"]["lineage"]
    assert report["recoveries"] and all(r["exact"] for r in report["recoveries"])
    assert report["timing"]["engine_ms_median"] > 0 and report["engine_errors"] == []
    # the clean exit leaves the file whole: a plain copy of lcm.db alone holds every message
    wal = tmp_path / "lcm.db-wal"
    assert not wal.exists() or wal.stat().st_size == 0
    copy = tmp_path / "copy.db"
    shutil.copyfile(tmp_path / "lcm.db", copy)
    with contextlib.closing(sqlite3.connect(copy)) as db:
        assert db.execute("SELECT count(*) FROM messages").fetchone()[0] == storage["stored"]

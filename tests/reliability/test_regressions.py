"""Engine defects the reliability work found, each pinned by its minimal reproduction.

An open defect is marked ``xfail(strict=True)``: the moment its fix lands the test passes, and the
strict marker turns that into a failure telling whoever fixed it to drop the marker.

On SQLite and PostgreSQL (``both_backends``), but for the query-plan check counted in SQLite's VM
steps (a SQLite index choice; the server's work is not ours to count).
"""

from __future__ import annotations

import copy
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import hermes_lcm
from hermes_lcm.engine import LcmEngine
from hermes_lcm.store import close_all

from .helpers import grow, msg

pytestmark = pytest.mark.both_backends


def started(home: Path, where: dict[str, str]) -> LcmEngine:
    engine = copy.deepcopy(
        LcmEngine(env={"HERMES_HOME": str(home), "LCM_SUMMARY_PROVIDER": "extractive", **where})
    )
    engine.update_model("bug-model", 128_000)
    engine.on_session_start("bugs", hermes_home=str(home), platform="cli")
    return engine


@pytest.fixture
def engine(tmp_path: Path, backend_env: dict[str, str]) -> Iterator[LcmEngine]:
    yield started(tmp_path, backend_env)
    close_all()


@pytest.fixture
def sqlite_engine(tmp_path: Path) -> Iterator[LcmEngine]:
    yield started(tmp_path, {})
    close_all()


def test_surrogate_in_tool_call_id_does_not_poison_the_session(engine: LcmEngine) -> None:
    """A lone surrogate in tool_call_id/role/name made every ingest of the session raise
    (UnicodeEncodeError in Store.append): the hook swallowed it and nothing was stored again."""
    history: list[dict[str, Any]] = [
        {"role": "user", "content": "hello"},
        {"role": "tool", "tool_call_id": "\ud800", "content": "result"},
    ]
    engine.ingest_host(history)  # the host's hook swallows what this raises ...
    history.append({"role": "assistant", "content": "and the session goes on"})
    engine.ingest_host(
        history
    )  # ... but every later turn raises too: nothing is stored from here on
    core = engine.ensure_core()
    assert core is not None and core.binding.conversation_id is not None
    assert core.store.message_count(core.binding.conversation_id) == 3


def test_unanchored_batch_does_not_scan_the_conversation(sqlite_engine: LcmEngine) -> None:
    """Cost (SQLite VM steps) of a 300-message batch sharing nothing with the stored tail must not
    depend on how long the conversation already is. The fingerprint lookup was planned on the
    (conversation_id, seq) index because of ORDER BY seq DESC: one full scan per incoming message."""
    engine = sqlite_engine
    core = engine.ensure_core()
    assert core is not None

    def steps_for_batch(first: int) -> int:
        ticks = [0]

        def tick() -> int:
            ticks[0] += 1
            return 0

        core.store.conn.set_progress_handler(tick, 1000)
        try:
            core.ingest([msg(i) for i in range(first, first + 300)])
        finally:
            core.store.conn.set_progress_handler(None, 0)
        return ticks[0]

    grow(engine, 0, 2000)
    small = steps_for_batch(10_000_000)
    grow(engine, 2000, 20_000)
    large = steps_for_batch(20_000_000)
    assert large <= 2 * small + 50, (
        f"VM steps for the same batch: {small} at 2k stored, {large} at 20k stored"
    )


def test_large_batch_costs_the_same_per_message(engine: LcmEngine) -> None:
    """Per-message cost of one 10,000-message batch against 1,000-message batches, counted in lines of
    the package's Python executed (deterministic, unlike a clock on a loaded machine). It was
    quadratic: _FromEnd.cached() scanned the kept list for every index."""
    core = engine.ensure_core()
    assert core is not None
    package = str(Path(hermes_lcm.__file__).parent)

    def per_message_lines(start: int, count: int) -> float:
        batch = [msg(i) for i in range(max(0, start - 8), start + count)]
        lines = [0]

        def local(frame: Any, event: str, arg: Any) -> Any:
            lines[0] += event == "line"
            return local

        def calls(frame: Any, event: str, arg: Any) -> Any:
            return local if frame.f_code.co_filename.startswith(package) else None

        sys.settrace(calls)
        try:
            core.ingest(batch)
        finally:
            sys.settrace(None)
        return lines[0] / count

    per_message_lines(0, 1000)  # warm-up: loads the token counter, creates the tables
    small = min(per_message_lines(1000, 1000), per_message_lines(2000, 1000))
    large = per_message_lines(3000, 10_000)
    assert large <= 1.5 * small, (
        f"{small:.0f} lines/message in a 1k batch, {large:.0f} lines/message in a 10k batch"
    )


def test_message_cut_to_fit_is_not_stored_again(
    tmp_path: Path, backend_env: dict[str, str]
) -> None:
    """A message the assembler cut to fit the prompt was stored again as a new row when the CLI host
    sent the compressed list back (and a kill-restart run of the crash test once counted it twice)."""
    engine = copy.deepcopy(
        LcmEngine(
            env={
                "HERMES_HOME": str(tmp_path),
                "LCM_SUMMARY_PROVIDER": "extractive",
                "LCM_ABSOLUTE_THRESHOLD_TOKENS": "3000",
                **backend_env,
            }
        )
    )
    engine.update_model("bug-model", 64_000)
    engine.on_session_start("cut", hermes_home=str(tmp_path), platform="cli")
    host: list[dict[str, Any]] = [
        {"role": "user", "content": "first question " * 5},
        {"role": "assistant", "content": "first answer " * 5},
        {"role": "user", "content": "BIG " + "lorem ipsum dolor sit amet " * 2000},
    ]
    engine.ingest_host(host)
    host = engine.compress(host, current_tokens=20_000)  # the big message only fits cut
    assert any("cut to fit" in str(m.get("content")) for m in host)
    host.append({"role": "assistant", "content": "that was a big one"})
    engine.ingest_host(
        host
    )  # the CLI host's next turn: its list is the compressed one plus the reply
    core = engine.ensure_core()
    assert core is not None and core.binding.conversation_id is not None
    assert core.store.message_count(core.binding.conversation_id) == 4
    close_all()

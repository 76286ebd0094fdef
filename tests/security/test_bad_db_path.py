"""A database path that cannot be a database is one clear startup error.

A real engine (the host's template, deep-copied per agent) is driven through the host's calls
with LCM_DATABASE_PATH naming a directory, a device, a place nothing can be created and a path
under a file. Nothing raises, every answer is valid, the open is tried once (one ERROR record
in the host log, one counted attempt), and status, doctor (tool and /lcm) and the log give the
same message naming the path and the setting to change.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from hermes_lcm import store as store_module
from hermes_lcm.base.startup import Opening
from hermes_lcm.command import handle_command
from hermes_lcm.host import hooks

from ..conftest import new_engine

BAD = ["DIR", "/dev/null", "/proc/hermes-lcm-nowhere/lcm.db", "FILE/lcm.db"]


def _path(tmp_path: Path, bad: str) -> str:
    (tmp_path / "afile").write_text("x")
    return bad.replace("DIR", str(tmp_path)).replace("FILE", str(tmp_path / "afile"))


def _turn(i: int) -> list[dict[str, str]]:
    return [
        {"role": "user", "content": f"question {i} " * 20},
        {"role": "assistant", "content": f"answer {i} " * 20},
    ]


@pytest.mark.parametrize("bad", BAD)
def test_bad_database_path_is_one_startup_error(tmp_path, caplog, bad):
    path = _path(tmp_path, bad)
    home = tmp_path / "home"
    home.mkdir()
    caplog.set_level(logging.DEBUG, logger="hermes_lcm")
    engine = new_engine(home, 400, "sess-bad", LCM_DATABASE_PATH=path)
    messages: list[dict[str, str]] = []
    for i in range(4):
        messages += _turn(i)
        hooks.post_llm_call(session_id="sess-bad", conversation_history=list(messages))
        engine.on_session_end("sess-bad", list(messages))
        out = engine.compress(list(messages), current_tokens=5000)
        assert (
            out == messages
        )  # nothing could be stored, so the host keeps its list and is told why
        assert engine._last_compress_aborted and path in (engine._last_summary_error or "")
        for tool in ("lcm_grep", "lcm_status", "lcm_doctor"):
            answer = json.loads(
                engine.handle_tool_call(tool, {"query": "question"}, messages=list(messages))
            )
            assert "error" in answer
    status = engine.get_status()
    doctor = json.loads(engine.handle_tool_call("lcm_doctor", {}))
    command = handle_command("doctor session=sess-bad")

    assert engine.opening.attempts == 1, "the open was retried on a later call"
    errors = [
        r.getMessage()
        for r in caplog.records
        if r.name == "hermes_lcm" and r.levelno >= logging.ERROR
    ]
    assert len(errors) == 1, errors
    message = status["startup_error"]
    assert message and errors[0] == message and doctor["error"] == message and message in command
    assert path in message and "LCM_DATABASE_PATH" in message
    assert "lcm_doctor" not in message  # it does not send the operator round in a circle
    warnings = [
        r for r in caplog.records if r.name == "hermes_lcm" and r.levelno == logging.WARNING
    ]
    assert not warnings, [r.getMessage() for r in warnings]
    assert status["engine_errors"] == []
    if bad == "FILE/lcm.db":
        assert (tmp_path / "afile").read_text() == "x"
    store_module.close_all()


def test_the_message_says_what_is_wrong(tmp_path):
    cases = {
        "DIR": "is a directory",
        "/dev/null": "not a regular file",
        "FILE/lcm.db": "is a file, not a directory",
    }
    for bad, words in cases.items():
        engine = new_engine(tmp_path / "h", 400, "s", LCM_DATABASE_PATH=_path(tmp_path, bad))
        assert engine.startup_error and words in engine.startup_error, engine.startup_error


def test_a_changed_setting_is_tried_again_and_then_works(tmp_path):
    engine = new_engine(tmp_path, 400, "s1", LCM_DATABASE_PATH=str(tmp_path))
    assert engine.core is None and engine.opening.attempts == 1
    engine._env["LCM_DATABASE_PATH"] = str(tmp_path / "good.db")
    engine.compress(_turn(1), current_tokens=10)
    assert engine.core is not None and engine.startup_error is None and engine.opening.attempts == 2
    assert (tmp_path / "good.db").is_file()
    store_module.close_all()


def test_after_the_back_off_it_is_tried_again(tmp_path):
    now = [1000.0]
    engine = new_engine(tmp_path, 400, "s1", LCM_DATABASE_PATH=str(tmp_path))
    engine.opening = Opening(clock=lambda: now[0])  # start over on a clock the test moves
    engine.ensure_core()
    assert engine.opening.attempts == 1 and "in 60 s" in (engine.startup_error or "")
    now[0] += 59
    engine.ensure_core()
    assert engine.opening.attempts == 1
    now[0] += 2
    engine.ensure_core()
    assert engine.opening.attempts == 2
    now[0] += 61  # the back-off doubled
    engine.ensure_core()
    assert engine.opening.attempts == 2
    (tmp_path / "sub").mkdir()
    engine._env["LCM_DATABASE_PATH"] = str(tmp_path / "sub" / "lcm.db")
    assert engine.ensure_core() is not None
    store_module.close_all()


def test_the_default_path_names_hermes_home(tmp_path):
    (tmp_path / "lcm.db").mkdir()
    engine = new_engine(tmp_path, 400, "s1")
    message = engine.startup_error or ""
    assert (
        "HERMES_HOME" in message and "LCM_DATABASE_PATH" in message and "is a directory" in message
    )


def test_a_file_that_is_not_a_database_is_a_store_error_when_read_only(tmp_path: Path) -> None:
    """The read-only open (the lcm CLI) names the problem as the data layer's own error, not
    sqlite3's, and leaves the file as it was."""
    from hermes_lcm.store import StoreError, open_readonly

    target = tmp_path / "passwd"
    target.write_text("root:x:0:0:root:/root:/bin/bash\n" * 50, encoding="utf-8")
    before = target.read_bytes()
    with pytest.raises(StoreError, match="not a SQLite database"):
        open_readonly(target)
    assert target.read_bytes() == before

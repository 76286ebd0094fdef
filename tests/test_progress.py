"""Progress and output formats: one live line on a terminal, nothing extra when piped.

The terminal path runs the real CLI in a subprocess whose stderr (and, for tables, stdout) is a
pseudo-terminal (stdlib ``pty``); the piped path checks stdout is exactly one JSON document and
stderr is empty.
"""

from __future__ import annotations

import io
import json
import os
import pty
import select
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hermes_lcm import store as store_module
from hermes_lcm.base import progress
from hermes_lcm.cli import output as cli_output

from .conftest import new_engine
from .convo import conversation, host_run

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("home")
    host_run(new_engine(home, 10**9, "s1"), list(conversation(3, 40)))
    store_module.close_all()
    return home / "lcm.db"


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LCM_", "HERMES_", "NO_COLOR"))}
    return {
        **env,
        "PYTHONPATH": str(ROOT / ".pyroot"),
        "COLUMNS": "120",
        "TERM": "xterm-256color",
        **extra,
    }


def run_on_pty(argv: list[str], env: dict[str, str], stdout_tty: bool) -> tuple[int, str, str]:
    """Run ``lcm ARGV`` with stderr (and stdout when ``stdout_tty``) on a pseudo-terminal."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "hermes_lcm.cli.main", *argv],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=slave if stdout_tty else subprocess.PIPE,
        stderr=slave,
    )
    os.close(slave)
    chunks: list[bytes] = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.2)
        if ready:
            try:
                data = os.read(master, 65536)
            except OSError:  # the child closed the terminal (EIO)
                break
            if not data:
                break
            chunks.append(data)
        elif proc.poll() is not None:
            break
    out = b"" if stdout_tty else proc.stdout.read()  # type: ignore[union-attr]
    proc.wait(timeout=30)
    os.close(master)
    return proc.returncode, out.decode(), b"".join(chunks).decode(errors="replace")


# -- the reporter -------------------------------------------------------------------------------


def test_off_a_terminal_the_reporter_is_silent_unless_notes_are_kept() -> None:
    err = io.StringIO()
    with progress.start("x", 10, stream=err, env={}) as line:
        line.advance(3)
        line.note("said")
    assert err.getvalue() == "" and line.done == 3
    with progress.start("x", 10, stream=err, env={}, notes=True) as line:
        line.note("scanned 3 rows")
    assert err.getvalue() == "lcm: scanned 3 rows\n"


def test_never_silences_even_notes_and_always_draws_the_line_anywhere() -> None:
    err = io.StringIO()
    with progress.start("x", 10, stream=err, env={"LCM_PROGRESS": "never"}, notes=True) as line:
        line.note("scanned")
        line.update(5, 10)
    assert err.getvalue() == ""
    with progress.start(
        "copy", 4, stream=err, env={"LCM_PROGRESS": "always"}, unit="pages"
    ) as line:
        for n in range(1, 5):
            time.sleep(0.01)
            line.update(n)
    text = err.getvalue()
    assert "copy" in text and "4/4" in text and "pages/s" in text and "ETA" in text
    assert progress.mode({"LCM_PROGRESS": "sometimes"}) == "auto"
    idle = io.StringIO()
    with progress.start("dry run", stream=idle, env={"LCM_PROGRESS": "always"}):
        pass  # a verb that never ticks (a dry run) draws no empty line
    assert idle.getvalue() == ""


def test_rich_is_imported_only_to_draw() -> None:
    # (hermes_lcm.cli itself still pulls rich in through httpx's own CLI module; the cold-start work owns that.)
    code = (
        "import sys, hermes_lcm.base.progress as p, hermes_lcm.cli.output as o, io; p.start('x', 1).update(1); "
        "o.emit({'a': 1}, 'json', io.StringIO()); print(any(m.split('.')[0] == 'rich' for m in sys.modules))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], env=clean_env(), capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "False"


# -- formats ------------------------------------------------------------------------------------


def test_auto_is_json_into_a_stringio_and_a_table_can_be_forced(db: Path) -> None:
    from hermes_lcm.cli.main import main

    out = io.StringIO()
    assert main(["--db", str(db), "conversations"], out=out) == 0
    assert json.loads(out.getvalue())["items"][0]["key"] == "session:s1"
    out = io.StringIO()
    assert main(["--db", str(db), "conversations", "--format", "table"], out=out) == 0
    header, rule, first = out.getvalue().splitlines()[:3]
    assert (
        header.split()[:2] == ["id", "key"]
        and set(rule.replace(" ", "")) == {"-"}
        and "session:s1" in first
    )
    assert "\x1b[" not in out.getvalue()  # no colour off a terminal
    assert cli_output.resolve("auto", io.StringIO()) == "json"


def test_piped_stdout_is_exactly_json_and_stderr_is_empty(db: Path) -> None:
    for argv in (["status"], ["conversations"], ["backup"]):
        proc = subprocess.run(
            [sys.executable, "-m", "hermes_lcm.cli.main", "--db", str(db), *argv],
            env=clean_env(),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == 0, proc.stderr
        assert isinstance(json.loads(proc.stdout), dict) and proc.stderr == "", argv
    bad = subprocess.run(
        [sys.executable, "-m", "hermes_lcm.cli.main", "--db", str(db), "summaries", "show", "S999"],
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 1 and json.loads(bad.stdout)["exit_code"] == 1
    assert bad.stderr.startswith("lcm: error:") and bad.stderr.count("\n") == 1


def test_on_a_terminal_backup_draws_one_progress_line_with_rate_and_eta(
    db: Path, tmp_path: Path
) -> None:
    code, out, err = run_on_pty(
        ["--db", str(db), "--format", "json", "backup", "--dest", str(tmp_path)],
        clean_env(),
        stdout_tty=False,
    )
    assert code == 0, err
    assert json.loads(out)["status"] == "ok"  # stdout (a pipe) stays clean JSON
    assert "backup" in err and "pages/s" in err and "ETA" in err
    pages = sqlite3.connect(db).execute("PRAGMA page_count").fetchone()[0]
    assert f"{pages}/{pages}" in err


def test_on_a_terminal_the_default_is_a_table_and_no_color_is_honoured(db: Path) -> None:
    code, _, screen = run_on_pty(["--db", str(db), "conversations"], clean_env(), stdout_tty=True)
    assert code == 0, screen
    assert "session:s1" in screen and "key" in screen and not screen.lstrip().startswith("{")
    assert "\x1b[" in screen  # a coloured header on a terminal
    code, _, plain = run_on_pty(
        ["--db", str(db), "conversations"], clean_env(NO_COLOR="1"), stdout_tty=True
    )
    assert code == 0 and "session:s1" in plain
    assert "\x1b[1;36m" not in plain and "\x1b[36m" not in plain

"""Ctrl-C leaves nothing half done: every long verb, interrupted mid-way, then checked.

Python turns SIGINT into KeyboardInterrupt at the next bytecode of the main thread; during a long
verb that is the progress callback (or the Python code around it), so raising KeyboardInterrupt
from the reporter's ``update`` after N calls is what a Ctrl-C there does, at a point the test
chooses. ``lcm embed --apply`` is also interrupted with a real SIGINT (tests/test_cli_embed.py).
Each test then checks: exit 130 and ONE stderr line naming how to resume, PRAGMA integrity_check
ok, nothing doubled or partial, no backup file left half written, and that a re-run completes.
"""

from __future__ import annotations

import importlib.util
import io
import json
import shutil
import sqlite3
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hermes_lcm import store as store_module
from hermes_lcm.base import outputs, progress
from hermes_lcm.cli import main as cli
from hermes_lcm.importers import lcmx as li
from hermes_lcm.maintenance import backfill
from hermes_lcm.storage.operator import verify_backup

from .conftest import new_engine
from .convo import conversation, host_run
from .dbutil import digest
from .migration.test_lcmx_import import lcmx_copy, source_rows
from .test_backfill import THRESHOLD, tool_rows, turns
from .test_import_fixtures import build_lossless_claw
from .test_rollups import DAY, MAY_1, msgs

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _closed(clean_home: Path) -> Iterator[None]:
    yield
    store_module.close_all()


@pytest.fixture
def ctrl_c(monkeypatch: pytest.MonkeyPatch) -> Any:
    """``ctrl_c(n)``: the n-th progress update raises KeyboardInterrupt (a Ctrl-C at that moment)."""

    def arm(n: int) -> dict[str, int]:
        real = progress.Reporter.update
        seen = {"calls": 0, "at": n}

        def update(self: progress.Reporter, done: int, total: int | None = None) -> None:
            real(self, done, total)
            seen["calls"] += 1
            if seen["calls"] == seen["at"]:
                raise KeyboardInterrupt

        monkeypatch.setattr(progress.Reporter, "update", update)
        return seen

    return arm


def lcm(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = cli.main(list(argv), out=out, err=err)
    store_module.close_all()
    return code, out.getvalue(), err.getvalue()


def sound(db: Path) -> None:
    con = sqlite3.connect(db)
    try:
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        con.close()


def interrupted(code: int, err: str, resume: str) -> None:
    assert code == 130, err
    assert err.count("\n") == 1 and err.startswith("lcm: error: interrupted;") and resume in err, (
        err
    )


def engine_db(home: Path, turns_: int = 3, per: int = 40) -> Path:
    host_run(new_engine(home, 10**9, "s1"), list(conversation(turns_, per)))
    store_module.close_all()
    return home / "lcm.db"


# -- backup --------------------------------------------------------------------------------------


def test_backup_interrupted_mid_copy_leaves_no_file_and_a_rerun_is_verified(
    clean_home: Path, ctrl_c: Any
) -> None:
    db = engine_db(clean_home)
    pages = sqlite3.connect(db).execute("PRAGMA page_count").fetchone()[0]
    assert pages > 3 * 16, "the database must take several backup steps"
    dest = clean_home / "backups"
    before = digest(db)
    ctrl_c(2)
    code, out, err = lcm("--db", str(db), "backup", "--dest", str(dest))
    interrupted(code, err, "lcm backup")
    assert json.loads(out)["exit_code"] == 130
    assert not dest.exists() or list(dest.iterdir()) == []  # no temp file, no half backup
    assert digest(db) == before
    sound(db)
    ctrl_c(10**9)
    code, out, _ = lcm("--db", str(db), "backup", "--dest", str(dest))
    saved = Path(json.loads(out)["backup"])
    assert code == 0 and list(dest.iterdir()) == [saved] and verify_backup(saved) is None


def test_a_stepped_backup_is_one_snapshot_while_another_process_writes(clean_home: Path) -> None:
    db = engine_db(clean_home)
    view = store_module.open_readonly(db)
    writer = sqlite3.connect(db, isolation_level=None)
    before = writer.execute("SELECT count(*) FROM messages").fetchone()[0]
    steps: list[int] = []

    def write_between_steps(done: int, total: int | None) -> None:
        steps.append(done)
        if len(steps) == 2:  # a writer commits while the copy is under way
            writer.execute(
                "INSERT INTO events(at, level, kind, detail) VALUES (0, 'info', 'x', 'y')"
            )

    target = clean_home / "copy.sqlite3"
    view.backup_to(target, write_between_steps)
    writer.close()
    assert len(steps) > 2 and verify_backup(target) is None
    con = sqlite3.connect(target)
    assert con.execute("SELECT count(*) FROM messages").fetchone()[0] == before
    assert (
        con.execute("SELECT count(*) FROM events WHERE kind = 'x'").fetchone()[0] == 0
    )  # the snapshot's
    con.close()


# -- lcm import lcm-x ---------------------------------------------------------------------------------


def test_import_lcmx_into_a_target_interrupted_resumes_with_nothing_doubled(
    clean_home: Path, ctrl_c: Any
) -> None:
    source, target = lcmx_copy(clean_home, "x.db"), clean_home / "ours.db"
    want = len(source_rows(source)["messages"])
    ctrl_c(1)  # after the first conversation committed
    code, _, err = lcm(
        "import", "lcm-x", "--source-db", str(source), "--target-db", str(target), "--apply"
    )
    interrupted(code, err, "run the same command again")
    sound(target)
    first = sqlite3.connect(target).execute("SELECT count(*) FROM messages").fetchone()[0]
    assert 0 < first < want
    ctrl_c(10**9)
    code, out, err = lcm(
        "import", "lcm-x", "--source-db", str(source), "--target-db", str(target), "--apply"
    )
    done = json.loads(out)
    assert code == 0 and done["verify"]["ok"], err
    assert done["conversations"] == {**done["conversations"], "imported": 1, "skipped_existing": 1}
    assert sqlite3.connect(target).execute("SELECT count(*) FROM messages").fetchone()[0] == want
    sound(target)


def test_import_lcmx_in_place_interrupted_leaves_the_lcmx_file_untouched(
    clean_home: Path, ctrl_c: Any
) -> None:
    source = lcmx_copy(clean_home, "lcm.db")
    before = digest(source)
    ctrl_c(1)
    code, _, err = lcm("import", "lcm-x", "--source-db", str(source), "--apply")
    interrupted(code, err, "run the same command again")
    assert digest(source) == before and li.is_lcmx(source)
    assert sorted(p.name for p in clean_home.iterdir() if p.name.startswith("lcm.db")) == ["lcm.db"]
    ctrl_c(10**9)
    code, out, err = lcm("import", "lcm-x", "--source-db", str(source), "--apply")
    assert code == 0 and json.loads(out)["upgraded"], err
    sound(source)


# -- the lossless-claw import (scripts/import_lossless_claw.py) -----------------------------------------


def claw_script() -> Any:
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        spec = importlib.util.spec_from_file_location(
            "import_lossless_claw", ROOT / "scripts" / "import_lossless_claw.py"
        )
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(ROOT / "scripts"))


def test_claw_import_interrupted_writes_nothing_and_a_rerun_imports_once(
    clean_home: Path, ctrl_c: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    source = clean_home / "claw.db"
    facts = build_lossless_claw(source)
    target = engine_db(clean_home / "home", 2, 3)
    before = digest(target)
    script = claw_script()
    argv = [
        "--source-db",
        str(source),
        "--target-db",
        str(target),
        "--include-summaries",
        "--apply",
        "--json",
        "--import-id",
        "c1",
    ]
    ctrl_c(1)
    assert script.main(argv) == 130
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "interrupted" in err and "nothing was written" in err
    store_module.close_all()
    assert digest(target) == before  # one transaction: rolled back whole
    sound(target)
    ctrl_c(10**9)
    assert script.main(argv) == 0
    assert json.loads(capsys.readouterr().out)["imported"] == facts["eligible"]
    assert script.main(argv) == 0
    assert json.loads(capsys.readouterr().out)["imported"] == 0  # nothing doubled


# -- backfill-outputs and gc-payloads -------------------------------------------------------------------


def test_backfill_outputs_interrupted_resumes_from_its_manifest(
    clean_home: Path, ctrl_c: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    new_engine(clean_home, 10**9).ingest_host(turns(4))
    store_module.close_all()
    db = clean_home / "lcm.db"
    monkeypatch.setattr(backfill, "BATCH", 1)
    manifest = clean_home / "m.json"
    argv = [
        "--db",
        str(db),
        "backfill-outputs",
        "--threshold-chars",
        str(THRESHOLD),
        "--apply",
        "--manifest",
        str(manifest),
    ]
    ctrl_c(1)  # after the first batch committed
    code, _, err = lcm(*argv, "--quiet")
    interrupted(code, err, "same --manifest")
    sound(db)
    assert sum(outputs.is_stub(r[1]) for r in tool_rows(db)) == 1
    ctrl_c(10**9)
    code, out, err = lcm(*argv, "--quiet")
    done = json.loads(out)
    assert code == 0 and done["rewritten"] == 2 and done["manifest_rows"] == 3, err
    assert sum(outputs.is_stub(r[1]) for r in tool_rows(db)) == 3
    assert len(list((clean_home / "lcm-payloads").glob("*.payload"))) == 3


def test_gc_payloads_interrupted_in_its_backup_removes_nothing_and_leaves_no_backup(
    clean_home: Path, ctrl_c: Any
) -> None:
    db = engine_db(clean_home)
    payloads = clean_home / "lcm-payloads"
    payloads.mkdir(exist_ok=True)
    orphan = payloads / ("ab" * 12 + ".payload")
    orphan.write_text("orphan bytes")
    ctrl_c(1)
    code, _, err = lcm("--db", str(db), "gc-payloads", "--apply", "--grace-seconds", "0")
    interrupted(code, err, "lcm gc-payloads --apply")
    assert orphan.exists()
    backups = clean_home / "lcm-backups"
    assert not backups.exists() or list(backups.iterdir()) == []
    ctrl_c(10**9)
    code, out, _ = lcm("--db", str(db), "gc-payloads", "--apply", "--grace-seconds", "0")
    assert code == 0 and json.loads(out)["removed"] == 1 and not orphan.exists()
    sound(db)


# -- rollups, assertions, redact ----------------------------------------------------------------------


def rollup_rows(db: Path) -> list[tuple[str, str, str]]:
    with sqlite3.connect(db) as con:
        return con.execute(
            "SELECT kind, period_start, status FROM rollups ORDER BY 1, 2"
        ).fetchall()


def test_rollups_build_interrupted_keeps_built_periods_and_finishes_on_rerun(
    clean_home: Path, ctrl_c: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LCM_TEMPORAL_ROLLUPS_ENABLED", "true")
    monkeypatch.setenv("LCM_ROLLUP_BUILDS_PER_PASS", "1")
    engine = new_engine(clean_home)
    core = engine.core
    assert core is not None
    if core.rollups.job is not None:
        core.rollups.job.stop()
    engine.ingest_host(msgs([MAY_1 + d * DAY + 60 for d in range(3)]))
    store_module.close_all()
    db = clean_home / "lcm.db"
    ctrl_c(1)
    code, _, err = lcm("--db", str(db), "rollups", "build")
    interrupted(code, err, "lcm rollups build")
    sound(db)
    states = [s for _, _, s in rollup_rows(db)]
    assert states.count("ready") == 1 and set(states) <= {"ready", "stale"}
    ctrl_c(10**9)
    code, _, _ = lcm("--db", str(db), "rollups", "build")
    assert code == 0 and {s for _, _, s in rollup_rows(db)} == {"ready"}
    assert [k for k, _, _ in rollup_rows(db)] == ["day", "day", "day", "month", "week"]


def test_assertions_rebuild_interrupted_is_resumable_and_gives_the_same_facts(
    clean_home: Path, ctrl_c: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LCM_ASSERTIONS_ENABLED", "true")
    said = [
        {"role": "user", "content": f"The port is {8000 + i}. My favourite colour is blue{i}."}
        for i in range(30)
    ]
    new_engine(clean_home, 10**9).ingest_host(
        [m for u in said for m in (u, {"role": "assistant", "content": "ok"})]
    )
    store_module.close_all()
    db = clean_home / "lcm.db"
    code, out, _ = lcm("--db", str(db), "assertions", "rebuild")
    full = json.loads(out)["sidecar"]
    assert code == 0 and full["total"] > 0
    ctrl_c(1)  # the sidecar was dropped; no step ran yet
    code, _, err = lcm("--db", str(db), "assertions", "rebuild")
    interrupted(code, err, "lcm assertions rebuild")
    sound(db)
    code, out, _ = lcm("--db", str(db), "assertions")
    waiting = json.loads(out)
    assert (
        waiting["message_ids_not_read_yet"] > 0
    )  # the cursor says what is left: the job continues from it
    ctrl_c(10**9)
    code, out, _ = lcm("--db", str(db), "assertions", "rebuild")
    assert code == 0 and json.loads(out)["sidecar"] == full


def test_redact_interrupted_mid_batch_rolls_the_batch_back_and_a_rerun_finishes(
    clean_home: Path, ctrl_c: Any
) -> None:
    from .security.test_redact_history import POLICY, build, db_files, leaks

    db, _, _ = build(clean_home)
    ctrl_c(2)  # inside the first batch's transaction, after one row was rewritten
    code, _, err = lcm("--db", str(db), "redact", "--apply", "--patterns", POLICY)
    interrupted(code, err, "lcm redact --apply")
    sound(db)
    assert leaks([db])  # the batch under way rolled back: its rows are all old
    ctrl_c(10**9)
    code, out, err = lcm("--db", str(db), "redact", "--apply", "--patterns", POLICY)
    assert code == 0 and json.loads(out)["status"] == "applied", err
    assert leaks(db_files(clean_home)) == []
    sound(db)


def test_a_real_sigint_during_the_backup_of_a_big_file(clean_home: Path) -> None:
    """SIGINT to a subprocess copying ~200 MB: exit 130, no backup file left, the database sound."""
    import os
    import signal
    import subprocess

    db = engine_db(clean_home, 2, 3)
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE ballast(x)")  # bulk only; hermes-lcm never reads it
    con.execute(
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 50000) "
        "INSERT INTO ballast SELECT randomblob(4000) FROM n"
    )
    con.commit()
    con.close()
    dest = clean_home / "backups"
    env = {**os.environ, "PYTHONPATH": str(ROOT / ".pyroot"), "LCM_PROGRESS": "always"}

    # Ctrl-C's handler, whatever this run inherited: a harness started in the background by a
    # shell without job control ignores SIGINT, and Python then never installs KeyboardInterrupt
    # (both CI runs of one session failed here that way: the copy finished, exit 0).
    lcm_cli = (
        "import runpy, signal; signal.signal(signal.SIGINT, signal.default_int_handler); "
        "runpy.run_module('hermes_lcm.cli.main', run_name='__main__', alter_sys=True)"
    )

    def interrupt_backup() -> tuple[subprocess.Popen[bytes], bytes, bytes, bytes]:
        proc = subprocess.Popen(
            [sys.executable, "-c", lcm_cli, "--db", str(db), "backup", "--dest", str(dest)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert proc.stderr is not None
        first = b""
        while b"pages/s" not in first:  # the live line is drawn: the copy is under way
            chunk = proc.stderr.read1(4096)  # type: ignore[attr-defined]
            assert chunk, "the backup ended before drawing progress"
            first += chunk
        # Frozen at once, so the signal lands mid-copy even where the copy takes a fraction of a
        # second (an idle machine copies these 200 MB in 0.2 s).
        proc.send_signal(signal.SIGSTOP)
        proc.send_signal(signal.SIGINT)
        proc.send_signal(signal.SIGCONT)
        out, rest = proc.communicate(timeout=120)
        return proc, first, out, rest

    for _ in range(
        3
    ):  # a copy that still finished first proves nothing: once more (it is a complete backup)
        proc, first, out, rest = interrupt_backup()
        if proc.returncode != 0:
            break
        assert json.loads(out)["status"] == "ok"
        shutil.rmtree(dest)
    err = (first + rest).decode(errors="replace")
    assert b"backup" in first
    assert proc.returncode == 130, err
    lines = [
        line for line in err.splitlines() if "lcm: error:" in line
    ]  # after rich's show-cursor escape
    assert len(lines) == 1 and "interrupted" in lines[0] and "lcm backup" in lines[0]
    assert json.loads(out)["exit_code"] == 130
    assert not dest.exists() or list(dest.iterdir()) == []
    sound(db)


# -- view ----------------------------------------------------------------------------------------


def test_view_interrupted_writes_no_page_and_no_temporary_file(
    clean_home: Path, ctrl_c: Any
) -> None:
    db = engine_db(clean_home)
    out_dir = clean_home / "pages"
    out_dir.mkdir()
    ctrl_c(1)
    code, _, err = lcm("--db", str(db), "view", "--output", str(out_dir / "v.html"))
    interrupted(code, err, "nothing was written")
    assert list(out_dir.iterdir()) == []
    code, _, _ = lcm("--db", str(db), "view", "--output", str(out_dir / "v.html"))
    assert code == 0 and [p.name for p in out_dir.iterdir()] == ["v.html"]

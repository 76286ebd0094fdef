"""The ``lcm`` CLI and the importer fail with one line and a documented
exit code, never a traceback, and write nothing to the target.

Every case runs the real command as a subprocess against a real database an engine wrote.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hermes_lcm import store as store_module

from ..conftest import new_engine
from ..convo import conversation, host_run
from ..test_import_fixtures import openclaw_session

EXIT_NOT_FOUND, EXIT_USAGE, EXIT_DATABASE, EXIT_WRITE, EXIT_INTERNAL = (
    1,
    2,
    3,
    4,
    5,
)  # as cli/output.py documents them
REPO = Path(__file__).resolve().parents[2]
HUGE = "99999999999999999999"
DOCUMENTED = {EXIT_NOT_FOUND, EXIT_USAGE, EXIT_DATABASE, EXIT_WRITE}


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    home = tmp_path_factory.mktemp("clihome")
    host_run(new_engine(home, 5000, "s1"), list(conversation(21, 30)))
    store_module.close_all()
    return home


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("LCM_", "HERMES_"))}


def lcm(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hermes_lcm.cli.main", *argv],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=120,
    )


def importer(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(REPO / "scripts" / "import_lossless_claw.py"), *argv],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=120,
    )


def digest(path: Path) -> str | None:
    if not path.exists():
        return None
    if path.is_dir():
        return "dir:" + ",".join(sorted(p.name for p in path.iterdir()))
    if not path.is_file():
        return "special"
    return hashlib.sha256(path.read_bytes()).hexdigest()


def assert_clean_failure(
    proc: subprocess.CompletedProcess[str], code: int, json_out: bool = True
) -> str:
    """The documented code, one stderr line without a traceback, a JSON error on stdout."""
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr + proc.stdout
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    if json_out:
        error = json.loads(proc.stdout)
        assert error["error"] and error["exit_code"] == code
    return lines[0]


@pytest.mark.parametrize("bad", ["/etc/passwd", "/dev/null", "DIR", "TEXT", "EMPTYDIR/sub/x.db"])
def test_a_bad_database_path_is_one_line_and_exit_3(home, tmp_path, bad):
    text = tmp_path / "notes.txt"
    text.write_text("not sqlite at all " * 100)
    (tmp_path / "EMPTYDIR").mkdir()
    path = {"DIR": str(tmp_path), "TEXT": str(text)}.get(
        bad, bad.replace("EMPTYDIR", str(tmp_path / "EMPTYDIR"))
    )
    before = digest(Path(path))
    for verb in (
        ["status"],
        ["doctor"],
        ["conversations"],
        ["backup", "--dest", str(tmp_path / "b")],
    ):
        line = assert_clean_failure(lcm("--db", path, *verb), EXIT_DATABASE)
        assert path in line or "database" in line
    assert digest(Path(path)) == before
    assert not (tmp_path / "b").exists()


def test_backup_into_a_file_or_device_writes_nothing(home, tmp_path):
    db = home / "lcm.db"
    target = tmp_path / "afile"
    target.write_text("keep me")
    for dest in (str(target), str(target / "deeper"), "/dev/null"):
        before = digest(Path(dest.split("/deeper")[0]))
        line = assert_clean_failure(lcm("--db", str(db), "backup", "--dest", dest), EXIT_WRITE)
        assert "not a directory" in line
        assert digest(Path(dest.split("/deeper")[0])) == before
    assert target.read_text() == "keep me"


def test_export_to_bad_outputs_writes_nothing(home, tmp_path):
    db = home / "lcm.db"
    existing = tmp_path / "old.jsonl"
    existing.write_text("previous export\n")
    cases = [
        str(tmp_path / "missing" / "x.jsonl"),
        "/nonexistent/x",
        str(tmp_path),
        str(existing / "x"),
    ]
    for output in cases:
        line = assert_clean_failure(
            lcm("--db", str(db), "export", "--conversation", "1", "--output", output), EXIT_WRITE
        )
        assert "cannot write" in line
        assert not Path(output).exists() or Path(output).is_dir()
    if Path("/dev/full").exists():  # a device that fails every write: the error, not a traceback
        assert_clean_failure(
            lcm("--db", str(db), "export", "--conversation", "1", "--output", "/dev/full"),
            EXIT_WRITE,
        )
    assert existing.read_text() == "previous export\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old.jsonl"]  # no temp file left behind
    ok = lcm("--db", str(db), "export", "--conversation", "1", "--output", str(existing))
    assert ok.returncode == 0, ok.stderr
    assert json.loads(existing.read_text().splitlines()[0])["type"] == "message"


@pytest.mark.parametrize(
    "argv",
    [
        ["expand", "--message", HUGE],
        ["expand", "--message", "-5"],
        ["expand", "--message", "nan"],
        ["expand", "--message", "1", "--content-offset", HUGE + HUGE],
        ["expand", "--node", "S1", "--source-offset", HUGE],
        ["expand", "--node", "S1", "--source-limit", HUGE],
        ["messages", "page", "--conversation", HUGE],
        ["messages", "tail", "--conversation", "-1"],
        ["messages", "page", "--conversation", "1", "--after", HUGE],
        ["messages", "page", "--conversation", "1", "--max-chars", "-3"],
        ["sessions", "--after", HUGE],
        ["conversations", "--limit", "NaN"],
        ["conversations", "--limit", "1e3"],
        ["conversations", "--after", "-1"],
        ["summaries", "list", "--conversation", "1", "--depth", HUGE],
        ["grep", "x", "--conversation", HUGE],
        ["retention", "--top", "-1"],
        ["retention", "--top", HUGE],
        ["export", "--conversation", HUGE],
        ["status", "--no-such-option"],
        ["no-such-verb"],
        [],
    ],
)
def test_fuzzed_numbers_and_usage_are_exit_2(home, argv):
    db = home / "lcm.db"
    before = digest(db)
    line = assert_clean_failure(lcm("--db", str(db), *argv), EXIT_USAGE)
    assert line.startswith("lcm: error:")
    assert digest(db) == before


@pytest.mark.parametrize(
    "argv",
    [
        ["summaries", "show", "S" + HUGE + "9"],
        ["expand", "--node", "S" + HUGE],
        ["expand", "--message", str((1 << 63) - 1)],
    ],
)
def test_ids_beyond_the_store_are_not_found(home, argv):
    assert_clean_failure(lcm("--db", str(home / "lcm.db"), *argv), EXIT_NOT_FOUND)


def test_table_format_errors_are_one_line_only(home):
    proc = lcm("--db", str(home / "lcm.db"), "--format", "table", "expand", "--message", HUGE)
    assert_clean_failure(proc, EXIT_USAGE, json_out=False)
    assert proc.stdout == ""


def test_every_exit_code_is_documented():
    import hermes_lcm.cli.main as cli

    doc = cli.__doc__ or ""
    assert (cli.EXIT_WRITE, cli.EXIT_INTERNAL) == (EXIT_WRITE, EXIT_INTERNAL)
    for code in (*DOCUMENTED, EXIT_INTERNAL):
        assert f"{code} " in doc


def test_importer_backup_dir_on_a_file_is_refused_before_writing(home, tmp_path):
    target = tmp_path / "target.db"
    target.write_bytes((home / "lcm.db").read_bytes())
    before = digest(target)
    source = openclaw_session(tmp_path)
    blocker = tmp_path / "afile"
    blocker.write_text("x")
    for backup_dir in (str(blocker), str(blocker / "sub"), "/dev/null"):
        proc = importer(
            "--source-jsonl",
            str(source),
            "--target-db",
            str(target),
            "--apply",
            "--backup-dir",
            backup_dir,
        )
        line = assert_clean_failure(proc, EXIT_WRITE, json_out=False)
        assert "not a directory" in line
        proc = importer(
            "--source-jsonl",
            str(source),
            "--target-db",
            str(target),
            "--apply",
            "--json",
            "--backup-dir",
            backup_dir,
        )
        assert proc.returncode == EXIT_WRITE and "Traceback" not in proc.stderr
        assert json.loads(proc.stderr)["exit_code"] == EXIT_WRITE
    assert digest(target) == before and blocker.read_text() == "x"


@pytest.mark.parametrize("target", ["DIR", "/dev/null", "FILE/x.db"])
def test_importer_bad_targets_are_one_line(tmp_path, target):
    source = openclaw_session(tmp_path)
    (tmp_path / "FILE").write_text("x")
    path = target.replace("DIR", str(tmp_path)).replace("FILE", str(tmp_path / "FILE"))
    for extra in ([], ["--apply"]):
        proc = importer("--source-jsonl", str(source), "--target-db", path, *extra)
        assert proc.returncode in (3, EXIT_WRITE), (proc.returncode, proc.stderr)
        assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert (tmp_path / "FILE").read_text() == "x"

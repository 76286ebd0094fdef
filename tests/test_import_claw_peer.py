"""The lossless-claw importer against a database made by lossless-claw's own engine.

``tests/peers/lossless_claw/claw.db`` was written by lossless-claw 0.15.3's ``LcmContextEngine``
(run under node 20) for a scripted conversation: two sessions with a tool call and a tool result
per turn, thinking blocks, and compactions by a fixed summarizer (leaf summaries and one condensed
one). See tests/peers/lossless_claw/README.md. Everything here reads that committed file (no node).

Attacks: tool results keep their tool_call_id/name (lossless-claw stores them as ``text`` parts);
a damaged page imports nothing with one clear line; a WAL source on a read-only directory is read
(including rows only in its -wal); wrong paths are clear errors; a re-run is a no-op.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from hermes_lcm.importers.claw import ImportFailure, run_import
from hermes_lcm.maintenance import doctor as mt
from hermes_lcm.storage.sqlite import SqliteStore as Store

from .dbutil import digest

ROOT = Path(__file__).resolve().parents[1]
PEER_DB = ROOT / "tests" / "peers" / "lossless_claw" / "claw.db"
SCRIPT = ROOT / "scripts" / "import_lossless_claw.py"


def source_counts(path: Path) -> dict[str, int]:
    """What the lossless-claw file holds, read straight from its own tables."""
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        one = lambda sql: int(con.execute(sql).fetchone()[0])  # noqa: E731
        linked = (
            "SELECT count(*) FROM messages m WHERE m.role='tool' AND EXISTS (SELECT 1 FROM message_parts p "
            "WHERE p.message_id=m.message_id AND coalesce(p.tool_call_id, json_extract(p.metadata, "
            "'$.toolCallId')) IS NOT NULL AND coalesce(p.tool_name, json_extract(p.metadata, '$.toolName')) "
            "IS NOT NULL)"
        )
        return {
            "messages": one("SELECT count(*) FROM messages"),
            "tool_results": one("SELECT count(*) FROM messages WHERE role='tool'"),
            "tool_linked": one(linked),
            "summaries": one("SELECT count(*) FROM summaries"),
            "edges": one("SELECT count(*) FROM summary_messages")
            + one("SELECT count(*) FROM summary_parents"),
            "text_result_parts": one(
                "SELECT count(*) FROM message_parts WHERE part_type='text' "
                "AND tool_call_id IS NOT NULL"
            ),
        }
    finally:
        con.close()


def target_rows(path: Path, sql: str) -> list[tuple[Any, ...]]:
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def run_script(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )


def test_fixture_is_a_real_lossless_claw_database() -> None:
    counts = source_counts(PEER_DB)
    assert PEER_DB.stat().st_size < 500_000
    # lossless-claw's own shape: results are text parts carrying the call id, not 'tool' parts
    assert counts["tool_results"] == 17 and counts["text_result_parts"] >= 1
    assert counts["tool_linked"] == counts["tool_results"]
    kinds = dict(target_rows(PEER_DB, "SELECT kind, count(*) FROM summaries GROUP BY kind"))
    assert kinds.get("leaf", 0) >= 2 and kinds.get("condensed", 0) >= 1


def test_tool_links_kept_and_rerun_is_a_noop(tmp_path: Path) -> None:
    source = source_counts(PEER_DB)
    target = tmp_path / "home" / "lcm.db"
    report = run_import(
        target_db=target, source_db=PEER_DB, include_summaries=True, apply=True, import_id="peer"
    )
    assert (
        report["imported"] == source["messages"] == 71
        and report["invalid_rows"] == 0
        and report["balanced"]
    )
    assert report["summaries"]["imported"] == source["summaries"] == 7
    linked = target_rows(
        target,
        "SELECT count(*) FROM messages WHERE role='tool' AND coalesce(tool_call_id, '')<>'' "
        "AND coalesce(tool_name, '')<>''",
    )[0][0]
    assert linked == source["tool_linked"] == source["tool_results"] == 17
    assert target_rows(target, "SELECT count(*) FROM edges")[0][0] == source["edges"] == 57
    # each result names the call of the assistant message before it, with the source's id and tool
    pairs = set(
        target_rows(target, "SELECT tool_call_id, tool_name FROM messages WHERE role='tool'")
    )
    src = sqlite3.connect(f"file:{PEER_DB}?mode=ro", uri=True)
    calls = set(
        src.execute(
            "SELECT tool_call_id, tool_name FROM message_parts WHERE part_type='tool'"
        ).fetchall()
    )
    src.close()
    assert pairs == calls
    # thinking blocks (lossless-claw 'reasoning' parts) are kept with their message
    assert report["thinking_kept"] == 6
    assert (
        target_rows(target, "SELECT count(*) FROM messages WHERE extra LIKE '%reasoning_content%'")[
            0
        ][0]
        == 6
    )
    view = Store.open_readonly(target)
    try:
        check = next(c for c in mt.doctor_report(view)["checks"] if c["name"] == "tool_links")
    finally:
        view.close()
    assert check["status"] == "ok" and check["data"]["tool_results"] == 17

    before = digest(target)
    again = run_import(
        target_db=target, source_db=PEER_DB, include_summaries=True, apply=True, import_id="peer"
    )
    assert (
        again["imported"] == 0
        and again["skipped_existing"] == 71
        and again["summaries"]["imported"] == 0
    )
    assert again["backup_path"] is None and digest(target) == before


def test_doctor_warns_on_tool_results_without_a_link(tmp_path: Path) -> None:
    target = tmp_path / "lcm.db"
    run_import(target_db=target, source_db=PEER_DB, apply=True, import_id="peer")
    con = sqlite3.connect(target)
    ids = [
        r[0] for r in con.execute("SELECT id FROM messages WHERE role='tool' ORDER BY id LIMIT 2")
    ]
    con.execute("UPDATE messages SET tool_call_id=NULL WHERE id=?", (ids[0],))
    con.execute("UPDATE messages SET tool_call_id='call_never_made' WHERE id=?", (ids[1],))
    con.commit()
    con.close()
    view = Store.open_readonly(target)
    try:
        report = mt.doctor_report(view)
    finally:
        view.close()
    check = next(c for c in report["checks"] if c["name"] == "tool_links")
    assert check["status"] == "warn", check
    assert check["data"]["without_call_id"] == 1 and check["data"]["orphaned"] == 1
    assert check["data"]["sample_without_call_id"] == [ids[0]] and check["data"][
        "sample_orphaned"
    ] == [ids[1]]
    assert "1 of 17 tool results have no tool_call_id" in check["detail"]


def _corrupt_copy(tmp_path: Path) -> Path:
    """The fixture with one leaf page of its ``messages`` table (holding a message in the middle of the
    first conversation) overwritten: the rows before it still read, the rest do not."""
    bad = tmp_path / "src" / "claw.db"
    bad.parent.mkdir()
    shutil.copyfile(PEER_DB, bad)
    con = sqlite3.connect(f"file:{bad}?mode=ro", uri=True)
    leaves = {
        int(r[0])
        for r in con.execute("SELECT pageno FROM dbstat WHERE name='messages' AND pagetype='leaf'")
    }
    con.close()
    data = bytearray(bad.read_bytes())
    page_size = int.from_bytes(data[16:18], "big")
    needle, at, page = b"Step 7: please check item 7 of the alpha", -1, 0
    while (at := data.find(needle, at + 1)) >= 0:
        page = at // page_size + 1  # SQLite numbers pages from 1
        if page in leaves:
            break
    assert page in leaves and page != max(leaves), (page, leaves)
    data[(page - 1) * page_size : page * page_size] = bytes([0x5A]) * page_size
    bad.write_bytes(bytes(data))
    return bad


def test_corrupt_source_imports_nothing_with_one_line(tmp_path: Path) -> None:
    bad = _corrupt_copy(tmp_path)
    target = tmp_path / "home" / "lcm.db"
    with pytest.raises(ImportFailure, match=r"damaged|cannot be read"):
        run_import(target_db=target, source_db=bad, include_summaries=True, apply=True)
    assert not target.exists()

    # an existing target is not touched either (no backup, no rows)
    run_import(target_db=target, source_db=PEER_DB, apply=True, import_id="good")
    before = digest(target)
    result = run_script(
        "--source-db", str(bad), "--target-db", str(target), "--apply", cwd=tmp_path
    )
    assert result.returncode == 3, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "damaged" in lines[0] and "Traceback" not in result.stderr
    assert digest(target) == before and not (target.parent / "lcm-backups").exists()


def _wal_source(directory: Path, edit: str) -> None:
    """A WAL-mode copy of the fixture whose latest edit lives only in its -wal file."""
    live = directory.parent / "live"
    live.mkdir()
    shutil.copyfile(PEER_DB, live / "claw.db")
    con = sqlite3.connect(live / "claw.db")
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA wal_autocheckpoint=0")
    con.execute(
        "UPDATE messages SET content=? WHERE message_id=(SELECT min(message_id) FROM messages)",
        (edit,),
    )
    con.commit()
    directory.mkdir()
    shutil.copyfile(live / "claw.db", directory / "claw.db")  # as a crash or a snapshot leaves it
    shutil.copyfile(live / "claw.db-wal", directory / "claw.db-wal")
    con.close()


def run_on_read_only(directory: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run the script with ``directory`` really read-only: a read-only bind mount in a private mount
    namespace when root (root ignores permission bits), else the directory's write bits removed."""
    if os.geteuid() != 0:
        directory.chmod(0o555)
        try:
            return run_script(*args, cwd=cwd)
        finally:
            directory.chmod(0o755)
    d = shlex.quote(str(directory))
    probe = subprocess.run(
        [
            "unshare",
            "-m",
            "sh",
            "-c",
            f"mount --bind {d} {d} && "
            f"mount -o remount,bind,ro {d} && ! touch {d}/.probe 2>/dev/null",
        ],
        capture_output=True,
        timeout=60,
    )
    if probe.returncode != 0:
        pytest.skip("root without a private mount namespace: cannot make a directory read-only")
    command = "exec " + shlex.join([sys.executable, str(SCRIPT), *args])
    return subprocess.run(
        [
            "unshare",
            "-m",
            "sh",
            "-c",
            f"mount --bind {d} {d} && mount -o remount,bind,ro {d} && {command}",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )


def test_wal_source_in_a_read_only_directory(tmp_path: Path) -> None:
    readonly = tmp_path / "ro"
    _wal_source(readonly, "EDIT ONLY IN THE WAL")
    out = tmp_path / "out"
    out.mkdir()
    target = out / "lcm.db"
    result = run_on_read_only(
        readonly,
        "--source-db",
        str(readonly / "claw.db"),
        "--target-db",
        str(target),
        "--apply",
        "--json",
        "--include-summaries",
        cwd=out,
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["imported"] == 71 and report["summaries"]["imported"] == 7
    # the row committed only to the -wal was read (immutable=1 alone would have missed it)
    assert (
        target_rows(target, "SELECT count(*) FROM messages WHERE content='EDIT ONLY IN THE WAL'")[
            0
        ][0]
        == 1
    )
    assert sorted(p.name for p in readonly.iterdir()) == [
        "claw.db",
        "claw.db-wal",
    ]  # nothing written beside it


def test_wal_mode_source_without_wal_file_in_a_read_only_directory(tmp_path: Path) -> None:
    readonly = tmp_path / "ro"
    readonly.mkdir()
    shutil.copyfile(PEER_DB, readonly / "claw.db")
    con = sqlite3.connect(readonly / "claw.db")
    con.execute(
        "PRAGMA journal_mode=WAL"
    )  # the header now says WAL; closing checkpoints and removes the -wal
    con.close()
    assert not (readonly / "claw.db-wal").exists()
    out = tmp_path / "out"
    out.mkdir()
    result = run_on_read_only(
        readonly,
        "--source-db",
        str(readonly / "claw.db"),
        "--target-db",
        str(out / "lcm.db"),
        "--json",
        cwd=out,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["would_import"] == 71


def test_wrong_paths_are_clear_errors(tmp_path: Path) -> None:
    target = tmp_path / "lcm.db"
    for args, words in (
        (["--source-db", str(tmp_path / "missing.db")], "does not exist"),
        (["--source-db", str(tmp_path)], "not a regular file"),
        (["--source-jsonl", str(tmp_path / "missing.jsonl")], "does not exist"),
        (["--source-jsonl-dir", str(tmp_path / "nodir")], "does not exist"),
    ):
        result = run_script(*args, "--target-db", str(target), "--apply", cwd=tmp_path)
        assert result.returncode == 3, (args, result.stdout, result.stderr)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and words in lines[0] and "not a lossless-claw" not in lines[0], (
            lines
        )
        assert "APPLIED" not in result.stdout and not target.exists()


def test_existing_target_in_a_read_only_directory(tmp_path: Path) -> None:
    """A dry run reads it (was: "not a hermes-lcm database"); an apply is refused in one clear line."""
    home = tmp_path / "home"
    home.mkdir()
    target = home / "lcm.db"
    run_import(target_db=target, source_db=PEER_DB, apply=True, import_id="first")
    before = digest(target)
    dry = run_on_read_only(
        home,
        "--source-db",
        str(PEER_DB),
        "--target-db",
        str(target),
        "--import-id",
        "second",
        "--json",
        cwd=tmp_path,
    )
    assert dry.returncode == 0, dry.stderr
    assert json.loads(dry.stdout)["would_import"] == 71
    same = run_on_read_only(
        home,
        "--source-db",
        str(PEER_DB),
        "--target-db",
        str(target),
        "--import-id",
        "first",
        "--json",
        cwd=tmp_path,
    )
    assert same.returncode == 0 and json.loads(same.stdout)["skipped_existing"] == 71
    applied = run_on_read_only(
        home,
        "--source-db",
        str(PEER_DB),
        "--target-db",
        str(target),
        "--import-id",
        "second",
        "--apply",
        cwd=tmp_path,
    )
    assert (
        applied.returncode == 3
        and "not writable" in applied.stderr
        and "APPLIED" not in applied.stdout
    )
    assert len(applied.stderr.strip().splitlines()) == 1 and digest(target) == before


def source_part_counts(path: Path) -> dict[str, int]:
    """Parts per ``part_type``, straight from lossless-claw's own table."""
    return dict(
        target_rows(path, "SELECT part_type, count(*) FROM message_parts GROUP BY part_type")
    )


def test_every_part_type_is_kept_or_reported(tmp_path: Path) -> None:
    """lossless-claw writes patch, file, subtask, step_start/step_finish, snapshot, retry, compaction
    and agent parts (its toPartType); none may vanish: each is kept on its message (readable in the
    content, found by search, shown by lcm_expand, the exact row in the private extra field) or counted
    as reported, per type, in the report and its --json."""
    source = source_part_counts(PEER_DB)
    assert (
        source.get("patch", 0) >= 1 and source.get("file", 0) >= 1 and source.get("agent", 0) >= 1
    )
    others = {k: v for k, v in source.items() if k not in ("text", "tool", "reasoning")}
    assert len(others) >= 8
    target = tmp_path / "lcm.db"
    dry = run_script(
        "--source-db", str(PEER_DB), "--target-db", str(target), "--json", cwd=tmp_path
    )
    assert dry.returncode == 0, dry.stderr
    plan = json.loads(dry.stdout)
    report = run_import(
        target_db=target, source_db=PEER_DB, include_summaries=True, apply=True, import_id="peer"
    )
    for counts in (plan, report):
        every = {
            k: counts["parts_kept"].get(k, 0) + counts["parts_reported"].get(k, 0)
            for k in set(counts["parts_kept"]) | set(counts["parts_reported"])
        }
        assert every == source, (counts["parts_kept"], counts["parts_reported"])
    assert {k: report["parts_kept"].get(k, 0) for k in others} == others

    # kept on the message: readable and searchable content, the exact source rows in extra
    con = sqlite3.connect(f"file:{PEER_DB}?mode=ro", uri=True)
    patch = json.loads(
        con.execute("SELECT metadata FROM message_parts WHERE part_type='patch'").fetchone()[0]
    )
    fname = json.loads(
        con.execute("SELECT metadata FROM message_parts WHERE part_type='file'").fetchone()[0]
    )
    rows = {
        r[0]: r[1:]
        for r in con.execute(
            "SELECT part_id, part_type, ordinal FROM message_parts "
            "WHERE part_type NOT IN ('text','tool','reasoning')"
        )
    }
    con.close()
    hit = target_rows(
        target,
        "SELECT id, content, parts, extra FROM messages WHERE content LIKE ?".replace(
            "?", "'%" + patch["raw"]["hash"] + "%'"
        ),
    )
    assert (
        len(hit) == 1 and "lossless-claw patch part" in hit[0][1] and "src/parser.py" in hit[0][1]
    )
    assert "Applying the parser fix." in hit[0][1] and hit[0][2] is not None
    assert (
        target_rows(
            target,
            "SELECT count(*) FROM messages WHERE content LIKE '%" + fname["raw"]["filename"] + "%'",
        )[0][0]
        == 1
    )
    kept = [
        p
        for (extra,) in target_rows(target, "SELECT extra FROM messages WHERE extra IS NOT NULL")
        for p in json.loads(extra).get("_lossless_claw_parts", [])
    ]
    assert {p["part_id"]: (p["part_type"], p["ordinal"]) for p in kept} == rows
    assert all(isinstance(p["metadata"], dict) and "raw" in p["metadata"] for p in kept)
    # lcm_expand's view of the message (the content as the model saw it) shows the parts
    view = Store.open_readonly(target)
    try:
        shown = view.message(hit[0][0])
        assert shown is not None
        host = shown.to_host(extra=False)
        assert (
            any("9f2c1e7" in p.get("text", "") for p in host["content"])
            and "_lossless_claw_parts" not in host
        )
        checks = {c["name"]: c["status"] for c in mt.doctor_report(view)["checks"]}
    finally:
        view.close()
    assert checks["tool_links"] == "ok" and not [n for n, s in checks.items() if s == "error"], (
        checks
    )

    before = digest(target)
    again = run_import(
        target_db=target, source_db=PEER_DB, include_summaries=True, apply=True, import_id="peer"
    )
    assert (
        again["imported"] == 0
        and again["parts_kept"] == report["parts_kept"]
        and digest(target) == before
    )


def test_parts_of_a_skipped_message_are_reported(tmp_path: Path) -> None:
    """A message the importer does not take (here a system message: lossless-claw's role CHECK allows
    it, hermes-lcm does not import it) takes its parts with it: they are counted as reported, per type."""
    source = tmp_path / "claw.db"
    shutil.copyfile(PEER_DB, source)
    con = sqlite3.connect(source)
    mid = con.execute("SELECT message_id FROM message_parts WHERE part_type='subtask'").fetchone()[
        0
    ]
    con.execute("UPDATE messages SET role='system' WHERE message_id=?", (mid,))
    con.commit()
    lost = dict(
        con.execute(
            "SELECT part_type, count(*) FROM message_parts WHERE message_id=? GROUP BY part_type",
            (mid,),
        ).fetchall()
    )
    con.close()
    report = run_import(
        target_db=tmp_path / "lcm.db", source_db=source, apply=True, import_id="peer"
    )
    assert (
        report["skipped_unsupported"] == 1 and report["parts_reported"] == lost and len(lost) >= 4
    )
    assert "subtask" not in report["parts_kept"]

"""OpenClaw JSONL transcripts as OpenClaw really writes them.

Attacks: ``parentSession`` in a real header is the parent transcript's *file path*, not an id;
thinking blocks and compaction entries must be kept or reported, never silently dropped; one
entry without an id in a tree-shaped file must not switch the whole file to file order (which
imports the abandoned branch).
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

from hermes_lcm.importers.claw import run_import
from hermes_lcm.storage.sqlite import SqliteStore as Store

from .test_import_fixtures import T0, _entry


def write(path: Path, entries: list[dict[str, Any]]) -> Path:
    path.write_text("\n".join(json.dumps(e) for e in entries) + "\n", encoding="utf-8")
    return path


def header(session_id: str, parent: str | None = None) -> dict[str, Any]:
    h: dict[str, Any] = {
        "type": "session",
        "version": 3,
        "id": session_id,
        "timestamp": "2026-01-05T08:00:00.000Z",
        "cwd": "/home/user/work",
    }
    if parent is not None:
        h["parentSession"] = parent
    return h


def sessions_of(target: Path) -> dict[str, str | None]:
    con = sqlite3.connect(f"file:{target}?mode=ro", uri=True)
    try:
        return dict(con.execute("SELECT id, parent_session_id FROM sessions").fetchall())
    finally:
        con.close()


def test_parent_session_file_path_resolves_to_the_parents_id(tmp_path: Path) -> None:
    sessions = tmp_path / "sessions"
    sessions.mkdir()
    # OpenClaw names files <timestamp>_<id>.jsonl; the id is in the header
    parent_file = write(
        sessions / "2026-01-05T08-00-00_sess-parent.jsonl",
        [
            header("sess-parent"),
            _entry("p1", None, {"role": "user", "content": "first question"}, T0 + 1000),
        ],
    )
    write(
        sessions / "2026-01-05T09-00-00_sess-child.jsonl",
        [
            header("sess-child", str(parent_file)),
            _entry("c1", None, {"role": "user", "content": "continued after /new"}, T0 + 2000),
        ],
    )
    target = tmp_path / "lcm.db"
    report = run_import(
        target_db=target, jsonl_dirs=[sessions], agent="main", apply=True, import_id="fork"
    )
    assert report["imported"] == 2
    rows = sessions_of(target)
    assert rows["openclaw:main:sess-child"] == "openclaw:main:sess-parent"
    assert rows["openclaw:main:sess-parent"] is None

    # a parent transcript that is gone: its file name stands in, with a warning
    gone = tmp_path / "other"
    gone.mkdir()
    write(
        gone / "orphan.jsonl",
        [
            header("sess-orphan", "/var/lost/sess-lost.jsonl"),
            _entry("o1", None, {"role": "user", "content": "hello"}, T0 + 3000),
        ],
    )
    report = run_import(
        target_db=target, jsonl_dirs=[gone], agent="main", apply=True, import_id="fork2"
    )
    assert sessions_of(target)["openclaw:main:sess-orphan"] == "openclaw:main:sess-lost"
    assert any(
        "parent transcript /var/lost/sess-lost.jsonl unreadable" in w for w in report["warnings"]
    )


def test_thinking_kept_and_compaction_reported(tmp_path: Path) -> None:
    path = write(
        tmp_path / "s.jsonl",
        [
            header("sess-think"),
            _entry("e1", None, {"role": "user", "content": "why is the build red?"}, T0 + 1000),
            _entry(
                "e2",
                "e1",
                {
                    "role": "assistant",
                    "content": [
                        {"type": "thinking", "thinking": "The lockfile changed; check CI logs."},
                        {"type": "text", "text": "The lockfile changed."},
                    ],
                },
                T0 + 2000,
            ),
            {
                "type": "compaction",
                "id": "e3",
                "parentId": "e2",
                "timestamp": "2026-01-05T08:00:03.000Z",
                "summary": "User asked about the red build; lockfile changed.",
                "firstKeptEntryId": "e2",
                "tokensBefore": 5000,
            },
            _entry("e4", "e3", {"role": "user", "content": "fix it"}, T0 + 4000),
        ],
    )
    target = tmp_path / "lcm.db"
    report = run_import(target_db=target, jsonl=[path], apply=True, import_id="think")
    assert report["imported"] == 3 and report["balanced"]
    assert report["thinking_kept"] == 1
    assert report["compactions_reported"] == 1
    assert any("1 OpenClaw compaction entries" in w for w in report["warnings"])
    view = Store.open_readonly(target)
    try:
        state = view.conversation_by_key("import:think:openclaw:sess-think")
        assert state is not None
        msgs = view.messages_after(state.id, 0)
    finally:
        view.close()
    assert msgs[1].content == "The lockfile changed."
    assert msgs[1].extra_fields() == {"reasoning_content": "The lockfile changed; check CI logs."}


def test_an_entry_without_an_id_does_not_import_the_abandoned_branch(tmp_path: Path) -> None:
    path = write(
        tmp_path / "s.jsonl",
        [
            header("sess-tree"),
            _entry("e1", None, {"role": "user", "content": "pick a port"}, T0 + 1000),
            _entry(
                "e2x",
                "e1",
                {"role": "assistant", "content": [{"type": "text", "text": "ABANDONED 8080"}]},
                T0 + 2000,
            ),
            {
                "type": "message",
                "timestamp": "2026-01-05T08:00:03.000Z",  # no id, no parentId
                "message": {
                    "role": "user",
                    "content": "STRAY line without an id",
                    "timestamp": T0 + 3000,
                },
            },
            _entry(
                "e2",
                "e1",
                {"role": "assistant", "content": [{"type": "text", "text": "Use 9443."}]},
                T0 + 4000,
            ),
            _entry("e3", "e2", {"role": "user", "content": "thanks"}, T0 + 5000),
        ],
    )
    target = tmp_path / "lcm.db"
    report = run_import(target_db=target, jsonl=[path], apply=True, import_id="tree")
    view = Store.open_readonly(target)
    try:
        state = view.conversation_by_key("import:tree:openclaw:sess-tree")
        assert state is not None
        contents = [m.content for m in view.messages_after(state.id, 0)]
    finally:
        view.close()
    assert contents == ["pick a port", "Use 9443.", "thanks"]
    assert report["invalid_rows"] == 1 and report["balanced"]
    assert any("without an id" in w for w in report["warnings"])
    assert any("abandoned branches" in w for w in report["warnings"])


def _state_dir(root: Path) -> list[Path]:
    """An OpenClaw state directory: two agents, five session files a day apart (oldest first)."""
    files = []
    for i in range(5):
        agent = "main" if i % 2 == 0 else "ops"
        sessions = root / "agents" / agent / "sessions"
        sessions.mkdir(parents=True, exist_ok=True)
        path = write(
            sessions / f"s{i}.jsonl",
            [
                header(f"sess-{i}"),
                _entry(f"e{i}", None, {"role": "user", "content": f"session {i} says hi"}, T0 + i),
            ],
        )
        when = 1_780_000_000 + i * 86_400
        os.utime(path, (when, when))
        files.append(path)
    return files


def test_a_state_dir_since_and_limit_import_a_batch_and_the_next_goes_on(tmp_path: Path) -> None:
    """lossless-claw's migration flags: --state-dir reads every agent's sessions (each one's id
    recorded), --since leaves out older files, --limit takes the oldest N, and a second run with
    the same import id imports the rest; the report says what was left out."""
    root = tmp_path / "openclaw"
    _state_dir(root)
    target = tmp_path / "lcm.db"
    since = 1_780_000_000 + 86_400  # the first file is older
    first = run_import(
        target_db=target, state_dir=root, since=since, limit=2, apply=True, import_id="batch"
    )
    assert first["imported"] == 2
    assert any("3 of 5 session files left out" in w for w in first["warnings"]), first["warnings"]
    assert set(sessions_of(target)) == {"openclaw:ops:sess-1", "openclaw:main:sess-2"}
    second = run_import(
        target_db=target, state_dir=root, since=since, apply=True, import_id="batch"
    )
    assert second["imported"] == 2 and second["skipped_existing"] == 2
    assert set(sessions_of(target)) == {
        "openclaw:ops:sess-1",
        "openclaw:main:sess-2",
        "openclaw:ops:sess-3",
        "openclaw:main:sess-4",
    }


def test_the_import_script_takes_the_batch_flags(tmp_path: Path) -> None:
    root = tmp_path / "openclaw"
    _state_dir(root)
    script = Path(__file__).resolve().parents[1] / "scripts" / "import_lossless_claw.py"
    done = subprocess.run(
        [
            sys.executable,
            str(script),
            "--state-dir",
            str(root),
            "--since",
            "2026-05-29",
            "--limit",
            "1",
            "--target-db",
            str(tmp_path / "lcm.db"),
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["dry_run"] and report["would_import"] == 1
    bad = subprocess.run(
        [sys.executable, str(script), "--state-dir", str(root), "--since", "yesterday"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 2 and "not an ISO date" in bad.stderr

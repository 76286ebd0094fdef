"""The ``lcm`` command on a database built by the engine: every verb, pagination, formats,
read-only behaviour, exit codes and database resolution.

The verbs run on a SQLite file and on PostgreSQL (``db`` is built on each); what is about the
file itself (its digest and WAL, FTS5's shadow tables, a SQLite backup copy, missing and foreign
files, path resolution) uses ``file_db``. PostgreSQL-only behaviour (passwords, pg_dump backups,
a server gone) is tests/test_cli_pg.py."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from hermes_lcm import store as store_module
from hermes_lcm.cli.database import resolve_db
from hermes_lcm.cli.main import main
from hermes_lcm.cli.output import EXIT_DATABASE, EXIT_NOT_FOUND, EXIT_USAGE
from hermes_lcm.storage.pg import redacted
from hermes_lcm.store import is_url, open_readonly

from .backends import raw_sql, table_names
from .conftest import BACKENDS, database_env, new_engine
from .convo import conversation, host_run
from .dbutil import digest, query_ro


def _build(home: Path, where: dict[str, str]) -> str:
    """Two conversations written by real engines: one long (compacted), one short."""
    long_run = new_engine(home, 5000, "s1", **where)
    host_run(long_run, list(conversation(11, 80)))
    target = where.get("LCM_DATABASE_URL") or str(home / "lcm.db")
    depths = {d for (d,) in rows(target, "SELECT DISTINCT depth FROM summaries")}
    assert {0, 1} <= depths, f"the fixture needs condensed summaries, got depths {depths}"
    short_run = new_engine(home, 10**9, "s2", **where)
    host_run(short_run, list(conversation(12, 3)))
    short_run.ingest_host([{"role": "user", "content": "a line with the marker QUOKKA-7 in it"}])
    store_module.close_all()
    return target


@pytest.fixture(scope="module")
def file_db(tmp_path_factory) -> Path:
    """The two conversations in a SQLite file (for what is about the file itself)."""
    return Path(_build(tmp_path_factory.mktemp("home"), {}))


@pytest.fixture(scope="module", params=BACKENDS)
def db(request, tmp_path_factory) -> Path | str:
    """The two conversations on each backend: the SQLite file, or a PostgreSQL URL."""
    if request.param == "sqlite":
        return request.getfixturevalue("file_db")
    return _build(tmp_path_factory.mktemp("pghome"), database_env("postgres"))


def rows(where: Path | str, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """A read past the CLI: read-only on a file, the server's answer for a URL."""
    return (
        raw_sql(str(where), sql, args) if is_url(str(where)) else query_ro(Path(where), sql, args)
    )


# what the raw SQL below reads from ``edges`` (schema 4 stores the kind as 0/1 on both backends)
EDGES = "(SELECT parent_id, CASE WHEN child_kind = 1 THEN 'summary' ELSE 'message' END AS child_kind, child_id, ord FROM edges) e"  # noqa: E501


def run(db: Path | str, *argv: str) -> tuple[int, Any]:
    out = io.StringIO()
    code = main(["--db", str(db), *argv], out=out)
    text = out.getvalue()
    try:
        return code, json.loads(text)
    except ValueError:
        return code, text


def ok(db: Path | str, *argv: str) -> Any:
    code, result = run(db, *argv)
    assert code == 0, result
    return result


def test_status(db):
    status = ok(db, "status")
    expected = redacted(db) if is_url(str(db)) else str(Path(db).resolve())
    assert status["database_path"] == expected and status["chosen_by"] == "--db"
    assert status["plugin_path"] == str(Path(main.__code__.co_filename).resolve().parents[1])
    assert status["counts"]["conversations"] == 2
    assert status["counts"]["messages"] == rows(db, "SELECT count(*) FROM messages")[0][0]
    assert status["summaries_by_depth"]["0"] > 0 and status["lineage_problems"] == []
    # the optional families are shown off, without creating their tables
    assert status["temporal_rollups"] == {"tables": False}
    assert status["assertions"]["enabled"] is False and status["assertions"]["sidecar"] is None
    assert not table_names(str(db)) & {"rollups", "assertions"}


def test_conversations_keyset_pagination(db):
    first = ok(db, "conversations", "--limit", "1")
    assert [c["key"] for c in first["items"]] == ["session:s1"] and first["next_cursor"] == 1
    assert first["items"][0]["messages"] == first["items"][0]["last_seq"]
    second = ok(db, "conversations", "--limit", "1", "--after", str(first["next_cursor"]))
    assert [c["key"] for c in second["items"]] == ["session:s2"]
    third = ok(db, "conversations", "--limit", "1", "--after", str(second["next_cursor"]))
    assert third == {"items": [], "next_cursor": None}


def test_conversations_by_session_key(db):
    """lossless-claw's ``conversations --session-key``: the key itself, or a pattern with *."""
    assert [c["key"] for c in ok(db, "conversations", "--session-key", "session:s2")["items"]] == [
        "session:s2"
    ]
    both = ok(db, "conversations", "--session-key", "session:*")["items"]
    assert [c["key"] for c in both] == ["session:s1", "session:s2"]
    assert ok(db, "conversations", "--session-key", "session:s")["items"] == []
    assert ok(db, "conversations", "--session-key", "sess_on:*")["items"] == []  # _ is no wildcard


def test_summaries_list_by_recency(file_db, tmp_path):
    """``summaries list --recency 7d``: only the nodes made within that long."""
    copy = tmp_path / "lcm.db"
    shutil.copyfile(file_db, copy)
    with contextlib.closing(sqlite3.connect(copy)) as con:
        ids = [r[0] for r in con.execute("SELECT id FROM summaries WHERE conversation_id=1")]
        old = ids[: len(ids) // 2]
        con.executemany(
            "UPDATE summaries SET created_at=? WHERE id=?",
            [(time.time() - 10 * 86_400, i) for i in old],
        )
        con.commit()
    args = ("summaries", "list", "--conversation", "1", "--limit", "500")
    recent = ok(copy, *args, "--recency", "7d")["items"]
    assert sorted(int(n["node_id"][1:]) for n in recent) == sorted(set(ids) - set(old))
    assert len(ok(copy, *args, "--recency", "2w")["items"]) == len(ids)
    assert run(copy, *args, "--recency", "soon")[0] == EXIT_USAGE


def test_sessions(db):
    everything = ok(db, "sessions")["items"]
    assert {s["id"] for s in everything} == {"s1", "s2"}
    only = ok(db, "sessions", "--conversation", "2")["items"]
    assert [s["id"] for s in only] == ["s2"] and only[0]["messages"] > 0


def test_messages_tail_and_page_walk(db):
    tail = ok(db, "messages", "tail", "--conversation", "2", "--limit", "2")["items"]
    assert tail[-1]["content"] == "a line with the marker QUOKKA-7 in it"
    assert tail[0]["seq"] + 1 == tail[1]["seq"]
    seen, cursor = [], None
    while True:
        args = ["messages", "page", "--conversation", "1", "--limit", "17"]
        page = ok(db, *args, *(["--after", str(cursor)] if cursor is not None else []))
        seen += [m["seq"] for m in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    last_seq = rows(db, "SELECT last_seq FROM conversations WHERE id=1")[0][0]
    assert seen == list(range(1, last_seq + 1))
    by_session = ok(db, "messages", "page", "--session", "s2", "--limit", "500")["items"]
    assert (
        len(by_session)
        == rows(
            db,
            "SELECT count(*) FROM messages WHERE session_key=(SELECT id FROM session_keys WHERE name='s2')",
        )[0][0]
    )
    cut = ok(db, "messages", "tail", "--conversation", "1", "--limit", "1", "--max-chars", "5")[
        "items"
    ][0]
    assert len(cut["content"]) <= 5 and cut["truncated"] == (cut["content_chars"] > 5)


def test_summaries_list_and_show_with_lineage(db):
    leaves = ok(db, "summaries", "list", "--conversation", "1", "--depth", "0")["items"]
    assert leaves and all(n["depth"] == 0 for n in leaves)
    parent_id = rows(db, "SELECT parent_id FROM " + EDGES + " WHERE child_kind='summary' LIMIT 1")[
        0
    ][0]
    child_id = rows(
        db,
        "SELECT child_id FROM "
        + EDGES
        + " WHERE parent_id=? AND child_kind='summary' ORDER BY ord",
        (parent_id,),
    )[0][0]
    shown = ok(db, "summaries", "show", f"S{child_id}", "--source-limit", "3")
    assert shown["node"]["node_id"] == f"S{child_id}" and shown["children_kind"] == "message"
    assert f"S{parent_id}" in [a["node_id"] for a in shown["lineage_up"]]
    assert len(shown["children"]) == 3 and shown["next_source_offset"] == 3
    assert (
        shown["source_count"]
        == rows(db, "SELECT count(*) FROM " + EDGES + " WHERE parent_id=?", (child_id,))[0][0]
    )
    assert shown["node"]["descendant_messages"] == shown["source_count"]
    upper = ok(db, "summaries", "show", f"S{parent_id}")
    assert upper["children_kind"] == "summary" and f"S{child_id}" in [
        c["node_id"] for c in upper["children"]
    ]
    assert run(db, "summaries", "show", "S99999")[0] == EXIT_NOT_FOUND
    assert run(db, "summaries", "show", "banana")[0] == EXIT_USAGE


def test_grep_messages_and_summaries(db):
    hits = ok(db, "grep", "where is the QUOKKA-7 marker?")["items"]
    assert hits[0]["kind"] == "message" and "QUOKKA-7" in hits[0]["snippet"]
    scoped = ok(db, "grep", "turn answer", "--conversation", "1", "--limit", "5")["items"]
    assert [h["kind"] for h in ok(db, "grep", "turn", "--kind", "summaries")["items"]] != []
    assert {h["conversation_id"] for h in scoped} == {1}
    assert any(h["kind"] == "summary" for h in scoped)
    assert run(db, "grep", "  !!! ")[0] == EXIT_USAGE


def test_expand_message_and_node(db):
    store_id = rows(db, "SELECT id FROM messages WHERE tool_calls IS NOT NULL LIMIT 1")[0][0]
    exact = ok(db, "expand", "--message", str(store_id))
    view = open_readonly(db)
    assert exact["exact"] == view.message(store_id).to_host()
    view.close()
    long_id, length = rows(
        db, "SELECT id, length(content) FROM messages ORDER BY length(content) DESC LIMIT 1"
    )[0]
    parts, offset = [], 0
    while offset is not None:
        page = ok(
            db,
            "expand",
            "--message",
            str(long_id),
            "--max-chars",
            "100",
            "--content-offset",
            str(offset),
        )
        parts.append(page["content"])
        offset = page["next_content_offset"]
    assert len("".join(parts)) == length
    node = ok(db, "expand", "--node", "S1", "--source-offset", "2", "--source-limit", "2")
    assert node["source_offset"] == 2 and len(node["children"]) == 2
    assert run(db, "expand", "--node", "S1", "--message", "1")[0] == EXIT_USAGE
    assert run(db, "expand", "--message", "999999")[0] == EXIT_NOT_FOUND


def test_export_jsonl_is_exact_and_markdown_is_readable(db, tmp_path):
    target = tmp_path / "conv1.jsonl"
    result = ok(
        db,
        "export",
        "--conversation",
        "1",
        "--as",
        "jsonl",
        "--output",
        str(target),
        "--include-summaries",
    )
    lines = [json.loads(line) for line in target.read_text().splitlines()]
    messages = [x for x in lines if x["type"] == "message"]
    stored = rows(db, "SELECT count(*) FROM messages WHERE conversation_id=1")[0][0]
    assert result["messages"] == len(messages) == stored
    view = open_readonly(db)
    assert all(x["message"] == view.message(x["store_id"]).to_host() for x in messages)
    view.close()
    assert [x["seq"] for x in messages] == sorted(x["seq"] for x in messages)
    assert any(x["type"] == "summary" and x["children"] for x in lines)
    code, markdown = run(db, "export", "--conversation", "2", "--as", "markdown")
    assert code == 0 and markdown.startswith("# Conversation 2: session:s2")
    assert "QUOKKA-7" in markdown and "```json" in markdown
    assert run(db, "export", "--conversation", "42")[0] == EXIT_NOT_FOUND


def test_doctor_backup_retention(file_db, tmp_path):
    db = file_db  # the backup half reads a SQLite copy; PostgreSQL's pg_dump backup: test_cli_pg
    report = ok(db, "doctor")
    assert report["status"] == "ok"
    assert any("integrity: skipped" in c.get("detail", "") for c in report["checks"])
    saved = ok(db, "backup", "--dest", str(tmp_path / "b"))
    copy = sqlite3.connect(saved["backup"])
    assert (
        copy.execute("SELECT count(*) FROM messages").fetchone()
        == rows(db, "SELECT count(*) FROM messages")[0]
    )
    copy.close()
    retention = ok(db, "retention", "--top", "1")
    assert (
        retention["totals"]["conversations"] == 2 and len(retention["largest_conversations"]) == 1
    )


def test_read_commands_never_change_the_database(file_db, tmp_path):
    db = file_db  # the file's digest and WAL
    before = digest(db)
    for argv in (
        ["status"],
        ["conversations"],
        ["sessions"],
        ["messages", "tail", "--conversation", "1"],
        ["summaries", "list", "--conversation", "1"],
        ["summaries", "show", "S1"],
        ["grep", "turn"],
        ["expand", "--message", "1"],
        ["doctor"],
        ["retention"],
        ["export", "--conversation", "1"],
        ["backup", "--dest", str(tmp_path)],
    ):
        run(db, *argv)
    assert digest(db) == before
    wal = Path(str(db) + "-wal")
    assert not wal.exists() or wal.stat().st_size == 0


def test_table_format(db):
    out = io.StringIO()
    assert main(["--db", str(db), "--format", "table", "conversations"], out=out) == 0
    header, rule, *body = out.getvalue().splitlines()
    assert (
        header.split()[:2] == ["id", "key"]
        and set(rule.replace(" ", "")) == {"-"}
        and "session:s1" in body[0]
    )
    out = io.StringIO()
    main(["--db", str(db), "--format", "table", "status"], out=out)
    assert "counts:" in out.getvalue() and "messages:" in out.getvalue()


def test_doctor_deep_finds_damage_and_exits_nonzero(tmp_path):
    engine = new_engine(tmp_path, 10**9, "s1")
    host_run(engine, list(conversation(3, 8)))
    with engine.core.store.write() as con:
        con.execute("UPDATE messages_fts_data SET block=zeroblob(length(block)) WHERE id > 10")
    store_module.close_all()
    code, report = run(tmp_path / "lcm.db", "doctor", "--deep")
    assert code == EXIT_NOT_FOUND and report["status"] == "fail"
    fts = next(c for c in report["checks"] if c["name"] == "fts:messages_fts")
    assert fts["data"]["integrity"] and "repair apply" in fts["command"]
    store_module.close_all()


def test_missing_and_foreign_databases(tmp_path):
    code, result = run(tmp_path / "nope.db", "status")
    assert code == EXIT_DATABASE and "no database" in result["error"]
    assert "the path comes from --db" in result["hint"] and "HERMES_HOME" in result["hint"]
    foreign = tmp_path / "claw.db"
    con = sqlite3.connect(foreign)
    for table in ("conversations", "messages", "summaries", "summary_messages", "summary_parents"):
        con.execute(f"CREATE TABLE {table}(x)")
    con.commit()
    con.close()
    code, result = run(foreign, "status")
    assert code == EXIT_DATABASE and "import_lossless_claw.py" in result["hint"]


def test_database_resolution(tmp_path, monkeypatch):
    env: dict[str, str] = {"HERMES_HOME": str(tmp_path)}
    assert resolve_db(None, env) == (tmp_path / "lcm.db", "HERMES_HOME")
    assert (
        resolve_db(None, {**env, "HERMES_PROFILE": "work"})[0]
        == tmp_path / "profiles" / "work" / "lcm.db"
    )
    assert resolve_db(None, {**env, "LCM_DATABASE_PATH": "/x/y.db"}) == (
        Path("/x/y.db"),
        "LCM_DATABASE_PATH",
    )
    (tmp_path / "config.yaml").write_text("lcm:\n  database_path: /elsewhere/z.db\n")
    assert resolve_db(None, env) == (Path("/elsewhere/z.db"), "config.yaml")
    assert resolve_db("/given.db", env) == (Path("/given.db"), "--db")


def test_console_script_entry_point(db):
    """The installed script, a URL included (nothing from this process's environment)."""
    script = Path(sys.executable).parent / "lcm"
    if not script.exists():
        pytest.fail(
            f"the 'lcm' console script is not installed next to {sys.executable}: pip install -e ."
        )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LCM_", "HERMES_"))}
    proc = subprocess.run(
        [str(script), "--db", str(db), "status"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["counts"]["conversations"] == 2


def test_global_options_work_after_the_command_too(tmp_path):
    from hermes_lcm.cli.main import parser

    args = parser().parse_args(["status", "--db", str(tmp_path / "x.db"), "--format", "table"])
    assert args.db == str(tmp_path / "x.db") and args.format == "table"
    args = parser().parse_args(["--db", "a.db", "status"])
    # The default became ``auto``: JSON whenever stdout is not a terminal (a StringIO, a pipe).
    assert args.db == "a.db" and args.format == "auto"


@pytest.mark.parametrize(
    "argv",
    [
        ["export", "--conversation", "1"],
        ["export", "--conversation", "1", "--as", "markdown"],
        ["messages", "tail", "--conversation", "1", "--format", "table"],
        ["doctor", "--format", "table"],
        ["status", "--format", "table"],
    ],
)
def test_a_reader_that_closes_the_pipe_early_ends_it_quietly(file_db, argv):
    """``lcm export ... | head -1``: the output stops there, exit 141 (SIGPIPE's), no traceback."""
    import subprocess
    import sys

    proc = subprocess.Popen(
        [sys.executable, "-m", "hermes_lcm.cli.main", "--db", str(file_db), *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "COLUMNS": "80"},
    )
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.readline()
    proc.stdout.close()  # the reader goes away, like `head -1`
    err = proc.stderr.read().decode()
    code = proc.wait(60)
    assert first, err
    assert code in (0, 141), (code, err)
    assert "Traceback" not in err and "BrokenPipe" not in err and "Exception ignored" not in err, (
        err
    )


@pytest.mark.parametrize(
    "argv",
    [
        ["doctor"],
        ["status"],
        ["summaries", "show", "1"],
        ["conversations"],
        ["messages", "tail", "--conversation", "1"],
        ["grep", "marker"],
        ["sessions"],
        ["retention"],
    ],
)
def test_a_table_off_a_terminal_has_bounded_lines(file_db, argv):
    """``lcm doctor --format table > f``: a file a person can open and grep, not 1,000,000-column
    lines of spaces (a nested table used to be padded out to the off-terminal console's width)."""
    out = io.StringIO()
    main(["--db", str(file_db), "--format", "table", *argv], out=out)
    text = out.getvalue()
    lines = text.splitlines()
    assert lines, argv
    assert max(len(line) for line in lines) <= 2000, (argv, max(len(line) for line in lines))
    assert len(text) < 200_000, (argv, len(text))


class _Terminal(io.StringIO):
    """A terminal as rich sees one (its width comes from COLUMNS)."""

    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("columns", [80, 120, 200])
@pytest.mark.parametrize(
    ("argv", "keys"),
    [
        (["conversations"], ["id"]),
        (["messages", "tail", "--conversation", "1"], ["store_id", "seq", "role"]),
        (["summaries", "show", "S2"], ["node_id"]),
        (["sessions"], ["id", "conversation_id"]),
    ],
)
def test_a_narrow_terminal_keeps_the_id_columns(file_db, monkeypatch, columns, argv, keys):
    """What the next command needs (a conversation id, a store id, a node id) is never the column
    a narrow terminal drops; what is left out instead is named."""
    import re

    monkeypatch.setenv("COLUMNS", str(columns))
    out = _Terminal()
    assert main(["--db", str(file_db), "--format", "table", *argv], out=out) == 0
    text = re.sub(r"\x1b\[[0-9;]*m", "", out.getvalue())
    lines = text.splitlines()
    headers = [
        line.split()
        for line in lines
        if set(line.strip()) - {"-", " "} and any(k in line.split() for k in keys)
    ]
    assert headers, text[:2000]
    assert all(k in headers[-1] for k in keys), (columns, headers[-1])
    drawn, block = (
        [],
        None,
    )  # a text block's lines are the stored text's own (the terminal wraps them)
    for line in lines:
        depth = len(line) - len(line.lstrip())
        if block is not None and (depth > block or not line.strip()):
            continue
        block = depth if line.rstrip().endswith(": |") else None
        drawn.append(line)
    assert max(len(line.rstrip()) for line in drawn) <= columns, (
        columns,
        max(len(line) for line in drawn),
    )


def test_expand_on_a_terminal_shows_the_exact_content_whole(tmp_path, monkeypatch):
    """``lcm expand --message N`` on a terminal: every line of the stored text, tabs and all, not
    the first 200 characters of it next to ``truncated: false``."""
    import re

    engine = new_engine(tmp_path, 10**9, "s1")
    text = "\n".join(f"line {i}:\tvalue {i} " + "x" * 90 for i in range(12))
    engine.ingest_host(
        [{"role": "user", "content": "show me"}, {"role": "assistant", "content": text}]
    )
    store_module.close_all()
    monkeypatch.setenv("COLUMNS", "80")
    out = _Terminal()
    assert (
        main(
            ["--db", str(tmp_path / "lcm.db"), "--format", "table", "expand", "--message", "2"],
            out=out,
        )
        == 0
    )
    shown = re.sub(r"\x1b\[[0-9;]*m", "", out.getvalue())
    assert "truncated: false" in shown
    block = [line[2:] for line in shown.splitlines() if line.startswith("  line ")]
    assert "\n".join(block) == text, shown[:3000]


def test_a_missing_database_names_the_setting_that_chose_it_and_doctor_still_checks_the_host(
    tmp_path, monkeypatch
):
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HERMES_HOME", str(home))
    monkeypatch.delenv("HERMES_PROFILE", raising=False)
    monkeypatch.delenv("HERMES_PYTHON", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "no-hermes-here"))
    out, err = io.StringIO(), io.StringIO()
    assert main(["status", "--format", "json"], out=out, err=err) == EXIT_DATABASE
    assert f"no database at {home / 'lcm.db'}" in err.getvalue()
    assert (
        f"the path comes from HERMES_HOME={home}" in err.getvalue()
        and "--db PATH" in err.getvalue()
    )

    out = io.StringIO()
    assert main(["doctor", "--format", "json"], out=out, err=io.StringIO()) == EXIT_DATABASE
    report = json.loads(out.getvalue())
    checks = {c["name"]: c for c in report["checks"]}
    assert report["status"] == "fail" and report["database"] == {
        "path": str(home / "lcm.db"),
        "exists": False,
    }
    assert checks["database"]["status"] == "fail" and "HERMES_HOME" in checks["database"]["action"]
    assert (
        checks["host"]["status"] == "ok"
        and "not checked: no Hermes here" in checks["host"]["detail"]
    )

    (home / "config.yaml").write_text(
        "plugins:\n  enabled: [hermes-lcm]\ncontext:\n  engine: lcm\n"
    )
    out = io.StringIO()
    main(["doctor", "--format", "json"], out=out, err=io.StringIO())
    host = next(c for c in json.loads(out.getvalue())["checks"] if c["name"] == "host")
    assert (
        host["status"] == "warn" and "HERMES_PYTHON" in host["action"]
    )  # a Hermes home, but no way to check it


def test_usage_errors_say_what_is_wanted_once(tmp_path):
    err = io.StringIO()
    assert main([], out=io.StringIO(), err=err) == EXIT_USAGE
    line = err.getvalue()
    assert line.startswith("lcm: error: a command is required, one of: status, conversations,")
    assert "lcm: lcm" not in line
    assert line.count("\n") == 1 and "doctor" in line and "usage: lcm" in line

    err = io.StringIO()
    assert (
        main(["--db", str(tmp_path / "x.db"), "messages"], out=io.StringIO(), err=err) == EXIT_USAGE
    )
    assert err.getvalue().startswith(
        "lcm: error: messages: the following arguments are required: tail|page"
    )
    err = io.StringIO()
    assert main(["summaries", "lsit"], out=io.StringIO(), err=err) == EXIT_USAGE
    assert "invalid choice: 'lsit' (choose from 'list', 'show')" in err.getvalue()
    assert "usage: lcm summaries" in err.getvalue()


def test_grep_snippets_start_just_before_the_match_and_scores_are_never_negative_zero():
    from hermes_lcm.base.display import score
    from hermes_lcm.search.snippets import snippet

    def cli_cell(text: str) -> str:  # how lcm grep cuts a hit for its table
        return snippet(text, ["quetzal"], 200, lead=24, fill=False, word_start=True)

    text = "word " * 60 + "the quetzal\nledger  was   chosen " + "tail " * 80
    shown = cli_cell(text)
    assert shown.startswith("…") and shown.index("quetzal") <= 30  # a 60-column cell still shows it
    assert "\n" not in shown and "  " not in shown and len(shown) <= 202
    assert cli_cell("quetzal at the start") == "quetzal at the start"
    assert (
        str(score(-0.0000001)) == "0.0" and str(score(-0.0004)) == "0.0" and score(0.12345) == 0.123
    )


def _on_terminal(db: Path, monkeypatch: pytest.MonkeyPatch, columns: int, *argv: str) -> str:
    import re

    monkeypatch.setenv("COLUMNS", str(columns))
    out = _Terminal()
    assert main(["--db", str(db), "--format", "table", *argv], out=out) == 0
    return re.sub(r"\x1b\[[0-9;]*m", "", out.getvalue())


@pytest.mark.parametrize(
    ("argv", "text"),
    [
        (["messages", "tail", "--conversation", "1"], "content"),
        (["grep", "marker"], "snippet"),
        (["summaries", "--conversation", "1"], "content"),
    ],
)
def test_an_80_column_terminal_keeps_the_text_a_row_is_about(file_db, monkeypatch, argv, text):
    """The row's text (a message's content, a hit's snippet) is the last column a narrow terminal
    gives up; a value every row shares (one conversation, one session) is said once under the
    table instead of taking a column."""
    page = _on_terminal(file_db, monkeypatch, 80, *argv)
    header = next(line.split() for line in page.splitlines() if text in line.split())
    assert text in header, page[:1500]
    if argv[0] == "messages":
        assert "conversation_id" not in header and "(in every row: conversation_id 1" in page


def test_a_time_is_whole_or_left_out(file_db, monkeypatch):
    import re

    for columns in (80, 120, 200):
        page = _on_terminal(file_db, monkeypatch, columns, "conversations")
        assert not re.search(r"\b20\d\d-[0-9-]*…", page), (columns, page[:1500])
        shown = re.findall(r"\b20\d\d-\d\d-\d\dT\d\d:\d\d:\d\dZ\b", page)
        assert shown or "created_at" in page.split("left out", 1)[-1], (columns, page[:1500])


def test_summaries_lists_by_default_and_across_conversations(db):
    """``lcm summaries --recency 7d`` as lossless-claw users type it: no ``list``, no
    ``--conversation`` needed (every conversation's nodes, oldest first)."""
    code, every = run(db, "summaries")
    assert code == 0 and every["items"]
    per = [run(db, "summaries", "list", "--conversation", c)[1]["items"] for c in ("1", "2")]
    assert [r["node_id"] for r in every["items"]] == sorted(
        (r["node_id"] for r in per[0] + per[1]), key=lambda n: int(n[1:])
    )
    code, recent = run(db, "summaries", "--recency", "7d")
    assert code == 0 and recent["items"] == every["items"]


def test_lossless_claw_spellings_work(db):
    """``--conversation-id`` as lossless-claw's CLI spells it, beside ``--conversation``."""
    assert run(db, "summaries", "list", "--conversation-id", "1") == run(
        db, "summaries", "list", "--conversation", "1"
    )
    code, tail = run(db, "messages", "tail", "--conversation-id", "1")
    assert code == 0 and tail["items"]


def test_each_verb_loads_its_own_family_only():
    """``lcm VERB`` registers only the family of VERB (a cold start pays for nothing else): the
    map names each verb's family, every verb the families register is in it, and a verb's own
    parser reads its arguments as the whole parser does."""
    import argparse

    from hermes_lcm.cli import main as cli_main

    registered = {}
    for name in cli_main.FAMILIES:
        p = argparse.ArgumentParser()
        sub = p.add_subparsers()
        cli_main.family(name).register(sub)
        registered.update(dict.fromkeys(sub.choices, name))
    assert registered == cli_main.VERB_FAMILY
    argv = ["--db", "x.db", "--format", "json", "summaries", "--recency", "7d", "--limit", "3"]
    assert cli_main.asked_verb(argv) == "summaries"
    whole = vars(cli_main.parser().parse_args(argv))
    own = vars(cli_main.parser("summaries").parse_args(argv))
    assert {k: v for k, v in whole.items() if k != "handler"} == {
        k: v for k, v in own.items() if k != "handler"
    }
    assert cli_main.asked_verb(["--help"]) is None and cli_main.asked_verb(["statu"]) is None
    assert cli_main.asked_verb(["--format=json", "doctor", "--deep"]) == "doctor"

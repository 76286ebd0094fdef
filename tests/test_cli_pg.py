"""Every ``lcm`` verb on a PostgreSQL database written by real engines (tests/pgserver.py), chosen
by ``--db URL`` or by ``LCM_DATABASE_URL``; and the URL's password appears in no output."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest

from hermes_lcm import store as store_module
from hermes_lcm.cli.main import main

from .conftest import new_engine
from .convo import conversation, host_run

SECRET = "Pw-s3cret-9Q"


def with_password(url: str) -> str:
    """The same URL with a password (the test server trusts loopback, so it is accepted and ignored)."""
    parts = urlsplit(url)
    return urlunsplit(
        (
            parts.scheme,
            f"{parts.username}:{SECRET}@{parts.hostname}:{parts.port}",
            parts.path,
            parts.query,
            parts.fragment,
        )
    )


@pytest.fixture(scope="module")
def pg_db(tmp_path_factory) -> str:
    """Two conversations on one PostgreSQL schema: one long (compacted), one short; the URL with a password."""
    from .pgserver import fresh_url

    url = with_password(fresh_url())
    home = tmp_path_factory.mktemp("home")
    long_run = new_engine(home, 5000, "s1", LCM_DATABASE_URL=url)
    host_run(long_run, list(conversation(11, 80)))
    short_run = new_engine(home, 10**9, "s2", LCM_DATABASE_URL=url)
    host_run(short_run, list(conversation(12, 3)))
    short_run.ingest_host([{"role": "user", "content": "a line with the marker QUOKKA-7 in it"}])
    store_module.close_all()
    return url


def run(url: str | None, *argv: str) -> tuple[int, Any, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main([*(["--db", url] if url else []), "--format", "json", *argv], out=out, err=err)
    text = out.getvalue()
    assert SECRET not in text and SECRET not in err.getvalue(), (argv, text[:500], err.getvalue())
    try:
        return code, json.loads(text), err.getvalue()
    except ValueError:
        return code, text, err.getvalue()


def ok(url: str | None, *argv: str) -> Any:
    code, result, err = run(url, *argv)
    assert code == 0, (result, err)
    return result


def test_status_on_postgres(pg_db):
    status = ok(pg_db, "status")
    assert status["database_path"].startswith("postgresql://lcm@127.0.0.1:")
    assert status["backend"] == "postgresql" and status["server_version"].startswith("16")
    assert status["counts"]["conversations"] == 2 and status["counts"]["messages"] > 100
    assert status["db"] > 0 and status["bytes_by_table"]["messages"] > 0
    assert status["schema_version"] >= 4 and status["pg_schema"] >= 1
    assert status["lineage_problems"] == [] and status["summaries_by_depth"]["0"] > 0


def test_url_from_environment(pg_db, monkeypatch, tmp_path):
    monkeypatch.setenv("HERMES_HOME", str(tmp_path))
    monkeypatch.setenv("LCM_DATABASE_URL", pg_db)
    status = ok(None, "status")
    assert status["chosen_by"] == "LCM_DATABASE_URL" and status["counts"]["conversations"] == 2


def test_pages_on_postgres(pg_db):
    convs = ok(pg_db, "conversations", "--limit", "1")
    assert [c["key"] for c in convs["items"]] == ["session:s1"] and convs["next_cursor"] == 1
    first = ok(pg_db, "sessions", "--limit", "1")
    assert first["items"][0]["id"] == "s1" and first["next_cursor"] is not None
    second = ok(pg_db, "sessions", "--limit", "1", "--after", str(first["next_cursor"]))
    assert second["items"][0]["id"] == "s2"
    tail = ok(pg_db, "messages", "tail", "--conversation", "2", "--limit", "1")
    assert "QUOKKA-7" in tail["items"][0]["content"]
    page = ok(pg_db, "messages", "page", "--session", "s2", "--limit", "2")
    assert len(page["items"]) == 2
    nodes = ok(pg_db, "summaries", "list", "--conversation", "1", "--limit", "5")
    assert nodes["items"]
    shown = ok(pg_db, "summaries", "show", nodes["items"][0]["node_id"])
    assert shown["children"]
    hits = ok(pg_db, "grep", "QUOKKA")
    assert any("QUOKKA-7" in h["snippet"] for h in hits["items"])


def test_doctor_on_postgres(pg_db):
    report = ok(pg_db, "doctor")
    assert report["status"] in ("ok", "warn"), report
    deep = ok(pg_db, "doctor", "--deep")
    names = {c["name"]: c for c in deep["checks"]}
    for table in ("fts:messages_fts", "fts:summaries_fts"):
        assert names[table]["status"] == "ok" and "integrity: ok" in names[table]["detail"], names[
            table
        ]
    assert "fts:triggers" not in names and names["database"]["status"] == "ok", names["database"]
    assert names["lineage"]["status"] == "ok" and names["tool_links"]["status"] in ("ok", "warn")


def test_retention_and_export_on_postgres(pg_db, tmp_path):
    retention = ok(pg_db, "retention")
    assert retention
    out = tmp_path / "c2.jsonl"
    done = ok(pg_db, "export", "--conversation", "2", "--output", str(out))
    assert done["messages"] == len(out.read_text().splitlines()) and "QUOKKA-7" in out.read_text()


def test_every_other_verb_answers(pg_db, tmp_path):
    for argv in (("rollups", "status"), ("assertions", "status")):
        code, result, err = run(pg_db, *argv)
        assert code in (0, 1), (argv, result, err)


def test_view_on_postgres(pg_db, tmp_path):
    page = tmp_path / "view.html"
    code, result, err = run(pg_db, "view", "--output", str(page))
    assert code == 0, (result, err)
    assert SECRET not in page.read_text()


def test_doctor_deep_finds_a_broken_full_text_index(tmp_path):
    """A GIN index left invalid (as a failed CREATE INDEX CONCURRENTLY leaves it) and a function dropped
    fail doctor; the repair plan rebuilds the index, after which doctor passes again."""
    import psycopg

    from .pgserver import fresh_url

    url = fresh_url()
    engine = new_engine(tmp_path, 10**9, "s1", LCM_DATABASE_URL=url)
    engine.ingest_host([{"role": "user", "content": "the zebra crossing at dawn"}])
    store_module.close_all()
    with psycopg.connect(url, autocommit=True) as pg:
        pg.execute(
            "UPDATE pg_index SET indisvalid = false WHERE indexrelid = 'messages_tsv'::regclass"
        )
    code, report, _err = run(url, "doctor", "--deep")
    names = {c["name"]: c for c in report["checks"]}
    assert code == 1 and names["fts:messages_fts"]["status"] == "fail", names["fts:messages_fts"]
    assert (
        "invalid" in names["fts:messages_fts"]["detail"] and names["database"]["status"] == "fail"
    )
    store_module.open_store(url).fts_rebuild("messages_fts")  # what `/lcm doctor repair apply` runs
    store_module.close_all()
    code, report, _err = run(url, "doctor", "--deep")
    names = {c["name"]: c for c in report["checks"]}
    assert names["fts:messages_fts"]["status"] == "ok", names["fts:messages_fts"]
    with psycopg.connect(url, autocommit=True) as pg:
        pg.execute("DROP FUNCTION lcm_tsq(text)")
    code, report, _err = run(url, "doctor")
    names = {c["name"]: c for c in report["checks"]}
    assert code == 1 and "function lcm_tsq" in names["fts:triggers"]["detail"]


def test_backup_is_a_verified_pg_dump_that_restores(pg_db, tmp_path, monkeypatch):
    """`lcm backup` on a URL writes a pg_dump custom-format file (pg_restore lists it); restored into a
    new database, the engine opens it and every message is there, with full-text search working."""
    import subprocess

    import psycopg

    from .pgserver import binaries, server

    monkeypatch.setenv("PATH", f"{binaries()}{os.pathsep}{os.environ.get('PATH', '')}")
    done = ok(pg_db, "backup", "--dest", str(tmp_path / "b"))
    dump = Path(done["backup"])
    assert (
        done["status"] == "ok"
        and dump.suffix == ".dump"
        and dump.stat().st_size == done["bytes"] > 0
    )
    assert "pg_restore" in done["restore"]
    srv, name = server(), f"restored_{tmp_path.name[-8:].lower().replace('-', '_')}"
    with psycopg.connect(srv.url(), autocommit=True) as pg:
        pg.execute(f"CREATE DATABASE {name}")
    restored = srv.url(database=name, schema=parse_schema(pg_db))
    subprocess.run(
        [str(binaries() / "pg_restore"), "--no-owner", "-d", srv.url(database=name), str(dump)],
        check=True,
        capture_output=True,
    )
    before, after = store_module.open_readonly(pg_db), store_module.open_readonly(restored)
    try:
        for conversation in (1, 2):
            assert [m.content for m in after.messages_after(conversation, 0)] == [
                m.content for m in before.messages_after(conversation, 0)
            ]
    finally:
        before.close()
        after.close()
    assert (
        ok(restored, "grep", "QUOKKA")["count"] >= 1
    )  # the vectors and the pinned functions came along


def test_backup_without_pg_dump_says_which_command(pg_db, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no pg_dump here
    code, result, _err = run(pg_db, "backup", "--dest", str(tmp_path / "b"))
    assert code == 1 and result["status"] == "pg_dump not found"
    assert result["run"].startswith("pg_dump -Fc -n t_") and "postgresql://lcm@" in result["run"]
    assert not (tmp_path / "b").exists()


def parse_schema(url: str) -> str:
    from urllib.parse import parse_qs

    return parse_qs(urlsplit(url).query)["options"][0].split("=", 1)[1]


def test_server_gone_is_one_line_and_exit_3(tmp_path):
    """A URL nothing answers at: exit 3, one line on stderr naming the URL without its password."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"postgresql://lcm:{SECRET}@127.0.0.1:{port}/postgres?connect_timeout=2"
    code, _result, err = run(url, "status")
    assert (
        code == 3
        and err.count("\n") == 1
        and "cannot connect" in err
        and f"lcm@127.0.0.1:{port}" in err
    )


def test_redact_through_the_cli_on_postgres(tmp_path, monkeypatch):
    """`lcm redact --apply` on a URL (with a password): a pg_dump first, the secret gone from rows and vectors."""
    import psycopg

    from .pgserver import binaries, fresh_url

    url = with_password(fresh_url())
    monkeypatch.setenv("PATH", f"{binaries()}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("HERMES_HOME", str(tmp_path))
    engine = new_engine(tmp_path, 10**9, "s1", LCM_DATABASE_URL=url)
    key = "ghp_" + "Z" * 36
    engine.ingest_host([{"role": "user", "content": f"token {key} here"}])
    store_module.close_all()
    done = ok(url, "redact", "--apply")
    assert (
        done["status"] == "applied"
        and done["backup"].endswith("-pre-redact.dump")
        and done["fts_sound"]
    )
    with psycopg.connect(url) as pg:
        assert (
            pg.execute(
                "SELECT count(*) FROM messages WHERE strpos(content, %s) > 0", (key,)
            ).fetchone()[0]
            == 0
        )
        assert (
            pg.execute(
                "SELECT count(*) FROM messages WHERE tsv @@ lcm_tsq(%s)", ("ZZZZZZZZ*",)
            ).fetchone()[0]
            == 0
        )


def test_writing_family_verbs_reopen_the_url_with_its_password(pg_db, monkeypatch):
    """`lcm assertions rebuild` and `lcm rollups build` write: on a URL they reopen the store with
    the URL they were given (the password kept), never refuse it as a read-only file."""
    monkeypatch.setenv("LCM_ASSERTIONS_ENABLED", "true")
    monkeypatch.setenv("LCM_TEMPORAL_ROLLUPS_ENABLED", "true")
    monkeypatch.setenv("LCM_SUMMARY_PROVIDER", "extractive")
    built = ok(pg_db, "assertions", "rebuild")
    assert "read-only" not in json.dumps(built)
    assert ok(pg_db, "rollups", "build") is not None
    opened = [key for key in store_module._stores if "postgresql://" in key[1]]
    assert opened and all(SECRET in key[1] for key in opened), opened
    store_module.close_all()


def test_nothing_is_written_under_a_path_made_of_the_url(pg_db, tmp_path, monkeypatch):
    """A URL is never used as a file path: `lcm view`, payloads and backups of a PostgreSQL memory go
    under this machine's Hermes home, and the working directory gets no `postgresql:` folder."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HERMES_HOME", str(tmp_path / "home"))
    ok(pg_db, "view")
    assert not (tmp_path / "postgresql:").exists()
    assert not any(p.name.startswith("postgres") for p in tmp_path.iterdir())
    assert list((tmp_path / "home" / "lcm-views").rglob("lcm-view-*.html"))

"""``/lcm`` on a PostgreSQL database (tests/pgserver.py): every subcommand that reads or writes the
store, each writing one backing up first with pg_dump (on PATH here), and refusing without it."""

from __future__ import annotations

import gc
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import psycopg
import pytest

from hermes_lcm.command import handle_command

from .conftest import new_engine
from .convo import conversation, host_run

NO_COMPACTION = 10**9


@pytest.fixture
def url(clean_home, monkeypatch) -> str:
    """A fresh schema, chosen by LCM_DATABASE_URL (so /lcm's template engine uses it too), pg_dump on PATH."""
    from .pgserver import binaries, fresh_url

    found = fresh_url()
    monkeypatch.setenv("LCM_DATABASE_URL", found)
    monkeypatch.setenv("PATH", f"{binaries()}{os.pathsep}{os.environ.get('PATH', '')}")
    return found


def lcm(args: str) -> Any:
    text = handle_command(f"{args} --json")
    assert not text.startswith("hermes-lcm:"), text
    return json.loads(text)


def engine_with_history(
    home: Path, turns: int = 20, threshold: int = NO_COMPACTION, session: str = "s1", **env: str
) -> Any:
    engine = pg_engine(home, threshold, session, LCM_ENABLE_SLASH_COMMAND="1", **env)
    host_run(engine, list(conversation(5, turns)))
    return engine


def pg_engine(home: Path, threshold: int, session: str, **env: str) -> Any:
    """An engine on the test's URL (engines read the env they are given, not the process's)."""
    return new_engine(
        home, threshold, session, LCM_DATABASE_URL=os.environ["LCM_DATABASE_URL"], **env
    )


def listed(dump: str) -> str:
    from .pgserver import binaries

    return subprocess.run(
        [str(binaries() / "pg_restore"), "--list", dump], capture_output=True, text=True, check=True
    ).stdout


def test_status_doctor_backup_retention(url, tmp_path):
    _engine = engine_with_history(tmp_path, threshold=6000)
    status = lcm("status")
    assert status["session_id"] == "s1" and status["messages_in_conversation"] > 0
    doctor = lcm("doctor")
    assert doctor["status"] == "ok", doctor["guidance"]
    saved = lcm("backup")
    assert saved["backup"].endswith(".dump") and " messages " in listed(saved["backup"])
    report = lcm("doctor retention")
    assert report["totals"]["conversations"] == 1


def test_source_and_clean_apply_back_up_with_pg_dump(url, tmp_path):
    noisy = pg_engine(tmp_path, NO_COMPACTION, "cron:nightly")
    host_run(noisy, list(conversation(2, 5)))
    fork = pg_engine(tmp_path, NO_COMPACTION, "idle-fork")
    del noisy, fork
    gc.collect()
    engine = engine_with_history(
        tmp_path,
        LCM_IGNORE_SESSION_PATTERNS="cron:*",
        LCM_DOCTOR_CLEAN_APPLY_ENABLED="true",
        LCM_EMPTY_LIFECYCLE_MIN_AGE_HOURS="0",
    )
    with engine.core.store.write() as con:
        con.execute("UPDATE messages SET source='' WHERE id <= 5")
    assert lcm("doctor source")["blank_source_rows"] == 5
    applied = lcm("doctor source apply")
    assert applied["updated"] == 5 and applied["backup"]["path"].endswith("-pre-source.dump")
    clean = lcm("doctor clean apply")
    assert clean["status"] == "applied" and clean["deleted"]["conversations"] == 1
    assert lcm("doctor clean lifecycle apply")["deleted"]["sessions"] == 1
    assert lcm("doctor repair")["status"] == "noop"


def test_an_apply_without_pg_dump_changes_nothing(url, tmp_path, monkeypatch):
    engine = engine_with_history(tmp_path)
    with engine.core.store.write() as con:
        con.execute("UPDATE messages SET source='' WHERE id <= 3")
    monkeypatch.setenv("PATH", str(tmp_path))
    text = handle_command("doctor source apply")
    assert text.startswith("hermes-lcm:") and "pg_dump -Fc -n t_" in text
    assert lcm("doctor source")["blank_source_rows"] == 3


def test_rotate_on_postgres(url, tmp_path):
    _engine = engine_with_history(tmp_path, turns=25, LCM_FRESH_TAIL_COUNT="10")
    preview = lcm("rotate")
    applied = lcm("rotate apply")
    assert (
        applied["status"] == "applied"
        and applied["frontier_seq_after"] == preview["target_frontier_seq"]
    )
    assert (
        applied["backup"]["path"].endswith("-rotate-latest.dump")
        and "lcm-pg-" in applied["backup"]["path"]
    )
    assert lcm("status")["rotate_backup"] == applied["backup"]["path"]


def test_redact_on_postgres_rewrites_rows_and_search(url, tmp_path):
    engine = engine_with_history(tmp_path, turns=3)
    secret = "sk-ant-api03-" + "Q" * 40
    engine.ingest_host([{"role": "user", "content": f"my key is {secret} keep it"}])
    scan = lcm("redact")
    assert (
        scan["rows_to_change"] >= 1
        if "rows_to_change" in scan
        else scan["status"] in ("ready", "noop")
    )
    done = lcm("redact apply")
    assert done["status"] == "applied" and done["fts_sound"], done
    with psycopg.connect(url) as pg:
        assert (
            pg.execute(
                "SELECT count(*) FROM messages WHERE content LIKE %s", (f"%{secret}%",)
            ).fetchone()[0]
            == 0
        )
        tsv_hits = pg.execute(
            "SELECT count(*) FROM messages WHERE tsv @@ lcm_tsq('QQQQQQQQ*')"
        ).fetchone()[0]
    assert tsv_hits == 0


def test_view_and_gc_payloads_on_postgres(url, tmp_path, monkeypatch):
    workdir = tmp_path / "cwd"
    workdir.mkdir()
    monkeypatch.chdir(workdir)
    _engine = engine_with_history(tmp_path, threshold=6000)
    assert lcm("gc-payloads")["status"] in ("noop", "ready")
    page = handle_command("view")
    assert not page.startswith("hermes-lcm:"), page
    # the page goes under this machine's Hermes home, never to a "postgresql:/..." path under the cwd
    assert list(workdir.iterdir()) == [], list(workdir.rglob("*"))
    written = list((tmp_path / "lcm-views").rglob("lcm-view-*.html"))
    assert len(written) == 1 and "Pw-" not in str(written[0]), written


def test_no_password_in_any_lcm_answer(clean_home, monkeypatch, tmp_path):
    """A URL with a password: /lcm status (bound and not), doctor and backup never show it."""
    from urllib.parse import urlsplit, urlunsplit

    from .pgserver import binaries, fresh_url

    parts = urlsplit(fresh_url())
    secret = "Pw-s3cret-7Z"
    with_pw = urlunsplit(
        (
            parts.scheme,
            f"{parts.username}:{secret}@{parts.hostname}:{parts.port}",
            parts.path,
            parts.query,
            parts.fragment,
        )
    )
    monkeypatch.setenv("LCM_DATABASE_URL", with_pw)
    monkeypatch.setenv("PATH", f"{binaries()}{os.pathsep}{os.environ.get('PATH', '')}")
    unbound = handle_command("status --json")
    assert secret not in unbound and "lcm@127.0.0.1" in unbound
    _engine = engine_with_history(tmp_path, turns=3)
    for args in ("status", "doctor", "backup", "doctor retention", "view"):
        text = handle_command(f"{args} --json")
        assert secret not in text and not text.startswith("hermes-lcm:"), (args, text[:300])

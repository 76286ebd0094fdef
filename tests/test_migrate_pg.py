"""``lcm migrate-to-postgres``: a real SQLite file made by our engine, copied into a real PostgreSQL
(tests/pgserver.py). Dry run writes nothing; apply copies every row with its id and the secrets,
verify agrees; a killed run resumes with nothing doubled; a foreign target is refused; a second run
is a no-op; an older schema is read through its TEMP views; peers' files get the upgrade command."""

from __future__ import annotations

import io
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hermes_lcm import store as store_module
from hermes_lcm import tools
from hermes_lcm.cli import main as cli

from .conftest import new_engine
from .convo import conversation, host_run
from .dbutil import digest
from .migration.test_lcmx_import import lcmx_copy
from .migration.test_schema_v4 import FIXTURE as V3_FIXTURE
from .pgserver import fresh_url
from .test_import_fixtures import build_lossless_claw

ROOT = Path(__file__).resolve().parents[1]
TABLES = (
    "conversations",
    "sessions",
    "session_keys",
    "messages",
    "payload_refs",
    "payload_ref_aliases",
    "summaries",
    "edges",
    "context_items",
    "events",
)


@pytest.fixture(autouse=True)
def _closed(clean_home: Path) -> Iterator[None]:
    yield
    store_module.close_all()


def lcm(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = cli.main(["--format", "json", *argv], out=out, err=err)
    store_module.close_all()
    return code, out.getvalue(), err.getvalue()


def made_by_engine(home: Path, turns: int = 30) -> Path:
    """A file our engine wrote: raw rows, a summary DAG, sessions, events, a redaction secret, a payload."""
    engine = new_engine(home, threshold=3000)
    turns_ = list(conversation(7, turns))
    turns_[1] = [
        *turns_[1],
        {"role": "user", "content": "the quokka manifest lives under the stairs"},
    ]
    host_run(engine, turns_)
    assert engine.core is not None
    engine.core.store.secret("redaction")
    engine.core.store.secret("summary_block")
    store_module.close_all()
    payloads = home / "lcm-payloads" / "ab"
    payloads.mkdir(parents=True)
    (payloads / "abcd.bin").write_bytes(b"\x00payload")
    return home / "lcm.db"


def pg_rows(url: str, sql: str) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        return [tuple(r) for r in conn.execute(sql).fetchall()]


def counts_sqlite(db: Path) -> dict[str, int]:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in TABLES}
    finally:
        con.close()


def counts_pg(url: str) -> dict[str, int]:
    return {t: pg_rows(url, f"SELECT count(*) FROM {t}")[0][0] for t in TABLES}


def test_dry_run_writes_nothing(clean_home: Path) -> None:
    db = made_by_engine(clean_home)
    url, before = fresh_url(), digest(db)
    code, out, err = lcm("migrate-to-postgres", "--source-db", str(db), "--url", url)
    plan = json.loads(out)
    assert code == 0, err
    assert plan["apply"] is False and plan["target_state"] == "empty" and plan["can_apply"]
    assert plan["would_copy"] == {t: n for t, n in counts_sqlite(db).items()}
    assert plan["would_copy"]["messages"] > 50 and plan["would_copy"]["summaries"] > 0
    assert "secret:redaction" in plan["secrets"] and plan["payload_files"] == 1
    assert pg_rows(
        url, "SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema()"
    ) == [(0,)]
    assert digest(db) == before


def test_apply_copies_everything_with_ids_and_secrets_and_verifies(clean_home: Path) -> None:
    db = made_by_engine(clean_home)
    url, before = fresh_url(), digest(db)
    code, out, err = lcm(
        "migrate-to-postgres", "--source-db", str(db), "--url", url, "--apply", "--batch", "7"
    )
    done = json.loads(out)
    assert code == 0 and done["verify"]["ok"], (err, done["verify"]["sample"])
    assert digest(db) == before  # the source is never written
    assert counts_pg(url) == counts_sqlite(db)
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    src_ids = [r[0] for r in con.execute("SELECT id FROM messages ORDER BY id")]
    secrets = dict(con.execute("SELECT key, value FROM meta WHERE key LIKE 'secret:%'").fetchall())
    con.close()
    assert [r[0] for r in pg_rows(url, "SELECT id FROM messages ORDER BY id")] == src_ids
    moved_secrets = dict(pg_rows(url, "SELECT key, value FROM meta WHERE key LIKE 'secret:%'"))
    assert {k: moved_secrets.get(k) for k in secrets} == secrets
    assert {"secret:redaction", "secret:summary_block"} <= set(secrets)
    moved = Path(done["payloads"]["directory"]) / "ab" / "abcd.bin"
    assert moved.read_bytes() == b"\x00payload"
    code, out, err = lcm("migrate-to-postgres", "--source-db", str(db), "--url", url, "--verify")
    assert code == 0 and json.loads(out)["ok"], err
    # the sequences continue after the copied ids: a new engine's row gets the next id
    engine = new_engine(clean_home, session="s2", LCM_DATABASE_URL=url)
    engine.ingest_host([{"role": "user", "content": "after the move zebracorn"}])
    assert pg_rows(url, "SELECT max(id) FROM messages")[0][0] == max(src_ids) + 1
    # and the engine on the URL answers grep and expand for an old row as the file does
    on_file = new_engine(clean_home, session="s3")
    ask = {"store_id": src_ids[3], "session_scope": "all"}
    answers = [json.loads(tools.dispatch(e, "lcm_expand", ask)) for e in (engine, on_file)]
    assert answers[0] == answers[1] and "error" not in answers[0], answers
    found = [
        json.loads(
            tools.dispatch(e, "lcm_grep", {"query": "quokka manifest", "session_scope": "all"})
        )
        for e in (engine, on_file)
    ]
    assert "error" not in found[0] and found[0]["hits"], found[0]
    unscored = [[{k: v for k, v in h.items() if k != "score"} for h in f["hits"]] for f in found]
    assert unscored[0] == unscored[1]  # scores are each backend's own scale (bm25, ts_rank)
    code, out, err = lcm("migrate-to-postgres", "--source-db", str(db), "--url", url, "--verify")
    checked = json.loads(out)  # the target has moved on (one new message): verify says so
    assert code == 1 and not checked["ok"] and set(checked["count_mismatch"]) >= {"messages"}, err


def test_second_run_is_a_no_op(clean_home: Path) -> None:
    db = made_by_engine(clean_home, turns=12)
    url = fresh_url()
    assert lcm("migrate-to-postgres", "--source-db", str(db), "--url", url, "--apply")[0] == 0
    before = counts_pg(url)
    code, out, err = lcm("migrate-to-postgres", "--source-db", str(db), "--url", url, "--apply")
    again = json.loads(out)
    assert code == 0 and again["verify"]["ok"], err
    assert sum(again["copied"].values()) == 0 and counts_pg(url) == before
    plan = json.loads(lcm("migrate-to-postgres", "--source-db", str(db), "--url", url)[1])
    assert plan["target_state"] == "migrated" and plan["can_apply"]


def test_foreign_target_is_refused(clean_home: Path) -> None:
    db = made_by_engine(clean_home, turns=6)
    url = fresh_url()
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE invoices(id int PRIMARY KEY, total numeric)")
        conn.execute("INSERT INTO invoices VALUES (1, 9.5)")
    code, _, err = lcm("migrate-to-postgres", "--source-db", str(db), "--url", url, "--apply")
    assert code == 3 and "not written by hermes-lcm" in err
    assert pg_rows(
        url,
        "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()",
    ) == [("invoices",)]
    plan = json.loads(lcm("migrate-to-postgres", "--source-db", str(db), "--url", url)[1])
    assert plan["target_state"] == "foreign" and not plan["can_apply"]


def test_target_in_use_by_engines_is_refused(clean_home: Path) -> None:
    db = made_by_engine(clean_home, turns=6)
    url = fresh_url()
    other = new_engine(clean_home / "other", session="x", LCM_DATABASE_URL=url)
    other.ingest_host([{"role": "user", "content": "someone else's memory"}])
    store_module.close_all()
    code, _, err = lcm("migrate-to-postgres", "--source-db", str(db), "--url", url, "--apply")
    assert code == 3 and "ids would clash" in err
    assert pg_rows(url, "SELECT count(*) FROM messages") == [(1,)]


def test_killed_mid_copy_resumes_with_nothing_doubled(clean_home: Path, tmp_path: Path) -> None:
    db = made_by_engine(clean_home, turns=40)
    url = fresh_url()
    path = os.pathsep.join(
        [str(ROOT / ".pyroot"), str(ROOT.parent), os.environ.get("PYTHONPATH", "")]
    )
    env = {
        **os.environ,
        "PYTHONPATH": path,
        "HERMES_HOME": str(clean_home),
        "LCM_PROGRESS": "never",
    }
    # a batch of one row is one transaction each: kill the process once some are committed
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "hermes_lcm.cli.main",
            "migrate-to-postgres",
            "--source-db",
            str(db),
            "--url",
            url,
            "--apply",
            "--batch",
            "1",
        ],
        env=env,
        cwd=str(tmp_path),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        import time

        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            assert proc.poll() is None, "the copy ended before it was killed"
            try:
                if pg_rows(url, "SELECT count(*) FROM messages")[0][0] > 20:
                    break
            except Exception:  # the schema is not created yet
                pass
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait()
    partial = counts_pg(url)
    assert 0 < partial["messages"] < counts_sqlite(db)["messages"]
    plan = json.loads(lcm("migrate-to-postgres", "--source-db", str(db), "--url", url)[1])
    assert plan["target_state"] == "partial" and plan["can_apply"]
    code, out, err = lcm("migrate-to-postgres", "--source-db", str(db), "--url", url, "--apply")
    done = json.loads(out)
    assert code == 0 and done["verify"]["ok"] and done["resumed"], err
    assert counts_pg(url) == counts_sqlite(db)
    assert pg_rows(
        url, "SELECT count(*) - count(DISTINCT (conversation_id, seq)) FROM messages"
    ) == [(0,)]


def test_ctrl_c_exits_130_with_resume_hint(
    clean_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hermes_lcm.base import progress

    db = made_by_engine(clean_home, turns=8)
    url = fresh_url()
    real, seen = progress.Reporter.update, {"n": 0}

    def update(self: progress.Reporter, done: int, total: int | None = None) -> None:
        real(self, done, total)
        seen["n"] += 1
        if seen["n"] == 3:
            raise KeyboardInterrupt

    monkeypatch.setattr(progress.Reporter, "update", update)
    code, _, err = lcm(
        "migrate-to-postgres", "--source-db", str(db), "--url", url, "--apply", "--batch", "5"
    )
    assert (
        code == 130 and "run the same command again" in err and len(err.strip().splitlines()) == 1
    )
    monkeypatch.setattr(progress.Reporter, "update", real)
    code, out, err = lcm("migrate-to-postgres", "--source-db", str(db), "--url", url, "--apply")
    assert code == 0 and json.loads(out)["verify"]["ok"], err


def test_older_schema_source_is_read_through_its_views(clean_home: Path) -> None:
    db = clean_home / "v3.db"
    shutil.copy(V3_FIXTURE, db)
    before = digest(db)
    url = fresh_url()
    code, out, err = lcm("migrate-to-postgres", "--source-db", str(db), "--url", url, "--apply")
    done = json.loads(out)
    assert code == 0 and done["verify"]["ok"], (err, done)
    assert digest(db) == before
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    want = con.execute("SELECT id, fingerprint FROM messages ORDER BY id").fetchall()
    con.close()
    assert pg_rows(url, "SELECT id, fingerprint FROM messages ORDER BY id") == [
        tuple(r) for r in want
    ]
    assert pg_rows(url, "SELECT count(*) FROM session_keys")[0][0] > 0


def test_peer_files_name_the_command_that_upgrades_them(clean_home: Path) -> None:
    claw = clean_home / "claw.db"
    build_lossless_claw(claw)
    url = fresh_url()
    code, _, err = lcm("migrate-to-postgres", "--source-db", str(claw), "--url", url)
    assert code == 3 and "import_lossless_claw" in err
    lcmx = lcmx_copy(clean_home, "x.db")
    code, _, err = lcm("migrate-to-postgres", "--source-db", str(lcmx), "--url", url, "--apply")
    assert code == 3 and "LCM-X" in err and "lcm import lcm-x" in err
    assert pg_rows(
        url, "SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema()"
    ) == [(0,)]


def test_optional_families_are_listed_not_copied(clean_home: Path) -> None:
    engine = new_engine(clean_home, threshold=3000)
    host_run(engine, list(conversation(3, 4)))
    assert engine.core is not None
    engine.core.store.ensure_rollup_tables()
    store_module.close_all()
    db, url = clean_home / "lcm.db", fresh_url()
    plan = json.loads(lcm("migrate-to-postgres", "--source-db", str(db), "--url", url)[1])
    assert set(plan["not_copied"]) >= {"rollups", "rollup_cursor"}
    code, out, err = lcm("migrate-to-postgres", "--source-db", str(db), "--url", url, "--apply")
    assert code == 0 and "rollups" in json.loads(out)["not_copied"], err


def test_bad_arguments_are_usage_errors(clean_home: Path) -> None:
    db = made_by_engine(clean_home, turns=2)
    assert lcm("migrate-to-postgres", "--source-db", str(db), "--url", str(db))[0] == 2
    assert (
        lcm("migrate-to-postgres", "--source-db", str(db), "--url", fresh_url(), "--batch", "0")[0]
        == 2
    )
    assert (
        lcm(
            "migrate-to-postgres", "--source-db", str(clean_home / "nope.db"), "--url", fresh_url()
        )[0]
        == 3
    )

"""``lcm redact``: history stored with redaction off, rewritten; attack tests on real SQLite files
and on PostgreSQL (``both_backends``).

Every check reads raw bytes: the database, its WAL and every payload file must hold no secret's
bytes after apply (nor the words the full-text index keeps of it); only the backup does. On
PostgreSQL what is at rest is every value of every table of the schema (payload bytes and the
``tsv`` vectors included), read past the store; the backup is a ``pg_dump`` archive, read back as
text with ``pg_restore``. Old row versions are the server's (VACUUM), not the rows a client reads.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from hermes_lcm import store as store_module
from hermes_lcm.base import payloads
from hermes_lcm.base.outputs import stub
from hermes_lcm.base.payloads import KIND_OUTPUT, OUTPUT_MIME
from hermes_lcm.base.records import PayloadRef
from hermes_lcm.cli import main as cli
from hermes_lcm.config import load_config
from hermes_lcm.core import LcmCore
from hermes_lcm.maintenance import checks, scrub
from hermes_lcm.prompt.budget import plan_budget
from hermes_lcm.tools import dispatch

from ..backends import every_value, raw_sql
from ..conftest import new_engine

pytestmark = pytest.mark.both_backends

ROOT = Path(__file__).resolve().parents[2]
POLICY = "all,acme=ACME-[0-9]{8}"
A40 = "Q7rT2mX9vL4pZ8kW1nB6cY3hJ5dF0gS2aE7uI9oR"

SECRETS: dict[str, str] = {
    "openai": "sk-proj-" + A40,
    "anthropic": "sk-ant-api03-" + A40[::-1],
    "google": "AIza" + "SyD3xW9kQ2mZ7vL4pT8nB6cY1hJ5dF0gS2a",
    "aws_access": "AKIA" + "QWERTYUIOPASDFGH",
    "aws_secret": "wJalrXUtnFEMIK7MDENGbPxRfiCYzEXAMPLEKEYa",
    "github": "ghp_" + "Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Jh1Gf0EdCbAz98",
    "github_pat": "github_pat_" + "11ABCDEFG0123456789_abcdefghijKLMNOP",
    "gitlab": "glpat-" + "Xy7Wv6Ut5Sr4Qp3On2Ml",
    "slack": "xoxb-" + "1234567890-0987654321-AbCdEfGhIjKlMnOp",
    "slack_hook": "https://hooks.slack.com/services/T0000AAAA/B0000BBBB/XXXXxxxxYYYYyyyyZZZZzzzz",
    "stripe": "sk_live_" + "51HqLmNoPqRsTuVwXyZaBcDe",
    "acme_event": "ACME-27182818",  # events are masked by the catalog as they are recorded: a user kind
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ1c2VyNDIifQ.c2lnbmF0dXJlX3ZhbHVlX2hlcmU",
    "basic_auth": "dXNlcjpwYXNzd29yZDEyMzQ1Ng",
    "bearer": "BeArErT0kenValue9988776655",
    "conn_password": "Pg5ecretW0rdX",
    "password": "hunter2hunter2",
    "private_key": "MIIEowIBAAKCAQEA7privatekeybodyLINE1xyz",
    "api_key": "zq9zq9zq9ApiKeyValue777",
    "acme": "ACME-31415926",
    "payload_openai": "sk-" + "PayloadFileSecret0123456789abcdefXYZ",
    "summary_gitlab": "glpat-" + "SummaryOnlySecretAbCdEf",
    "alt_text": "ghs_" + "AltTextImageSecret0123456789abcdefghij",
}


@pytest.fixture(autouse=True)
def clean_env(clean_home: Path) -> Path:
    """The CLI and the slash command read this test's home, with no LCM_* setting from outside."""
    return clean_home


WHERE: dict[str, str] = {}  # the running test's database setting (empty: lcm.db in its home)


@pytest.fixture
def where(backend_env: dict[str, str], clean_home: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The test's databases on its backend; for a URL, backups (pg_dump, on PATH here) go under
    the test's home."""
    WHERE.update(backend_env)
    if backend_env:
        from ..pgserver import binaries

        monkeypatch.setenv("PATH", f"{binaries()}{os.pathsep}{os.environ.get('PATH', '')}")
    yield WHERE
    WHERE.clear()


def db_of(home: Path) -> Path | str:
    """The database of a test's home: its lcm.db, or the test's URL."""
    return WHERE.get("LCM_DATABASE_URL") or home / "lcm.db"


def _config(**over: Any) -> Any:
    env = {"LCM_SUMMARY_PROVIDER": "extractive", "LCM_SENSITIVE_PATTERNS": POLICY, **over}
    return load_config(env).config


def history(ref: str, preview: str) -> list[dict[str, Any]]:
    s = SECRETS
    return [
        {
            "role": "user",
            "content": f"my key is {s['openai']} and the other {s['anthropic']}; google {s['google']}",
        },
        {"role": "assistant", "content": "noted, running the deploy"},
        {
            "role": "user",
            "content": f"aws id {s['aws_access']} aws_secret_access_key = {s['aws_secret']}\n"
            f"db postgres://admin:{s['conn_password']}@db.example.com/prod "
            f"password={s['password']}",
        },
        {
            "role": "assistant",
            "content": None,
            "reasoning_content": f"the token {s['github_pat']} is in the env",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {
                        "name": "terminal",
                        "arguments": json.dumps(
                            {
                                "command": f"git push https://x:{s['github']}@github.com/a/b",
                                "env": f"GITLAB_TOKEN={s['gitlab']}",
                            }
                        ),
                    },
                }
            ],
        },
        {
            "role": "tool",
            "tool_call_id": "call_1",
            "name": "terminal",
            "content": f"curl -H 'Authorization: Basic {s['basic_auth']}' -H 'Authorization: Bearer {s['bearer']}'\n"
            f"slack {s['slack']} hook {s['slack_hook']} stripe {s['stripe']}",
        },
        {
            "role": "user",
            "content": [
                {"type": "text", "text": f"here is the screenshot, jwt {s['jwt']}"},
                {
                    "type": "image_url",
                    "image_url": {"url": "https://example.com/a.png"},
                    "alt": f"token {s['alt_text']}",
                },
            ],
        },
        {
            "role": "assistant",
            "content": "-----BEGIN RSA PRIVATE KEY-----\n"
            + s["private_key"]
            + "\n-----END RSA PRIVATE KEY-----\nand api_key="
            + s["api_key"],
        },
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_2",
                    "type": "function",
                    "function": {
                        "name": "read_file",
                        "arguments": json.dumps({"path": "/var/log/build.log"}),
                    },
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_2", "name": "read_file", "content": preview},
        {
            "role": "user",
            "content": f"ticket {s['acme']}, also remember {s['summary_gitlab']} for later",
        },
        *[
            {
                "role": "user" if i % 2 == 0 else "assistant",
                "content": f"filler turn {i} " + "words " * 60,
            }
            for i in range(24)
        ],
    ]


def build(home: Path, db: Path | str | None = None) -> tuple[Any, list[dict[str, Any]], str]:
    """A database made with redaction off holding every secret: rows, FTS, summaries, an event,
    and an externalized output's payload file (the stub the large-output step writes; on
    PostgreSQL a row of the payloads table)."""
    db = db or db_of(home)
    payload_text = (
        ("build log line\n" * 400)
        + f"OPENAI_API_KEY={SECRETS['payload_openai']}\n"
        + f"vendor {SECRETS['acme']}\n"
        + ("more log\n" * 400)
    )
    core = LcmCore(_config(), db)
    ref = core.guard.ref_for(payload_text)  # keyed by this database's secret, as the step names it
    payloads.put(core.guard, ref, payload_text)  # its file (on PostgreSQL its row)
    messages = history(ref, stub(payload_text, ref, 1200))
    core.bind("s1", platform="cli")
    assert core.ingest(messages) == len(messages)
    assert core.binding.conversation_id is not None
    row = next(
        m
        for m in core.store.messages_after(core.binding.conversation_id, 0)
        if m.content.startswith("[lcm-output ref=")
    )
    core.store.grant_payloads(
        [(row.id, PayloadRef(ref, KIND_OUTPUT, OUTPUT_MIME))]
    )  # and the grant it writes
    budget = plan_budget(
        1500, 0, 0, tail_count=4, tail_max_tokens=0, target_ratio=0.5, summary_ratio=0.3
    )
    core.compress(messages, budget, force=True)
    core.store.record_event(
        "warn", "provider", f"upstream said: ticket {SECRETS['acme_event']} expired"
    )
    core.store.close()
    store_module.close_all()
    return db, messages, ref


def _words(secret: str) -> list[bytes]:
    """What of a secret the FTS index would keep: its long alphanumeric runs, lower-cased (and cut
    by three letters, so a stemmer's ending cannot hide one)."""
    return [w.lower()[:-3].encode() for w in re.findall(r"[A-Za-z0-9]{12,}", secret)]


def leaks(paths: list[Path]) -> list[str]:
    found = []
    for path in paths:
        if not path.exists():
            continue
        data = path.read_bytes()
        lowered = data.lower()
        for name, secret in SECRETS.items():
            if secret.encode() in data or any(w in lowered for w in _words(secret)):
                found.append(f"{name} in {path.name}")
    return found


def db_files(home: Path) -> list[Path]:
    return [home / "lcm.db", home / "lcm.db-wal", *sorted((home / "lcm-payloads").glob("*"))]


def at_rest(home: Path) -> dict[str, bytes]:
    """What the database keeps: its files (SQLite: the database, WAL, payload files), or every
    value of every table of the schema (PostgreSQL)."""
    db = db_of(home)
    if isinstance(db, str):
        return {f"table {name}": text.encode() for name, text in every_value(db).items()}
    return {path.name: path.read_bytes() for path in db_files(home) if path.exists()}


def leaks_in(named: dict[str, bytes]) -> list[str]:
    found = []
    for where, data in named.items():
        lowered = data.lower()
        for name, secret in SECRETS.items():
            if secret.encode() in data or any(w in lowered for w in _words(secret)):
                found.append(f"{name} in {where}")
    return found


def backup_bytes(path: Path) -> bytes:
    """A backup's content: the file, or a ``pg_dump`` archive (compressed) as the SQL it restores."""
    if not WHERE:
        return path.read_bytes()
    from ..pgserver import binaries

    proc = subprocess.run(
        [str(binaries() / "pg_restore"), "-f", "-", str(path)],
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def snapshot(db: Path | str) -> Any:
    """Everything the database holds, to compare before and after."""
    if isinstance(db, str):
        return every_value(db)
    with sqlite3.connect(db) as con:
        return list(con.iterdump())


def _open(db: Path | str) -> Any:
    return store_module.open_store(db)


def test_the_planted_database_holds_every_secret(tmp_path: Path, where: Any) -> None:
    """The attack setting is real: with redaction off, every planted secret is in the files."""
    build(tmp_path)
    found = leaks_in(at_rest(tmp_path))
    assert len(SECRETS) >= 20
    assert {f.split(" in ")[0] for f in found} == set(SECRETS)


def test_dry_run_counts_and_writes_nothing(tmp_path: Path, where: Any) -> None:
    db, _, _ = build(tmp_path)
    before = snapshot(db)
    out = io.StringIO()
    code = cli.main(["--db", str(db), "redact", "--patterns", POLICY], out=out, err=io.StringIO())
    assert code == 0
    text = out.getvalue()
    result = json.loads(text)
    assert result["status"] == "ready"
    tables = result["tables"]
    assert (
        tables["messages"]["rows"] >= 8
        and tables["summaries"]["rows"] >= 1
        and tables["events"]["rows"] == 1
    )
    kinds = tables["messages"]["secrets"]
    for kind in (
        "openai_key",
        "anthropic_key",
        "google_api_key",
        "aws_access_key",
        "aws_secret_key",
        "github_token",
        "gitlab_token",
        "slack_token",
        "stripe_key",
        "jwt",
        "authorization_header",
        "connection_string",
        "password_assignment",
        "private_key",
        "api_key",
        "acme",
    ):
        assert kinds.get(kind, 0) >= 1, kind
    assert (
        result["payload_files"]["files"] == 1
        and result["payload_files"]["secrets"]["openai_key"] == 1
    )
    assert all(isinstance(i, int) for i in tables["messages"]["store_ids"])
    assert not [n for n, s in SECRETS.items() if s in text]  # counts and ids only, never a secret
    assert snapshot(db) == before
    assert (
        not list((tmp_path / "lcm-backups").glob("*"))
        if (tmp_path / "lcm-backups").exists()
        else True
    )


def test_apply_leaves_no_secret_bytes_and_stays_recognised(tmp_path: Path, where: Any) -> None:
    db, messages, old_ref = build(tmp_path)
    out = io.StringIO()
    assert (
        cli.main(
            ["--db", str(db), "redact", "--apply", "--patterns", POLICY], out=out, err=io.StringIO()
        )
        == 0
    )
    result = json.loads(out.getvalue())
    store_module.close_all()
    assert result["status"] == "applied" and result["fts_sound"] is True
    assert "still holds the old secrets" in result["backup_note"]
    assert (
        result["removed_payload_files"] == 1
        and not (tmp_path / "lcm-payloads" / f"{old_ref}.payload").exists()
    )
    assert leaks_in(at_rest(tmp_path)) == []
    backup = Path(result["backup"])
    assert leaks_in({"backup": backup_bytes(backup)})  # the backup is the only file that keeps them
    manifest = Path(result["manifest"])
    assert manifest.parent == backup.parent and manifest.stat().st_mode & 0o777 == 0o600
    entries = json.loads(manifest.read_text())["rows"]
    assert {e["table"] for e in entries} == {"messages", "summaries", "events"}
    assert not leaks([manifest])
    # the doctor's FTS scan (deep: FTS5's own integrity-check) finds both indexes sound
    store = _open(db)
    scan = checks.fts_scan(store, deep=True)
    assert not any(t["needs_rebuild"] for t in scan["tables"].values()), scan
    # the new payload file holds the redacted text, and the row's stub names it
    if WHERE:
        files = [data for _, data in raw_sql(str(db), "SELECT ref, bytes FROM payloads")]
    else:
        files = [path.read_bytes() for path in (tmp_path / "lcm-payloads").glob("*.payload")]
    assert len(files) == 1 and b"[lcm-redacted:openai_key #" in bytes(files[0])
    # a core with redaction still off recognises every raw message (apply marked the store: the
    # shadow step), and so does live ingest with redaction on (same policy, same key): nothing new
    # The lists end at the newest secret (a head-only compress), so alignment must match it. The
    # externalized output is re-sent as its stub as stored now (see the guide: a host holding the
    # old stub re-stores that message).
    rows = store.message_count()
    stored_stub = next(
        m for m in store.messages_after(1, 0) if m.content.startswith("[lcm-output ref=")
    )
    resent = [
        stored_stub.to_host()
        if m.get("content", "") and str(m["content"]).startswith("[lcm-output")
        else m
        for m in messages
    ][:10]
    core = LcmCore(_config(), db)
    core.bind("s1", platform="cli")
    assert core.ingest(resent) == 0 and core.store.message_count() == rows
    store_module.close_all()
    core = LcmCore(_config(LCM_SENSITIVE_PATTERNS_ENABLED="true"), db)
    core.bind("s1", platform="cli")
    assert core.ingest(resent) == 0 and core.ingest(resent + messages[10:]) == 0
    assert core.store.message_count() == rows
    store_module.close_all()
    # lcm_grep finds placeholders, never a secret
    engine = new_engine(
        tmp_path, LCM_SENSITIVE_PATTERNS_ENABLED="true", LCM_SENSITIVE_PATTERNS=POLICY, **WHERE
    )
    answer = dispatch(engine, "lcm_grep", {"query": "redacted openai_key"})
    hits = json.loads(answer)["hits"]
    assert hits and "[lc" in hits[0]["snippet"]
    exact = dispatch(engine, "lcm_expand", {"store_id": hits[0]["store_id"]})
    assert "[lcm-redacted:openai_key #" in exact
    for secret in SECRETS.values():
        assert secret not in answer and secret not in exact
        assert json.loads(dispatch(engine, "lcm_grep", {"query": secret})).get("hits", []) == []
    store_module.close_all()


def test_second_apply_changes_nothing(tmp_path: Path, where: Any) -> None:
    db, _, _ = build(tmp_path)
    store = _open(db)
    first = scrub.apply(store, POLICY, 1200, tmp_path / "b1")
    assert first["rows"] > 0 and first["checkpoint"]["busy"] is False
    if (
        not WHERE
    ):  # read while the store is still open: no close-time checkpoint has cleaned anything up yet
        assert (tmp_path / "lcm.db-wal").stat().st_size == 0
    assert leaks_in(at_rest(tmp_path)) == []
    dump = snapshot(db)
    second = scrub.apply(store, POLICY, 1200, tmp_path / "b2")
    assert second["status"] == "noop" and second["rows"] == 0
    assert snapshot(db) == dump
    assert scrub.scan(store, POLICY, 1200)["status"] == "noop"
    store_module.close_all()


def _row_states(db: Path | str) -> dict[int, tuple[str, str | None]]:
    return {
        r[0]: (r[1], r[2]) for r in raw_sql(str(db), "SELECT id, content, tool_calls FROM messages")
    }


def test_a_failure_mid_way_leaves_rows_old_or_new_and_a_rerun_finishes(
    tmp_path: Path, where: Any
) -> None:
    db, _, _ = build(tmp_path)
    old = _row_states(db)
    key = _open(db).secret("redaction")  # the key apply would create: the copy must share it
    ref_key = _open(db).secret("payload_refs")  # and the one its payload refs are keyed by
    store_module.close_all()
    reference_home = tmp_path / "ref"
    if WHERE:  # the same build in a second schema, given the same keys
        from ..pgserver import fresh_url

        reference_home.mkdir()
        reference_db: Path | str = fresh_url()
        _open(reference_db)
        raw_sql(
            str(reference_db),
            "INSERT INTO meta(key, value) VALUES ('secret:payload_refs', ?)",
            (ref_key.hex(),),
        )
        store_module.close_all()
        build(reference_home, reference_db)
        raw_sql(
            str(reference_db),
            "INSERT INTO meta(key, value) VALUES ('secret:redaction', ?)",
            (key.hex(),),
        )
        assert _row_states(reference_db) == old
    else:
        shutil.copytree(tmp_path, reference_home, ignore=shutil.ignore_patterns("ref"))
        reference_db = reference_home / "lcm.db"
    reference = _open(reference_db)
    scrub.apply(reference, POLICY, 1200, tmp_path / "bref")
    new = _row_states(reference_db)
    store = _open(db)
    seen = []

    def boom(table: str, row_id: int) -> None:
        seen.append(row_id)
        if len(seen) == 5:
            raise RuntimeError("killed in the middle of a batch")

    with pytest.raises(RuntimeError):
        scrub.apply(store, POLICY, 1200, tmp_path / "b1", batch_rows=3, on_row=boom)
    now = _row_states(db)
    assert now.keys() == old.keys()
    assert [i for i in now if now[i] not in (old[i], new[i])] == []
    assert any(now[i] == new[i] != old[i] for i in now) and any(
        now[i] == old[i] != new[i] for i in now
    )
    done = scrub.apply(store, POLICY, 1200, tmp_path / "b2")
    assert done["status"] == "applied"
    assert _row_states(db) == new
    store_module.close_all()
    assert leaks_in(at_rest(tmp_path)) == []


CONCURRENT = textwrap.dedent("""
    import sys
    import time
    sys.path.insert(0, sys.argv[1])
    from hermes_lcm.config import load_config
    from hermes_lcm.core import LcmCore
    config = load_config({"LCM_SUMMARY_PROVIDER": "extractive", "LCM_SENSITIVE_PATTERNS_ENABLED": "true"}).config
    core = LcmCore(config, sys.argv[2])
    core.bind("s2", platform="cli")
    listed = []
    for i in range(int(sys.argv[3])):
        listed.append({"role": "user" if i % 2 == 0 else "assistant", "content": f"concurrent turn {i}"})
        while core.ingest(listed) != 1:
            pass
        if i == 0:
            print("ready", flush=True)
        time.sleep(0.02)
    print("done")
""")


def test_a_concurrent_ingest_during_apply_loses_nothing(tmp_path: Path, where: Any) -> None:
    db, _, _ = build(tmp_path)
    turns = 150
    writer = subprocess.Popen(
        [sys.executable, "-c", CONCURRENT, str(ROOT / ".pyroot"), str(db), str(turns)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert writer.stdout is not None and writer.stdout.readline().strip() == "ready"
    store = _open(db)
    seen: list[int] = []

    def slow(table: str, row_id: int) -> None:  # the writer's rows as each of ours is rewritten
        seen.append(
            raw_sql(
                str(db),
                "SELECT count(*) FROM messages WHERE session_key=(SELECT id FROM session_keys WHERE name='s2')",
            )[0][0]
        )
        time.sleep(0.03)

    result = scrub.apply(store, POLICY, 1200, tmp_path / "b", batch_rows=2, on_row=slow)
    out, err = writer.communicate(timeout=120)
    assert writer.returncode == 0 and out.strip() == "done", err
    assert result["status"] == "applied"
    assert len(set(seen)) > 2 and max(seen) < turns  # the writer stored rows while the rewrite ran
    texts = [
        r[0]
        for r in raw_sql(
            str(db),
            "SELECT content FROM messages WHERE session_key=(SELECT id FROM session_keys WHERE name='s2') ORDER BY seq",
        )
    ]
    assert texts == [f"concurrent turn {i}" for i in range(turns)]
    scrub.apply(
        store, POLICY, 1200, tmp_path / "b2"
    )  # a reader may have kept the WAL: a rerun truncates it
    store_module.close_all()
    assert leaks_in(at_rest(tmp_path)) == []


def test_an_lcmx_database_imported_then_redacted(tmp_path: Path) -> None:
    """A database written by LCM-X's own code, with a secret planted in one of its messages,
    upgraded by the importer, then redacted: the secret leaves, the rest is untouched."""
    from hermes_lcm.importers.lcmx import run_import

    source = tmp_path / "lcmx.db"
    shutil.copy(ROOT / "tests" / "peers" / "lcm_x" / "lcmx.db", source)
    with sqlite3.connect(source) as con:
        row = con.execute(
            "SELECT store_id, content FROM messages WHERE role='user' "
            "ORDER BY store_id LIMIT 1 OFFSET 3"
        ).fetchone()
        con.execute(
            "UPDATE messages SET content=? WHERE store_id=?",
            (row[1] + f" token={SECRETS['api_key']}", row[0]),
        )
    report = run_import(source, None, apply=True, backup_dir=str(tmp_path / "bk"))
    assert report.get("verify", {"ok": True})["ok"]
    store = _open(source)
    before = scrub.scan(store, POLICY, 1200)
    assert before["tables"]["messages"]["rows"] == 1
    counts = store.table_counts()
    result = scrub.apply(store, POLICY, 1200, tmp_path / "b")
    assert result["status"] == "applied" and result["fts_sound"]
    assert store.table_counts() == {
        **counts,
        "events": counts["events"] + 1,
    }  # the apply's own event
    assert SECRETS["api_key"].encode() not in source.read_bytes()
    store_module.close_all()


def test_slash_command_counts_then_applies(tmp_path: Path, where: Any) -> None:
    from hermes_lcm.command import handle_command

    engine = new_engine(tmp_path, 10**9, LCM_ENABLE_SLASH_COMMAND="1", **WHERE)
    listed = [
        {"role": "user", "content": f"deploy with {SECRETS['openai']} please"},
        {"role": "assistant", "content": "done"},
    ]
    engine.ingest_host(listed)
    core = engine.ensure_core()
    budget = core.budget(engine.threshold_tokens, 0)
    shown = [str(m.get("content")) for m in core.assemble(budget)]  # the live engine's items
    assert any(SECRETS["openai"] in text for text in shown)
    assert "redact [apply]" in handle_command("help")
    dry = json.loads(handle_command("redact --json"))
    assert dry["status"] == "ready" and dry["tables"]["messages"]["secrets"] == {"openai_key": 1}
    assert any("ENABLED is off" in n for n in dry["notes"])
    assert leaks_in(at_rest(tmp_path)) == (
        ["openai in table messages"] if WHERE else ["openai in lcm.db-wal"]
    )
    done = json.loads(handle_command("redact apply --json"))
    assert done["status"] == "applied" and Path(done["backup"]).exists()
    assert "unexpected arguments" in handle_command("redact now")
    # The next prompt is built from the redacted rows, not from the items built before.
    shown = [str(m.get("content")) for m in core.assemble(budget)]
    assert not any(SECRETS["openai"] in text for text in shown), shown
    assert any("deploy with" in text for text in shown)
    rows = engine.ensure_core().store.message_count()
    listed.append({"role": "user", "content": "next"})
    engine.ingest_host(listed)  # the live engine's next turn: only the new message is stored
    assert engine.ensure_core().store.message_count() == rows + 1
    store_module.close_all()
    assert leaks_in(at_rest(tmp_path)) == []

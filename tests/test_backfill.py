"""Backfill of large inline tool results on real databases: a dry run writes nothing, apply gives
``lcm_expand externalized_ref`` the exact bytes, rollback gives the rows back, a killed run resumes,
and a manifest of another database or an edited one is refused. On SQLite and PostgreSQL
(``both_backends``: there the payloads are rows of the payloads table and the backup a pg_dump)."""

from __future__ import annotations

import io
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from hermes_lcm import store as store_module
from hermes_lcm.base import outputs
from hermes_lcm.cli import main as cli
from hermes_lcm.maintenance import backfill
from hermes_lcm.search.query import build_query

from .backends import every_value, raw_sql, table_names
from .conftest import new_engine
from .dbutil import digest, query_ro
from .tooltest import ok

pytestmark = pytest.mark.both_backends
THRESHOLD = 5000
WHERE: dict[str, str] = {}  # the running test's database setting (empty: lcm.db in its home)


def body(i: int, size: int = 9000) -> str:
    """A tool output with a word only its middle holds (the stub's preview does not show it)."""
    half = "".join(f"line {n} of step {i} ok\n" for n in range(size // 40))
    return f"{half}MIDDLE marmoset{i}quokka é ✓\n{half}"


def turns(n: int) -> list[dict]:
    messages: list[dict] = []
    for i in range(n):
        call = f"call_{i}"
        messages += [
            {"role": "user", "content": f"run step {i}"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": call,
                        "type": "function",
                        "function": {"name": "terminal", "arguments": '{"cmd": "x"}'},
                    }
                ],
            },
            {
                "role": "tool",
                "tool_call_id": call,
                "name": "terminal",
                "content": body(i) if i < 3 else "short",
            },
            {"role": "assistant", "content": f"done {i}"},
        ]
    return messages


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, backend_env: dict[str, str]):
    monkeypatch.setenv("HERMES_HOME", str(tmp_path))
    WHERE.update(backend_env)
    if backend_env:  # the apply's backup is a pg_dump (on PATH here)
        from .pgserver import binaries

        monkeypatch.setenv("PATH", f"{binaries()}{os.pathsep}{os.environ.get('PATH', '')}")
    yield tmp_path
    store_module.close_all()
    WHERE.clear()


def db_of(home: Path) -> Path | str:
    return WHERE.get("LCM_DATABASE_URL") or home / "lcm.db"


def built(home: Path) -> tuple[Path | str, list[dict]]:
    history = turns(4)
    new_engine(home, 10**9, **WHERE).ingest_host(history)
    store_module.close_all()
    return db_of(home), history


def rows_of(db: Path | str, sql: str) -> list[tuple]:
    return raw_sql(db, sql) if isinstance(db, str) else query_ro(db, sql)


def payload_texts(home: Path) -> list[str]:
    """The payloads written: files under the home, or rows of the payloads table."""
    db = db_of(home)
    if isinstance(db, str):
        return (
            [bytes(r[0]).decode() for r in raw_sql(db, "SELECT bytes FROM payloads ORDER BY ref")]
            if "payloads" in table_names(db)
            else []
        )
    folder = home / "lcm-payloads"
    return [p.read_text() for p in sorted(folder.iterdir())] if folder.exists() else []


def lcm(*argv: str) -> tuple[int, dict]:
    out = io.StringIO()
    code = cli.main(list(argv), out=out, err=io.StringIO())
    return code, json.loads(out.getvalue())


def tool_rows(db: Path | str) -> list[tuple[int, str, str, int]]:
    return rows_of(
        db, "SELECT id, content, fingerprint, tokens FROM messages WHERE role='tool' ORDER BY id"
    )


def finds(db: Path | str, word: str) -> list[int]:
    store = store_module.open_readonly(db)
    try:
        return [m.id for m, _ in store.search_messages(build_query(word).match, None, 20)]
    finally:
        store.close()


def expand_all(engine, ref: str) -> str:
    text, offset = "", 0
    while offset is not None:
        page = ok(engine, "lcm_expand", externalized_ref=ref, content_offset=offset)
        text += page["content"]
        offset = page["next_content_offset"]
    return text


def test_dry_run_changes_nothing(home: Path) -> None:
    db, _ = built(home)
    before = {p.name: digest(p) for p in home.iterdir() if p.is_file()}
    stored = every_value(db) if isinstance(db, str) else None
    code, plan = lcm("--db", str(db), "backfill-outputs", "--threshold-chars", str(THRESHOLD))
    assert code == 0 and plan["status"] == "ready" and plan["rows"] == 3
    assert (
        plan["chars"] == sum(len(body(i)) for i in range(3))
        and plan["estimated_tokens_saved"] > 3 * 1000
    )
    # A read-only SQLite connection may create an empty -wal and a -shm beside a WAL database.
    assert {p.name: digest(p) for p in home.iterdir() if p.is_file() and p.name in before} == before
    assert not (home / "lcm.db-wal").exists() or (home / "lcm.db-wal").stat().st_size == 0
    assert not (home / "lcm-payloads").exists() and payload_texts(home) == []
    if isinstance(db, str):
        assert every_value(db) == stored


def test_apply_expand_rollback_round_trip(home: Path) -> None:
    db, history = built(home)
    manifest = home / "ops" / "backfill.json"
    originals = tool_rows(db)
    code, done = lcm(
        "--db",
        str(db),
        "backfill-outputs",
        "--threshold-chars",
        str(THRESHOLD),
        "--apply",
        "--manifest",
        str(manifest),
    )
    assert code == 0 and done["status"] == "applied" and done["rewritten"] == 3
    assert Path(done["backup"]["path"]).is_file()
    assert stat.S_IMODE(manifest.stat().st_mode) == 0o600
    text = manifest.read_text()
    assert "marmoset" not in text and "line 1 of step" not in text  # metadata only, no content
    assert {k for row in json.loads(text)["rows"] for k in row} == {
        "store_id",
        "ref",
        "sha256",
        "payload_sha256",
        "chars",
        "tokens",
        "stub_sha256",
    }  # no session ids
    after = tool_rows(db)
    for (_, original, print_before, _), (_, now, print_after, tokens) in zip(
        originals, after, strict=True
    ):
        assert print_after == print_before  # identity kept: alignment still knows the host's copy
        if len(original) >= THRESHOLD:
            info = outputs.parse_stub(now)
            assert info is not None and info.chars == len(original) and tokens < 1000
        else:
            assert now == original
    assert finds(db, "marmoset1quokka") == []  # the middle left the row and the index

    engine = new_engine(home, 10**9, **WHERE)
    count = len(rows_of(db, "SELECT id FROM messages"))
    engine.ingest_host(history)  # the host's whole copy: nothing stored twice
    assert len(rows_of(db, "SELECT id FROM messages")) == count
    for (_, original, _, _), (_, now, _, _) in zip(originals[:3], after[:3], strict=True):
        info = outputs.parse_stub(now)
        assert info is not None
        assert expand_all(engine, info.ref).encode() == original.encode()
    store_module.close_all()

    assert (
        lcm(
            "--db",
            str(db),
            "backfill-outputs",
            "--threshold-chars",
            str(THRESHOLD),
            "--apply",
            "--manifest",
            str(manifest),
        )[1]["status"]
        == "noop"
    )
    code, preview = lcm("--db", str(db), "backfill-outputs", "--rollback", str(manifest))
    assert code == 0 and preview["restorable"] == 3 and tool_rows(db) == after
    code, back = lcm("--db", str(db), "backfill-outputs", "--rollback", str(manifest), "--apply")
    assert code == 0 and back["restored"] == 3
    assert tool_rows(db) == originals
    assert finds(db, "marmoset1quokka") == [originals[1][0]]
    assert (
        lcm("--db", str(db), "backfill-outputs", "--rollback", str(manifest), "--apply")[1][
            "status"
        ]
        == "noop"
    )


def test_a_killed_apply_resumes_without_duplicates(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db, _ = built(home)
    originals = {r[0]: r[1] for r in tool_rows(db)}
    manifest = home / "m.json"
    monkeypatch.setattr(backfill, "BATCH", 1)
    batches = []

    def dies_on_second_batch(line: str) -> None:
        if line.startswith("files written"):
            batches.append(line)
            if len(batches) == 2:
                raise KeyboardInterrupt  # killed after the files and the manifest, before the rows

    store = store_module.open_store(db)
    with pytest.raises(KeyboardInterrupt):
        backfill.apply(store, manifest, home / "bk", THRESHOLD, 1200, None, dies_on_second_batch)
    stubs = [r for r in tool_rows(db) if outputs.is_stub(r[1])]
    assert len(stubs) == 1  # one batch committed, the second not at all
    assert len(json.loads(manifest.read_text())["rows"]) == 2
    done = backfill.apply(store, manifest, home / "bk", THRESHOLD, 1200, None)
    assert done["rewritten"] == 2 and done["manifest_rows"] == 3
    rows = tool_rows(db)
    assert sum(outputs.is_stub(r[1]) for r in rows) == 3
    if isinstance(db, str):
        refs = [r[0] for r in raw_sql(db, "SELECT ref FROM payloads")]
        assert len(refs) == 3 and len(set(refs)) == 3  # no duplicate
    else:
        files = sorted(p.name for p in (home / "lcm-payloads").iterdir())
        assert len(files) == 3 and all(
            n.endswith(".payload") for n in files
        )  # no temp, no duplicate
    back = backfill.rollback(store, manifest, home / "bk", do_apply=True)
    assert back["restored"] == 3 and {r[0]: r[1] for r in tool_rows(db)} == originals


def test_a_tampered_or_foreign_manifest_is_refused(
    home: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    db, _ = built(home)
    manifest = home / "m.json"
    assert (
        lcm(
            "--db",
            str(db),
            "backfill-outputs",
            "--threshold-chars",
            str(THRESHOLD),
            "--apply",
            "--manifest",
            str(manifest),
        )[0]
        == 0
    )
    applied = tool_rows(db)
    edited = json.loads(manifest.read_text())
    edited["rows"][0]["tokens"] += 1
    bad = home / "edited.json"
    bad.write_text(json.dumps(edited))
    code, answer = lcm("--db", str(db), "backfill-outputs", "--rollback", str(bad), "--apply")
    assert code == 1 and "changed" in answer["error"]

    other_home = tmp_path_factory.mktemp("other")
    if WHERE:
        from .pgserver import fresh_url

        other: Path | str = fresh_url()
        new_engine(other_home, 10**9, LCM_DATABASE_URL=str(other)).ingest_host(turns(4))
    else:
        other = other_home / "lcm.db"
        new_engine(other_home, 10**9).ingest_host(turns(4))
    store_module.close_all()
    moved = json.loads(manifest.read_text())
    # even claiming to be the other's, the MAC is this one's
    moved["database"] = other if isinstance(other, str) else str(other.resolve())
    forged = home / "forged.json"
    forged.write_text(json.dumps(moved))
    for path in (manifest, forged):
        code, answer = lcm(
            "--db", str(other), "backfill-outputs", "--rollback", str(path), "--apply"
        )
        assert code == 1 and "error" in answer
    assert tool_rows(db) == applied


def test_redaction_applies_before_the_file_is_written(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = "sk-proj-" + "A1b2C3d4E5f6G7h8J9k0" * 2
    history = turns(1)
    history[2]["content"] = body(0) + f"\nexport OPENAI_API_KEY={key}\n"
    new_engine(home, 10**9, **WHERE).ingest_host(history)
    store_module.close_all()
    monkeypatch.setenv("LCM_SENSITIVE_PATTERNS_ENABLED", "true")
    db = db_of(home)
    code, done = lcm(
        "--db",
        str(db),
        "backfill-outputs",
        "--threshold-chars",
        str(THRESHOLD),
        "--apply",
        "--manifest",
        str(home / "m.json"),
    )
    assert code == 0 and done["rewritten"] == 1 and done["redacted"] is True
    (kept,) = payload_texts(home)
    assert key not in kept and "[lcm-redacted:" in kept and "marmoset0quokka" in kept
    assert key not in tool_rows(db)[0][1]


def test_the_script_is_the_same_cli(home: Path) -> None:
    db, _ = built(home)
    script = (
        Path(__file__).resolve().parents[1] / "scripts" / "backfill_externalized_tool_outputs.py"
    )
    env = {**os.environ, "HERMES_HOME": str(home)}
    base = [sys.executable, str(script), "--db", str(db), "--threshold-chars", str(THRESHOLD)]
    dry = subprocess.run(base, capture_output=True, text=True, timeout=120, cwd=home, env=env)
    assert dry.returncode == 0, dry.stderr
    assert json.loads(dry.stdout)["rows"] == 3 and "scanned 3 rows" in dry.stderr
    done = subprocess.run(
        [*base, "--apply", "--manifest", str(home / "m.json"), "--quiet"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=home,
        env=env,
    )
    assert done.returncode == 0 and json.loads(done.stdout)["rewritten"] == 3 and done.stderr == ""
    missing = subprocess.run(
        [*base, "--apply"], capture_output=True, text=True, timeout=120, cwd=home, env=env
    )
    assert missing.returncode == 1 and "--manifest" in missing.stderr

"""Secrets planted everywhere a host message can carry them never reach a file under HERMES_HOME
when redaction is on, and are all recoverable when it is off.

The engine is driven as the host drives it (compress with the whole history, tool calls, session
end), then a backup and an export are made with the ``lcm`` CLI, and every file under the home
(database, WAL, payload files, backups, exports) is read as raw bytes.

On PostgreSQL (``both_backends``) the database is not a file: every value of every table of the
schema (payload bytes included) is read past the store, and the ``pg_dump`` backup (compressed)
is read back as text with ``pg_restore``, next to the files the home still gets (the export).
"""

from __future__ import annotations

import base64
import copy
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from hermes_lcm.cli import main as cli
from hermes_lcm.engine import LcmEngine
from hermes_lcm.store import close_all, is_url

from ..backends import every_value
from .test_sensitive_catalog import PLANTED

pytestmark = pytest.mark.both_backends

SECRETS = [secret for _, _, secret in PLANTED]
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 40).decode()


def planted_history() -> list[dict[str, Any]]:
    """Host-shaped messages with the planted secrets in user text, tool-call arguments, tool results,
    an image's alt text and caption, the host's reasoning field, and a long output."""
    texts = [text for _, text, _ in PLANTED]
    out: list[dict[str, Any]] = []
    for turn in range(12):
        out.append(
            {"role": "user", "content": f"turn {turn}: " + "please continue with the plan. " * 30}
        )
        out.append(
            {"role": "assistant", "content": f"turn {turn} done. " + "noted and applied. " * 30}
        )
    out.append({"role": "user", "content": "Here are my settings:\n" + "\n".join(texts[:8])})
    arguments = json.dumps({"path": ".env", "content": "\n".join(texts[9:14])})
    out.append(
        {
            "role": "assistant",
            "content": None,
            "reasoning_content": "they pasted " + texts[8],
            "tool_calls": [
                {
                    "id": "call_w",
                    "type": "function",
                    "function": {"name": "write_file", "arguments": arguments},
                }
            ],
        }
    )
    out.append({"role": "tool", "tool_call_id": "call_w", "content": "wrote .env: " + texts[14]})
    out.append(
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "screenshot of the console: " + texts[15]},
                {
                    "type": "image_url",
                    "image_url": {"url": f"data:image/png;base64,{PNG}"},
                    "alt": texts[16],
                },
            ],
        }
    )
    out.append(
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "call_r",
                    "type": "function",
                    "function": {
                        "name": "terminal",
                        "arguments": json.dumps({"command": "cat config/*.yml"}),
                    },
                }
            ],
        }
    )
    log = "\n".join(f"line {i}: build ok" for i in range(3000))
    out.append(
        {
            "role": "tool",
            "tool_call_id": "call_r",
            "content": log + "\n" + "\n".join(texts[17:]) + "\n" + log,
        }
    )
    out.append({"role": "assistant", "content": "I see the config; I will not repeat the keys."})
    out.append({"role": "user", "content": "thanks, now summarise what we did"})
    return out


WHERE: dict[str, str] = {}  # the running test's database setting (empty: lcm.db in its home)


@pytest.fixture(autouse=True)
def on_backend(backend_env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """Every engine and ``lcm`` call of the test on its backend; for a URL, backups (pg_dump, on
    PATH here) go under the test's home."""
    WHERE.update(backend_env)
    if backend_env:
        from ..pgserver import binaries

        monkeypatch.setenv("HERMES_HOME", str(tmp_path / "home"))
        monkeypatch.setenv("PATH", f"{binaries()}{os.pathsep}{os.environ.get('PATH', '')}")
    yield
    WHERE.clear()


def db_arg(home: Path) -> str:
    return WHERE.get("LCM_DATABASE_URL", str(home / "lcm.db"))


def drive(home: Path, env: dict[str, str]) -> LcmEngine:
    base = {
        "HERMES_HOME": str(home),
        "LCM_ABSOLUTE_THRESHOLD_TOKENS": "6000",
        "LCM_FRESH_TAIL_COUNT": "4",
        "LCM_LEAF_CHUNK_TOKENS": "1000",
        "LCM_SUMMARY_PROVIDER": "extractive",
        **env,
        **WHERE,
    }
    engine = copy.deepcopy(LcmEngine(env=base))
    engine.update_model("main-model", 64000)
    engine.on_session_start("planted", hermes_home=str(home), platform="cli")
    history = planted_history()
    engine.compress(history, current_tokens=30000)
    engine.handle_tool_call("lcm_grep", {"query": "settings"}, messages=history)
    engine.on_session_end("planted", history)
    return engine


def cli_run(home: Path, *argv: str) -> dict[str, Any]:
    out_path = home / f"cli-{len(list(home.iterdir()))}.json"
    with out_path.open("w", encoding="utf-8") as out:
        code = cli.main(["--db", db_arg(home), *argv], out=out)
    assert code == 0, out_path.read_text()
    return json.loads(out_path.read_text()) if argv[0] != "export" else {}


def every_byte_under(home: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(home)): p.read_bytes()
        for p in home.rglob("*")
        if p.is_file() and not p.is_symlink()
    }


def leaks(files: dict[str, bytes], secrets: list[str]) -> list[tuple[str, str]]:
    return [
        (name, secret)
        for name, data in files.items()
        for secret in secrets
        if secret.encode() in data or json.dumps(secret)[1:-1].encode() in data
    ]


@pytest.fixture(autouse=True)
def _closed() -> Any:
    yield
    close_all()


def test_with_redaction_on_no_planted_secret_is_in_any_file(tmp_path: Path, backend: str) -> None:
    home = tmp_path / "home"
    home.mkdir()
    engine = drive(
        home,
        {
            "LCM_SENSITIVE_PATTERNS_ENABLED": "true",
            "LCM_LARGE_OUTPUT_EXTERNALIZATION_ENABLED": "true",
        },
    )
    status = engine.get_status()["privacy"]["redaction"]
    assert status["enabled"] and sum(status["redacted_this_process"].values()) >= len(SECRETS)
    backup = cli_run(home, "backup")
    with (home / "export.jsonl").open("w", encoding="utf-8") as out:
        assert cli.main(["--db", db_arg(home), "export", "--conversation", "1"], out=out) == 0
    files = every_byte_under(home)
    if is_url(db_arg(home)):
        assert Path(backup["backup"]).read_bytes()
        # at rest in the database: every table's values (payload bytes included), and the dump as text
        files.update(
            {f"table {name}": text.encode() for name, text in every_value(db_arg(home)).items()}
        )
        files["pg_restore"] = restored_text(Path(backup["backup"]))
        payloads = [data for name, data in files.items() if name == "table payloads"]
        database = b"".join(data for name, data in files.items() if name.startswith("table "))
        assert b"lcm-redacted:" in files["pg_restore"], "the dump holds the redacted rows"
    else:
        assert Path(backup["backup"]).read_bytes() and any(
            "lcm-payloads" in name for name in files
        ), files.keys()
        payloads = [data for name, data in files.items() if name.startswith("lcm-payloads")]
        database = files["lcm.db"] + files.get("lcm.db-wal", b"")
    assert len(files) >= 4
    assert not leaks(files, SECRETS)
    outputs = [data for data in payloads if b"line 2999: build ok" in data]
    assert len(outputs) == 1 and b"[lcm-redacted:private_key #" in outputs[0], (
        "the big log went to a redacted file"
    )
    assert b"[lcm-redacted:" in database
    # the image survived redaction byte for byte (its payload holds the data URI)
    assert any(PNG.encode() in data for data in payloads)


def restored_text(dump: Path) -> bytes:
    """A ``pg_dump -Fc`` archive (compressed) as the SQL text it restores."""
    from ..pgserver import binaries

    proc = subprocess.run(
        [str(binaries() / "pg_restore"), "-f", "-", str(dump)],
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_with_redaction_off_every_planted_secret_is_recoverable(
    tmp_path: Path, backend: str
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    engine = drive(home, {})
    assert engine.get_status()["privacy"]["redaction"]["enabled"] is False
    with (home / "export.jsonl").open("w", encoding="utf-8") as out:
        assert cli.main(["--db", db_arg(home), "export", "--conversation", "1"], out=out) == 0
    exported = [
        json.loads(line)
        for line in (home / "export.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    assert len(exported) == len(planted_history())
    shown = json.dumps(exported, ensure_ascii=False)
    missing = [s for s in SECRETS if s not in shown and json.dumps(s)[1:-1] not in shown]
    assert not missing
    stored = "\n".join(
        every_value(db_arg(home)).values()
    )  # the scan the test above relies on sees them
    assert not [s for s in SECRETS if s not in stored and json.dumps(s)[1:-1] not in stored]
    first = json.loads(
        engine.handle_tool_call(
            "lcm_grep", {"query": "AKIAIOSFODNN7EXAMPLE", "include_in_context": True}
        )
    )
    assert first["hits"], "a secret stored raw is found by search when redaction is off"


def test_turning_redaction_on_and_off_stores_no_message_twice(tmp_path: Path, backend: str) -> None:
    home = tmp_path / "home"
    home.mkdir()
    history = planted_history()
    counts = []
    for turn, setting in enumerate(("false", "true", "false", "true")):
        engine = drive(home, {"LCM_SENSITIVE_PATTERNS_ENABLED": setting})
        history = [
            *history,
            {"role": "user", "content": f"turn {turn}: redaction {setting}, key {SECRETS[turn]}"},
        ]
        engine.compress(history, current_tokens=30000)
        counts.append(engine.get_status()["messages_in_conversation"])
        close_all()
    assert counts == [len(history) - 3 + i for i in range(4)], counts


def test_the_summarizer_never_sees_a_secret_stored_before_redaction(
    tmp_path: Path, backend: str
) -> None:
    """Rows stored with redaction off keep their secrets (forward-only); a compaction after it is
    turned on sends the summarizer their redacted text, and stores a summary without them."""
    home = tmp_path / "home"
    home.mkdir()
    seen: list[str] = []

    def call_llm(**kwargs: Any) -> Any:
        seen.append(json.dumps(kwargs.get("messages"), default=str))
        raise RuntimeError("summarizer unavailable: the engine falls back to its offline summary")

    os.environ.pop("LCM_SUMMARY_PROVIDER", None)
    history = planted_history()
    engine = copy.deepcopy(
        LcmEngine(env={"HERMES_HOME": str(home), "LCM_FRESH_TAIL_COUNT": "2", **WHERE})
    )
    engine.update_model("m", 64000)
    engine.on_session_start("s", hermes_home=str(home), platform="cli")
    engine.on_session_end("s", history)  # stored raw: redaction is off
    close_all()
    engine = copy.deepcopy(
        LcmEngine(
            env={
                "HERMES_HOME": str(home),
                "LCM_FRESH_TAIL_COUNT": "2",
                "LCM_SENSITIVE_PATTERNS_ENABLED": "1",
                "LCM_SUMMARY_PROVIDER": "auxiliary",
                **WHERE,
            },
            host_call_llm=call_llm,
        )
    )
    engine.update_model("m", 64000)
    engine.on_session_start("s", hermes_home=str(home), platform="cli")
    engine.compress(history, current_tokens=60000, force=True)
    assert seen, "the summarizer was never asked"
    assert not [s for s in SECRETS if any(s in text for text in seen)]
    summaries = json.loads(engine.handle_tool_call("lcm_describe", {}))
    assert summaries and not [s for s in SECRETS if s in json.dumps(summaries)]


def test_ignore_patterns_look_at_tool_call_arguments_and_drop_the_call_with_its_results(
    tmp_path: Path, backend: str
) -> None:
    """A heartbeat tool call matches by its arguments only: the call and the results that answer it
    are not stored; the turn around them is, and the prompt stays valid."""
    from hermes_lcm.base.wire import problems
    from hermes_lcm.config import LcmConfig
    from hermes_lcm.core import LcmCore

    core = LcmCore(
        LcmConfig(ignore_message_patterns='"kind": "heartbeat",^never$'),
        WHERE.get("LCM_DATABASE_URL") or tmp_path / "lcm.db",
    )
    core.bind("s")
    beat = {
        "id": "hb1",
        "type": "function",
        "function": {"name": "ping", "arguments": '{"kind": "heartbeat"}'},
    }
    work = {
        "id": "w1",
        "type": "function",
        "function": {"name": "ping", "arguments": '{"kind": "work"}'},
    }
    history = [
        {"role": "user", "content": "check in"},
        {"role": "assistant", "content": None, "tool_calls": [beat]},
        {"role": "tool", "tool_call_id": "hb1", "content": "alive"},
        {"role": "assistant", "content": None, "tool_calls": [work]},
        {"role": "tool", "tool_call_id": "w1", "content": "worked"},
        {"role": "assistant", "content": "all good"},
    ]
    assert core.ingest(history) == 4
    stored = [
        (m.role, m.content, m.tool_call_id)
        for m in core.store.messages_after(core.binding.conversation_id, 0)
    ]
    assert ("tool", "alive", "hb1") not in stored and ("tool", "worked", "w1") in stored
    assert core.normalizer.ignored_count >= 2
    assert core.ingest(history) == 0, "the same list again stores nothing"
    prompt = core.assemble(core.budget(20000, 0))
    assert not problems(prompt)

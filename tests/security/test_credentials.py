"""No credential in any status, tool answer, log line or stored event.

The attack: a summary endpoint on 127.0.0.1 that answers every request with an error echoing the
request back, its headers (``Authorization: Bearer <key>``) and body, and the bare key. A real engine
uses it as its summary provider, compaction is forced, and then the key is looked for everywhere the
engine puts text: ``get_status()``, the lcm_status / lcm_inspect / lcm_doctor tool answers, ``/lcm status``,
the events table (read from the database past the store), the ``lcm`` CLI's status, doctor and view
page, and every log record at DEBUG. The same for the host's key (``update_model(api_key=...)``) quoted
by the host's auxiliary client in its exception. On PostgreSQL (``both_backends``) the database URL
carries a password too (the test server trusts loopback, so it is never needed and never checked): it
must not show anywhere either, nor in what a failing or unreachable server makes the engine record.
"""

from __future__ import annotations

import copy
import io
import json
import logging
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from hermes_lcm import command
from hermes_lcm.base.redact import MASK, redact
from hermes_lcm.cli import main as cli
from hermes_lcm.engine import LcmEngine
from hermes_lcm.store import close_all

from ..backends import break_store, raw_sql, with_password

pytestmark = pytest.mark.both_backends

# Shapes no pattern knows: only the exact match of the configured key can catch these.
SUMMARY_KEY = "lcmKey7f3a9c1e2b4dQ8zW"
HOST_KEY = "hostKey2b9e6d1a4c7fR3xV"
DB_PASSWORD = "dbPass5c8e1f3a7b9dK2mT"  # in the PostgreSQL URL: not a known key shape either


class EchoServer:
    """An OpenAI-compatible endpoint that fails with the request echoed back (status 401 or 500)."""

    def __init__(self, status: int) -> None:
        self.requests = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # http.server's naming
                server.requests += 1
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()
                auth = self.headers.get("Authorization", "")
                bare = auth.split()[-1] if auth else ""
                # Short body first, so the key sits inside the 120 characters an error keeps.
                text = (
                    f"key {bare} denied; Authorization: {auth}; headers={dict(self.headers.items())!r}; "
                    f"body={body}"
                )
                payload = json.dumps({"error": {"message": text, "api_key": bare}}).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, format: str, *args: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(params=[401, 500])
def echo(request: pytest.FixtureRequest) -> Iterator[EchoServer]:
    server = EchoServer(request.param)
    yield server
    server.close()
    close_all()


def history(turns: int = 30) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    for turn in range(turns):
        messages.append(
            {
                "role": "user",
                "content": f"turn {turn}: please look at module {turn} " + "detail " * 60,
            }
        )
        messages.append(
            {"role": "assistant", "content": f"done with module {turn}: " + "result " * 60}
        )
    return messages


@pytest.fixture
def where(backend_env: dict[str, str]) -> dict[str, str]:
    """The engine's database: a file in its home, or a PostgreSQL URL with a password in it."""
    return {k: with_password(v, DB_PASSWORD) for k, v in backend_env.items()}


def start(home: Path, env: dict[str, str], host_call_llm: Any = None) -> LcmEngine:
    base = {
        "HERMES_HOME": str(home),
        "LCM_ABSOLUTE_THRESHOLD_TOKENS": "4000",
        "LCM_FRESH_TAIL_COUNT": "4",
        "LCM_LEAF_CHUNK_TOKENS": "1000",
        "LCM_SUMMARY_TIMEOUT_MS": "2000",
        "LCM_ENABLE_SLASH_COMMAND": "1",
        **env,
    }
    engine = copy.deepcopy(LcmEngine(env=base, host_call_llm=host_call_llm))
    engine.update_model(
        "main-model", 64000, base_url="https://example.invalid/v1", api_key=HOST_KEY
    )
    engine.on_session_start("cred-attack", hermes_home=str(home), platform="cli")
    return engine


def lcm_cli(home: Path, db: str, *argv: str) -> str:
    """What the ``lcm`` CLI prints (stdout and stderr) for one verb on the engine's database."""
    out, err = io.StringIO(), io.StringIO()
    cli.main(["--db", db, "--format", "json", *argv], out=out, err=err)
    return out.getvalue() + err.getvalue()


def everything_shown(
    engine: LcmEngine, home: Path, caplog: pytest.LogCaptureFixture
) -> dict[str, str]:
    """Every place the engine puts text, as one string each."""
    db = str(engine.database_path())
    events = json.dumps([list(row) for row in raw_sql(db, "SELECT * FROM events")], default=str)
    page = home / "view.html"
    view = lcm_cli(home, db, "view", "--output", str(page))
    return {
        "get_status": json.dumps(engine.get_status(), default=str),
        "lcm_status": engine.handle_tool_call("lcm_status", {}),
        "lcm_inspect": engine.handle_tool_call("lcm_inspect", {}),
        "lcm_doctor": engine.handle_tool_call("lcm_doctor", {}),
        "/lcm status": command.handle_command("status"),
        "/lcm --json status": command.handle_command("--json status"),
        "events": events,
        "lcm status": lcm_cli(home, db, "status"),
        "lcm doctor": lcm_cli(home, db, "doctor"),
        "lcm view": view + (page.read_text(encoding="utf-8") if page.exists() else ""),
        "logs": "\n".join(r.getMessage() for r in caplog.records) + caplog.text,
    }


def assert_clean(shown: dict[str, str], *keys: str) -> None:
    leaks = [(where, key) for where, text in shown.items() for key in keys if key in text]
    assert not leaks, f"credential leaked in: {leaks}"


def test_echoing_summary_endpoint_leaks_no_key(
    tmp_path: Path, echo: EchoServer, where: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    engine = start(
        tmp_path,
        {
            "LCM_SUMMARY_PROVIDER": "openai",
            "LCM_SUMMARY_MODEL": "echo-model",
            "LCM_SUMMARY_BASE_URL": echo.base_url,
            "LCM_SUMMARY_API_KEY": SUMMARY_KEY,
            **where,
        },
    )
    engine.compress(history(), current_tokens=20000, force=True)
    assert echo.requests >= 1, "the endpoint was never called"
    shown = everything_shown(engine, tmp_path, caplog)
    status = engine.get_status()
    seen = " ".join(status["summarizer_guard"]["last_errors"])
    assert f"HTTP {401 if 'HTTP 401' in seen else 500}" in seen, (
        "the failure itself must stay visible"
    )
    assert MASK in seen, seen
    assert_clean(shown, SUMMARY_KEY, HOST_KEY, f"Bearer {SUMMARY_KEY}", DB_PASSWORD)


def test_host_client_error_quoting_the_key_leaks_nothing(
    tmp_path: Path, where: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    """The host's auxiliary client raises with its request quoted (an SDK AuthenticationError does)."""
    caplog.set_level(logging.DEBUG)

    def call_llm(**kwargs: Any) -> Any:
        raise PermissionError(
            f"Error code: 401 - Incorrect API key provided: {HOST_KEY}. "
            f"request headers {{'authorization': 'Bearer {HOST_KEY}'}}"
        )

    engine = start(tmp_path, {"LCM_SUMMARY_PROVIDER": "auxiliary", **where}, host_call_llm=call_llm)
    engine.compress(history(), current_tokens=20000, force=True)
    shown = everything_shown(engine, tmp_path, caplog)
    assert "PermissionError" in shown["get_status"], "the failure itself must stay visible"
    assert_clean(shown, HOST_KEY, DB_PASSWORD)
    close_all()


def test_engine_error_and_log_traceback_are_redacted(
    tmp_path: Path, where: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    """An error recorded by the engine and a logged traceback quoting a key are masked too."""
    caplog.set_level(logging.DEBUG)
    engine = start(
        tmp_path,
        {"LCM_SUMMARY_PROVIDER": "extractive", "LCM_SUMMARY_API_KEY": SUMMARY_KEY, **where},
    )
    engine.record_error(f"provider said: bad key {SUMMARY_KEY} / {HOST_KEY}")
    try:
        raise RuntimeError(f"boom with {HOST_KEY}")
    except RuntimeError:
        logging.getLogger("hermes_lcm").exception("failed: %s", SUMMARY_KEY)
    shown = everything_shown(engine, tmp_path, caplog)
    assert "provider said: bad key" in shown["get_status"]
    assert_clean(shown, SUMMARY_KEY, HOST_KEY, DB_PASSWORD)
    close_all()


@pytest.mark.parametrize(
    "text",
    [
        "Authorization: Bearer abcdefghijklmnop1234",
        "{'authorization': 'Basic dXNlcjpwYXNzd29yZDEyMw=='}",
        "api_key=q9w8e7r6t5y4u3i2",
        '{"api_key": "q9w8e7r6t5y4u3i2"}',
        "x-api-key: q9w8e7r6t5y4u3i2",
        "sk-proj-abcdefghijklmnopqrstuvwxyz012345",
        "AKIAIOSFODNN7EXAMPLE",
        "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
        "xoxb-123456789012-abcdefghijkl",
        "https://user:hunter2secret@example.com/v1",
        "client_secret: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    ],
)
def test_well_known_credential_shapes_are_masked(text: str) -> None:
    secret = (
        text.split()[-1].strip("'\"{}").split(":")[-1] if "://" not in text else "hunter2secret"
    )
    out = redact(text)
    assert MASK in out and secret not in out, out


def test_ordinary_text_is_left_alone() -> None:
    text = "last_prompt_tokens=4000; 12 tokens: fine; author: Jane Smithson; see task-force notes"
    assert redact(text) == text


def test_the_events_table_never_holds_a_credential_whoever_records_it(
    tmp_path: Path, where: dict[str, str]
) -> None:
    """The data layer redacts what any caller records, and redacts on the way out what an older
    version stored before redaction existed."""
    from hermes_lcm.store import open_store

    token = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    db = where.get("LCM_DATABASE_URL") or str(tmp_path / "lcm.db")
    store = open_store(db if where else tmp_path / "lcm.db")
    store.record_event("error", "summarizer", f"HTTP 401: Authorization: Bearer {token}")
    assert token not in " ".join(r[0] for r in raw_sql(db, "SELECT detail FROM events"))
    raw_sql(
        db,
        "INSERT INTO events(at, level, kind, conversation_id, detail) VALUES (0, 'error', 'old', NULL, ?)",
        (f"old body echoed {token}",),
    )
    details = [detail for _, _, _, detail in store.recent_events(10)]
    assert (
        len(details) == 2
        and all(token not in d for d in details)
        and any(MASK in d for d in details)
    )
    close_all()


def test_a_database_that_fails_under_the_engine_shows_no_password(
    tmp_path: Path, where: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    """The store's connection goes away mid-run: the failure is recorded and shown (status, doctor,
    logs) without the database's password."""
    caplog.set_level(logging.DEBUG)
    engine = start(tmp_path, {"LCM_SUMMARY_PROVIDER": "extractive", **where})
    engine.compress(history(), current_tokens=20000, force=True)
    assert engine.core is not None
    break_store(engine.core.store)
    engine.compress(history(40), current_tokens=30000, force=True)
    shown = {
        "get_status": json.dumps(engine.get_status(), default=str),
        "lcm_status": engine.handle_tool_call("lcm_status", {}),
        "lcm_doctor": engine.handle_tool_call("lcm_doctor", {}),
        "logs": "\n".join(r.getMessage() for r in caplog.records) + caplog.text,
    }
    assert caplog.records, "the failure left no trace at all"
    assert_clean(shown, DB_PASSWORD)
    close_all()


def test_an_unreachable_database_url_shows_no_password(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A URL to a server that is not there: the engine's startup error, its tools, ``/lcm status``,
    the ``lcm`` CLI's error and the logs name the server, never the password."""
    caplog.set_level(logging.DEBUG)
    url = f"postgresql://lcm:{DB_PASSWORD}@127.0.0.1:1/postgres?connect_timeout=1"
    engine = start(tmp_path, {"LCM_SUMMARY_PROVIDER": "extractive", "LCM_DATABASE_URL": url})
    engine.compress(history(), current_tokens=20000, force=True)
    shown = {
        "get_status": json.dumps(engine.get_status(), default=str),
        "lcm_status": engine.handle_tool_call("lcm_status", {}),
        "lcm_doctor": engine.handle_tool_call("lcm_doctor", {}),
        "/lcm status": command.handle_command("status"),
        "lcm status": lcm_cli(tmp_path, url, "status"),
        "logs": "\n".join(r.getMessage() for r in caplog.records) + caplog.text,
    }
    assert "127.0.0.1" in shown["get_status"] + shown["lcm status"], (
        "the failure must name the server"
    )
    assert_clean(shown, DB_PASSWORD)
    close_all()


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://u:p%zz@h:5432/db", "postgresql://u@h:5432/db"),  # a bad percent-escape
        (
            "postgresql://u:pw@h:notaport/db",
            "postgresql://u@h:notaport/db",
        ),  # a port that does not parse
        (
            "postgresql://u@h/db?password=s3cret&sslmode=require",
            "postgresql://u@h/db?password=***&sslmode=require",
        ),
        ("postgresql://u@h/db?sslpassword=s3cret", "postgresql://u@h/db?sslpassword=***"),
        ("postgresql://:s3cret@h/db", "postgresql://h/db"),  # an empty user
        ("host=h port=5432 password='s3 cret' dbname=x", "host=h port=5432 password=*** dbname=x"),
        ("postgresql://h/db", "postgresql://h/db"),
    ],
)
def test_a_database_url_is_shown_without_its_password_in_every_form(url, shown):
    from hermes_lcm.storage.pg import redacted

    assert (
        redacted(url) == shown and "s3cret" not in redacted(url) and "s3 cret" not in redacted(url)
    )

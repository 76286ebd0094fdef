"""A PostgreSQL URL's password appears in no output: not in the connection pool's warnings or any
other record of psycopg's loggers, not in the store's errors, not in what the real ``lcm status``
and ``lcm doctor`` print (run as subprocesses: their stderr is where a host's log takes the pool's
warnings), not in the engine's status and tools. Every form libpq reads a password in: a
percent-escape libpq refuses (its error quotes the raw token, password and all), ``?password=``,
the parameter's name percent-encoded (libpq decodes names too), an empty user, and a keyword/value
string given where a URL belongs. All on the real test server (tests/pgserver.py)."""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import time
import traceback
from pathlib import Path

import pytest

from hermes_lcm import command
from hermes_lcm import store as store_module
from hermes_lcm.store import WriteFailed, open_store

from ..conftest import new_engine
from ..pgserver import fresh_url, server

SECRET = "Qv7-sEcReT-pW"


@pytest.fixture(autouse=True)
def _close_stores():
    yield
    store_module.close_all()


def unparsable(url: str) -> dict[str, str]:
    """``url`` (``postgresql://lcm@host:port/db?options=...``) with a password libpq cannot decode."""
    return {
        "bad escape in the userinfo": url.replace("lcm@", f"lcm:{SECRET}%zz@"),
        "bad escape, empty user": url.replace("lcm@", f":%zz{SECRET}@"),
        "bad escape in ?password=": f"{url}&password={SECRET}%zz",
    }


def accepted(url: str) -> dict[str, str]:
    """``url`` with a password in each form libpq reads (the test server trusts loopback: it connects)."""
    return {
        "userinfo": url.replace("lcm@", f"lcm:{SECRET}@"),
        "?password=": f"{url}&password={SECRET}",
        "?password= first": url.replace("?", f"?password={SECRET}&"),
        "encoded name": f"{url}&pass%77ord={SECRET}",
        "?sslpassword=": f"{url}&sslpassword={SECRET}",
    }


def keyword_value() -> str:
    srv = server()
    return f"host=127.0.0.1 port={srv.port} user=lcm dbname=postgres password={SECRET}"


def logged(caplog: pytest.LogCaptureFixture) -> str:
    """Every record as a handler would see it: message, traceback, and the formatted text."""
    return "\n".join(r.getMessage() + (r.exc_text or "") for r in caplog.records) + caplog.text


@pytest.mark.parametrize("form", list(unparsable("postgresql://lcm@h:1/db?x=1")))
def test_a_url_libpq_cannot_parse_leaves_its_password_in_no_log_and_no_error(form, caplog):
    """The pool used to retry such a URL for its whole timeout, logging libpq's message (which
    quotes the password's raw token) at each try; the store now refuses it at once, scrubbed."""
    caplog.set_level(logging.DEBUG)
    url = unparsable(fresh_url())[form]
    with pytest.raises(WriteFailed) as caught:
        open_store(url)
    error = "".join(traceback.format_exception(caught.value))
    assert SECRET not in error and SECRET not in logged(caplog)
    assert (
        "cannot connect" in error and "invalid percent-encoded token" in error
    )  # said at once, not after retries


def test_psycopg_pools_own_warnings_are_scrubbed(caplog):
    """Once a store has opened a URL, psycopg's and psycopg_pool's loggers carry the scrubbing
    filter: the pool's own warning for that URL (raised here by psycopg_pool itself, our store out
    of the way) reaches no handler with the password, whoever made the pool."""
    import psycopg_pool

    caplog.set_level(logging.DEBUG)
    url = unparsable(fresh_url())["bad escape in the userinfo"]
    with pytest.raises(WriteFailed):
        open_store(url)
    pool = psycopg_pool.ConnectionPool(
        url, min_size=1, open=True, name="probe", kwargs={"connect_timeout": 2}
    )
    try:
        deadline = time.monotonic() + 60
        while (
            not [r for r in caplog.records if r.name == "psycopg.pool"]
            and time.monotonic() < deadline
        ):
            time.sleep(0.05)
    finally:
        pool.close(timeout=5)
    warnings = [r for r in caplog.records if r.name == "psycopg.pool"]
    assert warnings and "invalid percent-encoded token" in warnings[0].getMessage()
    assert SECRET not in logged(caplog)


def test_a_driver_log_line_with_a_traceback_is_scrubbed(caplog):
    """psycopg's own logger, a record with arguments and an exception whose message quotes the
    password: message, arguments and traceback are all scrubbed before any handler formats them."""
    caplog.set_level(logging.DEBUG)
    url = accepted(fresh_url())["userinfo"]
    open_store(url).close()
    try:
        raise ValueError(f'invalid percent-encoded token: "{SECRET}"')
    except ValueError:
        logging.getLogger("psycopg").warning("connection to %s failed", url, exc_info=True)
    assert caplog.records and SECRET not in logged(caplog)
    assert "lcm@127.0.0.1" in caplog.text  # the URL is still named, without its password


def lcm(home: Path, db: str, verb: str) -> subprocess.CompletedProcess[str]:
    """The installed ``lcm`` command (else the module), as an operator runs it."""
    found = shutil.which("lcm", path=str(Path(sys.executable).parent))
    argv = [found] if found else [sys.executable, "-m", "hermes_lcm.cli.main"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("LCM_")}
    env["HERMES_HOME"] = str(home)
    return subprocess.run(
        [*argv, "--db", db, "--format", "json", verb],
        capture_output=True,
        text=True,
        env=env,
        timeout=180,
        check=False,
    )


def test_lcm_status_and_doctor_show_no_password_in_any_form(tmp_path):
    """The real CLI, once per form and verb: stdout and stderr (the pool's warnings went there)
    never hold the password; a URL that connects still answers, naming the server."""
    url = fresh_url()
    open_store(url).close()
    store_module.close_all()
    cases = {**accepted(url), **unparsable(url), "keyword/value": keyword_value()}
    leaks, failures = [], []
    for form, db in cases.items():
        for verb in ("status", "doctor"):
            done = lcm(tmp_path, db, verb)
            if SECRET in done.stdout or SECRET in done.stderr:
                leaks.append((form, verb))
            if form in accepted(url) and verb == "status":
                shown = json.loads(done.stdout)
                if done.returncode != 0 or not shown["database_path"].startswith(
                    "postgresql://lcm@127.0.0.1:"
                ):
                    failures.append((form, done.returncode, done.stderr[-300:]))
    assert not leaks, f"the password leaked in: {leaks}"
    assert not failures


def test_engine_status_tools_and_slash_command_show_no_password(tmp_path, clean_home, monkeypatch):
    """An engine on a URL whose password is in a percent-encoded ``password`` parameter: every
    status surface names the database without it."""
    url = accepted(fresh_url())["encoded name"]
    monkeypatch.setenv("LCM_DATABASE_URL", url)
    engine = new_engine(clean_home, LCM_DATABASE_URL=url, LCM_ENABLE_SLASH_COMMAND="1")
    engine.ingest_host([{"role": "user", "content": "hello"}])
    shown = {
        "get_status": json.dumps(engine.get_status(), default=str),
        "lcm_status": engine.handle_tool_call("lcm_status", {}),
        "lcm_doctor": engine.handle_tool_call("lcm_doctor", {}),
        "/lcm status": command.handle_command("status"),
        "/lcm doctor": command.handle_command("doctor"),
    }
    assert "127.0.0.1" in shown["lcm_status"]
    assert not [where for where, text in shown.items() if SECRET in text]


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (
            "postgresql://u@h/db?pass%77ord=s3cret&x=1",
            "postgresql://u@h/db?pass%77ord=***&x=1",
        ),  # libpq decodes names
        ("postgresql://u:ab/s3cret@h/db", "postgresql://u@h/db"),  # a '/' typed into the password
        (
            "postgresql://u:ab?s3cret@h/db",
            "postgresql://u@h/db",
        ),  # libpq's userinfo ends at the first '@'
        (
            "postgresql://u@h/db?password=ab#s3cret",
            "postgresql://u@h/db?password=***",
        ),  # libpq reads no fragment
        ("postgresql://u:s3cret@[::1/db", "postgresql://u@[::1/db"),  # a bracket urlsplit refuses
        (
            "host=h password='un s3cret",
            "host=h password=***",
        ),  # a quote never closed runs to the end
        (
            "postgresql://h/db@x",
            "postgresql://h/db@x",
        ),  # an '@' in a database's name is no userinfo
    ],
)
def test_redacted_masks_the_forms_a_url_parser_misreads(url, shown):
    from hermes_lcm.storage.pg import redacted

    assert redacted(url) == shown and "s3cret" not in redacted(url, drop=True)

"""``lcm backup`` on a server that checks passwords: pg_dump's command line (``ps`` shows it to
every user) holds no password in any form; pg_dump logs in through a 0600 passfile (an
sslpassword through a 0600 service file) in a private directory that is gone afterwards, never
through ``PGPASSWORD``; every other parameter of the URL reaches it; and the dump is whole.

A server of this module's own (tests/pgserver.py) asks a role made here for its password
(scram-sha-256), so a password that arrives wrong, or not at all, fails the backup. The password
holds the characters a URL must percent-encode and a passfile must escape. The subprocess calls
are recorded (argv, environment, the passfile's mode while pg_dump runs) and run for real.
"""

from __future__ import annotations

import io
import json
import os
import stat
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from hermes_lcm import store as store_module
from hermes_lcm.cli.main import main
from hermes_lcm.maintenance import pg_backup

from ..conftest import new_engine
from ..pgserver import Server, binaries

PASSWORD = "Bk:p@ss/w%rd\\ 9Q&x=1"
SSL_PASSWORD = "Key-passphrase-7Z"
ROLE, SCHEMA = "bk", "bkschema"


@pytest.fixture(scope="module")
def checking_server():
    """A server that trusts loopback for its superuser but wants ``ROLE``'s password."""
    import psycopg
    from psycopg import sql

    srv = Server()
    with psycopg.connect(srv.url(), autocommit=True) as pg:
        pg.execute(
            sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(
                sql.Identifier(ROLE), sql.Literal(PASSWORD)
            )
        )
        pg.execute(
            sql.SQL("CREATE SCHEMA {} AUTHORIZATION {}").format(
                sql.Identifier(SCHEMA), sql.Identifier(ROLE)
            )
        )
    hba = srv.data / "pg_hba.conf"
    hba.write_text(f"host all {ROLE} 127.0.0.1/32 scram-sha-256\n" + hba.read_text())
    srv.restart()
    yield srv
    srv.stop()


def urls(srv: Server) -> dict[str, str]:
    tail = f"options={quote(f'-csearch_path={SCHEMA}')}&application_name=lcm-backup-test"
    secret = quote(PASSWORD, safe="")
    return {
        "userinfo": f"postgresql://{ROLE}:{secret}@127.0.0.1:{srv.port}/postgres?{tail}",
        "?password=": f"postgresql://{ROLE}@127.0.0.1:{srv.port}/postgres?password={secret}&{tail}",
        "with sslpassword": f"postgresql://{ROLE}:{secret}@127.0.0.1:{srv.port}/postgres?{tail}"
        f"&sslpassword={SSL_PASSWORD}",
    }


def secret_forms() -> list[str]:
    return [PASSWORD, quote(PASSWORD, safe=""), quote(PASSWORD), "p@ss/w%rd", SSL_PASSWORD]


@pytest.fixture
def recorded(monkeypatch) -> list[dict[str, Any]]:
    """Every subprocess.run of the backup, recorded as it starts (the passfile exists then), then run."""
    calls: list[dict[str, Any]] = []
    real = subprocess.run

    def recording(argv: list[str], *args: Any, **kwargs: Any) -> Any:
        env = dict(kwargs.get("env") or {})
        seen: dict[str, Any] = {"argv": [str(a) for a in argv], "env": env, "modes": {}}
        for name in ("PGPASSFILE", "PGSERVICEFILE"):
            if name in env:
                path = Path(env[name])
                seen["modes"][name] = (
                    stat.S_IMODE(path.stat().st_mode),
                    stat.S_IMODE(path.parent.stat().st_mode),
                )
                seen[name] = path.read_text()
        calls.append(seen)
        return real(argv, *args, **kwargs)

    monkeypatch.setattr(pg_backup.subprocess, "run", recording)
    monkeypatch.setenv("PATH", f"{binaries()}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv(
        "PGPASSWORD", "a-stale-password-of-the-shell"
    )  # must neither reach pg_dump nor win
    return calls


@pytest.mark.parametrize("form", ["userinfo", "?password=", "with sslpassword"])
def test_backup_hands_the_password_off_the_command_line_and_still_dumps(
    form, checking_server, recorded, tmp_path
):
    import psycopg
    from psycopg.conninfo import conninfo_to_dict

    url = urls(checking_server)[form]
    with pytest.raises(psycopg.OperationalError):  # the server really checks: no password, no login
        psycopg.connect(
            f"postgresql://{ROLE}@127.0.0.1:{checking_server.port}/postgres", connect_timeout=5
        ).close()
    engine = new_engine(tmp_path, 10**9, "s1", LCM_DATABASE_URL=url)
    engine.ingest_host([{"role": "user", "content": "a line the dump must carry"}])
    store_module.close_all()
    out, err = io.StringIO(), io.StringIO()
    code = main(
        ["--db", url, "--format", "json", "backup", "--dest", str(tmp_path / "b")], out=out, err=err
    )
    done = json.loads(out.getvalue())
    assert code == 0 and done["status"] == "ok", (done, err.getvalue())

    dumps = [c for c in recorded if Path(c["argv"][0]).name == "pg_dump"]
    assert len(dumps) == 1
    for call in recorded:
        assert not [s for s in secret_forms() if s in " ".join(call["argv"])], call["argv"]
    dump = dumps[0]
    assert "PGPASSWORD" not in dump["env"]
    assert dump["modes"]["PGPASSFILE"] == (0o600, 0o700)
    assert PASSWORD.replace("\\", "\\\\").replace(":", "\\:") in dump["PGPASSFILE"]
    dsn = dump["argv"][dump["argv"].index("-d") + 1]
    given = {k: v for k, v in conninfo_to_dict(url).items() if k not in ("password", "sslpassword")}
    handed = conninfo_to_dict(dsn)
    if form == "with sslpassword":
        assert (
            dump["modes"]["PGSERVICEFILE"] == (0o600, 0o700)
            and SSL_PASSWORD in dump["PGSERVICEFILE"]
        )
        assert handed.pop("service") == pg_backup.SERVICE
    assert handed == given  # every other parameter kept: the schema, the application name, ...
    for name in ("PGPASSFILE", "PGSERVICEFILE"):
        if name in dump["env"]:
            assert not Path(dump["env"][name]).parent.exists()  # removed with its directory
    listing = subprocess.run(
        [str(binaries() / "pg_restore"), "--list", done["backup"]],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert f"TABLE DATA {SCHEMA} messages" in listing


def test_the_command_an_operator_is_shown_carries_no_password(
    checking_server, tmp_path, monkeypatch
):
    """Without pg_dump here, the command to run names the database without its password, not
    even a masked one (libpq would send ``***`` as the password)."""
    url = urls(checking_server)["?password="]
    new_engine(tmp_path, 10**9, "s1", LCM_DATABASE_URL=url)
    store_module.close_all()
    monkeypatch.setenv("PATH", str(tmp_path))
    out = io.StringIO()
    assert main(["--db", url, "--format", "json", "backup"], out=out, err=io.StringIO()) == 1
    run = json.loads(out.getvalue())["run"]
    assert run.startswith("pg_dump -Fc -n ") and f"{ROLE}@127.0.0.1:{checking_server.port}" in run
    assert "password" not in run and not [s for s in secret_forms() if s in run]

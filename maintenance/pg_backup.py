"""``lcm backup`` on a PostgreSQL database: PostgreSQL's own backup is ``pg_dump``.

The SQLite path copies pages with the online backup API; a server's database is dumped in the
custom format (``pg_dump -Fc``: compressed, restorable table by table, one consistent snapshot
while the fleet keeps writing), of our schema only, into the backup directory, then verified by
``pg_restore --list`` (a truncated or foreign file does not list). No password reaches the
command line (``ps`` shows every process's arguments to every user): pg_dump gets the URL's
other parameters there, as a keyword/value string, and its password in a passfile
(``PGPASSFILE``), its ``sslpassword`` in a service file (libpq reads that from no variable),
both 0600 in a 0700 directory of their own that is removed when the dump ends. Not in
``PGPASSWORD``: some systems show a process's environment to other users. Without
``pg_dump`` on PATH nothing is written and the operator gets the exact command to run.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from ..base import private
from ..storage.pg import secrets
from ..store import Store, redacted

DUMP_TIMEOUT_S = 6 * 3600


@dataclass(frozen=True)
class Dump:
    """A verified dump (``path``), or, when ``path`` is empty, the command the operator runs."""

    path: str
    bytes: int
    seconds: float
    command: str
    restore: str


def schema_of(store: Store) -> str:
    """The schema our tables live in (what ``-n`` dumps)."""
    return str(store.database_header().get("schema_name") or "public")


def command_for(store: Store, target: Path) -> tuple[str, str]:
    """The dump command an operator runs (no password in it, not even a masked one: libpq would send
    that) and how to restore its file."""
    schema = schema_of(store)
    dump_cmd = f"pg_dump -Fc -n {schema} -f {target} '{redacted(str(getattr(store, 'url', store.path)), drop=True)}'"
    restore = (
        f"createdb NEWDB && pg_restore --no-owner -d 'postgresql://HOST/NEWDB' {target} "
        f"(then LCM_DATABASE_URL=postgresql://HOST/NEWDB?options=-csearch_path%3D{schema})"
    )
    return dump_cmd, restore


def dump(store: Store, directory: Path, label: str = "") -> Dump:
    """A new timestamped dump of ``store``'s schema in ``directory`` (see :func:`dump_to`)."""
    stamp = datetime.now(UTC).strftime(
        "%Y%m%dT%H%M%S.%fZ"
    )  # the fraction after a dot, not run into the seconds
    suffix = f"-{label}" if label else ""
    return dump_to(store, directory / f"lcm-pg-{schema_of(store)}-{stamp}{suffix}.dump")


def dump_to(store: Store, target: Path) -> Dump:
    """``pg_dump -Fc -n <schema>`` into ``target`` (written whole or not at all), verified by
    ``pg_restore --list``; without pg_dump or pg_restore here, nothing is written (``path`` empty)."""
    url = str(getattr(store, "url", store.path))
    command, restore = command_for(store, target)
    binary, lister = shutil.which("pg_dump"), shutil.which("pg_restore")
    if binary is None or lister is None:
        return Dump("", 0, 0.0, command, restore)
    started = time.monotonic()
    private.make_dir(target.parent)
    fd, temp = private.temp_file(target.parent, f".{target.name}.")
    os.close(fd)
    try:
        with credentials(url) as (dsn, env):
            _run([binary, "-Fc", "-n", schema_of(store), "-f", str(temp), "-d", dsn], env)
        listing = _run(
            [lister, "--list", str(temp)], dict(os.environ)
        )  # reads the file: no connection
        if "TABLE DATA" not in listing or " messages " not in listing:
            raise OSError(f"the dump does not list our tables: {listing[:300]}")
        os.replace(temp, target)
    finally:
        temp.unlink(missing_ok=True)
    return Dump(
        str(target), target.stat().st_size, round(time.monotonic() - started, 3), command, restore
    )


SERVICE = "hermes-lcm-dump"


@contextmanager
def credentials(url: str) -> Iterator[tuple[str, dict[str, str]]]:
    """(the connection string for pg_dump's command line, its environment): the string holds every
    parameter of ``url`` but its passwords; the password goes in a passfile, an sslpassword in a
    service file, each 0600 in a private directory removed on leaving, whatever happened."""
    dsn, hidden = secrets.split_secrets(url)
    env = dict(os.environ)
    if not hidden:
        yield dsn, env
        return
    folder = Path(tempfile.mkdtemp(prefix="lcm-pgpass-"))  # 0700, an unpredictable name
    try:
        if "password" in hidden:
            field = (
                _checked(hidden["password"], "password").replace("\\", "\\\\").replace(":", "\\:")
            )
            private.write_new(folder, "pgpass", f"*:*:*:*:{field}\n".encode())
            env["PGPASSFILE"] = str(folder / "pgpass")
            env.pop(
                "PGPASSWORD", None
            )  # it would win over the passfile; the URL's password is the store's own
        if "sslpassword" in hidden:
            from psycopg.conninfo import conninfo_to_dict

            if "service" in conninfo_to_dict(dsn):
                raise OSError(
                    "the database URL names a service= and an sslpassword=: pg_dump could get the "
                    "sslpassword only on its command line; move it into that service's file"
                )
            line = _checked(hidden["sslpassword"], "sslpassword")
            private.write_new(
                folder, "pg_service.conf", f"[{SERVICE}]\nsslpassword={line}\n".encode()
            )
            env["PGSERVICEFILE"] = str(folder / "pg_service.conf")
            dsn = f"{dsn} service={SERVICE}"
        yield dsn, env
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _checked(secret: str, name: str) -> str:
    """``secret``, if a passfile or service file line can hold it: libpq cuts a line break (and a
    service file's surrounding blanks), so the dump is refused rather than sent a wrong password."""
    if "\n" in secret or "\r" in secret or (name == "sslpassword" and secret != secret.strip()):
        raise OSError(
            f"the database URL's {name} holds a line break or surrounding blanks: it cannot be handed "
            "to pg_dump off its command line; back up with pg_dump by hand"
        )
    return secret


def _run(argv: list[str], env: dict[str, str]) -> str:
    proc = subprocess.run(
        argv, capture_output=True, text=True, env=env, timeout=DUMP_TIMEOUT_S, check=False
    )
    if proc.returncode != 0:
        raise OSError(f"{Path(argv[0]).name} failed: {proc.stderr.strip()[-500:]}")
    return proc.stdout

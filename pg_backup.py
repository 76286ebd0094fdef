"""``lcm backup`` on a PostgreSQL database: PostgreSQL's own backup is ``pg_dump``.

The SQLite path copies pages with the online backup API; a server's database is dumped in the
custom format (``pg_dump -Fc``: compressed, restorable table by table, one consistent snapshot
while the fleet keeps writing), of our schema only, into the backup directory, then verified by
``pg_restore --list`` (a truncated or foreign file does not list). The password never reaches
the command line (``ps`` shows arguments): it is handed over in ``PGPASSWORD``. Without
``pg_dump`` on PATH nothing is written and the operator gets the exact command to run.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlsplit

from . import private
from .store import Store, redacted

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
    """The dump command an operator runs (no password in it) and how to restore its file."""
    schema = schema_of(store)
    dump_cmd = f"pg_dump -Fc -n {schema} -f {target} '{redacted(str(store.path))}'"
    restore = (f"createdb NEWDB && pg_restore --no-owner -d 'postgresql://HOST/NEWDB' {target} "
               f"(then LCM_DATABASE_URL=postgresql://HOST/NEWDB?options=-csearch_path%3D{schema})")
    return dump_cmd, restore


def dump(store: Store, directory: Path, label: str = "") -> Dump:
    """A new timestamped dump of ``store``'s schema in ``directory`` (see :func:`dump_to`)."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S.%fZ")  # the fraction after a dot, not run into the seconds
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
    env = {**os.environ}
    secret = urlsplit(url).password
    if secret is not None:
        env["PGPASSWORD"] = secret
    fd, temp = private.temp_file(target.parent, f".{target.name}.")
    os.close(fd)
    try:
        _run([binary, "-Fc", "-n", schema_of(store), "-f", str(temp), "-d", redacted(url)], env)
        listing = _run([lister, "--list", str(temp)], env)
        if "TABLE DATA" not in listing or " messages " not in listing:
            raise OSError(f"the dump does not list our tables: {listing[:300]}")
        os.replace(temp, target)
    finally:
        temp.unlink(missing_ok=True)
    return Dump(str(target), target.stat().st_size, round(time.monotonic() - started, 3), command, restore)


def _run(argv: list[str], env: dict[str, str]) -> str:
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=DUMP_TIMEOUT_S, check=False)
    if proc.returncode != 0:
        raise OSError(f"{Path(argv[0]).name} failed: {proc.stderr.strip()[-500:]}")
    return proc.stdout

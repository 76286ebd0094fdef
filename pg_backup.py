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


def _schema_of(store: Store) -> str:
    return str(store.database_header().get("schema_name") or "public")


def dump(store: Store, directory: Path) -> Dump:
    """``pg_dump -Fc -n <schema>`` of ``store``'s database into ``directory``, verified; or the command."""
    url = str(getattr(store, "url", store.path))
    schema = _schema_of(store)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    target = directory / f"lcm-pg-{schema}-{stamp}.dump"
    shown = redacted(url)
    command = f"pg_dump -Fc -n {schema} -f {target} '{shown}'"
    restore = (f"createdb NEWDB && pg_restore --no-owner -d 'postgresql://.../NEWDB' {target} "
               f"(then LCM_DATABASE_URL=postgresql://.../NEWDB?options=-csearch_path%3D{schema})")
    binary = shutil.which("pg_dump")
    lister = shutil.which("pg_restore")
    if binary is None or lister is None:
        return Dump("", 0, 0.0, command, restore)
    started = time.monotonic()
    private.make_dir(directory)
    env = {**os.environ}
    secret = urlsplit(url).password
    if secret is not None:
        env["PGPASSWORD"] = secret
    fd, temp = private.temp_file(directory, f".{target.name}.")
    os.close(fd)
    try:
        _run([binary, "-Fc", "-n", schema, "-f", str(temp), "-d", shown], env)
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

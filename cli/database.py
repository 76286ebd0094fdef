"""Which database ``lcm`` reads and how it opens it: the engine's order of settings for the path
or URL, a read-only open, and a failure that says which setting chose the path and what to do
(a missing file, a directory, an LCM-X or lossless-claw database, a newer schema)."""

from __future__ import annotations

import os
from pathlib import Path

from ..config import load_config, read_yaml_block
from ..store import (
    ForeignDatabase,
    NewerSchema,
    Store,
    StoreError,
    StoreFault,
    detect_source,
    open_readonly,
)
from . import pg as cli_pg
from .common import hermes_home
from .output import EXIT_DATABASE, CliError


def resolve_db(explicit: str | None, env: dict[str, str]) -> tuple[Path | str, str]:
    """(path or postgresql:// URL, how it was chosen): --db, LCM_DATABASE_URL, config.yaml lcm.database_url,
    LCM_DATABASE_PATH, config.yaml lcm.database_path, HERMES_HOME (the engine's order: startup.locate)."""
    if explicit:
        return (explicit if cli_pg.is_url(explicit) else Path(explicit).expanduser()), "--db"
    home = hermes_home(env)
    loaded = load_config(env, read_yaml_block(home)[0])
    if loaded.config.database_url:
        from_env = loaded.sources.get("database_url") == "env"
        return loaded.config.database_url, "LCM_DATABASE_URL" if from_env else "config.yaml"
    if loaded.config.database_path:
        from_env = loaded.sources.get("database_path") == "env"
        origin = "LCM_DATABASE_PATH" if from_env else "config.yaml"
        return Path(loaded.config.database_path).expanduser(), origin
    return home / "lcm.db", "HERMES_HOME" if env.get("HERMES_HOME") else "~/.hermes"


def no_database(path: Path, origin: str) -> CliError:
    """A database that does not exist yet: which setting chose the path, and how to choose another."""
    chosen = f"HERMES_HOME={os.environ.get('HERMES_HOME')}" if origin == "HERMES_HOME" else origin
    # scrubbed: a keyword/value connection string given to --db is taken for a path, password and all
    return CliError(
        f"no database at {cli_pg.scrubbed(str(path))}",
        EXIT_DATABASE,
        hint=f"the path comes from {chosen}; Hermes creates it at the first turn it stores with "
        "context.engine: lcm (lcm doctor says whether it can); to read another, give --db PATH "
        "or set HERMES_HOME or LCM_DATABASE_PATH",
    )


def open_db(path: Path | str, origin: str = "--db") -> Store:
    if cli_pg.is_url(path):
        try:  # read-only: this store refuses every write() (doctor --deep and backup say otherwise)
            return open_readonly(path)
        except (StoreError, StoreFault) as exc:
            # ForeignDatabase, NewerSchema, cannot connect (URL without password)
            raise CliError(str(exc), EXIT_DATABASE) from exc
    path = Path(path)
    if not path.exists():
        raise no_database(path, origin)
    if path.is_dir():
        raise CliError(
            f"{path} is a directory, not a database file",
            EXIT_DATABASE,
            hint="give --db the file (e.g. DIR/lcm.db) or set LCM_DATABASE_PATH to it",
        )
    try:
        return open_readonly(path)
    except ForeignDatabase as exc:
        raise CliError(str(exc), EXIT_DATABASE, hint=foreign_hint(path)) from exc
    except NewerSchema as exc:
        raise CliError(
            str(exc), EXIT_DATABASE, hint="upgrade hermes-lcm to read this database"
        ) from exc
    except StoreError as exc:
        raise CliError(str(exc), EXIT_DATABASE) from exc


def foreign_hint(path: Path) -> str:
    from ..importers.lcmx import command_for, is_lcmx  # lazy: the error path only

    if is_lcmx(path):
        return (
            f"{path} is an LCM-X database: upgrade it in place with `{command_for(path)}` (dry run without "
            "--apply; the original is kept as <db>.lcm-x-backup), or let the engine do it at start "
            "(LCM_MIGRATE_ON_START=1, the default)"
        )
    kind = detect_source(path)
    if kind == "lossless-claw":
        return (
            f"{path} is a lossless-claw/OpenClaw database: import it with `python scripts/import_lossless_claw.py "
            f"--source-db {path} --target-db NEW.db` (dry-run first), and point LCM_DATABASE_PATH elsewhere"
        )
    return f"{path} was written by another program; hermes-lcm never writes to it. Set LCM_DATABASE_PATH to a new file"

"""Opening the engine's database: what is wrong with a path, and when to try again.

A path that cannot be a database (a directory, a device, a file under a file, a place that
cannot be written) used to fail again inside every host call, each failure pointing the
operator at ``lcm_doctor``, which failed the same way. :class:`Opening` makes it one startup
error instead: tried once per configuration (the path and the setting that chose it), tried
again only when that changes or after a back-off, and worded so the operator knows what is
wrong with the path and which setting to change. Status, doctor and the host log all show
the same text.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import tokens
from .redact import redact

BACKOFF_FIRST_SECONDS = 60.0
BACKOFF_MAX_SECONDS = 3600.0
MEMORY = ":memory:"


def locate(
    env: Mapping[str, str], config: Any, sources: Mapping[str, str], home: str
) -> tuple[Path | str, str]:
    """(database, the setting that chose it): a ``postgresql://`` URL from LCM_DATABASE_URL or
    config.yaml's ``lcm.database_url``, else a file from LCM_DATABASE_PATH, config.yaml, or the home
    default. A URL stays a string: as a Path its ``//`` would collapse."""
    if config.database_url:
        return config.database_url, (
            "LCM_DATABASE_URL"
            if sources.get("database_url") == "env"
            else "lcm.database_url in config.yaml"
        )
    configured, source = config.database_path, sources.get("database_path")
    if env.get("LCM_DATABASE_PATH"):
        return Path(env["LCM_DATABASE_PATH"]).expanduser(), "LCM_DATABASE_PATH"
    if configured:
        setting = "LCM_DATABASE_PATH" if source == "env" else "lcm.database_path in config.yaml"
        return Path(configured).expanduser(), setting
    return Path(home).expanduser() / "lcm.db", "HERMES_HOME"


def local_home() -> Path:
    """This machine's Hermes home: where files go that a database on a server cannot hold (pages,
    backups) when the database is a ``postgresql://`` URL rather than a file they could sit beside."""
    return Path(os.environ.get("HERMES_HOME") or "~/.hermes").expanduser()


def path_problem(path: Path | str) -> str | None:
    """Why ``path`` cannot hold a database this process writes, or None when it may (a URL: the
    server answers for itself when it is opened)."""
    if isinstance(path, str):
        return None
    if str(path) == MEMORY:
        return None
    if path.is_dir():
        return f"{path} is a directory, not a database file"
    if path.exists():
        if not path.is_file():
            return f"{path} is not a regular file (a device, pipe or socket)"
        if not os.access(path, os.R_OK | os.W_OK):
            return f"{path} is not readable and writable by this process"
        return None
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                return f"{path} cannot be created: {parent} is a file, not a directory"
            if not os.access(parent, os.W_OK | os.X_OK):
                return f"{path} cannot be created: {parent} is not writable by this process"
            return None
    return None


def fix_for(setting: str, path: Path | str) -> str:
    """The one change that helps, naming the setting that chose ``path``."""
    if isinstance(path, str):
        return (
            f"the URL comes from {setting}: check that the server is up and reachable, the database "
            "exists and its user may create tables (see docs/guide/postgresql.md)"
        )
    if setting == "HERMES_HOME":
        return (
            f"the path is the default {path.parent}/lcm.db: set LCM_DATABASE_PATH to a writable file "
            "path, or fix HERMES_HOME"
        )
    return f"the path comes from {setting}: set it to a writable file path (e.g. ~/.hermes/lcm.db)"


class PathRefused(Exception):
    """The configured path cannot be a database; nothing was opened."""


@dataclass
class Opening:
    """One engine's attempts to open its database, so a bad path fails once, not on every call."""

    clock: Callable[[], float] = time.monotonic
    error: str | None = None
    refused: bool = (
        False  # the file is another program's or newer: kept unwritten, the prompt trimmed
    )
    attempts: int = 0
    _key: tuple[str, str] | None = field(default=None, repr=False)
    _path: Path | str = field(default=Path(), repr=False)
    _retry_at: float = 0.0
    _backoff: float = BACKOFF_FIRST_SECONDS

    def due(self, path: Path | str, setting: str) -> bool:
        """Try (again)? The first time, when the path or its setting changed, or after the back-off."""
        return (
            self.error is None
            or (str(path), setting) != self._key
            or self.clock() >= self._retry_at
        )

    def begin(self, path: Path | str, setting: str) -> None:
        """Count an attempt; refuse a path that cannot be a database before anything touches it."""
        if (str(path), setting) != self._key:
            self._backoff = BACKOFF_FIRST_SECONDS
        self._key, self._path = (str(path), setting), path
        self.attempts += 1
        problem = path_problem(path)
        if problem is not None:
            raise PathRefused(problem)

    def failed(self, exc: BaseException, for_good: bool = False) -> str:
        """The startup error for this failure; the next attempt waits for a change or the back-off.

        ``for_good``: the database itself refuses us (another program's file, a newer schema).
        """
        path, setting = self._path, self._key[1] if self._key else "LCM_DATABASE_PATH"
        self.refused = for_good
        if isinstance(exc, PathRefused):
            what = str(exc)
        elif for_good:
            what = f"{exc} - this engine will not write to it; see docs/guide/import-and-migrate.md"
        elif isinstance(path, Path) and str(path) != MEMORY and not path.exists():
            what = f"{path} cannot be created ({exc.__class__.__name__}: {exc})"
        else:
            what = f"{path} could not be opened ({exc.__class__.__name__}: {exc})"
        wait = int(self._backoff)
        self._retry_at = self.clock() + self._backoff
        self._backoff = min(BACKOFF_MAX_SECONDS, self._backoff * 2)
        # redact(): a database URL's password must not reach status, doctor or the tools' answers
        self.error = redact(
            f"hermes-lcm cannot use its database: {what}. {fix_for(setting, path)[0].upper()}"
            f"{fix_for(setting, path)[1:]}. Nothing is stored until then; the engine tries again "
            f"when the setting changes, or in {wait} s."
        )
        return self.error

    def opened(self) -> None:
        """The database is open. The exact token counter starts building now, on a background thread
        (tokens.preload), while the host finishes starting and the user types: the first turn then
        finds it ready. Not earlier: its build holds the GIL, and opening the database would wait."""
        self.error, self.refused, self._backoff = None, False, BACKOFF_FIRST_SECONDS
        tokens.preload()

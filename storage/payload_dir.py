"""Where a database's payload files live: ``lcm-payloads`` beside a SQLite file, or one directory
per PostgreSQL database under the Hermes home (whose payload bytes live in the database itself).

The data layer owns this so the engine, the maintenance verbs and the viewer agree on one place
without importing each other."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import TYPE_CHECKING, cast

from ..payloads import Blobs
from ..startup import local_home
from .pg import is_url, redacted

if TYPE_CHECKING:
    from ..store import Store


def directory_of(db_path: str | os.PathLike[str]) -> Path:
    """Where the payload guard and the large-output step keep files: ``lcm-payloads`` beside the
    database; for a PostgreSQL URL, under the Hermes home, one directory per database."""
    if is_url(db_path):
        return local_home() / "lcm-payloads" / f"pg-{database_tag(str(db_path))}"
    return Path(db_path).parent / "lcm-payloads"


def blobs_of(store: Store) -> Blobs | None:
    """Where a store's payload bytes live other than files: a PostgreSQL store itself (hosts
    sharing it share no directory); None for SQLite, whose payloads are files beside it."""
    return cast(Blobs, store) if is_url(store.path) else None


def database_tag(url: str) -> str:
    """A short stable name for one PostgreSQL database (its URL without the password)."""
    return hashlib.sha256(redacted(url).encode()).hexdigest()[:12]

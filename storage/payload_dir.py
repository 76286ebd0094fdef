"""Where a database's payload files live and the key their refs are made with: ``lcm-payloads``
beside a SQLite file, or one directory
per PostgreSQL database under the Hermes home (whose payload bytes live in the database itself).

The data layer owns this so the engine, the maintenance verbs and the viewer agree on one place
without importing each other."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import TYPE_CHECKING, cast

from ..base.startup import local_home
from .errors import StoreError, StoreFault
from .pg import is_url, redacted

if TYPE_CHECKING:
    from ..base.payloads import Blobs
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
    return cast("Blobs", store) if is_url(store.path) else None


def database_tag(url: str) -> str:
    """A short stable name for one PostgreSQL database (its URL without the password)."""
    return hashlib.sha256(redacted(url).encode()).hexdigest()[:12]


def ref_key(store: Store) -> bytes:
    """The database's ref key. A read-only view that cannot create it gets a throwaway key: it
    writes no file and no row, so what it computes (a dry run's stub sizes) names nothing."""
    from ..base.payloads import REF_SECRET  # lazily: the payload guard's imports are not cheap

    try:
        return store.secret(REF_SECRET)
    except (StoreError, StoreFault):
        return os.urandom(32)

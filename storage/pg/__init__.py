"""The PostgreSQL backend (``LCM_DATABASE_URL=postgresql://...``): the same store, for a fleet.

Optional: it needs the ``postgres`` extra (psycopg 3 and psycopg_pool), imported only when a
URL selects it, so the SQLite install never loads a driver.
"""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit


def is_url(target: object) -> bool:
    """Whether ``target`` names a PostgreSQL database rather than a SQLite file."""
    return isinstance(target, str) and target.startswith(("postgresql://", "postgres://"))


def redacted(url: str) -> str:
    """The URL with its password removed: what status, doctor and logs may show."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    user = f"{parts.username}@" if parts.username else ""
    port = f":{parts.port}" if parts.port else ""
    return urlunsplit((parts.scheme, f"{user}{host}{port}", parts.path, parts.query, parts.fragment))

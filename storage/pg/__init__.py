"""The PostgreSQL backend (``LCM_DATABASE_URL=postgresql://...``): the same store, for a fleet.

Optional: it needs the ``postgres`` extra (psycopg 3 and psycopg_pool), imported only when a
URL selects it, so the SQLite install never loads a driver.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit


def is_url(target: object) -> bool:
    """Whether ``target`` names a PostgreSQL database rather than a SQLite file."""
    return isinstance(target, str) and target.startswith(("postgresql://", "postgres://"))


_SECRET_PARAMETERS = ("password", "sslpassword")
_KEYWORD_SECRET = re.compile(r"(?i)\b(password|sslpassword)\s*=\s*('(?:[^'\\]|\\.)*'|\S+)")


def redacted(url: str) -> str:
    """The URL with every password removed (what status, doctor and logs may show), in each form
    libpq accepts: the userinfo (an empty user too: ``postgresql://:pw@host``), a ``password=``
    or ``sslpassword=`` query parameter, and a keyword/value string (``host=x password=y``).
    Never parses a port or a percent-escape, so a malformed URL is masked all the same."""
    if "://" not in url:
        return _KEYWORD_SECRET.sub(lambda m: f"{m.group(1)}=***", url)
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, hostport = netloc.rsplit("@", 1)
        user = userinfo.split(":", 1)[0]
        netloc = f"{user}@{hostport}" if user else hostport
    query = "&".join(f"{p.split('=', 1)[0]}=***" if p.split("=", 1)[0].lower() in _SECRET_PARAMETERS else p
                     for p in parts.query.split("&")) if parts.query else parts.query
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))

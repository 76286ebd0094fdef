"""The PostgreSQL backend (``LCM_DATABASE_URL=postgresql://...``): the same store, for a fleet.

Optional: it needs the ``postgres`` extra (psycopg 3 and psycopg_pool), imported only when a
URL selects it, so the SQLite install never loads a driver.
"""

from __future__ import annotations

import re
from urllib.parse import unquote


def is_url(target: object) -> bool:
    """Whether ``target`` names a PostgreSQL database rather than a SQLite file."""
    return isinstance(target, str) and target.startswith(("postgresql://", "postgres://"))


SECRET_PARAMETERS = ("password", "sslpassword")
# A keyword/value string's secret: quoted (an unterminated quote runs to the end) or up to a blank.
KEYWORD_SECRET = re.compile(r"(?i)\b(password|sslpassword)\s*=\s*('(?:[^'\\]|\\.)*(?:'|$)|\S+)")


def userinfo_ends(rest: str) -> tuple[int, int]:
    """Where the userinfo of a URL's part after ``://`` ends (its ``@``; -1: none), by two readings:
    libpq's (the first ``@`` before any ``/``, so a ``?`` or ``#`` typed into a password stays in it)
    and a generous one (the last ``@`` before the query, so a ``/`` or ``@`` typed into a password
    counts too, although libpq cannot connect with it)."""
    slash = rest.find("/")
    libpq = rest.find("@", 0, slash if slash >= 0 else len(rest))
    query = rest.find("?")
    generous = rest.rfind("@", 0, query if query >= 0 else len(rest))
    if generous > libpq and ":" not in rest[:generous]:
        generous = -1  # no password before that @: an @ in the database's name, not userinfo
    return libpq, generous


def userinfo_end(rest: str) -> int:
    """The wider of :func:`userinfo_ends`: what is masked."""
    return max(userinfo_ends(rest))


def redacted(url: str, drop: bool = False) -> str:
    """The URL with every password removed (what status, doctor and logs may show), in each form
    libpq accepts: the userinfo (an empty user too: ``postgresql://:pw@host``), a ``password=``
    or ``sslpassword=`` query parameter (its name percent-encoded too: libpq decodes names), and a
    keyword/value string (``host=x password=y``). Never parses a port or a percent-escape, so a
    malformed URL is masked all the same. ``drop``: leave the secret parameters out instead of
    showing ``password=***`` (a command an operator copies must not carry a fake password)."""
    if "://" not in url:
        return KEYWORD_SECRET.sub("", url).strip() if drop else KEYWORD_SECRET.sub(r"\1=***", url)
    scheme, rest = url.split("://", 1)
    at = userinfo_end(rest)
    if at >= 0:
        user = rest[:at].split(":", 1)[0]
        rest = f"{user}@{rest[at + 1 :]}" if user else rest[at + 1 :]
    if "?" not in rest:
        return f"{scheme}://{rest}"
    base, query = rest.split("?", 1)  # libpq reads no fragment: a '#' belongs to the value it is in
    kept = []
    for param in query.split("&"):
        name = param.split("=", 1)[0]
        if unquote(name).strip().lower() not in SECRET_PARAMETERS:
            kept.append(param)
        elif not drop:
            kept.append(f"{name}=***")
    return f"{scheme}://{base}?{'&'.join(kept)}" if kept else f"{scheme}://{base}"

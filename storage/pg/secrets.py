"""A database URL's passwords kept out of every text this process emits: log records (ours and the
driver's), exception messages, the ``lcm`` CLI's errors.

:func:`redacted <hermes_lcm.storage.pg.redacted>` masks a password where a URL is printed whole.
That is not enough: libpq quotes the offending *token* of a URL it cannot parse (``invalid
percent-encoded token: "pw%zz..."``), and psycopg_pool logs that message at WARNING on every retry,
so the password reaches the host's log without any URL around it. So each URL a store opens is
:func:`remember`-ed: its password values (as written and percent-decoded) are masked wherever they
appear, by :func:`scrub` and by a filter on psycopg's and psycopg_pool's loggers
(:func:`guard_loggers`). Needs no driver: the SQLite install imports it for nothing.
"""

from __future__ import annotations

import re
import threading
from urllib.parse import unquote

from ...base.redact import RedactingFilter, guard_logger
from ...base.redact import remember as remember_key
from . import KEYWORD_SECRET, SECRET_PARAMETERS, is_url, redacted, userinfo_end, userinfo_ends

MASK = "***"
# Shorter values are masked only where libpq quotes them ("..."): anywhere, they would eat plain words.
MIN_ANYWHERE = 4
# The loggers psycopg 3 and psycopg_pool write to (a logger's filter does not see its children's
# records, so each one gets it), and ours (the engine logs a store's failure through it).
LOGGERS = (
    "psycopg",
    "psycopg.pool",
    "psycopg.pq",
    "psycopg_pool.sched",
    "psycopg_pool.sched_async",
    "hermes_lcm",
)
# In free text: a URL (redacted whole), or else a keyword's value (up to a blank or a quote).
_IN_TEXT = re.compile(
    r"(?P<url>postgres(?:ql)?://[^\s'\"<>]*)"
    r"|(?i:\b(?P<key>password|sslpassword)\s*=\s*(?P<value>'(?:[^'\\]|\\.)*(?:'|$)|[^\s'\"]+))"
)

_lock = threading.Lock()
_known: set[str] = set()


def secret_values(url: str) -> set[str]:
    """Every string that is, or may be, a password of ``url``: the userinfo's (by libpq's reading
    and the generous one), each ``password``/``sslpassword`` parameter's, a keyword/value string's;
    each as written and percent-decoded (libpq quotes the former, a driver may echo the latter)."""
    found: set[str] = set()
    if "://" in url:
        rest = url.split("://", 1)[1]
        at = userinfo_end(rest)
        for end in userinfo_ends(rest):
            if end > 0 and ":" in rest[:end]:
                found.add(rest[:end].split(":", 1)[1])
        query = rest[at + 1 :].split("?", 1)[1] if "?" in rest[at + 1 :] else ""
        for param in query.split("&"):
            name, _, value = param.partition("=")
            if unquote(name).strip().lower() in SECRET_PARAMETERS:
                found.add(value)
    else:
        for match in KEYWORD_SECRET.finditer(url):
            value = match.group(2)
            found.add(value)
            if value.startswith("'"):
                found.add(re.sub(r"\\(.)", r"\1", value.strip("'")))
    found |= {unquote(v) for v in found}
    return {v for v in found if v}


def remember(url: str) -> None:
    """From now on, ``url``'s passwords are masked by :func:`scrub` and in every redacted text
    (``redact.remember``: status, tool answers, our loggers' records)."""
    values = secret_values(url)
    with _lock:
        _known.update(values)
    remember_key(*values)


def scrub(text: str) -> str:
    """``text`` with every database URL in it :func:`redacted`, every ``password=``/``sslpassword=``
    value masked, and every remembered password masked (bare, or quoted as libpq quotes tokens)."""
    if not isinstance(text, str) or not text:
        return text
    text = _IN_TEXT.sub(_masked, text)
    with _lock:
        known = sorted(_known, key=len, reverse=True)  # a password containing another masks whole
    for value in known:
        text = (
            text.replace(value, MASK)
            if len(value) >= MIN_ANYWHERE
            else text.replace(f'"{value}"', f'"{MASK}"').replace(f"'{value}'", f"'{MASK}'")
        )
    return text


def split_secrets(url: str) -> tuple[str, dict[str, str]]:
    """``url`` as a keyword/value connection string with every parameter but its passwords, and those
    (``{"password": ..., "sslpassword": ...}``, decoded): what a client program gets on its command
    line (``ps`` shows it to every user) and what it must get another way. Read by libpq itself
    (psycopg's ``conninfo_to_dict``), so every form it accepts splits the same. Needs the driver."""
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    remember(url)
    try:
        params = conninfo_to_dict(url)
    except Exception as exc:  # noqa: BLE001 - libpq's message quotes the token it could not parse
        raise ValueError(f"{shown(url)}: {scrub(str(exc))}") from None
    hidden = {
        name: str(params.pop(name)) for name in SECRET_PARAMETERS if params.get(name) is not None
    }
    return make_conninfo("", **params), hidden


def _masked(match: re.Match[str]) -> str:
    if match.group("url"):
        return redacted(match.group("url"))
    return match.group() if match.group("value") == MASK else f"{match.group('key')}={MASK}"


def shown(target: object) -> str:
    """A database as an error message may show it: a URL :func:`redacted`, anything else scrubbed
    (a keyword/value string given where a file was expected is not a URL, but holds its password)."""
    return redacted(str(target)) if is_url(target) else scrub(str(target))


# :func:`scrub` over a record's message, arguments, traceback and stack before any handler formats
# it: psycopg_pool logs libpq's connection errors, which may quote a URL's password.
_FILTER = RedactingFilter(scrub, "a database log line")


def guard_loggers() -> None:
    """Put the scrubbing filter (and ``redact``'s, for every other credential shape) on psycopg's,
    psycopg_pool's and our loggers; idempotent. Called when a store opens a URL."""
    for name in LOGGERS:
        logger = guard_logger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)

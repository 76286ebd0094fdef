"""One redaction for every text that leaves the engine: status, tool answers, logs, stored events.

Text from outside (a provider's error body, an exception's message) can carry a credential: an
endpoint that echoes the request puts ``Authorization: Bearer <key>`` into the error we keep. So
every exit runs :func:`redact`, which removes

* the configured keys themselves (exact matches of every key the engine was given: the summary
  provider's key, the host's key from ``update_model``, and credential-named environment variables),
  whatever shape the text gives them, and
* every kind of secret in the catalog (sensitive.py, the one list of credential shapes the stored
  history is redacted by too): ``Authorization:`` values, ``Bearer`` tokens, provider keys, JWTs,
  private keys, passwords in URLs and assignments, and values after key-like names
  (``api_key=...``, ``"api_key": "..."``, ``x-api-key: ...``).

Redact before cutting: a key cut in half no longer matches itself. :func:`clip` does both in order.
A logging filter (:func:`guard_logger`) applies the same to every record of our loggers, tracebacks
included, so a log line cannot leak what a status would hide.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from collections.abc import Callable, Iterable
from typing import Any

MASK = "[REDACTED]"
# Shorter "keys" (test stubs use "x") would mask ordinary text; no real credential is this short.
MIN_SECRET_CHARS = 8
_ENV_NAME = re.compile(r"(?i)(api[_-]?key|token|secret|password|passwd|credential)s?$")

_lock = threading.Lock()
_known: set[str] = set()
_known_pattern: re.Pattern[str] | None = None


def remember(*secrets: str | None) -> None:
    """Add keys the engine was given; from now on they are masked wherever they appear."""
    global _known_pattern
    fresh = {
        s.strip() for s in secrets if isinstance(s, str) and len(s.strip()) >= MIN_SECRET_CHARS
    }
    with _lock:
        if fresh - _known:
            _known.update(fresh)
            _known_pattern = None


def remember_env(env: Any) -> None:
    """Add the values of credential-named variables (``*_API_KEY``, ``*_TOKEN``, ...) of ``env``."""
    try:
        items = list(env.items())
    except Exception:  # noqa: BLE001 - an odd mapping must not stop the engine
        return
    remember(
        *(
            str(v)
            for k, v in items
            if isinstance(k, str) and _ENV_NAME.search(k) and isinstance(v, str)
        )
    )


def _known_secrets() -> re.Pattern[str] | None:
    global _known_pattern
    with _lock:
        if _known_pattern is None and _known:
            ordered = sorted(_known, key=len, reverse=True)  # a key containing another masks whole
            _known_pattern = re.compile("|".join(re.escape(s) for s in ordered))
        return _known_pattern


def redact(text: str, extra: Iterable[str | None] = ()) -> str:
    """``text`` without any known key or credential-shaped value. ``extra``: keys known only here."""
    if not isinstance(text, str) or not text:
        return text
    for secret in extra:
        if isinstance(secret, str) and len(secret) >= MIN_SECRET_CHARS:
            text = text.replace(secret, MASK)
    known = _known_secrets()
    if known is not None:
        text = known.sub(MASK, text)
    from .sensitive import mask  # lazily: its catalog costs a cold start ~15 ms (lcm status)

    return mask(text, MASK)


def clip(text: str, limit: int, extra: Iterable[str | None] = ()) -> str:
    """Redacted, then cut to ``limit`` characters (in this order: a cut key would not match)."""
    return redact(text, extra)[:limit]


def redact_value(value: Any) -> Any:
    """Every string inside a JSON-like value redacted (status dicts, tool answers)."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {k: redact_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_value(v) for v in value]
    return value


class RedactingFilter(logging.Filter):
    """Masks credentials in a record's message, arguments and traceback before any handler sees it.
    ``clean``: the masking (``redact`` here; the PostgreSQL store adds its own for URL passwords)."""

    def __init__(
        self, clean: Callable[[str], str] | None = None, withheld: str = "log line"
    ) -> None:
        super().__init__()
        self.clean = clean or redact
        self.withheld = f"hermes-lcm: ({withheld} withheld: could not be redacted)"

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            record.msg = self.clean(record.getMessage())
            record.args = None
            if record.exc_info and record.exc_info[1] is not None and not record.exc_text:
                record.exc_text = logging.Formatter().formatException(record.exc_info)
            if record.exc_text:
                record.exc_text = self.clean(record.exc_text)
            if record.stack_info:
                record.stack_info = self.clean(record.stack_info)
        except Exception:  # noqa: BLE001 - a log line must never fail the caller
            record.msg, record.args = self.withheld, None
        return True


_FILTER = RedactingFilter()


def guard_logger(name: str) -> logging.Logger:
    """``logging.getLogger(name)`` with the redacting filter (a logger's filters do not apply to
    records its children propagate, so each logger we log through gets it)."""
    logger = logging.getLogger(name)
    if _FILTER not in logger.filters:
        logger.addFilter(_FILTER)
    return logger


guard_logger("hermes_lcm")
remember_env(os.environ)

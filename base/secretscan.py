"""Secrets found by what a text says they are, not only by how they look.

The catalog (secretkinds.py) knows the shapes of provider keys and tokens. A password has no shape:
it is a secret because of the name it is assigned to. This module reads texts the way the formats
that carry credentials write them, and returns the spans of the values to replace:

* **Assignments by key name**, in every way configuration and code spell them: ``.env`` and shell
  (``DB_PASSWORD=...``, ``PGPASSWORD=... psql``, ``export TOKEN=...``), YAML and INI
  (``POSTGRES_PASSWORD: ...``, ``password = ...``), JSON at any depth and JSON inside strings,
  escaped once or more (``{\\"password\\": \\"...\\"}``), command-line flags (``--password VALUE``,
  ``--api-key=...``, ``-u user:pass``) and XML elements. A name is split into words in any case
  style (``DB_PASSWORD``, ``userPassword``, ``x-api-key``, ``PGPASSWORD``) and it names a secret
  when its last word does (:func:`secret_name`). Only the value is replaced: keys stay readable.
* **Structure**: in parsed JSON, ``{"name": "DB_PASSWORD", "value": "..."}`` pairs and argument
  lists such as ``["--password", "..."]`` (:func:`structured_values`).
* **Hidden characters**: a zero-width character or a look-alike letter inside a key name or a token
  (``pa\\u200bssword``, Cyrillic ``а``) does not hide it: the text is read through a
  :class:`Shadow` with those characters folded away, and spans are mapped back.
* **Base64**: a run of base64 that decodes to readable text is read again decoded
  (:func:`base64_runs`); when the decoded text holds a secret, the whole run is one.

Every scan is bounded: each regex is linear (bounded, possessive quantifiers that start at a
literal or an identifier's first character), values are at most :data:`MAX_VALUE` characters,
and base64 decoding stops after :data:`MAX_DECODED_CHARS` per text.
"""

from __future__ import annotations

import base64
import binascii
import functools
import itertools
import re
import unicodedata
from bisect import bisect_right
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

PASSWORD = "password_assignment"
KEY = "api_key"
PREFIX = "[lcm-redacted:"
MAX_VALUE = 512
# Lower-case substrings one of which a name assigned a secret holds: a text with none is skipped
# without running the assignment scan at all.
STEMS = ("pass", "pwd", "secret", "token", "key", "auth", "credential", "cookie", "-u", "user")
# The shortest bare value taken as a secret per family (a quoted one may be shorter): shorter
# values after ``token:`` are counts and words, not credentials.
MIN_BARE = {PASSWORD: 3, KEY: 8}

# From a stem to the assignment sign after the name it is part of; the name's start is found by
# walking back (at most MAX_NAME characters). Stdlib ``re``: these classes need no Unicode rules,
# and it scans them several times faster than ``regex``.
_STEM_TO_SIGN = re.compile(
    r"(?:[Pp][Aa][Ss][Ss]|[Pp][Ww][Dd]|[Ss][Ee][Cc][Rr][Ee][Tt]|[Tt][Oo][Kk][Ee][Nn]|[Kk][Ee][Yy]|[Aa][Uu][Tt][Hh]"
    r"|[Cc][Rr][Ee][Dd][Ee][Nn][Tt][Ii][Aa][Ll]|[Cc][Oo][Oo][Kk][Ii][Ee]|--user|--proxy-user|-u)"
    r"[A-Za-z0-9_.\-]{0,48}+(?P<close>\\{0,7}[\"'])?"
    r"(?P<op>[ \t]{0,8}(?:=>|:=|[:=])[ \t]{0,8}|[ \t]{1,8}|>)"
)
_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")
MAX_NAME = 64
_SPLIT = re.compile(r"[_\-.\s]+|(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_CODE_VALUE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)([(\[].*)?,?$")
_TYPE_NAMES = frozenset(
    {"str", "string", "int", "bool", "bytes", "Optional", "None", "Any", "SecretStr", "String"}
)
_VARIABLE = re.compile(r"\$[A-Za-z_][A-Za-z0-9_]*")
_QUOTE = re.compile(r"(\\{0,7})([\"'])")
_LINE_START = re.compile(
    r"(?:^|\n|\r|\\n|\\r)[ \t]*(?:(?:export|set|ENV|ARG|-)[ \t]+)?\\{0,7}[\"']?$"
)
# Where a bare value ends: white space, quotes, separators, closing brackets, an escape sequence.
_BARE_END = re.compile(r"""[\s'"`,;&})\]<>]|\\[nrt"'\\/u]""")
_EOL = re.compile(r"\n|\r|\\n|\\r|[ \t]+#")
_NOT_VALUES = frozenset(
    {
        "null",
        "none",
        "nil",
        "true",
        "false",
        "undefined",
        "required",
        "optional",
        "string",
        "str",
        "redacted",
        "[redacted]",
        "<redacted>",
    }
)

_PASSWORD_WORDS = frozenset({"pass", "pwd", "passcode", "passwd", "password", "passphrase"})
_KEY_WORDS = frozenset({"auth", "authorization", "credential", "credentials", "cookie", "apikey"})
# ``<qualifier>_key`` names a secret; ``primary_key``, ``sort_key`` or ``cache_key`` do not.
_KEY_QUALIFIERS = frozenset(
    {
        "api",
        "secret",
        "private",
        "access",
        "encryption",
        "signing",
        "master",
        "client",
        "auth",
        "license",
        "ssh",
        "service",
        "app",
        "admin",
        "account",
        "subscription",
        "shared",
        "hmac",
        "webhook",
        "deploy",
        "consumer",
        "crypt",
    }
)
# ``<word>_token`` that counts or marks text rather than grants access.
_NOT_TOKENS = frozenset(
    {
        "max",
        "min",
        "num",
        "total",
        "input",
        "output",
        "prompt",
        "completion",
        "eos",
        "bos",
        "pad",
        "unk",
        "sep",
        "cls",
        "mask",
        "special",
        "start",
        "end",
        "stop",
        "next",
        "page",
        "continuation",
        "cancel",
        "cancellation",
        "count",
        "sync",
        "resume",
        "cursor",
        "last",
        "first",
        "image",
        "reasoning",
        "cached",
        "cache",
        "new",
        "per",
    }
)
_TOKEN_PREFIXES = frozenset(
    {
        "auth",
        "access",
        "refresh",
        "api",
        "bearer",
        "csrf",
        "xsrf",
        "session",
        "id",
        "github",
        "gh",
        "gitlab",
        "slack",
        "bot",
        "oauth",
        "private",
        "personal",
        "service",
        "secret",
    }
)
_USER_FLAGS = frozenset({"u", "user", "proxy-user"})
# Names that are also plain words ("Tests pass: all 42"): alone, they count only when written as
# code writes a key (a flag, a quoted key, ``=``), not as prose writes a heading.
_PLAIN_WORDS = frozenset({"pass", "auth", "credential", "credentials"})


@functools.lru_cache(maxsize=4096)
def _words(name: str) -> tuple[str, ...]:
    """A key name's words in lower case, in any case style (``DB_PASSWORD``, ``userPassword``)."""
    return tuple(w.lower() for w in _SPLIT.split(name.strip("-_.")) if w)


@functools.lru_cache(maxsize=4096)
def secret_name(name: str) -> str | None:
    """The family (:data:`PASSWORD` or :data:`KEY`) of a value assigned to ``name``, or None.

    The name is split into words in any case style; its last word decides, because a qualifier
    in front narrows (``db_password``) while a word behind changes the meaning
    (``password_length``, ``token_count``)."""
    words = _words(name)
    if not words:
        return None
    last, before = words[-1], (words[-2] if len(words) > 1 else "")
    if before == "per":
        return None  # ``builds_per_pass``, ``ms_per_token``: a rate
    if last in _PASSWORD_WORDS or last.endswith(("password", "passwd", "passphrase")):
        return PASSWORD
    if last in _KEY_WORDS or last.endswith("secret"):
        return KEY
    if last == "token":
        return None if before in _NOT_TOKENS else KEY
    if last.endswith("token"):  # one word: authtoken, GITHUBTOKEN (not tiktoken, a package)
        return KEY if last[:-5] in _TOKEN_PREFIXES or name.isupper() else None
    if last == "key":
        return KEY if before in _KEY_QUALIFIERS else None
    if last.endswith("key") and any(last.endswith(q + "key") for q in _KEY_QUALIFIERS):
        return KEY  # one word written without separators: APIKEY, XAPIKEY, secretkey
    if last.endswith("pass") and name.isupper():
        return PASSWORD  # an environment variable: SMTPPASS, DBPASS
    return None


def secret_number(name: str) -> bool:
    """Is a number assigned to ``name`` a secret (a PIN or a numeric password)? Only under a
    password's own name: ``builds_per_pass: 3`` or ``auth: 1`` are settings."""
    words = _words(name)
    return bool(words) and secret_name(name) == PASSWORD and words[-1] != "pass"


def is_reference(value: str) -> bool:
    """A value that points at a secret instead of holding one (``${DB_PASSWORD}``, ``$TOKEN``,
    ``{{ secret }}``, ``<your key>``, ``null``, ``****``): nothing to hide, and worth keeping."""
    low = value.lower()
    if low in _NOT_VALUES or low.startswith((PREFIX, "[redacted", "${", "{{", "%(", "<")):
        return True
    if value.startswith("$") and _VARIABLE.fullmatch(value):
        return True
    return len(set(value)) == 1 and value[0] in "*xX.#-"


def _quoted_end(text: str, start: int, slashes: int, quote: str) -> int:
    """The end of a value quoted with ``slashes`` backslashes before ``quote``: the next such quote
    preceded by exactly as many backslashes (more belong to a deeper level of escaping). Unclosed
    within :data:`MAX_VALUE` characters: the value runs to the end of its line or that limit."""
    stop = min(len(text), start + MAX_VALUE)
    i = start
    while i < stop:
        j = text.find(quote, i, stop)
        if j < 0:
            break
        k = j
        while k > start and text[k - 1] == "\\":
            k -= 1
        if j - k == slashes:
            return k
        i = j + 1
    newline = text.find("\n", start, stop)
    return newline if newline >= 0 else stop


def _bare_end(text: str, start: int, to_line_end: bool) -> int:
    stop = min(len(text), start + MAX_VALUE)
    found = (_EOL if to_line_end else _BARE_END).search(text, start, stop)
    end = found.start() if found else stop
    while to_line_end and end > start and text[end - 1] in " \t":
        end -= 1
    return end


def assignments(text: str, lowered: str, families: frozenset[str]) -> list[tuple[int, int, str]]:
    """Spans ``(start, end, family)`` of values assigned to a secret's name in ``text``
    (``lowered``: the same text in lower case, for the pre-check). A candidate inside a value
    already taken is passed over, so each character is read a bounded number of times."""
    if not families or not any(stem in lowered for stem in STEMS):
        return []
    spans: list[tuple[int, int, str]] = []
    taken = 0
    for found in _STEM_TO_SIGN.finditer(text):
        if found.start() < taken:
            continue
        start = found.start()
        floor = max(taken, start - MAX_NAME)
        while start > floor and text[start - 1] in _NAME_CHARS:
            start -= 1
        if start == floor and floor > taken and text[start - 1] in _NAME_CHARS:
            continue  # a name longer than any key's: part of a blob
        span = _value_span(text, start, found, families)
        if span is not None:
            spans.append(span)
            taken = span[1]
    return spans


def _value_span(
    text: str, start: int, found: re.Match[str], families: frozenset[str]
) -> tuple[int, int, str] | None:
    """The value assigned to the name at ``text[start:]`` that ``found`` runs to the sign of."""
    close, op = found.group("close") or "", found.group("op")
    ident = text[start : found.end() - len(op) - len(close)]
    name = ident.lstrip("-")
    flag = ident[: len(ident) - len(name)]
    sign = op.strip()
    if not name[:1].isalpha() or len(flag) > 2:
        return None
    if not sign and not flag:
        return None  # "password reset": a word, not an assignment
    if flag and name.lower() in _USER_FLAGS:
        return _user_flag(text, found.end()) if PASSWORD in families and sign in ("", "=") else None
    family = secret_name(name)
    if family is None or family not in families:
        return None
    if sign == ":" and not flag and not close and name.lower() in _PLAIN_WORDS:
        return None
    opened = start - (1 if start and text[start - 1] in "\"'" else 0)
    if sign == ">" and not (start and text[start - 1] == "<"):
        return None
    value_at = found.end()
    if sign == ">":
        end = text.find("<", value_at, value_at + MAX_VALUE)
        end = end if end >= 0 else min(len(text), value_at + MAX_VALUE)
        return _checked(text, value_at, end, family, quoted=True, name=name)
    quote = _QUOTE.match(text, value_at)
    if quote is not None:
        inner = quote.end()
        end = _quoted_end(text, inner, len(quote.group(1)), quote.group(2))
        return _checked(text, inner, end, family, quoted=True, name=name)
    if value_at < len(text) and text[value_at] in "{[(":
        return None  # a structure: its own keys say which of its values are secret
    if flag and not sign and value_at < len(text) and text[value_at] == "-":
        return None  # ``--no-password -h db``: the next word is another flag
    line_start = not flag and bool(_LINE_START.search(text, max(0, opened - 48), opened))
    to_line_end = line_start and (":" in sign or op != sign)
    return _checked(
        text,
        value_at,
        _bare_end(text, value_at, to_line_end),
        family,
        quoted=False,
        name=name,
        keyed=bool(close),
    )


def _code(value: str, name: str, keyed: bool) -> bool:
    """Is this unquoted value source code rather than a secret: a call or a subscript
    (``getattr(agent, "api_key")``, ``Optional[str] = None``), an attribute path
    (``self.api_key``), the name passed on (``api_key=api_key``), or an identifier after a quoted
    key (``"api_key": api_key,``: JSON has no bare words, Python and JavaScript do)."""
    found = _CODE_VALUE.match(value)
    if found is None:
        return False
    word = found.group(1)
    return bool(found.group(2)) or "." in word or word == name or keyed or word in _TYPE_NAMES


def _checked(
    text: str, start: int, end: int, family: str, *, quoted: bool, name: str, keyed: bool = False
) -> tuple[int, int, str] | None:
    value = text[start:end]
    if not value or (not quoted and len(value) < MIN_BARE[family]) or is_reference(value):
        return None
    if not quoted and _code(value, name, keyed):
        return None
    if name.lower() in ("pwd", "oldpwd") and value[:1] in "/~":
        return None  # the shell's working directory, not a password
    return start, end, family


def _user_flag(text: str, start: int) -> tuple[int, int, str] | None:
    """``-u user:password`` (curl, and tools like it): the part after the first colon."""
    end = _bare_end(text, start, False)
    colon = text.find(":", start, end)
    if colon < 0 or colon + 1 >= end or is_reference(text[colon + 1 : end]):
        return None
    return colon + 1, end, PASSWORD


# --- hidden characters -----------------------------------------------------------------------

_HIDDEN_CHARS = (
    "\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180e\u200b\u200c\u200d\u200e\u200f"
    "\u202a\u202b\u202c\u202d\u202e\u2060\u2061\u2062\u2063\u2064\u2066\u2067\u2068\u2069\ufeff"
)
_HIDDEN = re.compile("[" + _HIDDEN_CHARS + "]")
# Look-alikes that are not compatibility characters (NFKC keeps them): Cyrillic and Greek letters
# drawn like Latin ones.
_LOOKALIKES = dict(
    zip(
        "аеорсуххіјѕԁһԛԝкАВЕКМНОРСТХУІЈЅαοιρνκτυχΑΒΕΖΗΙΚΜΝΟΡΤΥΧ",
        "aeopcyxxijsdhqwkABEKMHOPCTXYIJSaoipvktuxABEZHIKMNOPTYX",
        strict=True,
    )
)


@functools.cache
def _fold_table() -> dict[int, str]:
    """One character to one ASCII character (so positions do not move): the look-alikes, and every
    compatibility form NFKC turns into a single ASCII letter or digit (fullwidth, mathematical
    alphanumerics, circled letters)."""
    table = {ord(k): v for k, v in _LOOKALIKES.items()}
    for start, end in ((0xFF01, 0xFF5F), (0x1D400, 0x1D800), (0x2460, 0x24EA), (0x2070, 0x20A0)):
        for point in range(start, end):
            folded = unicodedata.normalize("NFKC", chr(point))
            if len(folded) == 1 and folded.isascii() and folded.isprintable():
                table[point] = folded
    return table


@functools.cache
def _foldable() -> re.Pattern[str]:
    return re.compile("[" + "".join(re.escape(chr(p)) for p in sorted(_fold_table())) + "]")


@dataclass(frozen=True)
class Shadow:
    """``text`` with hidden characters removed and look-alikes folded to ASCII; ``removed`` holds
    the original positions of what was removed, to map a span back (:meth:`original`)."""

    text: str
    removed: tuple[int, ...]

    @classmethod
    def of(cls, text: str) -> Shadow | None:
        """The shadow of ``text``, or None when it has nothing to fold (every ASCII text)."""
        if text.isascii():
            return None
        hidden = _HIDDEN.search(text) is not None
        foldable = _foldable().search(text) is not None
        if not hidden and not foldable:
            return None
        folded = text.translate(_fold_table()) if foldable else text
        if not hidden:
            return cls(folded, ())
        removed = tuple(m.start() for m in _HIDDEN.finditer(folded))
        return cls(_HIDDEN.sub("", folded), removed)

    def _position(self, index: int) -> int:
        """The original position of shadow position ``index``: every removed character at or
        before it shifts it right."""
        position = index
        while True:
            shifted = index + bisect_right(self.removed, position)
            if shifted == position:
                return position
            position = shifted

    def original(self, start: int, end: int) -> tuple[int, int]:
        """The span of the original text that shadow span ``[start, end)`` came from."""
        return self._position(start), self._position(end - 1) + 1


# --- base64 ----------------------------------------------------------------------------------

_BASE64_RUN = re.compile(r"(?<![A-Za-z0-9+/=_-])[A-Za-z0-9+/_-]{16,8192}={0,2}(?![A-Za-z0-9+/=_-])")
MAX_DECODED_CHARS = 65_536
MIN_READABLE = 0.95


def base64_runs(text: str) -> Iterator[tuple[int, int, str]]:
    """``(start, end, decoded)`` of each run of base64 in ``text`` that decodes to readable text
    (at least :data:`MIN_READABLE` of it printable): an encoded credential (``echo c2stcH... |
    base64 -d``, a docker ``auth`` field) is looked for in its decoded form too. Hex digests, paths
    and ids decode to noise and are passed over."""
    budget = MAX_DECODED_CHARS
    for found in _BASE64_RUN.finditer(text):
        run = found.group(0)
        body = run.rstrip("=")
        if len(body) % 4 == 1 or (
            body.isalnum() and (body.isdigit() or all(c in "0123456789abcdefABCDEF" for c in body))
        ):
            continue
        try:
            raw = base64.b64decode(
                body + "=" * (-len(body) % 4),
                altchars=b"-_" if "-" in body or "_" in body else None,
                validate=True,
            )
            decoded = raw.decode("utf-8")
        except (binascii.Error, ValueError):
            continue
        if not decoded or sum(
            ch.isprintable() or ch in "\n\t\r" for ch in decoded
        ) < MIN_READABLE * len(decoded):
            continue
        budget -= len(decoded)
        if budget < 0:
            return
        yield found.start(), found.end(), decoded


# --- structure -------------------------------------------------------------------------------

_NAME_FIELDS = ("name", "key", "Name", "Key", "variable", "env", "id", "parameter", "ParameterKey")
_VALUE_FIELDS = ("value", "Value", "secret", "ParameterValue", "default")


def structured_values(
    value: Any, families: frozenset[str], depth: int = 0
) -> Iterator[tuple[str, str]]:
    """``(secret, family)`` for values whose secrecy only the structure shows: the value of a
    ``{"name": "DB_PASSWORD", "value": ...}`` pair, and the item after a flag in an argument list
    (``["psql", "--password", "..."]``)."""
    if depth > 64:
        return
    if isinstance(value, dict):
        for name_field in _NAME_FIELDS:
            named = value.get(name_field)
            family = secret_name(named) if isinstance(named, str) and len(named) <= 128 else None
            if family is not None and family in families:
                for value_field in _VALUE_FIELDS:
                    secret = value.get(value_field)
                    if isinstance(secret, str) and secret and not is_reference(secret):
                        yield secret, family
        for item in value.values():
            yield from structured_values(item, families, depth + 1)
    elif isinstance(value, list):
        for before, item in itertools.pairwise(value):
            if (
                isinstance(before, str)
                and isinstance(item, str)
                and before.startswith("-")
                and "=" not in before
                and len(before) <= 64
                and item
                and not item.startswith("-")
                and not is_reference(item)
            ):
                family = secret_name(before.lstrip("-"))
                if family is not None and family in families:
                    yield item, family
        for item in value:
            yield from structured_values(item, families, depth + 1)

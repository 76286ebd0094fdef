"""The redactor that replaces secrets before anything is written, and the policy that picks its kinds.

With ``LCM_SENSITIVE_PATTERNS_ENABLED`` on, every text on its way into the store (a message's
content and tool-call arguments, its other fields, a large output's payload file, a summary and
the summarizer's input, an imported row) passes :meth:`Redactor.redact` first. A secret becomes a
placeholder that names its kind and, except for passwords, a short keyed digest of its value::

    api_key=[lcm-redacted:api_key #3f2a9c1b]     password=[lcm-redacted:password]

Equal secrets get equal digests within one database (the key is the database's own, in ``meta``),
so "the same token again" stays visible; a password gets none, because a short digest of a
low-entropy value can be checked against a dictionary. Redaction is not reversible: that is its point.

Secrets are found as spans of the text as it came (secretfinder.py): the catalog's patterns
(secretkinds.py) find shapes, secretscan.py finds values by the name they are assigned to in any
format, by a JSON text's structure, through hidden characters and inside base64; overlapping spans
merge into one placeholder. Nothing one reader replaced first can hide what another would find.

Guarantees:

* The redactor is a fixed point: redacting its output changes nothing (the prompt we rebuild from
  stored rows is identified again by its fingerprint, see ingest.Step).
* Each pattern runs with a timeout that grows with the text (``regex``). A text on which a pattern
  times out is not stored as it is: it is withheld whole (``[lcm-redacted:unscanned ...]``) and
  counted, because a secret we could not look for may be in it.
* A cheap pre-check skips a pattern whose tell-tale substring is absent, so a message with no
  secret costs about one lower-casing of its text.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import regex

from . import secretscan
from .patterns import split_entries
from .secretfinder import Finder, Found, Unscanned
from .secretkinds import BY_NAME, CATALOG, GROUPS, PASSWORD_KIND, TIMEOUT_BASE_S, Kind, compiled

PREFIX = "[lcm-redacted:"
_DATA_URI = regex.compile(
    r"data:[\w.+-]{1,100}/[\w.+-]{1,100}(?:;[\w-]{1,100}=[\w.-]{1,100}){0,8};base64,"
    r"[A-Za-z0-9+/=_-]+"
)
UNSCANNED = PREFIX + "unscanned"
DIGEST_HEX = 8
# No catalog kind matches a shorter text ("pwd=abc" is the shortest); call ids, types and names
# are skipped without a look. A user pattern may match less, so it lowers the bound (Policy).
MIN_TEXT_CHARS = 7
# How many times a redacted text is read again for what its placeholders' edges let match.
MAX_ROUNDS = 4
# Past this depth a JSON value's strings are redacted as texts, without their keys' light.
MAX_JSON_DEPTH = 64
# A token split over two neighbouring strings is looked for when both together are at most this long.
MAX_SPLIT_CHARS = 1024


@dataclass(frozen=True)
class Policy:
    """Which kinds run: catalog kinds chosen by name or group (``all`` for every one) and user
    patterns (``name=regex``); ``problems`` names each entry that could not be used."""

    kinds: tuple[Kind, ...]
    problems: tuple[str, ...] = ()

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(kind.name for kind in self.kinds)

    @classmethod
    def parse(cls, text: str) -> Policy:
        chosen: dict[str, Kind] = {}
        problems: list[str] = []
        for entry in split_entries(text):
            name, sep, source = entry.partition("=")
            name = name.strip()
            if sep:
                kind = _user_kind(name, source.strip(), problems)
                if kind is not None:
                    chosen[kind.name] = kind
            elif name.lower() == "all":
                chosen.update((k.name, k) for k in CATALOG)
            elif name in GROUPS or name in BY_NAME:
                chosen.update(
                    (n, BY_NAME[n])
                    for n in (*GROUPS.get(name, ()), *(() if name in GROUPS else (name,)))
                )
            else:
                problems.append(
                    f"LCM_SENSITIVE_PATTERNS: {name!r} is not a known kind or group (known: all, "
                    f"{', '.join(sorted({*GROUPS, *BY_NAME}))}); ignored"
                )
        order = {kind.name: i for i, kind in enumerate(CATALOG)}
        kinds = sorted(
            chosen.values(), key=lambda k: (order.get(k.name, -1), k.name)
        )  # user patterns first
        if not kinds:
            problems.append("LCM_SENSITIVE_PATTERNS selects no pattern; using all")
            kinds = list(CATALOG)
        return cls(tuple(kinds), tuple(problems))


def _user_kind(name: str, source: str, problems: list[str]) -> Kind | None:
    if (
        not regex.fullmatch(r"[A-Za-z][A-Za-z0-9_]{0,39}", name)
        or name in BY_NAME
        or name in GROUPS
    ):
        problems.append(
            f"LCM_SENSITIVE_PATTERNS: user pattern name {name!r} must be a new word "
            "(letters, digits, _); ignored"
        )
        return None
    try:
        pattern = compiled(source)
    except regex.error as exc:
        problems.append(
            f"LCM_SENSITIVE_PATTERNS: pattern {name}={source!r} is invalid ({exc}); ignored"
        )
        return None
    if pattern.search("", timeout=TIMEOUT_BASE_S) is not None:  # (also: it compiles and runs)
        problems.append(f"LCM_SENSITIVE_PATTERNS: pattern {name} matches the empty text; ignored")
        return None
    return Kind(name, ("user",), source)


@dataclass
class Tally:
    """What redaction did in this process (status shows it; no secret is kept)."""

    by_kind: Counter[str] = field(default_factory=Counter)
    unscanned: int = 0
    timeouts: Counter[str] = field(default_factory=Counter)


class Redactor:
    """Replaces every secret of its policy's kinds in a text (see the module docstring)."""

    def __init__(self, policy: Policy, key: bytes) -> None:
        self.policy = policy
        self._key = key
        self._finder = Finder(policy.kinds)
        self._min_chars = 1 if any(kind.user for kind in policy.kinds) else MIN_TEXT_CHARS
        # A pattern out of time withholds the whole text (False: that pattern's kind is skipped).
        self.strict = True
        self.tally = Tally()
        self._lock = threading.Lock()

    def placeholder(self, kind: Kind, secret: str) -> str:
        if not kind.digest:
            return f"{PREFIX}{kind.name}]"
        digest = hmac.new(
            self._key, secret.encode("utf-8", "surrogatepass"), hashlib.sha256
        ).hexdigest()
        return f"{PREFIX}{kind.name} #{digest[:DIGEST_HEX]}]"

    def redact(self, text: str) -> str:
        """``text`` with every secret replaced; withheld whole if a pattern timed out on it.
        Inline ``data:...;base64,`` payloads are left as they are: they hold no text a pattern
        should read, and a chance match inside one would corrupt the file it encodes."""
        if not isinstance(text, str) or len(text) < self._min_chars or text.startswith(UNSCANNED):
            return text
        if "base64," in text and _DATA_URI.search(text):
            return self._around_payloads(text)
        return self._redact(text)

    def _around_payloads(self, text: str) -> str:
        pieces: list[str] = []
        last = 0
        for found in _DATA_URI.finditer(text):
            pieces.extend((self._redact(text[last : found.start()]), found.group(0)))
            last = found.end()
        pieces.append(self._redact(text[last:]))
        if any(p.startswith(UNSCANNED) for p in pieces):
            return f"{UNSCANNED} {len(text)} chars: a pattern timed out on it]"
        return "".join(pieces)

    def _redact(self, text: str) -> str:
        if not text:
            return text
        original = text
        # A placeholder ends in ``]``, which can start a match that its secret's last characters
        # prevented (``...Qsk-://u:p@h``): the output is read again until nothing new is found, so
        # the redactor stays a fixed point.
        for _ in range(MAX_ROUNDS):
            try:
                found = self._finder.find(text, strict=self.strict)
            except Unscanned as out_of_time:
                with self._lock:
                    self.tally.unscanned += 1
                    self.tally.timeouts[out_of_time.kind] += 1
                return f"{UNSCANNED} {len(original)} chars: pattern {out_of_time.kind} timed out on it]"
            if not found:
                return text
            with self._lock:
                self.tally.by_kind.update(item.kind.name for item in found)
            text = _replaced(text, found, self._placeholder_in(text))
        return text

    def _placeholder_in(self, text: str) -> Callable[[Found], str]:
        """The placeholder of each secret found in ``text`` (its digest is of that text's span)."""
        return lambda item: self.placeholder(item.kind, text[item.start : item.end])

    def redact_value(self, value: Any) -> Any:
        """Every string inside a JSON-like value redacted (dict keys stay: they name fields);
        the very same object back when nothing changed."""
        if isinstance(value, str):
            return self.redact(value)
        if isinstance(value, list):
            items = [self.redact_value(v) for v in value]
            return value if all(a is b for a, b in zip(items, value, strict=True)) else items
        if isinstance(value, Mapping):
            pairs = {k: self.redact_value(v) for k, v in value.items()}
            return value if all(pairs[k] is v for k, v in value.items()) else pairs
        return value

    def redact_json_text(self, text: str) -> str:
        """A JSON text (a tool call's arguments) redacted so that it stays JSON: keys and strings
        are read as they are unescaped, a value in the light of its key (``"password": "..."``
        names what the value is), a key by its shape (a token used as a key), a value the
        structure marks (secretscan.structured_values), and a token split over two neighbouring
        strings; a text that is not a JSON object or array is redacted as text."""
        try:
            parsed = json.loads(text)
        except ValueError:
            return self.redact(text)
        if not isinstance(parsed, dict | list):
            return self.redact(text)
        marked = dict(secretscan.structured_values(parsed, self._finder.families))
        cleaned = self._json_value(parsed, None, marked, 0)
        return text if cleaned is parsed else json.dumps(cleaned, ensure_ascii=False)

    def _json_value(self, value: Any, key: str | None, marked: dict[str, str], depth: int) -> Any:
        if isinstance(value, str):
            family = marked.get(value) or (secretscan.secret_name(key) if key is not None else None)
            if (
                family is not None
                and family in self._finder.families
                and value
                and not secretscan.is_reference(value)
            ):
                with self._lock:
                    self.tally.by_kind[family] += 1
                return self.placeholder(BY_NAME[family], value)
            return self.redact(value)
        if isinstance(value, int | float) and not isinstance(value, bool) and key is not None:
            if PASSWORD_KIND in self._finder.families and secretscan.secret_number(key):
                return self.placeholder(BY_NAME[PASSWORD_KIND], str(value))
            return value
        if depth > MAX_JSON_DEPTH:
            return self.redact_value(value)
        if isinstance(value, list):
            items = self._split_secrets(
                value, [self._json_value(v, None, marked, depth + 1) for v in value]
            )
            return value if all(a is b for a, b in zip(items, value, strict=True)) else items
        if isinstance(value, dict):
            keys = list(value)
            names = [self.redact(k) if isinstance(k, str) else k for k in keys]
            items = self._split_secrets(
                [value[k] for k in keys],
                [self._json_value(value[k], str(k), marked, depth + 1) for k in keys],
            )
            if all(a is b for a, b in zip(names, keys, strict=True)) and all(
                items[i] is value[k] for i, k in enumerate(keys)
            ):
                return value
            return dict(zip(names, items, strict=True))
        return value

    def _split_secrets(self, before: list[Any], after: list[Any]) -> list[Any]:
        """``after`` (the redacted items of a container) with both halves of a token split over
        two neighbouring strings replaced: each half alone may be too short for its shape."""
        for i in range(len(before) - 1):
            one, two = before[i], before[i + 1]
            if not (
                isinstance(one, str)
                and isinstance(two, str)
                and one
                and two
                and len(one) + len(two) <= MAX_SPLIT_CHARS
            ):
                continue
            joined = one + two
            spans = self._finder.find(joined, strict=False, depth=1)
            crossing = [f for f in spans if f.start < len(one) < f.end]
            if crossing:
                kind = crossing[0].kind
                after[i], after[i + 1] = self.placeholder(kind, one), self.placeholder(kind, two)
                with self._lock:
                    self.tally.by_kind[kind.name] += 1
        return after

    def findings(self, texts: Iterable[str]) -> Counter[str]:
        """Per kind, how many secrets the texts hold (for a dry run; nothing is kept)."""
        counts: Counter[str] = Counter()
        before = Counter(self.tally.by_kind)
        unscanned = self.tally.unscanned
        for text in texts:
            self.redact(text)
        counts.update(self.tally.by_kind - before)
        if self.tally.unscanned > unscanned:
            counts["unscanned"] += self.tally.unscanned - unscanned
        return counts

    def describe(self) -> dict[str, Any]:
        """What status and doctor show: the policy, never a secret."""
        return {
            "enabled": True,
            "kinds": list(self.policy.names),
            "problems": list(self.policy.problems),
            "placeholder": f"{PREFIX}<kind> #<{DIGEST_HEX} hex keyed digest>] ({PREFIX}password] for "
            "passwords and connection strings)",
            "redacted_this_process": dict(self.tally.by_kind),
            "unscanned_this_process": self.tally.unscanned,
            "timeouts": dict(self.tally.timeouts),
        }


def _replaced(text: str, found: list[Found], replacement: Callable[[Found], str]) -> str:
    pieces: list[str] = []
    last = 0
    for item in found:
        pieces.extend((text[last : item.start], replacement(item)))
        last = item.end
    pieces.append(text[last:])
    return "".join(pieces)


class _Masker(Redactor):
    """The whole catalog with one fixed replacement: no digest, no key, no count kept."""

    def __init__(self, replacement: str) -> None:
        super().__init__(Policy(CATALOG), b"")
        self.replacement = replacement
        self.strict = False

    def placeholder(self, kind: Kind, secret: str) -> str:
        return self.replacement


@functools.cache
def _masker(replacement: str) -> _Masker:
    return _Masker(replacement)


def mask(text: str, replacement: str) -> str:
    """``text`` with the secret of every catalog kind replaced by ``replacement`` (the masking of
    status, logs and events, redact.py); a JSON text is read as the store reads tool arguments.
    A pattern that times out leaves that kind unmasked rather than withholding an error message."""
    if not text:
        return text
    masker = _masker(replacement)
    if text[:1] in "{[" and text[-1:] in "}]":
        return masker.redact_json_text(text)
    return masker.redact(text)


def redaction_patterns(config: Any) -> str | None:
    """The patterns an import or a rewrite applies: ``LCM_SENSITIVE_PATTERNS`` when redaction is
    on, None when it is off (``config``: an LcmConfig)."""
    return str(config.sensitive_patterns) if config.sensitive_patterns_enabled else None


def redactor_for(enabled: bool, patterns: str, key: bytes) -> Redactor | None:
    """The redactor the settings ask for, or None when redaction is off."""
    return Redactor(Policy.parse(patterns), key) if enabled else None

"""The catalog of secret kinds, and the redactor that replaces them before anything is written.

With ``LCM_SENSITIVE_PATTERNS_ENABLED`` on, every text on its way into the store (a message's
content and tool-call arguments, its other fields, a large output's payload file, a summary and
the summarizer's input, an imported row) passes :meth:`Redactor.redact` first. A secret becomes a
placeholder that names its kind and, except for passwords, a short keyed digest of its value::

    api_key=[lcm-redacted:api_key #3f2a9c1b]     password=[lcm-redacted:password]

Equal secrets get equal digests within one database (the key is the database's own, in ``meta``),
so "the same token again" stays visible; a password gets none, because a short digest of a
low-entropy value can be checked against a dictionary. Redaction is not reversible: that is its point.

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
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import regex

PREFIX = "[lcm-redacted:"
_DATA_URI = regex.compile(r"data:[\w.+-]{1,100}/[\w.+-]{1,100}(?:;[\w-]{1,100}=[\w.-]{1,100}){0,8};base64,"
                          r"[A-Za-z0-9+/=_-]+")
UNSCANNED = PREFIX + "unscanned"
DIGEST_HEX = 8
# Time a pattern may take on a text: a base plus a budget per character (a linear pattern needs
# far less; a user pattern that backtracks does not get to stall a turn).
TIMEOUT_BASE_S = 0.05
TIMEOUT_PER_CHAR_S = 2e-7
# Below this many characters the catalog's own patterns (bounded, linear) run without a timeout:
# arming one costs ``regex`` some 10-30 us a call, more than the scan of a usual message. User
# patterns always run with one (they may backtrack on a short text too).
UNTIMED_CHARS = 4096
# No catalog kind matches a shorter text ("pwd=abc" is the shortest); call ids, types and names
# are skipped without a look. A user pattern may match less, so it lowers the bound (Policy).
MIN_TEXT_CHARS = 7
# A value right after a key name is not a secret when it is already a placeholder.
_NOT_MASKED = r"(?!\[(?:lcm-redacted|REDACTED))"
# A value: quoted (escapes inside kept whole, so a JSON string stays one), or bare.
_VALUE = _NOT_MASKED + (r"""(?:"((?:[^"\\\n]|\\.){1,512})"|'((?:[^'\\\n]|\\.){1,512})'"""
                        r"""|([^\s'"`,;&}\]\[)(<>\\]{%d,512}))""")
_ASSIGN = r"""['"]?\s{0,8}(?:[:=]|=>)\s{0,8}"""
# How far after a key word its ``:`` or ``=`` may be (a quote, 8 spaces, and the sign itself).
ASSIGN_REACH = 11


@dataclass(frozen=True)
class Kind:
    """One kind of secret: its name (in placeholders and settings), the LCM-X group names that
    select it, its pattern (the secret is the first group that matched, else the whole match),
    whether its placeholder carries a digest, and the lower-case substrings one of which must
    be in a text for the pattern to be worth running (empty: always run)."""

    name: str
    groups: tuple[str, ...]
    source: str
    digest: bool = True
    tells: tuple[str, ...] = ()
    # The secret is assigned right after a tell (``api_key = ...``): a tell with no ``:`` or ``=``
    # in the few characters after it cannot start a match, so the pattern is not run for it.
    assigned: bool = False

    def worth_running(self, lowered: str, present: frozenset[str] | None = None) -> bool:
        """Can the pattern match ``lowered`` (the text in lower case)? A cheap, exact pre-check:
        substring searches run at memory speed, the pattern's alternations do not. ``present``:
        the tells known to occur in the text (see :func:`tells_in`)."""
        if not self.tells:
            return True
        for tell in self.tells:
            if present is not None and tell not in present:
                continue
            start = lowered.find(tell)
            while start >= 0:
                if not self.assigned:
                    return True
                after = lowered[start + len(tell):start + len(tell) + ASSIGN_REACH]
                if ":" in after or "=" in after:
                    return True
                start = lowered.find(tell, start + 1)
        return False

    @property
    def pattern(self) -> regex.Pattern[str]:
        return _compiled(self.source)

    @property
    def user(self) -> bool:
        return self.groups == ("user",)

    def timeout(self, chars: int) -> float | None:
        """The time this pattern may take on a text of ``chars`` characters (None: unbounded)."""
        if not self.user and chars < UNTIMED_CHARS:
            return None
        return TIMEOUT_BASE_S + TIMEOUT_PER_CHAR_S * chars

    def secret_span(self, match: regex.Match[str]) -> tuple[int, int]:
        for index in range(1, (match.re.groups or 0) + 1):
            if match.group(index) is not None:
                return match.span(index)
        return match.span()


@functools.cache
def _compiled(source: str) -> regex.Pattern[str]:
    """Compiled on first use, once per process: compiling the whole catalog costs ~10 ms, which
    every ``lcm`` command would pay at import although most never redact anything."""
    return regex.compile(source)


def _kind(name: str, groups: str, pattern: str, *, digest: bool = True, tells: str = "",
          assigned: bool = False) -> Kind:
    return Kind(name, tuple(groups.split()), pattern, digest, tuple(tells.split()), assigned)


_KEY_WORDS = (r"(?:api[_-]?key|apikey|secret[_-]?key|client[_-]?secret|access[_-]?token|auth[_-]?token"
              r"|refresh[_-]?token|private[_-]?token|secret|token|access[_-]?key)")
# Every quantifier is bounded and every pattern starts at a literal, so a scan costs at most a
# bounded amount per starting point: linear in the text (tests/security/test_sensitive_catalog.py
# times them on hostile input). The key name before an assignment is not matched at all: only the
# value is replaced, so the pattern starts at the key word itself.
_PEM = r"-----BEGIN (?:[A-Z0-9]{1,20} ){0,4}PRIVATE KEY(?: BLOCK)?-----"
_PEM_BODY = r"(?:[A-Za-z0-9+/=\s\\:,.]|-(?!----))*+(?:-----END (?:[A-Z0-9]{1,20} ){0,4}PRIVATE KEY(?: BLOCK)?-----)?"

CATALOG: tuple[Kind, ...] = (
    _kind("private_key", "private_key", _PEM + _PEM_BODY, tells="private key-----"),
    _kind("anthropic_key", "api_key", r"\bsk-ant-[A-Za-z0-9]{2,8}-[A-Za-z0-9_-]{20,512}", tells="sk-ant-"),
    _kind("openai_key", "api_key", r"\bsk-(?!ant-)(?:proj-|svcacct-|admin-|or-v1-)?[A-Za-z0-9_-]{20,512}",
          tells="sk-"),
    _kind("google_api_key", "api_key", r"\bAIza[0-9A-Za-z_-]{35}", tells="aiza"),
    _kind("aws_access_key", "api_key", r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[0-9A-Z]{16}\b",
          tells="akia asia agpa aida aroa anpa anva aipa"),
    _kind("aws_secret_key", "api_key",
          r"(?i)\baws_?secret_?(?:access_?)?key" + _ASSIGN + r"""['"]?([A-Za-z0-9/+=]{40})(?![A-Za-z0-9/+=])""",
          tells="key", assigned=True),
    _kind("github_token", "api_key", r"\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})",
          tells="ghp_ gho_ ghu_ ghs_ ghr_ github_pat_"),
    _kind("gitlab_token", "api_key", r"\bgl(?:pat|dt|rt|ptt|cbt|oas)-[A-Za-z0-9_-]{20,255}",
          tells="glpat- gldt- glrt- glptt- glcbt- gloas-"),
    _kind("slack_token", "api_key",
          r"\bxox[abposre]-[A-Za-z0-9-]{10,255}|https://hooks\.slack\.com/services/[A-Za-z0-9/]{20,255}",
          tells="xox hooks.slack.com"),
    _kind("stripe_key", "api_key", r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,255}", tells="_live_ _test_"),
    _kind("jwt", "bearer_token", r"\beyJ[A-Za-z0-9_-]{8,2048}\.[A-Za-z0-9_-]{8,4096}\.[A-Za-z0-9_-]{8,2048}",
          tells="eyj"),
    _kind("authorization_header", "bearer_token",
          r"(?i)authorization['\"]?\s{0,8}[:=]\s{0,8}['\"]?(?:(?:bearer|basic|token|digest)\s{1,8})?+"
          + _NOT_MASKED + r"([^\s'\",;}\]]{6,4096})", tells="authorization", assigned=True),
    _kind("bearer_token", "bearer_token", r"(?i)\bbearer\s{1,8}" + _NOT_MASKED + r"([A-Za-z0-9._~+/=-]{8,4096})",
          tells="bearer"),
    _kind("connection_string", "password_assignment",
          r"(?i)\b[a-z][a-z0-9+.-]{0,30}://[^\s/@:\[\]]{1,256}:" + _NOT_MASKED + r"([^\s/@]{1,256})@", digest=False,
          tells="://"),
    _kind("password_assignment", "password_assignment",
          r"(?i)\b(?:password|passwd|passphrase|pwd|db_pass)" + _ASSIGN + (_VALUE % 3), digest=False,
          tells="password passwd passphrase pwd db_pass", assigned=True),
    _kind("api_key", "api_key", r"(?i)" + _KEY_WORDS + _ASSIGN + (_VALUE % 8), tells="key token secret",
          assigned=True),
)
BY_NAME: dict[str, Kind] = {kind.name: kind for kind in CATALOG}
_ALL_TELLS = tuple(sorted({tell for kind in CATALOG for tell in kind.tells}))


def tells_in(lowered: str) -> frozenset[str]:
    """The catalog's tells that occur in ``lowered``: one pass of substring checks per text, so a
    kind whose tells are all absent costs nothing more."""
    return frozenset(tell for tell in _ALL_TELLS if tell in lowered)
GROUPS: dict[str, tuple[str, ...]] = {}
for _k in CATALOG:
    for _g in _k.groups:
        GROUPS.setdefault(_g, ())
        GROUPS[_g] = (*GROUPS[_g], _k.name)
# LCM-X's default list: the same four names select every kind of their group here.
LCMX_DEFAULT = "api_key,bearer_token,password_assignment,private_key"


def split_entries(text: str) -> list[str]:
    """Comma-separated entries, where a comma that keeps brackets or braces open on both sides
    (``[a,b]``, ``{2,8}``) or is escaped as ``\\,`` belongs to the entry (a user pattern may hold
    one). A piece whose brackets never close stays an entry of its own (then reported invalid)."""
    pieces, current, escaped = [], [], False
    for char in text or "":
        if escaped:
            current.append(char if char == "," else "\\" + char)
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == ",":
            pieces.append("".join(current))
            current = []
        else:
            current.append(char)
    if escaped:
        current.append("\\")
    pieces.append("".join(current))
    entries, i = [], 0
    while i < len(pieces):
        joined, j = pieces[i], i
        while _open_brackets(joined) and j + 1 < len(pieces):
            j += 1
            joined = f"{joined},{pieces[j]}"
        if _open_brackets(joined):
            joined, j = pieces[i], i  # never closes: the piece alone
        entries.append(joined.strip())
        i = j + 1
    return [entry for entry in entries if entry]


def _open_brackets(text: str) -> bool:
    depth, escaped = 0, False
    for char in text:
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
    return depth > 0


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
                chosen.update((n, BY_NAME[n]) for n in (*GROUPS.get(name, ()), *(() if name in GROUPS else (name,))))
            else:
                problems.append(f"LCM_SENSITIVE_PATTERNS: {name!r} is not a known kind or group (known: all, "
                                f"{', '.join(sorted({*GROUPS, *BY_NAME}))}); ignored")
        order = {kind.name: i for i, kind in enumerate(CATALOG)}
        kinds = sorted(chosen.values(), key=lambda k: (order.get(k.name, -1), k.name))  # user patterns first
        if not kinds:
            problems.append("LCM_SENSITIVE_PATTERNS selects no pattern; using all")
            kinds = list(CATALOG)
        return cls(tuple(kinds), tuple(problems))


def _user_kind(name: str, source: str, problems: list[str]) -> Kind | None:
    if not regex.fullmatch(r"[A-Za-z][A-Za-z0-9_]{0,39}", name) or name in BY_NAME or name in GROUPS:
        problems.append(f"LCM_SENSITIVE_PATTERNS: user pattern name {name!r} must be a new word "
                        "(letters, digits, _); ignored")
        return None
    try:
        pattern = _compiled(source)
    except regex.error as exc:
        problems.append(f"LCM_SENSITIVE_PATTERNS: pattern {name}={source!r} is invalid ({exc}); ignored")
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
        self._min_chars = 1 if any(kind.user for kind in policy.kinds) else MIN_TEXT_CHARS
        self.tally = Tally()
        self._lock = threading.Lock()

    def placeholder(self, kind: Kind, secret: str) -> str:
        if not kind.digest:
            return f"{PREFIX}{kind.name}]"
        digest = hmac.new(self._key, secret.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()
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
            pieces.extend((self._redact(text[last:found.start()]), found.group(0)))
            last = found.end()
        pieces.append(self._redact(text[last:]))
        if any(p.startswith(UNSCANNED) for p in pieces):
            return f"{UNSCANNED} {len(text)} chars: a pattern timed out on it]"
        return "".join(pieces)

    def _redact(self, text: str) -> str:
        if not text:
            return text
        lowered = text.lower()
        present = tells_in(lowered)
        for kind in self.policy.kinds:
            if not kind.worth_running(lowered, present):
                continue
            try:
                replaced = self._replace(kind, text, kind.timeout(len(text)))
            except TimeoutError:
                with self._lock:
                    self.tally.unscanned += 1
                    self.tally.timeouts[kind.name] += 1
                return f"{UNSCANNED} {len(text)} chars: pattern {kind.name} timed out on it]"
            if replaced is not text:
                text, lowered = replaced, replaced.lower()
                present = tells_in(lowered)
        return text

    def _replace(self, kind: Kind, text: str, timeout: float | None) -> str:
        found = 0

        masked = _placeholder_spans(text)

        def swap(match: regex.Match[str]) -> str:
            nonlocal found
            start, end = kind.secret_span(match)
            if start == end or any(s < end and start < e for s, e in masked):
                return match.group(0)  # a placeholder is never redacted again (a user pattern may match it)
            found += 1
            base = match.start()
            whole = match.group(0)
            return whole[:start - base] + self.placeholder(kind, text[start:end]) + whole[end - base:]

        result = kind.pattern.sub(swap, text, timeout=timeout)
        if not found:
            return text
        with self._lock:
            self.tally.by_kind[kind.name] += found
        return str(result)

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
        """A JSON text (a tool call's arguments) redacted so that it stays JSON: each string is
        redacted as it reads unescaped, and with its key in front (``"password": "..."`` names
        what the value is); a text that is not a JSON object or array is redacted as text."""
        try:
            parsed = json.loads(text)
        except ValueError:
            return self.redact(text)
        if not isinstance(parsed, dict | list):
            return self.redact(text)
        cleaned = self._json_value(parsed, None)
        return text if cleaned is parsed else json.dumps(cleaned, ensure_ascii=False)

    def _json_value(self, value: Any, key: str | None) -> Any:
        if isinstance(value, str):
            out = self.redact(value)
            return self._keyed(key, value) if out is value and key is not None else out
        if isinstance(value, list):
            items = [self._json_value(v, None) for v in value]
            return value if all(a is b for a, b in zip(items, value, strict=True)) else items
        if isinstance(value, dict):
            pairs = {k: self._json_value(v, str(k)) for k, v in value.items()}
            return value if all(pairs[k] is v for k, v in value.items()) else pairs
        return value

    def _keyed(self, key: str, value: str) -> str:
        """``value`` redacted in the light of its key (``{"api_key": "..."}``), else ``value`` itself."""
        framed = f"{json.dumps(key)}: {json.dumps(value)}"
        out = self.redact(framed)
        if out == framed:
            return value
        try:
            found = json.loads("{" + out + "}")
        except ValueError:
            return f"{UNSCANNED} {len(value)} chars: could not be redacted in place]"
        return str(next(iter(found.values()))) if isinstance(found, dict) and len(found) == 1 else value

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
        return {"enabled": True, "kinds": list(self.policy.names), "problems": list(self.policy.problems),
                "placeholder": f"{PREFIX}<kind> #<{DIGEST_HEX} hex keyed digest>] ({PREFIX}password] for "
                               "passwords and connection strings)",
                "redacted_this_process": dict(self.tally.by_kind), "unscanned_this_process": self.tally.unscanned,
                "timeouts": dict(self.tally.timeouts)}


def mask(text: str, replacement: str) -> str:
    """``text`` with the secret of every catalog kind replaced by ``replacement`` (the masking of
    status, logs and events, redact.py: no digest, no count; a pattern that times out leaves that
    kind unmasked rather than withholding an error message)."""
    if not text:
        return text
    lowered = text.lower()
    for kind in CATALOG:
        if not kind.worth_running(lowered):
            continue

        def swap(match: regex.Match[str], kind: Kind = kind) -> str:
            start, end = kind.secret_span(match)
            base = match.start()
            return match.group(0)[:start - base] + replacement + match.group(0)[end - base:]

        try:
            text = str(kind.pattern.sub(swap, text, timeout=kind.timeout(len(text))))
        except TimeoutError:
            continue
        lowered = text.lower()
    return text


def _placeholder_spans(text: str) -> list[tuple[int, int]]:
    spans = []
    start = text.find(PREFIX)
    while start >= 0:
        end = text.find("]", start)
        end = len(text) if end < 0 else end + 1
        spans.append((start, end))
        start = text.find(PREFIX, end)
    return spans


def redaction_patterns(config: Any) -> str | None:
    """The patterns an import or a rewrite applies: ``LCM_SENSITIVE_PATTERNS`` when redaction is
    on, None when it is off (``config``: an LcmConfig)."""
    return str(config.sensitive_patterns) if config.sensitive_patterns_enabled else None


def redactor_for(enabled: bool, patterns: str, key: bytes) -> Redactor | None:
    """The redactor the settings ask for, or None when redaction is off."""
    return Redactor(Policy.parse(patterns), key) if enabled else None

"""The catalog of secret kinds: what each one looks like, which group names select it, and the cheap
pre-check that skips its pattern on a text that cannot hold it.

Kept apart from the redactor (sensitive.py): the policy that picks kinds, the finder that runs
them and the redactor all read this one table, and nothing here does any finding or replacing.
Its patterns compile lazily (:func:`compiled`), so importing the catalog costs nothing until a
text is scanned.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import regex

from . import secretscan

# Time a pattern may take on a text: a base plus a budget per character (a linear pattern needs
# far less; a user pattern that backtracks does not get to stall a turn).
TIMEOUT_BASE_S = 0.05
TIMEOUT_PER_CHAR_S = 2e-7
# Below this many characters the catalog's own patterns (bounded, linear) run without a timeout:
# arming one costs ``regex`` some 10-30 us a call, more than the scan of a usual message. User
# patterns always run with one (they may backtrack on a short text too).
UNTIMED_CHARS = 4096
# A value right after a key name is not a secret when it is already a placeholder.
_NOT_MASKED = r"(?!\[(?:lcm-redacted|REDACTED))"
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
    # Found by the assignment scan (secretscan.py: the value after a secret's name), not a pattern.
    scan: bool = False

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
                after = lowered[start + len(tell) : start + len(tell) + ASSIGN_REACH]
                if ":" in after or "=" in after:
                    return True
                start = lowered.find(tell, start + 1)
        return False

    @property
    def pattern(self) -> regex.Pattern[str]:
        return compiled(self.source)

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
def compiled(source: str) -> regex.Pattern[str]:
    """Compiled on first use, once per process: compiling the whole catalog costs ~10 ms, which
    every ``lcm`` command would pay at import although most never redact anything."""
    return regex.compile(source)


def _kind(
    name: str,
    groups: str,
    pattern: str,
    *,
    digest: bool = True,
    tells: str = "",
    assigned: bool = False,
    scan: bool = False,
) -> Kind:
    return Kind(name, tuple(groups.split()), pattern, digest, tuple(tells.split()), assigned, scan)


# Every quantifier is bounded and every pattern starts at a literal, so a scan costs at most a
# bounded amount per starting point: linear in the text (tests/security/test_sensitive_catalog.py
# times them on hostile input). The key name before an assignment is not matched at all: only the
# value is replaced, so the pattern starts at the key word itself.
_PEM = r"-----BEGIN (?:[A-Z0-9]{1,20} ){0,4}PRIVATE KEY(?: BLOCK)?-----"
_PEM_BODY = r"(?:[A-Za-z0-9+/=\s\\:,.]|-(?!----))*+(?:-----END (?:[A-Z0-9]{1,20} ){0,4}PRIVATE KEY(?: BLOCK)?-----)?"

CATALOG: tuple[Kind, ...] = (
    _kind("private_key", "private_key", _PEM + _PEM_BODY, tells="private key-----"),
    _kind(
        "anthropic_key",
        "api_key",
        r"\bsk-ant-[A-Za-z0-9]{2,8}-[A-Za-z0-9_-]{20,512}",
        tells="sk-ant-",
    ),
    _kind(
        "openai_key",
        "api_key",
        r"\bsk-(?!ant-)(?:proj-|svcacct-|admin-|or-v1-)?[A-Za-z0-9_-]{20,512}",
        tells="sk-",
    ),
    _kind("google_api_key", "api_key", r"\bAIza[0-9A-Za-z_-]{35}", tells="aiza"),
    _kind(
        "aws_access_key",
        "api_key",
        r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[0-9A-Z]{16}\b",
        tells="akia asia agpa aida aroa anpa anva aipa",
    ),
    _kind(
        "aws_secret_key",
        "api_key",
        r"(?i)\baws_?secret_?(?:access_?)?key"
        + _ASSIGN
        + r"""['"]?([A-Za-z0-9/+=]{40})(?![A-Za-z0-9/+=])""",
        tells="key",
        assigned=True,
    ),
    _kind(
        "github_token",
        "api_key",
        r"\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})",
        tells="ghp_ gho_ ghu_ ghs_ ghr_ github_pat_",
    ),
    _kind(
        "gitlab_token",
        "api_key",
        r"\bgl(?:pat|dt|rt|ptt|cbt|oas)-[A-Za-z0-9_-]{20,255}",
        tells="glpat- gldt- glrt- glptt- glcbt- gloas-",
    ),
    _kind(
        "slack_token",
        "api_key",
        r"\bxox[abposre]-[A-Za-z0-9-]{10,255}|https://hooks\.slack\.com/services/[A-Za-z0-9/]{20,255}",
        tells="xox hooks.slack.com",
    ),
    _kind(
        "stripe_key",
        "api_key",
        r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,255}",
        tells="_live_ _test_",
    ),
    _kind(
        "jwt",
        "bearer_token",
        r"\beyJ[A-Za-z0-9_-]{8,2048}\.[A-Za-z0-9_-]{8,4096}\.[A-Za-z0-9_-]{8,2048}",
        tells="eyj",
    ),
    _kind(
        "authorization_header",
        "bearer_token",
        r"(?i)authorization['\"]?\s{0,8}[:=]\s{0,8}['\"]?(?:(?:bearer|basic|token|digest)\s{1,8})?+"
        + _NOT_MASKED
        + r"([^\s'\",;}\]]{6,4096})",
        tells="authorization",
        assigned=True,
    ),
    _kind(
        "bearer_token",
        "bearer_token",
        r"(?i)\bbearer\s{1,8}" + _NOT_MASKED + r"([A-Za-z0-9._~+/=-]{8,4096})",
        tells="bearer",
    ),
    _kind(
        "connection_string",
        "password_assignment",
        r"(?i)\b[a-z][a-z0-9+.-]{0,30}://[^\s/@:\[\]]{0,256}:" + _NOT_MASKED + r"([^\s/@]{1,256})@",
        digest=False,
        tells="://",
    ),
    # The value after a secret's name in any format (secretscan.py), and after a flag or a
    # name/value pair: passwords get no digest, every other value assigned a secret's name does.
    _kind("password_assignment", "password_assignment", "", digest=False, scan=True),
    _kind("api_key", "api_key", "", scan=True),
)
BY_NAME: dict[str, Kind] = {kind.name: kind for kind in CATALOG}
PASSWORD_KIND = secretscan.PASSWORD
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

"""The catalog of secret kinds (sensitive.py): each kind is found in the shapes it really takes,
ordinary text is left alone, placeholders say the kind (and a keyed digest except for passwords),
the redactor is a fixed point, and a pattern that runs too long withholds the text, never leaks it."""

from __future__ import annotations

import json
import re

import pytest
import regex
from hypothesis import given, settings
from hypothesis import strategies as st

from hermes_lcm.base.patterns import MessagePatterns
from hermes_lcm.base.secretkinds import BY_NAME, CATALOG
from hermes_lcm.base.sensitive import (
    PREFIX,
    UNSCANNED,
    Policy,
    Redactor,
    split_entries,
)
from hermes_lcm.config import load_config

KEY = b"k" * 32
# (kind, text, the secret in it); every kind of the catalog appears at least once.
PLANTED = [
    (
        "openai_key",
        "export OPENAI_API_KEY=sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1w",
        "sk-proj-Ab3dEf6hIj9kLm2n",
    ),
    (
        "openai_key",
        "key sk-or-v1-0123456789abcdef0123456789abcdef in the log",
        "sk-or-v1-0123456789abcdef0123456789",
    ),
    (
        "anthropic_key",
        "ANTHROPIC: sk-ant-api03-Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0FeDcBa",
        "sk-ant-api03-Zx9Yw8Vu7",
    ),
    (
        "google_api_key",
        "maps key AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q",
        "AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q",
    ),
    ("aws_access_key", "aws id AKIAIOSFODNN7EXAMPLE here", "AKIAIOSFODNN7EXAMPLE"),
    (
        "aws_secret_key",
        "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "wJalrXUtnFEMI/K7MDENG",
    ),
    (
        "github_token",
        "token ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8 pushed",
        "ghp_a1B2c3D4e5F6g7H8i9J0k1",
    ),
    (
        "github_token",
        "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
        "github_pat_11ABCDEFG0123456789",
    ),
    ("gitlab_token", "GITLAB=glpat-xY7zW6vU5tS4rQ3pO2nM", "glpat-xY7zW6vU5tS4rQ3pO2nM"),
    (
        "slack_token",
        "bot xoxb-1234567890-0987654321-AbCdEfGhIjKlMnOp",
        "xoxb-1234567890-0987654321",
    ),
    (
        "slack_token",
        "hook https://hooks.slack.com/services/T0000/B0000/XXXXXXXXXXXXXXXXXXXXXXXX",
        "XXXXXXXXXXXX",
    ),
    ("stripe_key", "stripe sk_live_4eC39HqLyjWDarjtT1zdp7dc", "sk_live_4eC39HqLyjWDarjtT1zdp7dc"),
    (
        "jwt",
        "cookie eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
        "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    ),
    (
        "authorization_header",
        "curl -H 'Authorization: Basic dXNlcjpwYXNzd29yZDEyMw=='",
        "dXNlcjpwYXNzd29yZDEyMw==",
    ),
    (
        "bearer_token",
        "use bearer Qm9yaXNKb2huc29uSXNBVGVzdA in the call",
        "Qm9yaXNKb2huc29uSXNBVGVzdA",
    ),
    (
        "connection_string",
        "DATABASE_URL=postgres://app:Wr0ngH0rse!@db.internal:5432/app",
        "Wr0ngH0rse!",
    ),
    ("password_assignment", "password=hunter2", "hunter2"),
    ("password_assignment", '{"passwd": "correct horse battery"}', "correct horse battery"),
    (
        "private_key",
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\nQyNTUxOQ==\n"
        "-----END OPENSSH PRIVATE KEY-----",
        "b3BlbnNzaC1rZXktdjEAAAAA",
    ),
    (
        "private_key",
        "cut output: -----BEGIN RSA PRIVATE KEY-----\\nMIIEowIBAAKCAQEAx4Y2",
        "MIIEowIBAAKCAQEAx4Y2",
    ),
    (
        "api_key",
        'config: {"client_secret": "9f86d081884c7d659a2feaa0c55ad015"}',
        "9f86d081884c7d659a2feaa0c55ad015",
    ),
    ("api_key", "x-api-key: q9w8e7r6t5y4u3i2", "q9w8e7r6t5y4u3i2"),
]
ORDINARY = [
    "last_prompt_tokens=4000; 12 tokens: fine; author: Jane Smithson; see task-force notes",
    "Tests pass: all 42 passed in 3.1s; max_tokens=4096; the password policy needs review",
    "The key insight: cache the token counts. Secret sauce is patience. https://example.com/a:b",
    "git log --oneline | head; ask-for-help; risk-free; sk-short",
]


@pytest.fixture
def redactor() -> Redactor:
    return Redactor(Policy.parse("all"), KEY)


def test_every_kind_of_the_catalog_is_planted_here() -> None:
    assert {kind for kind, _, _ in PLANTED} == set(BY_NAME)


@pytest.mark.parametrize(
    ("kind", "text", "secret"), PLANTED, ids=[f"{k}-{i}" for i, (k, _, _) in enumerate(PLANTED)]
)
def test_each_kind_is_replaced_by_a_placeholder_naming_it(
    redactor: Redactor, kind: str, text: str, secret: str
) -> None:
    out = redactor.redact(text)
    assert secret not in out, out
    assert f"{PREFIX}{kind}" in out, out
    digested = re.search(re.escape(PREFIX + kind) + r" #[0-9a-f]{8}\]", out)
    assert bool(digested) == BY_NAME[kind].digest, out


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_text_is_left_alone(redactor: Redactor, text: str) -> None:
    assert redactor.redact(text) == text


def test_equal_secrets_share_a_digest_and_the_key_is_the_database_s(redactor: Redactor) -> None:
    one = redactor.redact("token sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1w")
    two = redactor.redact("again: sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1w!")
    other = Redactor(Policy.parse("all"), b"o" * 32).redact(
        "token sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1w"
    )
    tag = re.search(r"#([0-9a-f]{8})", one)
    assert tag and tag.group(1) in two and tag.group(1) not in other


def test_passwords_get_no_digest(redactor: Redactor) -> None:
    assert redactor.redact("password=hunter2") == "password=[lcm-redacted:password_assignment]"
    assert redactor.redact("password=hunter3") == "password=[lcm-redacted:password_assignment]"


def test_lcmx_names_select_whole_groups_and_unknown_names_are_reported() -> None:
    policy = Policy.parse("api_key,bearer_token,password_assignment,private_key")
    assert set(policy.names) == set(BY_NAME) and not policy.problems
    only = Policy.parse("private_key, nope")
    assert only.names == ("private_key",)
    assert any("'nope'" in p for p in only.problems)
    assert Redactor(only, KEY).redact("password=hunter2") == "password=hunter2"


def test_user_patterns_keep_their_commas_and_bad_ones_are_reported() -> None:
    assert split_entries("a,tix=TCK-[0-9]{4,6},b\\,c") == ["a", "tix=TCK-[0-9]{4,6}", "b,c"]
    policy = Policy.parse("password_assignment,ticket=TCK-([0-9]{4,6}),broken=(x,empty=a*")
    assert "ticket" in policy.names
    assert any("broken" in p for p in policy.problems) and any(
        "empty" in p for p in policy.problems
    )
    out = Redactor(policy, KEY).redact("see TCK-123456 and password=hunter2")
    assert "123456" not in out and "TCK-[lcm-redacted:ticket #" in out and "hunter2" not in out


def test_settings_report_bad_patterns_instead_of_dropping_them_silently() -> None:
    loaded = load_config(
        {
            "LCM_IGNORE_MESSAGE_PATTERNS": "^HEARTBEAT$,(unclosed",
            "LCM_SENSITIVE_PATTERNS_ENABLED": "true",
            "LCM_SENSITIVE_PATTERNS": "jwt,nonsense",
        }
    )
    assert any("(unclosed" in p for p in loaded.problems)
    assert any("nonsense" in p for p in loaded.problems)
    assert MessagePatterns.parse("^a{1,3}$").compiled, (
        "a comma inside braces does not split a pattern"
    )


def test_a_pattern_that_runs_too_long_withholds_the_text() -> None:
    slow = Redactor(Policy.parse("slow=(a+)+$"), KEY)
    out = slow.redact(("a" * 5000) + "b")  # catastrophic backtracking: far past the time allowed
    assert out.startswith(UNSCANNED) and "a" * 20 not in out
    assert slow.tally.unscanned == 1 and slow.tally.timeouts["slow"] == 1
    assert slow.redact(out) == out
    assert slow.redact("aaaa").startswith("[lcm-redacted:slow #"), "a short text is scanned in time"


_PIECES = st.sampled_from(
    [text for _, text, _ in PLANTED]
    + ORDINARY
    + [
        "api_key=",
        "password: ",
        "Bearer ",
        "[lcm-redacted:api_key #00000000]",
        "[lcm-redacted:",
        "]",
        "=",
        '"',
        "-----BEGIN PRIVATE KEY-----",
        "\n",
        " ",
        "sk-",
        "token: ",
        "://u:p@h",
    ]
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(_PIECES, st.text(max_size=12)), max_size=12))
def test_the_redactor_is_a_fixed_point(pieces: list[str]) -> None:
    redactor = Redactor(Policy.parse("all,ticket=[0-9a-f]{8}"), KEY)
    once = redactor.redact("".join(pieces))
    assert redactor.redact(once) == once


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.sampled_from(PLANTED), min_size=1, max_size=5),
    st.lists(st.sampled_from(ORDINARY), max_size=3),
)
def test_no_planted_secret_survives_in_any_mix(
    planted: list[tuple[str, str, str]], ordinary: list[str]
) -> None:
    redactor = Redactor(Policy.parse("all"), KEY)
    out = redactor.redact(" | ".join([t for _, t, _ in planted] + ordinary))
    for _, _, secret in planted:
        assert secret not in out


@pytest.mark.parametrize(
    "unit",
    [
        "eyJ-",
        "a.b.",
        "xoxb-",
        "api_key=",
        "password: ",
        "Bearer ",
        "://u:",
        "sk-",
        "-----BEGIN PRIVATE KEY-----",
        "token=[",
        "AKIA",
        "\\n-",
    ],
)
def test_no_catalog_pattern_backtracks_on_repeats_below_the_untimed_size(
    redactor: Redactor, unit: str
) -> None:
    """Below UNTIMED_CHARS our patterns run without a timeout: none may blow up on a text made of
    one of its own prefixes repeated (each quantifier is bounded and possessive where it matters)."""
    text = (unit * (4000 // len(unit)))[:4000]
    out = redactor.redact(text)
    assert redactor.redact(out) == out


def test_the_catalog_patterns_are_linear_on_hostile_input(redactor: Redactor) -> None:
    hostile = ("api_key=" + "a" * 200 + " ") * 2000 + "-----BEGIN PRIVATE KEY-----" + "A" * 200_000
    out = redactor.redact(hostile)
    assert not out.startswith(UNSCANNED), "a catalog pattern timed out on 600 kB"
    assert "A" * 100 not in out and redactor.tally.unscanned == 0
    assert all(k.pattern.pattern for k in CATALOG if not k.scan)


_IGNORE_POOL = [
    r"^HEARTBEAT_OK$",
    r"(?i)^\s*ping\s*$",
    r'"kind": "heartbeat"',
    r"a{2,3}b",
    r"(x)\1",
    r"^Cron",
    r"[,;]{2}",
    r"(?m)^done$",
    r"\bok\b",
]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.sampled_from(_IGNORE_POOL), min_size=1, max_size=5, unique=True),
    st.lists(
        st.sampled_from(
            [
                "HEARTBEAT_OK",
                " PING ",
                "x aab",
                "xx",
                "Cron job",
                ",;",
                "a\ndone\n",
                "ok then",
                "nothing",
                '{"kind": "heartbeat"}',
                "aaab",
            ]
        ),
        min_size=1,
        max_size=3,
    ),
)
def test_ignore_patterns_searched_together_match_as_each_alone(
    patterns: list[str], texts: list[str]
) -> None:
    together = MessagePatterns.parse(",".join(patterns))
    alone = any(regex.search(p, t) for p in patterns for t in texts)
    assert together.matches(texts) == alone


def test_the_shortest_secret_of_the_catalog_is_still_found(redactor: Redactor) -> None:
    assert redactor.redact("pwd=abc") == "pwd=[lcm-redacted:password_assignment]"
    short = Redactor(Policy.parse("pin=PIN[0-9]{2}"), KEY)
    assert short.redact("PIN12").startswith("[lcm-redacted:pin #"), (
        "a user pattern may match a short text"
    )


@pytest.mark.parametrize(
    "arguments",
    [
        json.dumps({"cmd": 'mysql --password="s3cr3t-pw" db'}),
        json.dumps({"password": 'a"quoted" value'}),
        json.dumps(
            {"api_key": "zq9zq9zq9ApiKeyValue777", "nested": [{"token": "tok_0123456789abcdef"}]}
        ),
        json.dumps({"env": "export OPENAI_API_KEY=sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1w"}),
        '{"cmd": "curl -H \\"Authorization: Bearer abcdefghijklmnop1234\\""}',
    ],
)
def test_tool_call_arguments_stay_json_and_lose_their_secrets(
    redactor: Redactor, arguments: str
) -> None:
    out = redactor.redact_json_text(arguments)
    parsed = json.loads(out)
    assert isinstance(parsed, dict) and "[lcm-redacted:" in out
    for secret in (
        "s3cr3t-pw",
        "quoted",
        "zq9zq9zq9ApiKeyValue777",
        "tok_0123456789abcdef",
        "sk-proj-Ab3dEf6h",
        "abcdefghijklmnop1234",
    ):
        assert secret not in out
    assert redactor.redact_json_text(out) == out


def test_arguments_that_are_not_json_are_redacted_as_text(redactor: Redactor) -> None:
    assert (
        redactor.redact_json_text("password=hunter2 (not json)")
        == "password=[lcm-redacted:password_assignment] (not json)"
    )

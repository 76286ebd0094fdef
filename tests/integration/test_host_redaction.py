"""Redaction inside the real Hermes host: secrets typed by the user and put in a tool call's
arguments by the model never reach a file of ours, and the prompt rebuilt after compaction
carries their placeholders; the host's own session store (not ours) still has them, which
proves they were really there."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from ..secretforms import leaked, plant
from ..security.test_sensitive_catalog import PLANTED
from .harness import make_home, require_host, run_host
from .stub_llm import StubLLM, make_directive_policy

pytestmark = pytest.mark.host

SECRETS = [secret for _, _, secret in PLANTED]
# Secrets a name or a format marks (an .env line, compose YAML, escaped JSON, a flag, base64, a
# hidden character in a name), typed by the user in the real host.
FORMS = [
    plant(random.Random(7), form)
    for form in (
        "env",
        "yaml",
        "ini",
        "escaped_json",
        "url",
        "hidden",
        "lookalike",
        "base64",
        "xml",
    )
]
ASKED = PLANTED[0][2]  # the model searches for this one: it is in the tool call's arguments
WORDS = "ledger shard replica quota tenant socket parser queue retry budget canary schema rollback".split()


def turns() -> list[str]:
    rng = random.Random(3)
    out = []
    for i in range(12):
        body = " ".join(rng.choice(WORDS) for _ in range(260))
        planted = PLANTED[i % len(PLANTED)][1] if i < 11 else ""
        out.append(f"turn {i}: {planted} keep this. {body}")
    out.append(
        "turn 12: and the remaining ones: " + " | ".join(text for _, text, _ in PLANTED[11:])
    )
    out.append("turn 12b: my settings as they are:\n" + "\n\n".join(item.text for item in FORMS))
    out.append("turn 13: find the key [[tool lcm_grep @find]]")
    out.append("turn 14: thanks, carry on")
    return out


def ours(home: Path) -> dict[str, bytes]:
    """Every file hermes-lcm writes under HERMES_HOME: the database, its WAL and payload files."""
    files = [*home.glob("lcm.db*"), *(home / "lcm-payloads").glob("*")]
    return {p.name: p.read_bytes() for p in files if p.is_file()}


@pytest.mark.parametrize("host_defaults", [False, True], ids=["quiet", "host-defaults"])
def test_no_secret_reaches_our_files_in_the_real_host(tmp_path: Path, host_defaults: bool) -> None:
    """Also with the host as a user has it (every toolset, memory and skill reviews on): a review
    fork sees the same history and must not put a secret into our files either."""
    require_host()
    policy = make_directive_policy({"find": {"query": ASKED}})
    with StubLLM(policy, context_length=64_000) as stub:
        hh = make_home(
            tmp_path,
            stub,
            env={
                "LCM_SENSITIVE_PATTERNS_ENABLED": "true",
                "LCM_CONTEXT_THRESHOLD": "0.08",
                "LCM_FRESH_TAIL_COUNT": "4",
                "LCM_LEAF_CHUNK_TOKENS": "1200",
            },
            host_defaults=host_defaults,
        )
        run = run_host(hh, turns(), timeout=200)
        mains = stub.requests_of("main")
    assert all(t["completed"] and not t["failed"] for t in run.report["turns"]), run.describe()
    assert any(t["compression_count"] for t in run.report["turns"]), "nothing was compacted"
    calls = [tc for r in mains for tc in ((r.reply or {}).get("tool_calls") or [])]
    assert any(json.loads(tc["function"]["arguments"]) == {"query": ASKED} for tc in calls)
    files = ours(hh.home)
    assert "lcm.db" in files
    found = [(name, s) for name, data in files.items() for s in SECRETS if s.encode() in data]
    found += [
        (name, item.form)
        for name, data in files.items()
        for item in FORMS
        if leaked(item, data.decode("utf-8", "replace"))
    ]
    assert not found
    assert b"[lcm-redacted:openai_key #" in files["lcm.db"] + files.get("lcm.db-wal", b"")
    hosts = b"".join(
        p.read_bytes()
        for p in hh.home.rglob("*")
        if p.is_file() and "lcm" not in p.name and not p.is_symlink() and "plugins" not in p.parts
    )
    assert ASKED.encode() in hosts, (
        "the host's own session store holds the raw text (ours must not)"
    )
    sent = json.dumps(mains[-1].messages)
    assert "[lcm-redacted:" in sent, "the prompt rebuilt from the store carries placeholders"

"""YAML-only settings are in force from the real host's first call.

No ``LCM_*`` variable anywhere: only config.yaml's ``lcm:`` block sets the threshold. The host
deep-copies the engine template, calls ``update_model`` and reads ``threshold_tokens`` before any
turn (agent/agent_init.py), then runs preflight compression against that number. With the default
threshold (35% of 64,000 = 22,400) a ~10k-token first message is sent as is; with the YAML
threshold it must be compacted on the very first turn, and stored whole. On SQLite and PostgreSQL
(``both_backends``): the PostgreSQL URL comes from the same block (``lcm.database_url``).
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from hermes_lcm.base.tokens import count_tokens

from ..backends import raw_sql
from .harness import host_env, make_home, require_host, run_host
from .stub_llm import StubLLM

pytestmark = [pytest.mark.host, pytest.mark.both_backends]

FACT = "PANGOLIN-5521"
WORDS = (
    "ledger shard replica quota tenant socket parser queue retry budget canary schema rollback "
    "cache index region token gateway lockfile artifact manifest checksum snapshot"
).split()


def big_first_message() -> str:
    rng = random.Random(7)
    body = " ".join(rng.choice(WORDS) for _ in range(9000))
    return f"Remember the release codename {FACT}. Then review these notes: {body}"


@pytest.mark.parametrize(
    "lcm_yaml,expected",
    [
        ({"absolute_threshold_tokens": 6000}, 6000),
        ({"context_threshold": 0.1}, 6400),
    ],
    ids=["absolute", "ratio"],
)
def test_yaml_threshold_rules_the_first_turn(
    tmp_path, lcm_yaml: dict[str, Any], expected: int, backend_env: dict[str, str]
) -> None:
    require_host()
    first = big_first_message()
    assert 8_000 < count_tokens(first) < 22_400  # over the YAML threshold, under the default one
    url = backend_env.get("LCM_DATABASE_URL")
    block = {**lcm_yaml, **({"database_url": url} if url else {})}
    with StubLLM() as stub:
        hh = make_home(tmp_path, stub, env={}, config_overrides={"lcm": block})
        run = run_host(hh, [first, "And what was the codename?"], timeout=180)
        mains = stub.requests_of("main")
    report = run.report
    assert not [k for k in host_env(hh) if k.startswith("LCM_")]  # config.yaml is the only source
    assert report["engine"]["class"].endswith("LcmEngine")
    assert report["engine"]["threshold_tokens"] == expected  # as the host saw it, before turn 1
    assert report["turns"][0]["compression_count"] >= 1, report["turns"][0]
    assert all(t["completed"] and not t["failed"] for t in report["turns"])
    assert mains and mains[0].prompt_tokens < count_tokens(first)  # compacted before the first send
    assert not [r.problems for r in mains if r.problems]
    if url:
        assert not hh.lcm_db.exists(), "the URL in config.yaml was not the store used"
    stored = raw_sql(
        url or str(hh.lcm_db),
        "SELECT count(*) FROM messages WHERE role='user' AND content=?",
        (first,),
    )[0][0]
    assert stored == 1  # lossless: the whole first message is in the store

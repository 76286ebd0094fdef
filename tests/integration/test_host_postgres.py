"""Two real Hermes hosts (hermes-agent 0.19.0, two HERMES_HOMEs: two "machines") sharing one
memory on PostgreSQL, offline, against the stub model.

Host A talks long enough to compact several times, planting a fact in its first turn. Host B, a
different home with its own conversation, then asks for that fact: its model calls
``lcm_recall``, which searches every conversation of the shared store, and the fact planted on
host A comes back. Afterwards the database is read directly (psycopg, past our own code): every
user message of both hosts stored exactly once, each host's conversation its own, the summary
DAG's lineage complete, and every request within the budget.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from hermes_lcm.base.tokens import count_messages

from ..convo import assert_lineage_complete
from ..pgserver import fresh_url
from .harness import HostRun, make_home, require_host, run_host
from .stub_llm import StubLLM, make_directive_policy, text_of

pytestmark = pytest.mark.host

CONTEXT_LENGTH = 64_000
THRESHOLD_RATIO = 0.11
FACT = "WOMBAT-4410"
ENV = {
    "LCM_CONTEXT_THRESHOLD": str(THRESHOLD_RATIO),
    "LCM_FRESH_TAIL_COUNT": "8",
    "LCM_LEAF_CHUNK_TOKENS": "1500",
    "LCM_CONDENSE_MIN_NODES": "3",
}
_VOCAB = (
    "cache index schema migration latency budget replica shard queue worker batch retry timeout backoff "
    "checksum snapshot rollback canary metric alert dashboard quota tenant region node socket buffer"
).split()


def _turn(host: str, i: int) -> str:
    rng = random.Random(f"{host}-{i}")
    body = " ".join(
        " ".join(rng.choice(_VOCAB) for _ in range(14)).capitalize() + "." for _ in range(18)
    )
    if host == "a" and i == 1:
        return f"{host} turn {i}: keep this safe, the vault recovery code for the west region is {FACT}. {body}"
    return f"{host} turn {i}: please review these notes. {body}"


TURNS_A = [_turn("a", i) for i in range(30)]
TURNS_B = [_turn("b", i) for i in range(6)] + [
    "b turn 6: another agent of ours was told the vault recovery code for the west region. "
    "Find it and tell me exactly. [[tool lcm_recall @recall]]"
]


@dataclass
class Fleet:
    url: str
    runs: dict[str, HostRun]
    stubs: dict[str, StubLLM]


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    require_host()
    url = fresh_url()
    policy = make_directive_policy({"recall": {"query": "vault recovery code west region"}})
    runs: dict[str, HostRun] = {}
    with (
        StubLLM(policy, context_length=CONTEXT_LENGTH) as stub_a,
        StubLLM(policy, context_length=CONTEXT_LENGTH) as stub_b,
    ):
        for name, stub, turns in (("a", stub_a, TURNS_A), ("b", stub_b, TURNS_B)):
            home = make_home(
                tmp_path_factory.mktemp(f"host_{name}"), stub, env={**ENV, "LCM_DATABASE_URL": url}
            )
            runs[name] = run_host(home, turns, timeout=170)
        yield Fleet(url, runs, {"a": stub_a, "b": stub_b})


def _rows(url: str, sql: str, args: tuple[Any, ...] = ()) -> list[Any]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as pg:
        return pg.execute(sql, args).fetchall()


def test_both_hosts_ran_on_the_shared_database(fleet: Fleet) -> None:
    for name, run in fleet.runs.items():
        assert run.report["engine"]["name"] == "lcm", name
        bad = [t for t in run.report["turns"] if not t["completed"] or t["failed"]]
        assert not bad, (name, bad)
    assert fleet.runs["a"].report["engine_final"]["compression_count"] >= 2
    assert _rows(fleet.url, "SELECT value FROM meta WHERE key='app'") == [("hermes-lcm",)]


def test_every_user_message_stored_once_in_its_own_conversation(fleet: Fleet) -> None:
    seen: dict[str, set[int]] = {}
    for name, turns in (("a", TURNS_A), ("b", TURNS_B)):
        for i, text in enumerate(turns):
            rows = _rows(
                fleet.url,
                "SELECT conversation_id FROM messages WHERE role='user' AND content=%s",
                (text,),
            )
            assert len(rows) == 1, f"host {name} turn {i} stored {len(rows)} times"
            seen.setdefault(name, set()).add(rows[0][0])
    assert len(seen["a"]) == 1 and len(seen["b"]) == 1 and seen["a"] != seen["b"], seen


def test_lineage_is_complete_and_summaries_exist(fleet: Fleet) -> None:
    depths = _rows(fleet.url, "SELECT depth, count(*) FROM summaries GROUP BY depth ORDER BY depth")
    assert depths and depths[0][0] == 0, depths
    assert_lineage_complete(fleet.url)


def test_host_b_recalls_the_fact_host_a_was_told(fleet: Fleet) -> None:
    mains = fleet.stubs["b"].requests_of("main")
    calls = [
        tc
        for r in mains
        for tc in ((r.reply or {}).get("tool_calls") or [])
        if tc["function"]["name"] == "lcm_recall"
    ]
    assert len(calls) == 1, calls
    answer = [
        r
        for r in mains
        if r.tail_role() == "tool" and r.messages[-1].get("tool_call_id") == calls[0]["id"]
    ]
    assert len(answer) == 1
    result = json.loads(text_of(answer[0].messages[-1].get("content")))
    assert FACT in json.dumps(result), (
        f"the fact planted on host A was not recalled on host B: {str(result)[:800]}"
    )
    final = fleet.runs["b"].report["turns"][-1]["final_response"] or ""
    assert FACT in final


def test_every_request_of_both_hosts_fits_the_budget(fleet: Fleet) -> None:
    for name, stub in fleet.stubs.items():
        threshold = fleet.runs[name].report["engine_final"]["threshold_tokens"]
        mains = stub.requests_of("main")
        one_turn = max(count_messages(r.messages[-1:]) for r in mains)
        over = [(r.seq, r.prompt_tokens) for r in mains if r.prompt_tokens > threshold + one_turn]
        assert not over, (name, threshold, over)

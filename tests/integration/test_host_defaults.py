"""The real host as a user has it: every CLI toolset, memory on, the memory and skill reviews at
their default intervals (every 10 turns), subagents through ``delegate_task``, compaction
prepared between turns (the default).

What must hold: the host's background review forks (which take over the user's session id)
store nothing in any conversation and leave no conversation behind; none of their harness
prompts or replies reaches a request of the user's own turns, before or after a compaction;
a subagent stores nothing by default and, with LCM_SUBAGENT_SESSIONS=store, is its own
conversation linked to its parent.
"""

from __future__ import annotations

import itertools
import sqlite3
from typing import Any

import pytest

from hermes_lcm.base.hostagents import is_harness_text

from .harness import HostHome, run_host
from .stub_llm import Recorded, Reply, StubLLM, make_directive_policy, text_of

pytestmark = pytest.mark.host

TURNS = 26
# A fork's answer to its harness prompt (the stub's reply to a message with no "turn N" marker).
FORK_REPLY = "Acknowledged this request."


def turns(count: int = TURNS) -> list[str]:
    return [
        f"turn {i}: a note about component {i}, its config key comp{i}.timeout_ms = {1000 + i} "
        f"and the reason we chose it, for the record."
        for i in range(count)
    ]


def rows(hh: HostHome, sql: str) -> list[tuple[Any, ...]]:
    con = sqlite3.connect(f"file:{hh.lcm_db}?mode=ro", uri=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def is_fork_request(req: Recorded) -> bool:
    return is_harness_text(req.last_user_text())


def user_requests(stub: StubLLM) -> list[Recorded]:
    return [r for r in stub.requests_of("main") if not is_fork_request(r)]


def test_review_forks_never_reach_the_users_memory_or_prompt(
    host_defaults: HostHome, stub: StubLLM
):
    # the user pauses between turns (until the preparer is idle): compaction is prepared, as users
    # who read the reply have it, while the review forks run on the host's own threads
    run = run_host(
        host_defaults,
        turns(),
        host_defaults=True,
        think_seconds=5,
        think_until_idle=True,
        timeout=900,
    )
    forks = [r for r in stub.requests_of("main") if is_fork_request(r)]
    starts: dict[str, float] = {}  # one fork per snapshot it reviews (its first request)
    for r in forks:
        starts.setdefault(f"{r.last_user_text()[:60]}:{len(r.messages)}", r.at)
    assert len(starts) >= 2, (
        f"expected 2+ review forks at the host's defaults, saw {len(forks)} fork requests"
    )
    second_fork_at = sorted(starts.values())[1]
    played = run.report["turns"]
    compacting = [
        t
        for before, t in itertools.pairwise(played)
        if t["compression_count"] > before["compression_count"]
    ]
    assert any(t["ended_at"] > second_fork_at for t in compacting), (
        f"no compaction after the second fork: {[(t['i'], t['compression_count']) for t in played]}"
    )

    # nothing of a fork is stored, anywhere
    contents = [c for (c,) in rows(host_defaults, "SELECT content FROM messages")]
    assert not [c for c in contents if is_harness_text(c)]
    assert not [c for c in contents if c.startswith(FORK_REPLY)]
    summaries = [c for (c,) in rows(host_defaults, "SELECT content FROM summaries")]
    assert summaries, "the run never compacted into summaries"
    assert not [s for s in summaries if "Review the conversation above" in s]
    # what was prepared between turns was published, and nothing prepared holds a fork's words
    deferred = run.report["engine_final"]["status"]["deferred_compaction"]
    assert deferred["mode"] == "deferred" and deferred["published"] > 0, deferred
    waiting = [c for (c,) in rows(host_defaults, "SELECT content FROM prepared_summaries")]
    assert not [c for c in waiting if is_harness_text(c) or FORK_REPLY in c]
    assert not [c for c in waiting if "Review the conversation above" in c]
    # one conversation, the user's: a fork opens none of its own
    conversations = rows(
        host_defaults,
        "SELECT c.id, (SELECT count(*) FROM messages m WHERE m.conversation_id=c.id) "
        "FROM conversations c",
    )
    assert len(conversations) == 1 and conversations[0][1] > 0, conversations
    users = [c for (c,) in rows(host_defaults, "SELECT content FROM messages WHERE role='user'")]
    assert users == turns()

    # no request of the user's own turns carries a harness prompt or a fork's reply
    mine = user_requests(stub)
    assert len(mine) >= TURNS
    for req in mine:
        for m in req.messages:
            text = text_of(m.get("content"))
            assert not is_harness_text(text) and "Review the conversation above" not in text, (
                req.seq
            )
            assert FORK_REPLY not in text, req.seq
    assert not [r.problems for r in stub.requests_of("main") if r.problems]
    # the host's session title: asked of the model on its own thread, stored nowhere
    assert stub.requests_of("title"), "the host never asked for a session title"
    assert not [
        c for c in contents if "descriptive title" in c or c == "Integration test conversation"
    ]


def test_a_subagent_stores_nothing_by_default(host_defaults: HostHome, subagent_stub: StubLLM):
    run_host(
        host_defaults,
        [
            "turn 0: the staging database listens on port 6543",
            "turn 1: look it up [[tool delegate_task @delegate]]",
            "turn 2: thanks",
        ],
        host_defaults=True,
        timeout=600,
    )
    child = [
        r for r in subagent_stub.requests_of("main") if r.last_user_text().startswith(SUBAGENT_GOAL)
    ]
    assert child, "the subagent never ran"
    assert not [r.problems for r in child if r.problems]
    contents = [c for (c,) in rows(host_defaults, "SELECT content FROM messages")]
    assert not [c for c in contents if c.startswith(SUBAGENT_GOAL)]
    assert len(rows(host_defaults, "SELECT id FROM conversations")) == 1
    assert rows(host_defaults, "SELECT count(*) FROM sessions WHERE platform='subagent'") == [(0,)]


def test_a_subagent_can_be_stored_linked_to_its_parent(
    host_defaults: HostHome, subagent_stub: StubLLM
):
    host_defaults.env["LCM_SUBAGENT_SESSIONS"] = "store"
    run = run_host(
        host_defaults,
        [
            "turn 0: the staging database listens on port 6543",
            "turn 1: look it up [[tool delegate_task @delegate]]",
            "turn 2: thanks",
        ],
        host_defaults=True,
        timeout=600,
    )
    sessions = rows(
        host_defaults,
        "SELECT id, conversation_id, platform, parent_session_id, reason FROM sessions",
    )
    parent = [s for s in sessions if s[0] == run.report["session_id"]]
    child = [s for s in sessions if s[2] == "subagent"]
    assert parent and child, sessions
    assert child[0][3] == parent[0][0] and child[0][4] == "subagent"
    assert child[0][1] != parent[0][1]
    stored = rows(
        host_defaults, f"SELECT content FROM messages WHERE conversation_id={child[0][1]}"
    )
    assert any(c.startswith(SUBAGENT_GOAL) for (c,) in stored)
    owners = dict(rows(host_defaults, "SELECT id, owner FROM conversations"))
    assert owners[child[0][1]] == owners[parent[0][1]]
    parent_rows = [
        c
        for (c,) in rows(
            host_defaults, f"SELECT content FROM messages WHERE conversation_id={parent[0][1]}"
        )
    ]
    assert not [c for c in parent_rows if c.startswith(SUBAGENT_GOAL)]


SUBAGENT_GOAL = "subagent goal: find the staging port"


@pytest.fixture
def subagent_stub(stub: StubLLM) -> StubLLM:
    """The stub scripted so the user's turn 1 delegates a task (the host runs it in the background)."""
    stub.policy = make_directive_policy({"delegate": {"goal": SUBAGENT_GOAL}})
    return stub


SKILL = (
    "---\nname: component-timeouts\ndescription: How this user sets component timeouts.\n---\n"
    "# Component timeouts\nEach component has a compN.timeout_ms key; record the reason with it.\n"
)


def test_the_curator_stores_nothing_and_reaches_no_prompt(host_defaults: HostHome, stub: StubLLM):
    """The review forks create a skill (so the curator has something to curate), then one curator
    pass runs with consolidation on its own thread, as the host's schedule starts it."""
    directives = make_directive_policy()

    def policy(req: Recorded) -> Reply:
        if is_fork_request(req) and "skill" in req.last_user_text() and req.tail_role() == "user":
            return Reply(
                tool_name="skill_manage",
                tool_args={"action": "create", "name": "component-timeouts", "content": SKILL},
            )
        return directives(req)

    stub.policy = policy
    run = run_host(host_defaults, turns(12), host_defaults=True, curator=True, timeout=900)
    curator = [
        r for r in stub.requests_of("main") if "background skill CURATOR" in r.last_user_text()
    ]
    assert curator, f"the curator never called the model: {run.report.get('curator')}"
    assert (host_defaults.home / "skills").exists()
    contents = [c for (c,) in rows(host_defaults, "SELECT content FROM messages")]
    assert not [c for c in contents if is_harness_text(c) or "CURATOR" in c]
    assert len(rows(host_defaults, "SELECT id FROM conversations")) == 1
    assert rows(host_defaults, "SELECT count(*) FROM sessions WHERE platform='curator'") == [(0,)]
    for req in user_requests(stub):
        if "CURATOR" in req.last_user_text():
            continue
        assert not any("CURATOR" in text_of(m.get("content")) for m in req.messages)

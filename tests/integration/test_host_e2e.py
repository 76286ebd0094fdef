"""hermes-lcm inside the real Hermes host (hermes-agent 0.19.0), offline, against the stub model.

One 42-turn conversation at context_length 64,000 with a threshold of ~7k tokens, the whole
history handed back every turn (API/gateway style), so the engine compacts several times.
Turn 30 makes the stub model call ``lcm_grep`` for a fact planted in turn 1 (compacted long
before), then ``lcm_expand`` on the id the search returned, then answer. Afterwards the
engine's database is opened read-only and checked, and every request the host sent to the
model is measured.
"""

from __future__ import annotations

import json
import random
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from hermes_lcm.base.tokens import count_messages

from .harness import HostHome, HostRun, make_home, require_host, run_host
from .stub_llm import Policy, Recorded, Reply, StubLLM, make_directive_policy, text_of

pytestmark = pytest.mark.host

CONTEXT_LENGTH = 64_000
THRESHOLD_RATIO = 0.11  # ~7,040 tokens
N_TURNS = 42
FACT = "QUOKKA-7731"
FACT_TURN = 1
TOOL_TURN = 30
ENGINE_ENV = {
    "LCM_CONTEXT_THRESHOLD": str(THRESHOLD_RATIO),
    "LCM_FRESH_TAIL_COUNT": "8",
    "LCM_LEAF_CHUNK_TOKENS": "1500",
    "LCM_CONDENSE_MIN_NODES": "3",
}

_VOCAB_TEXT = (
    "cache index schema migration latency budget replica shard queue worker batch retry "
    "timeout backoff checksum snapshot rollback canary metric alert dashboard quota tenant "
    "region node socket buffer parser lexer compiler linker module package wheel "
    "lockfile pipeline runner artifact bucket prefix manifest ledger invoice refund coupon "
    "cart checkout session cookie token header payload gateway router proxy firewall subnet"
)
_VOCAB = _VOCAB_TEXT.split()


def user_turn(i: int) -> str:
    """A distinct ~350-token user message for turn ``i``."""
    rng = random.Random(1000 + i)
    sentences = []
    for _ in range(18):
        words = [rng.choice(_VOCAB) for _ in range(14)]
        sentences.append(" ".join(words).capitalize() + ".")
    body = " ".join(sentences)
    if i == FACT_TURN:
        return (
            f"turn {i}: Before we go on, keep this safe: the deployment passphrase for the "
            f"staging cluster is {FACT}. I will need it later. {body}"
        )
    if i == TOOL_TURN:
        return (
            f"turn {i}: At the very start I asked you to keep something safe for the staging "
            "cluster. Look it up and tell me exactly what it was. [[tool lcm_grep @recall]]"
        )
    return f"turn {i}: Please review the following notes and advise. {body}"


TURNS = [user_turn(i) for i in range(N_TURNS)]
NAMED_TOOL_ARGS = {"recall": {"query": "deployment passphrase"}}


def grep_then_expand_policy() -> Policy:
    """The directive policy, plus: after an lcm_grep result, expand the best raw hit by its id."""
    base = make_directive_policy(NAMED_TOOL_ARGS)

    def policy(req: Recorded) -> Reply:
        if req.kind == "main" and req.tail_role() == "tool" and _last_tool_name(req) == "lcm_grep":
            hits = json.loads(text_of(req.messages[-1].get("content"))).get("hits") or []
            store_ids = [h["store_id"] for h in hits if "store_id" in h]
            if store_ids:
                return Reply(tool_name="lcm_expand", tool_args={"store_id": store_ids[0]})
        return base(req)

    return policy


def _last_tool_name(req: Recorded) -> str | None:
    call_id = req.messages[-1].get("tool_call_id")
    for message in reversed(req.messages):
        for call in message.get("tool_calls") or []:
            if call.get("id") == call_id:
                return str(call["function"]["name"])
    return None


@dataclass
class E2E:
    hh: HostHome
    stub: StubLLM
    run: HostRun
    turns: list[str]

    def db(self) -> sqlite3.Connection:
        path = self.hh.lcm_db
        assert path.is_file(), f"no engine database at {path}"
        return sqlite3.connect(f"file:{path}?mode=ro", uri=True)


@pytest.fixture(scope="module")
def e2e(tmp_path_factory: pytest.TempPathFactory) -> Iterator[E2E]:
    require_host()
    tmp = tmp_path_factory.mktemp("host_e2e")
    with StubLLM(grep_then_expand_policy(), context_length=CONTEXT_LENGTH) as stub:
        hh = make_home(tmp, stub, env=ENGINE_ENV)
        run = run_host(hh, TURNS, timeout=170)
        print(
            f"\nhost e2e: {N_TURNS} turns in {run.seconds:.1f}s "
            f"({len(stub.requests_of('main'))} main requests, "
            f"{len(stub.requests_of('summary'))} summary requests); plugin loaded as "
            + ", ".join(
                f"{p['module']} ({p['source']})"
                for p in run.report.get("plugins", [])
                if p["enabled"]
            )
        )
        yield E2E(hh=hh, stub=stub, run=run, turns=TURNS)


def _mains(e2e: E2E) -> list[Recorded]:
    return e2e.stub.requests_of("main")


def test_engine_selected_and_turns_complete(e2e: E2E) -> None:
    report = e2e.run.report
    assert report["engine"]["name"] == "lcm"
    assert "lcm_grep" in report["context_engine_tools"]
    turns = report["turns"]
    assert len(turns) == N_TURNS
    bad = [t for t in turns if not t["completed"] or t["failed"]]
    assert not bad, bad
    assert report["engine_final"]["compression_count"] >= 2, report["engine_final"]
    # the history handed back each turn stays bounded instead of growing with the conversation
    assert turns[-1]["messages"] < 2 * N_TURNS, turns[-1]


def test_requests_are_valid_and_keep_the_newest_user_message(e2e: E2E) -> None:
    mains = _mains(e2e)
    problems = [(r.seq, r.problems) for r in mains if r.problems]
    assert not problems, problems
    assert all(r.messages and r.messages[0].get("role") == "system" for r in mains)
    firsts = [r.last_user_text() for r in mains if r.tail_role() == "user"]
    assert firsts == e2e.turns, "a turn's own user message did not reach the model"


def test_every_user_message_stored_exactly_once(e2e: E2E) -> None:
    with e2e.db() as db:
        missing, duplicated = [], []
        conversations = set()
        for i, text in enumerate(e2e.turns):
            rows = db.execute(
                "SELECT conversation_id FROM messages WHERE role = 'user' AND content = ?", (text,)
            ).fetchall()
            if not rows:
                missing.append(i)
            elif len(rows) > 1:
                duplicated.append((i, len(rows)))
            conversations.update(r[0] for r in rows)
    assert not missing, f"user turns not stored: {missing}"
    assert not duplicated, f"user turns stored more than once (turn, count): {duplicated}"
    assert len(conversations) == 1, f"one logical conversation expected, got {conversations}"


def test_summary_dag_has_depths_and_complete_lineage(e2e: E2E) -> None:
    with e2e.db() as db:
        depths = dict(db.execute("SELECT depth, COUNT(*) FROM summaries GROUP BY depth").fetchall())
        assert depths.get(0, 0) >= 2, f"summaries per depth: {depths}"
        assert depths.get(1, 0) >= 1, f"summaries per depth: {depths}"
        dangling = db.execute(
            """
            SELECT e.parent_id, e.child_kind, e.child_id FROM (SELECT parent_id,
                iif(child_kind, 'summary', 'message') AS child_kind, child_id, ord FROM edges) e
            WHERE NOT EXISTS (SELECT 1 FROM summaries s WHERE s.id = e.parent_id)
               OR e.child_kind NOT IN ('message', 'summary')
               OR (e.child_kind = 'message'
                   AND NOT EXISTS (SELECT 1 FROM messages m WHERE m.id = e.child_id))
               OR (e.child_kind = 'summary'
                   AND NOT EXISTS (SELECT 1 FROM summaries s WHERE s.id = e.child_id))
            """
        ).fetchall()
        assert not dangling, f"edges pointing nowhere: {dangling[:10]}"
        inverted = db.execute(
            """
            SELECT p.id, p.depth, c.id, c.depth FROM (SELECT parent_id,
                iif(child_kind, 'summary', 'message') AS child_kind, child_id, ord FROM edges) e
            JOIN summaries p ON p.id = e.parent_id
            JOIN summaries c ON e.child_kind = 'summary' AND c.id = e.child_id
            WHERE c.depth >= p.depth
            """
        ).fetchall()
        assert not inverted, f"summary children not shallower than parents: {inverted[:10]}"
        orphans = db.execute(
            """
            WITH RECURSIVE reach(root, kind, node) AS (
                SELECT s.id, 'summary', s.id FROM summaries s
                UNION
                SELECT r.root, e.child_kind, e.child_id
                FROM reach r JOIN (SELECT parent_id,
                    iif(child_kind, 'summary', 'message') AS child_kind, child_id, ord FROM edges) e
                    ON r.kind = 'summary' AND e.parent_id = r.node
            )
            SELECT s.id, s.depth FROM summaries s
            WHERE NOT EXISTS (
                SELECT 1 FROM reach r JOIN messages m ON r.kind = 'message' AND m.id = r.node
                WHERE r.root = s.id
            )
            """
        ).fetchall()
        assert not orphans, f"summaries that reach no raw message: {orphans[:10]}"


def _turn_tokens(r: Recorded) -> int:
    """Tokens of the request's current turn: from its last user message to the end."""
    msgs = r.messages
    start = max((i for i, m in enumerate(msgs) if m.get("role") == "user"), default=len(msgs))
    return count_messages(msgs[start:])


def test_every_request_fits_the_budget(e2e: E2E) -> None:
    threshold = e2e.run.report["engine_final"]["threshold_tokens"]
    assert 0 < threshold <= int(CONTEXT_LENGTH * THRESHOLD_RATIO), threshold
    mains = _mains(e2e)
    one_turn = max(_turn_tokens(r) for r in mains)
    limit = threshold + one_turn
    # r.prompt_tokens = hermes_lcm.tokens.count_messages(messages) + tokens of the tools JSON
    over = [
        {
            "seq": r.seq,
            "prompt_tokens": r.prompt_tokens,
            "messages": len(r.messages),
            "system": count_messages(r.messages[:1]),
            "turn": _turn_tokens(r),
        }
        for r in mains
        if r.prompt_tokens > limit
    ]
    assert not over, f"requests over threshold {threshold} + one turn {one_turn}: {over}"
    # and the conversation really was several times the budget, so the bound means something
    said = [{"role": "user", "content": t} for t in e2e.turns] + [r.reply for r in mains if r.reply]
    assert count_messages(said) > 3 * threshold, count_messages(said)


def test_grep_result_reaches_the_model(e2e: E2E) -> None:
    mains = _mains(e2e)
    calls = [
        tc
        for r in mains
        for tc in ((r.reply or {}).get("tool_calls") or [])
        if tc["function"]["name"] == "lcm_grep"
    ]
    assert len(calls) == 1, calls
    call_id = calls[0]["id"]
    followups = [
        r
        for r in mains
        if r.tail_role() == "tool" and r.messages[-1].get("tool_call_id") == call_id
    ]
    assert len(followups) == 1, "no request carried the lcm_grep result back to the model"
    tool_msg = followups[0].messages[-1]
    content = text_of(tool_msg.get("content"))
    assert FACT in content, f"planted fact missing from the lcm_grep result: {content[:800]}"


def test_expand_of_the_grep_hit_returns_the_exact_compacted_turn(e2e: E2E) -> None:
    mains = _mains(e2e)
    calls = [
        tc
        for r in mains
        for tc in ((r.reply or {}).get("tool_calls") or [])
        if tc["function"]["name"] == "lcm_expand"
    ]
    assert len(calls) == 1, calls
    store_id = json.loads(calls[0]["function"]["arguments"])["store_id"]
    followups = [
        r
        for r in mains
        if r.tail_role() == "tool" and r.messages[-1].get("tool_call_id") == calls[0]["id"]
    ]
    assert len(followups) == 1, "no request carried the lcm_expand result back to the model"
    expanded = json.loads(text_of(followups[0].messages[-1].get("content")))
    assert expanded["message"]["content"] == TURNS[FACT_TURN], (
        "lcm_expand did not return the planted turn exactly"
    )
    assert expanded["complete"] and expanded["summarized_in"], (
        "the recalled turn should be complete and summarized"
    )
    with e2e.db() as con:
        seq, frontier = con.execute(
            "SELECT m.seq, c.frontier_seq FROM messages m JOIN conversations c ON c.id=m.conversation_id "
            "WHERE m.id=?",
            (store_id,),
        ).fetchone()
        covered = con.execute(
            "SELECT count(*) FROM (SELECT parent_id, iif(child_kind, 'summary', 'message') AS child_kind, child_id, ord FROM edges) WHERE child_kind='message' AND child_id=?",  # noqa: E501 (schema 4 raw SQL)
            (store_id,),
        ).fetchone()[0]
    assert seq <= frontier and covered == 1, (
        "the planted turn was not compacted before it was recalled"
    )
    final = e2e.run.report["turns"][TOOL_TURN]["final_response"] or ""
    assert FACT in final


def _debug_dump(e2e: E2E) -> dict[str, Any]:  # handy from a debugger
    return {
        "report": {k: v for k, v in e2e.run.report.items() if k != "final_history"},
        "requests": [(r.seq, r.kind, r.prompt_tokens, r.tail_role()) for r in e2e.stub.requests],
    }


def test_fresh_agent_every_turn_stores_each_message_once(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """Gateway style: a new AIAgent (so a new engine copy) for every turn, same session id, the
    whole history replayed each time. Replays must not duplicate rows."""
    require_host()
    tmp = tmp_path_factory.mktemp("host_fresh_agents")
    turns = [user_turn(i) for i in range(2, 16)]
    with StubLLM(grep_then_expand_policy(), context_length=CONTEXT_LENGTH) as stub:
        hh = make_home(tmp, stub, env=ENGINE_ENV)
        run = run_host(hh, turns, agent_per_turn=True, timeout=120)
        mains = stub.requests_of("main")
    report = run.report
    assert all(t["completed"] and not t["failed"] for t in report["turns"])
    assert {t["session_id"] for t in report["turns"]} == {report["session_id_initial"]}
    assert [r.last_user_text() for r in mains if r.tail_role() == "user"] == turns
    assert not [r.problems for r in mains if r.problems]
    with sqlite3.connect(f"file:{hh.lcm_db}?mode=ro", uri=True) as db:
        counts = [
            db.execute(
                "SELECT COUNT(*) FROM messages WHERE role = 'user' AND content = ?", (t,)
            ).fetchone()[0]
            for t in turns
        ]
        n_summaries = db.execute("SELECT COUNT(*) FROM summaries").fetchone()[0]
    assert counts == [1] * len(turns), counts
    assert n_summaries >= 1


def test_client_resending_raw_history_stores_each_message_once(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """API-server style (/v1/chat/completions): a new agent per request and the client's raw,
    never-compacted transcript as history. The engine must still store each message once and
    keep every request within budget."""
    require_host()
    tmp = tmp_path_factory.mktemp("host_raw_client")
    turns = [user_turn(i) for i in range(2, 20)]
    with StubLLM(grep_then_expand_policy(), context_length=CONTEXT_LENGTH) as stub:
        hh = make_home(tmp, stub, env=ENGINE_ENV)
        run = run_host(hh, turns, history="client", agent_per_turn=True, timeout=120)
        mains = stub.requests_of("main")
    report = run.report
    assert all(t["completed"] and not t["failed"] for t in report["turns"])
    assert [r.last_user_text() for r in mains if r.tail_role() == "user"] == turns
    threshold = report["engine_final"]["threshold_tokens"]
    limit = threshold + max(_turn_tokens(r) for r in mains)
    assert all(r.prompt_tokens <= limit for r in mains), [r.prompt_tokens for r in mains]
    with sqlite3.connect(f"file:{hh.lcm_db}?mode=ro", uri=True) as db:
        counts = [
            db.execute(
                "SELECT COUNT(*) FROM messages WHERE role = 'user' AND content = ?", (t,)
            ).fetchone()[0]
            for t in turns
        ]
    assert counts == [1] * len(turns), counts


def test_summaries_came_from_the_host_auxiliary_llm(e2e: E2E) -> None:
    """With default settings the engine summarizes through the host's auxiliary client, which
    for this offline config resolves to the same stub endpoint."""
    summaries = e2e.stub.requests_of("summary")
    assert summaries, "no summarization request reached the model endpoint"
    assert not any(r.tools for r in summaries)


def test_the_view_shows_the_hosts_compactions(e2e: E2E, tmp_path) -> None:
    """The compaction record the page draws comes from the host's own compress calls: one event per
    compaction, the prompt before and after, the host's system prompt and tool schemas counted."""
    from hermes_lcm.store import open_readonly
    from hermes_lcm.viewer import write_page

    store = open_readonly(e2e.hh.lcm_db)
    try:
        out = write_page(store, tmp_path / "view.html")
        events = store.events_of("compaction", out["conversation_id"])
        nodes = {n.id for n in store.summaries(out["conversation_id"], limit=10_000)}
    finally:
        store.close()
    assert out["messages"] > 2 * N_TURNS and out["compactions"] == len(events) >= 2
    made = [i for e in events for i in e["detail"]["nodes"]]
    assert (
        len(made) == len(set(made)) and set(made) <= nodes
    )  # each node made by one recorded compaction
    for e in events:
        before, after = e["detail"]["before"], e["detail"]["after"]
        assert (
            after["system"] == before["system"] > 1000
        )  # the host's system prompt and tool schemas
        assert (
            sum(after.values()) < sum(before.values())
            and sum(after.values()) <= e["detail"]["limit"]
        )

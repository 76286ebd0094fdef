"""The real host's scaffolding and our own summary block.

* One user request, a todo list, then a long tool loop in the same turn: the host compacts
  several times inside the loop and appends a user-role todo snapshot after each compaction.
  The request must reach the model verbatim after every compaction; the snapshots are stored,
  labelled, and never pinned in its place.
* A session resumed from the host's own session database hands our summary block back
  without our private key: it is never stored as a message, while a user message that merely
  starts like one is stored and found.

On SQLite and PostgreSQL (``both_backends``: the host's engine gets LCM_DATABASE_URL).
"""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path
from typing import Any

import pytest

from ..backends import raw_sql
from .harness import make_home, require_host, run_host
from .stub_llm import Recorded, Reply, StubLLM, make_directive_policy, text_of

pytestmark = [pytest.mark.host, pytest.mark.both_backends]

CONTEXT_LENGTH = 64_000
ENGINE_ENV = {
    "LCM_CONTEXT_THRESHOLD": "0.11",  # ~7,040 tokens
    "LCM_FRESH_TAIL_COUNT": "6",
    "LCM_LEAF_CHUNK_TOKENS": "1500",
}
REQUEST = (
    "Port the parser module to the new lexer, one source file at a time, and tell me "
    "when all of them are done. Reference: ticket PARSE-4411."
)
READS = 16
TODOS = [
    {"id": "1", "content": "read every parser source file", "status": "in_progress"},
    {"id": "2", "content": "port each file to the new lexer", "status": "pending"},
    {"id": "3", "content": "report back to the user", "status": "pending"},
]
SNAPSHOT_PREFIX = "[Your active task list was preserved across context compression]"
BLOCK_PREFIX = "[lcm:context"
OWN_BLOCK = re.compile(r"\s*\[lcm:context [0-9a-f]{24}\]")
BRANCH_AT = 11


def _source_files(root: Path) -> list[Path]:
    """Distinct files of ~1,500 tokens each (distinct, so the host's read dedup never kicks in)."""
    files = []
    for k in range(READS):
        path = root / f"parser_{k:02d}.py"
        lines = [
            f"def rule_{k}_{n}(tokens): return tokens.expect('tok_{k}_{n}', 'branch {n} of file {k}')"
            for n in range(70)
        ]
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        files.append(path)
    return files


def loop_policy(files: list[Path]):
    """First call: write the todo list; then one read_file per file; then the final answer."""
    lock = threading.Lock()
    state = {"step": 0}

    def policy(req: Recorded) -> Reply:
        if req.kind == "title":
            return Reply(text="Parser port")
        if req.kind != "main":
            return make_directive_policy()(req)
        with lock:
            step = state["step"]
            state["step"] += 1
        if step == 0:
            return Reply(tool_name="todo", tool_args={"todos": TODOS})
        if step <= len(files):
            return Reply(
                tool_name="read_file", tool_args={"path": str(files[step - 1]), "limit": 200}
            )
        return Reply(text="All parser files are read and ported.")

    return policy


def _after_compaction(mains: list[Recorded]) -> list[Recorded]:
    return [
        r
        for r in mains
        if any(text_of(m.get("content")).startswith(BLOCK_PREFIX) for m in r.messages)
    ]


def _request_reaches_model(req: Recorded) -> bool:
    """The request verbatim as a user message; the host may have merged it into the block before it."""
    for m in req.messages:
        text = text_of(m.get("content"))
        if m.get("role") == "user" and (text == REQUEST or text.endswith("\n\n" + REQUEST)):
            return True
    return False


def where(hh: Any, backend_env: dict[str, str]) -> str:
    """The database the host's engine used: its home's lcm.db, or the URL it was given."""
    return backend_env.get("LCM_DATABASE_URL") or str(hh.lcm_db)


def test_todo_snapshots_in_one_long_tool_loop_never_displace_the_request(
    tmp_path: Path, backend_env: dict[str, str]
) -> None:
    require_host()
    files = _source_files(tmp_path)
    with StubLLM(loop_policy(files), context_length=CONTEXT_LENGTH) as stub:
        hh = make_home(tmp_path, stub, env={**ENGINE_ENV, **backend_env})
        run = run_host(hh, [REQUEST], toolsets=["context_engine", "todo", "file"], timeout=200)
        mains = stub.requests_of("main")
    turn = run.report["turns"][0]
    assert turn["completed"] and not turn["failed"], run.describe()
    called = [
        tc["function"]["name"] for r in mains for tc in ((r.reply or {}).get("tool_calls") or [])
    ]
    assert called == ["todo"] + ["read_file"] * READS, called
    assert not [(r.seq, r.problems) for r in mains if r.problems]

    compacted = _after_compaction(mains)
    snapshots_sent = [
        r
        for r in compacted
        if any(text_of(m.get("content")).startswith(SNAPSHOT_PREFIX) for m in r.messages)
    ]
    assert turn["compression_count"] >= 2, turn
    assert len(snapshots_sent) >= 2, (
        "the host did not append its todo snapshot after the compactions"
    )
    missing = [r.seq for r in compacted if not _request_reaches_model(r)]
    assert not missing, f"requests after a compaction without the user's request: {missing}"

    rows = raw_sql(
        where(hh, backend_env), "SELECT seq, role, content, synthetic FROM messages ORDER BY seq"
    )
    requests = [r for r in rows if r[2] == REQUEST]
    snapshots = [r for r in rows if r[2].startswith(SNAPSHOT_PREFIX)]
    assert [(r[1], r[3]) for r in requests] == [("user", None)], requests
    assert len(snapshots) >= 2 and all(r[1] == "user" and r[3] for r in snapshots), snapshots
    assert max(r[0] for r in snapshots) > requests[0][0]
    print(
        f"\none turn: {len(mains)} main requests, {turn['compression_count']} compactions, "
        f"{len(compacted)} requests after one, {len(snapshots)} todo snapshots stored (labelled)"
    )
    assert not [r for r in rows if r[2].startswith(BLOCK_PREFIX)], (
        "our own summary block was stored"
    )


def _resume_turns() -> list[str]:
    body = " ".join(
        f"word{k} cache index schema migration latency budget replica shard" for k in range(30)
    )
    turns = [f"turn {i}: please review these notes and advise. {body}" for i in range(14)]
    turns[9] = "[lcm:context 1234] this is my own text, NUMBAT-5521, not a summary. " + body
    return turns


def test_a_session_resumed_or_branched_from_the_host_database_never_stores_our_block(
    tmp_path: Path, backend_env: dict[str, str]
) -> None:
    """Every turn a fresh agent reloads the transcript from the host's session database (the
    gateway's restart/resume path), and once the session is forked like the gateway's /branch:
    our block comes back without its private key, into the same conversation and into a new
    one where nothing is stored yet. It is never stored; the user text the host merged into it
    is; a user message that merely starts like our block is stored and found."""
    require_host()
    turns = _resume_turns()
    with StubLLM(make_directive_policy(), context_length=CONTEXT_LENGTH) as stub:
        hh = make_home(tmp_path, stub, env={**ENGINE_ENV, **backend_env})
        run = run_host(
            hh, turns, history="db", agent_per_turn=True, branch_before=[BRANCH_AT], timeout=200
        )
        mains = stub.requests_of("main")
    assert all(t["completed"] and not t["failed"] for t in run.report["turns"]), run.describe()
    assert [r for r in mains if r.problems] == []
    assert _after_compaction(mains[:BRANCH_AT]), "no compaction before the branch"
    rows = raw_sql(
        where(hh, backend_env),
        "SELECT m.conversation_id, m.role, m.content, s.id FROM messages m "
        "JOIN session_keys k ON k.id=m.session_key JOIN sessions s ON s.id=k.name ORDER BY m.conversation_id, m.seq",
    )
    branch = run.report["branches"][0]
    in_branch = [r for r in rows if r[3] == branch]
    assert in_branch and {r[0] for r in in_branch} != {r[0] for r in rows if r[3] != branch}, (
        "no new conversation"
    )
    ours = [r[2][:60] for r in rows if OWN_BLOCK.match(r[2])]
    assert not ours, f"our own block was stored as a message: {ours}"
    user_texts = [r[2] for r in rows if r[1] == "user"]
    assert set(user_texts) <= set(turns), [t[:80] for t in set(user_texts) - set(turns)]
    first_conversation = [r[2] for r in rows if r[1] == "user" and r[0] == rows[0][0]]
    assert [t for t in turns[:BRANCH_AT] if first_conversation.count(t) != 1] == []
    branch_users = [r[2] for r in in_branch if r[1] == "user"]
    assert [t for t in turns[BRANCH_AT:] if branch_users.count(t) != 1] == []
    raw = [
        h
        for h in _grep(
            hh, run.report["turns"][BRANCH_AT - 1]["session_id"], "NUMBAT-5521", backend_env
        )
        if "store_id" in h
    ]
    assert [h["role"] for h in raw] == ["user"], raw


def _grep(
    hh: Any, session_id: str, query: str, backend_env: dict[str, str]
) -> list[dict[str, Any]]:
    """lcm_grep through an engine bound to the run's last session (a fresh engine in this process)."""
    from hermes_lcm import store as store_module
    from hermes_lcm.engine import LcmEngine

    engine = LcmEngine(
        env={"HERMES_HOME": str(hh.home), "LCM_SUMMARY_PROVIDER": "extractive", **backend_env}
    )
    engine.on_session_start(session_id, hermes_home=str(hh.home), platform="cli")
    try:
        return list(json.loads(engine.handle_tool_call("lcm_grep", {"query": query}))["hits"])
    finally:
        store_module.close_all()

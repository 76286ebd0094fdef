"""Recall as the agent really uses it, inside the real Hermes host against the stub model.

One early user message states a fact, fourteen long turns follow (the engine compacts), then
the user asks for it and the stub model calls ``lcm_grep`` with the user's own question. The
question was stored a moment before the search and holds every query word, yet the fact must
come first. Two turns later the same question is asked again: now the first question, the first
search's tool call and result and the reply built from it are all stored, and the fact must still
come first, ahead of every one of them.
"""

from __future__ import annotations

import json
import random
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from .harness import HostHome, HostRun, make_home, require_host, run_host
from .stub_llm import Recorded, StubLLM, make_directive_policy, text_of

pytestmark = pytest.mark.host

CONTEXT_LENGTH = 64_000
QUESTION = "When does the staging database password rotation happen?"
FACT = "the staging database password rotation happens every Thursday at 04:30 UTC"
ASK_TURNS = (15, 17)
ENGINE_ENV = {
    "LCM_CONTEXT_THRESHOLD": "0.11",  # ~7,000 tokens: fourteen long turns are twice that
    "LCM_FRESH_TAIL_COUNT": "8",
    "LCM_LEAF_CHUNK_TOKENS": "1500",
    "LCM_CONDENSE_MIN_NODES": "3",
}
_VOCAB = (
    "cache index schema migration latency budget replica shard queue worker batch retry timeout backoff "
    "checksum snapshot canary metric alert dashboard quota tenant region socket buffer parser module"
).split()


def user_turn(i: int) -> str:
    rng = random.Random(2000 + i)
    body = " ".join(
        " ".join(rng.choice(_VOCAB) for _ in range(14)).capitalize() + "." for _ in range(18)
    )
    if i == 0:
        return f"turn 0: Note this for later: {FACT}. {body}"
    if i == ASK_TURNS[0]:
        return f"turn {i}: {QUESTION} [[tool lcm_grep @ask]]"
    if i == ASK_TURNS[1]:
        return f"turn {i}: Once more, {QUESTION} [[tool lcm_grep @ask]]"
    return f"turn {i}: Please review these notes. {body}"


TURNS = [user_turn(i) for i in range(ASK_TURNS[1] + 1)]


@dataclass
class Run:
    hh: HostHome
    stub: StubLLM
    run: HostRun

    def db(self) -> sqlite3.Connection:
        return sqlite3.connect(f"file:{self.hh.lcm_db}?mode=ro", uri=True)

    def grep_answers(self) -> list[dict[str, Any]]:
        """Every lcm_grep result as the model received it, in order."""
        mains = self.stub.requests_of("main")
        calls = [
            tc
            for r in mains
            for tc in ((r.reply or {}).get("tool_calls") or [])
            if tc["function"]["name"] == "lcm_grep"
        ]
        answers = []
        for call in calls:
            follow: list[Recorded] = [
                r
                for r in mains
                if r.tail_role() == "tool" and r.messages[-1].get("tool_call_id") == call["id"]
            ]
            assert len(follow) == 1, "the lcm_grep result did not reach the model"
            assert json.loads(call["function"]["arguments"]) == {"query": QUESTION}
            answers.append(json.loads(text_of(follow[0].messages[-1].get("content"))))
        return answers


@pytest.fixture(scope="module")
def used(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    require_host()
    tmp = tmp_path_factory.mktemp("host_recall_in_use")
    with StubLLM(
        make_directive_policy({"ask": {"query": QUESTION}}), context_length=CONTEXT_LENGTH
    ) as stub:
        hh = make_home(tmp, stub, env=ENGINE_ENV)
        yield Run(hh, stub, run_host(hh, TURNS, timeout=170))


def _row(con: sqlite3.Connection, store_id: int) -> tuple[str, str, str | None]:
    role, content, tool_name = con.execute(
        "SELECT role, content, tool_name FROM messages WHERE id=?", (store_id,)
    ).fetchone()
    return role, content, tool_name


def test_the_fact_comes_first_although_the_question_was_stored_first(used: Run) -> None:
    answers = used.grep_answers()
    assert len(answers) == 2
    with used.db() as con:
        fact_id, fact_seq, frontier = con.execute(
            "SELECT m.id, m.seq, c.frontier_seq FROM messages m JOIN conversations c ON c.id=m.conversation_id "
            "WHERE m.content=?",
            (TURNS[0],),
        ).fetchone()
        question_ids = {
            r[0]
            for r in con.execute(
                "SELECT id FROM messages WHERE role='user' AND content LIKE ?", (f"%{QUESTION}%",)
            )
        }
    assert fact_seq <= frontier, "the fact was not compacted: the search proved nothing"
    first = answers[0]
    assert first["hits"][0].get("store_id") == fact_id, first["hits"][:3]
    assert first["in_context"] >= 1, "the question being answered is in the prompt and is counted"
    later = [h for h in first["hits"] if h.get("store_id") in question_ids]
    assert all(h.get("in_context") for h in later), (
        "the question is listed only as already in the prompt"
    )


def test_the_second_search_is_not_crowded_by_the_first(used: Run) -> None:
    """The first question, its search's call and result, and the reply built from them are stored;
    none outranks the fact: the lcm_* rows are not searched, and the question and the reply come
    only after every ranked hit (in the prompt, or in the walk's newest-first remainder, unscored)."""
    second = used.grep_answers()[1]
    with used.db() as con:
        fact_id = con.execute("SELECT id FROM messages WHERE content=?", (TURNS[0],)).fetchone()[0]
        rows = {h["store_id"]: _row(con, h["store_id"]) for h in second["hits"] if "store_id" in h}
        echoes = con.execute(
            "SELECT count(*) FROM messages WHERE tool_name='lcm_grep' OR content LIKE "
            "'Based on the tool result%'"
        ).fetchone()[0]
    shown = [
        (
            h.get("store_id"),
            h.get("in_context"),
            h.get("score"),
            rows.get(h.get("store_id"), ("summary", ""))[0],
        )
        for h in second["hits"]
    ]
    assert second["hits"][0].get("store_id") == fact_id, shown
    assert echoes >= 2, (
        "the first search's traffic was stored (and so could have crowded the second)"
    )
    for hit in second["hits"]:
        role, content, tool_name = rows.get(hit.get("store_id"), ("summary", "", None))
        assert not (tool_name or "").startswith("lcm_"), (
            f"an lcm_* result was a hit: {content[:200]}"
        )
        if content.startswith("Based on the tool result") or (
            role == "user" and QUESTION in content
        ):
            assert hit.get("in_context") or "score" not in hit, shown

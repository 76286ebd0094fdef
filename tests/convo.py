"""Conversation builders and invariant checks shared by the engine tests."""

from __future__ import annotations

import json
import random
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from hermes_lcm.base.tokens import count_messages
from hermes_lcm.engine import LcmEngine
from hermes_lcm.ingest.normalize import is_synthetic

WORDS = """alpha beta gamma delta deploy config parser token budget cache index ledger
module retry timeout socket schema vector kernel branch commit merge release ticket""".split()


def text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words))


def turn(
    rng: random.Random, t: int, size: int = 60, tool_loops: int | None = None
) -> list[dict[str, Any]]:
    """One user turn: the ask, 0-2 tool loops, the final answer."""
    out: list[dict[str, Any]] = [{"role": "user", "content": f"turn {t} ask: {text(rng, size)}"}]
    loops = rng.randint(0, 2) if tool_loops is None else tool_loops
    for loop in range(loops):
        ids = [f"call_{t}_{loop}_{k}" for k in range(rng.randint(1, 2))]
        out.append(
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": i,
                        "type": "function",
                        "function": {
                            "name": "read_file",
                            "arguments": json.dumps({"path": f"f{t}.py"}),
                        },
                    }
                    for i in ids
                ],
            }
        )
        out.extend(
            {"role": "tool", "tool_call_id": i, "content": f"result {i}: {text(rng, size * 2)}"}
            for i in ids
        )
    out.append({"role": "assistant", "content": f"turn {t} answer: {text(rng, size)}"})
    return out


def conversation(seed: int, turns: int, size: int = 60) -> Iterator[list[dict[str, Any]]]:
    rng = random.Random(seed)
    for t in range(turns):
        yield turn(rng, t, size)


def host_run(
    engine: LcmEngine,
    turns: Sequence[list[dict[str, Any]]],
    overhead: int = 500,
    api_mode: bool = False,
) -> tuple[list[dict[str, Any]], list[list[dict[str, Any]]]]:
    """Drive the engine as Hermes does; returns (all raw messages, every compress output)."""
    history: list[dict[str, Any]] = []
    live: list[dict[str, Any]] = []
    outputs = []
    for messages in turns:
        history.extend(messages)
        live.extend(messages)
        sent = history if api_mode else live
        engine.ingest_host(list(sent))
        tokens = count_messages(sent) + overhead
        if engine.should_compress(tokens):
            result = engine.compress(list(sent), current_tokens=tokens)
            outputs.append(result)
            if not api_mode:
                live = list(result)
    return history, outputs


def stored_sequence(engine: LcmEngine) -> list[tuple[str, Any]]:
    core = engine.core
    assert core is not None and core.binding.conversation_id is not None
    return [
        (m.role, m.to_host()["content"])
        for m in core.store.messages_after(core.binding.conversation_id, 0)
    ]


def assert_valid_sequence(messages: Sequence[dict[str, Any]]) -> None:
    """No tool result without its call right before it; no call without all its results."""
    i = 0
    while i < len(messages):
        m = messages[i]
        assert m.get("role") in ("user", "assistant", "tool"), m.get("role")
        assert m["role"] != "tool", f"orphan tool result at {i}: {m.get('tool_call_id')}"
        if m["role"] == "assistant" and m.get("tool_calls"):
            wanted = {c["id"] for c in m["tool_calls"]}
            j = i + 1
            got = set()
            while j < len(messages) and messages[j].get("role") == "tool":
                got.add(messages[j]["tool_call_id"])
                j += 1
            assert got == wanted, f"call at {i} answered by {got}, wanted {wanted}"
            i = j
            continue
        i += 1


def _raw_query(
    target: str,
) -> tuple[Callable[[str, tuple[Any, ...]], list[Any]], Callable[[], None]]:
    """Plain SQL on the database, past the store's own code: sqlite3 for a file, psycopg for a URL."""
    if target.startswith("postgresql://"):
        import psycopg

        pg = psycopg.connect(target, autocommit=True)
        return (lambda sql, args: pg.execute(sql.replace("?", "%s"), args).fetchall()), pg.close
    con = sqlite3.connect(target)
    return (lambda sql, args: con.execute(sql, args).fetchall()), con.close


def assert_lineage_complete(db_path: str) -> None:
    """Every node reaches raw messages; every depth-0 node links messages, deeper ones nodes."""
    query, close = _raw_query(str(db_path))
    edges = (
        "(SELECT parent_id, CASE WHEN child_kind=1 THEN 'summary' ELSE 'message' END AS child_kind, child_id "
        "FROM edges)"
    )
    try:
        for node_id, depth in query("SELECT id, depth FROM summaries", ()):
            kinds = {
                r[0]
                for r in query(f"SELECT child_kind FROM {edges} e WHERE parent_id=?", (node_id,))
            }
            assert kinds == ({"message"} if depth == 0 else {"summary"}), (node_id, depth, kinds)
            leaves = query(
                f"WITH RECURSIVE walk(kind, id) AS (SELECT 'summary', CAST(? AS BIGINT) UNION SELECT e.child_kind, "
                f"e.child_id FROM {edges} e JOIN walk w ON w.kind='summary' AND e.parent_id=w.id) "
                "SELECT count(*) FROM walk w JOIN messages m ON w.kind='message' AND m.id=w.id",
                (node_id,),
            )[0][0]
            assert leaves > 0, f"node {node_id} reaches no raw message"
    finally:
        close()


def visible(messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m for m in messages if not is_synthetic(m)]

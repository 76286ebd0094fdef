"""A host turn does the same work at any history length.

Each turn the host calls the post_llm_call hook with its whole list (a copy) and then
``should_compress``: that path runs on every turn a user waits for, so nothing on it may walk the
stored history or the host's list. The work is counted, not timed: the SQL statements the store
executes and the messages fingerprinted (each a canonical JSON dump and a hash), for the same
turns played on a short history and on one twenty times longer, in both host shapes (the API
client that re-sends the whole history, the CLI that holds the compressed list).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hermes_lcm.base import registry
from hermes_lcm.host import hooks
from hermes_lcm.ingest import steps

from .conftest import new_engine


def _message(i: int) -> dict[str, Any]:
    if i % 4 == 2:
        return {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": f"call{i}",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": f'{{"path": "f{i}.py"}}'},
                }
            ],
        }
    if i % 4 == 3:
        return {"role": "tool", "tool_call_id": f"call{i - 1}", "content": f"line {i} of f{i}.py"}
    role = "user" if i % 4 == 0 else "assistant"
    return {"role": role, "content": f"turn {i}: the deploy of worker {i % 97} needs a check"}


def _work(tmp_path: Path, size: int, shape: str, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    engine = new_engine(tmp_path / f"{shape}-{size}", 10**9, f"s-{shape}-{size}")
    core = engine.core
    assert core is not None
    host = [_message(i) for i in range(size)]
    engine.ingest_host(host)
    if shape == "cli":  # the host holds the compressed list: summaries and the fresh tail
        budget = core.budget(4000, 0)
        core.compact(budget)
        host = core.assemble(budget)
    statements: list[str] = []
    core.store.conn.set_trace_callback(statements.append)
    printed = 0
    real = steps.fingerprint_of

    def counting(*args: Any, **kwargs: Any) -> str:
        nonlocal printed
        printed += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(steps, "fingerprint_of", counting)
    work = []
    try:
        for turn in range(4):
            new = [_message(size + 4 * turn + k) for k in range(4)]
            host = [*host, *new]
            registry.register(engine.session_id, engine)
            statements.clear()
            printed = 0
            hooks.post_llm_call(
                session_id=engine.session_id,
                platform="cli",
                user_message=new[0]["content"],
                conversation_history=list(host),
            )
            engine.should_compress(1000)
            # the statements' shapes (numbers differ with the rows), and how many
            work.append((len(statements), printed, sorted({s.split()[0] for s in statements})))
    finally:
        core.store.conn.set_trace_callback(None)
        monkeypatch.setattr(steps, "fingerprint_of", real)
    stored = core.store.message_count(core.binding.conversation_id)
    assert stored == size + 16  # every turn stored its messages: the counts are of real work
    return work


@pytest.mark.parametrize("shape", ["api", "cli"])
def test_a_turn_does_the_same_work_at_any_history_length(
    tmp_path: Path, shape: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    short = _work(tmp_path, 200, shape, monkeypatch)
    long = _work(tmp_path, 4000, shape, monkeypatch)
    assert all(statements > 0 and printed > 0 for statements, printed, _ in short), short
    assert short == long, (short, long)
    # four new messages each turn: each fingerprinted a bounded number of times, not the list
    assert max(printed for _, printed, _ in long) <= 12, long

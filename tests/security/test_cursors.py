"""Search cursors are bound to their scope and tamper-evident.

A cursor carries a full-length keyed hash (key: the database's own secret) over the request and
its numbers: a forged, modified or foreign cursor is an error and never pages another
conversation's rows. Before, the pool cache was keyed by a 24-bit fingerprint, so a crafted query
with a guessed cursor could be served another conversation's ranked pool.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from hermes_lcm import store as store_module

from ..conftest import database_env
from .test_scope import ATTACKER_WORD, VICTIM_SECRET, VICTIM_WORD, engine_for, fill

pytestmark = (
    pytest.mark.both_backends
)  # the cursor's key is the database's own secret, on either backend


@pytest.fixture
def where(backend: str) -> dict[str, str]:
    return database_env(backend)


def grep(engine: Any, **args: Any) -> dict[str, Any]:
    return json.loads(engine.handle_tool_call("lcm_grep", args))


def test_forged_modified_and_foreign_cursors_are_errors(tmp_path: Path, where: dict[str, str]):
    alice = engine_for(tmp_path, "tg-alice-1", "111", **where)
    fill(alice, VICTIM_WORD, seed=1, turns=20)
    bob = engine_for(tmp_path, "tg-bob-1", "222", **where)
    fill(bob, ATTACKER_WORD, seed=2, turns=20)
    first = grep(alice, query="turn ask", limit=2)
    cursor = first["next_cursor"]
    assert cursor and len(cursor.rsplit(":", 1)[1]) == 64
    assert "error" not in grep(alice, query="turn ask", limit=2, cursor=cursor)
    # Alice's own cursor, replayed by Bob with the same query: another scope.
    foreign = grep(bob, query="turn ask", limit=2, cursor=cursor)
    assert "error" in foreign and VICTIM_SECRET not in json.dumps(foreign)
    # Every number changed, and the signature flipped: errors.
    body, mac = cursor.rsplit(":", 1)
    parts = body.split(":")
    for i in range(1, 6):
        changed = parts.copy()
        changed[i] = str(int(changed[i]) + 1)
        assert "error" in grep(
            alice, query="turn ask", limit=2, cursor=":".join(changed) + ":" + mac
        )
    flipped = mac[:-1] + ("0" if mac[-1] != "0" else "1")
    assert "error" in grep(alice, query="turn ask", limit=2, cursor=f"{body}:{flipped}")
    # The old 24-bit format, and guesses at it, are errors.
    for guess in ("r:0:999:999:998:998:abcdef", f"{body}:{mac[:6]}", "t:0:1:1:0:0:" + "0" * 64):
        answer = grep(bob, query="turn ask", limit=2, cursor=guess)
        assert "error" in answer and VICTIM_SECRET not in json.dumps(answer)
    store_module.close_all()


def test_no_crafted_query_is_served_another_conversations_pool(
    tmp_path: Path, where: dict[str, str]
):
    """Bob walks many queries with cursors built from Alice's walk: never one of her rows."""
    alice = engine_for(tmp_path, "tg-alice-1", "111", **where)
    fill(alice, VICTIM_WORD, seed=1, turns=20)
    bob = engine_for(tmp_path, "tg-bob-1", "222", **where)
    fill(bob, ATTACKER_WORD, seed=2, turns=20)
    cursors = []
    page = grep(alice, query=VICTIM_WORD, limit=1)
    while page.get("next_cursor") and len(cursors) < 5:
        cursors.append(page["next_cursor"])
        page = grep(alice, query=VICTIM_WORD, limit=1, cursor=page["next_cursor"])
    assert cursors
    for n in range(200):
        for cursor in cursors:
            answer = grep(bob, query=f"{VICTIM_WORD} q{n}", limit=1, cursor=cursor)
            assert VICTIM_SECRET not in json.dumps(answer)
            assert "error" in answer
    store_module.close_all()

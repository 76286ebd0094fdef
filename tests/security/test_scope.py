"""One owner's lcm_* tools never read another owner's conversations.

Two real engines share ONE database file, as a gateway serving two people does (the host names
each chat by its session key). Every tool is called by the attacker with and without scope
arguments, with the victim's ids and session id and words: no answer may carry the victim's text
or session id. The same owner's other conversation is read only when the call asks for it, and
another owner's only when the operator turns shared memory on. The same attacks run with both
engines on one PostgreSQL URL (``both_backends``): the owner filter is the shared mixins' SQL, and
PostgreSQL's own search (tsvector) must filter exactly as FTS5 does.
"""

from __future__ import annotations

import copy
import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from hermes_lcm import store as store_module
from hermes_lcm.engine import LcmEngine
from hermes_lcm.store import SCHEMA_VERSION, StoreError, StoreFault, open_store

from ..conftest import database_env
from ..convo import conversation, host_run

VICTIM_WORD = "aliceplumvault"
VICTIM_SECRET = "xylophonealicesecret"  # beside VICTIM_WORD in the victim's text, never in a query
ATTACKER_WORD = "bobquincevault"
FIXTURES = Path(__file__).resolve().parent.parent.parent / "fixtures"


def engine_for(home: Path, session: str, chat: str | None = None, **env: str) -> LcmEngine:
    """An engine copy as the host makes one; ``chat`` is the gateway's key (None: the CLI)."""
    base = {"HERMES_HOME": str(home), "LCM_SUMMARY_PROVIDER": "extractive", **env}
    engine = copy.deepcopy(LcmEngine(env=base))
    engine.update_model("fake-model", 64000)
    engine.threshold_tokens = 6000
    start: dict[str, Any] = {"hermes_home": str(home), "platform": "telegram" if chat else "cli"}
    if chat:
        start["conversation_id"] = f"agent:main:telegram:dm:{chat}"
    engine.on_session_start(session, **start)
    return engine


def fill(engine: LcmEngine, word: str, seed: int, turns: int = 30) -> None:
    """A compacted history whose every turn carries ``word`` (in asks, tool results and answers)."""
    rounds = []
    for messages in conversation(seed, turns):
        for m in messages:
            if isinstance(m.get("content"), str) and m["content"]:
                m["content"] += f" {word} {VICTIM_SECRET if word == VICTIM_WORD else ''}"
        rounds.append(messages)
    host_run(engine, rounds)


def call(engine: LcmEngine, name: str, **args: Any) -> str:
    raw = engine.handle_tool_call(name, args)
    assert isinstance(raw, str) and isinstance(json.loads(raw), dict)
    return raw


def victim_ids(engine: LcmEngine) -> tuple[list[int], list[str]]:
    core = engine.core
    assert core is not None and core.binding.conversation_id is not None
    conv = core.binding.conversation_id
    messages = [m.id for m in core.store.messages_after(conv, 0)]
    nodes = [n.node_id for n in core.dag.nodes(conv)]
    assert messages and nodes
    return messages, nodes


def attacks(victim: LcmEngine, session: str) -> list[tuple[str, dict[str, Any]]]:
    """Every tool, with and without scope arguments, aimed at the victim's ids, words and session."""
    messages, nodes = victim_ids(victim)
    out: list[tuple[str, dict[str, Any]]] = []
    for scope in ({}, {"session_scope": "all"}):
        out += [
            ("lcm_grep", {"query": VICTIM_WORD, **scope}),
            ("lcm_grep", {"query": "turn ask", **scope}),
            ("lcm_recent", {"period": "7d", **scope}),
            ("lcm_describe", {**scope}),
        ]
        out += [
            ("lcm_expand", {"store_id": i, **scope})
            for i in messages[:: max(1, len(messages) // 12)]
        ]
        out += [("lcm_expand", {"node_id": n, **scope}) for n in nodes]
        out += [("lcm_describe", {"node_id": n, **scope}) for n in nodes]
    out += [
        ("lcm_grep", {"query": VICTIM_WORD, "session_scope": "session", "session_id": session}),
        ("lcm_grep", {"query": VICTIM_WORD, "sort": "recency", "session_scope": "all"}),
        ("lcm_recall", {"query": VICTIM_WORD}),
        ("lcm_recall", {"query": "turn ask answer", "limit": 30}),
        ("lcm_recall", {"query": VICTIM_WORD, "scope_bias": 0}),
        ("lcm_load_session", {"session_id": session}),
        ("lcm_expand_query", {"question": f"what is {VICTIM_WORD}", "mode": "evidence"}),
        (
            "lcm_expand_query",
            {"question": "what happened", "node_ids": nodes[:3], "mode": "evidence"},
        ),
        ("lcm_status", {}),
        ("lcm_inspect", {}),
        ("lcm_doctor", {}),
    ]
    return out


@pytest.fixture
def where(backend: str) -> dict[str, str]:
    """The setting that puts every engine of one test on the same database (a file or one URL)."""
    return database_env(backend)


@pytest.fixture
def two_people(tmp_path: Path, where: dict[str, str]):
    alice = engine_for(tmp_path, "tg-alice-1", "111", **where)
    fill(alice, VICTIM_WORD, seed=1)
    bob = engine_for(tmp_path, "tg-bob-1", "222", **where)
    fill(bob, ATTACKER_WORD, seed=2)
    assert alice.database_path() == bob.database_path()
    yield alice, bob
    store_module.close_all()


@pytest.mark.both_backends
def test_no_tool_reads_another_owners_conversation(two_people):
    alice, bob = two_people
    for name, args in attacks(alice, "tg-alice-1"):
        raw = call(bob, name, **args)
        assert VICTIM_SECRET not in raw, (name, args, raw[:400])
        if "tg-alice-1" not in json.dumps(args):  # echoing the caller's own argument tells nothing
            assert "tg-alice-1" not in raw, (name, args, raw[:400])


@pytest.mark.both_backends
def test_another_owners_ids_answer_like_missing_ids(two_people):
    alice, bob = two_people
    messages, nodes = victim_ids(alice)
    missing_message = json.loads(call(bob, "lcm_expand", store_id=10**9, session_scope="all"))[
        "error"
    ]
    foreign_message = json.loads(
        call(bob, "lcm_expand", store_id=messages[0], session_scope="all")
    )["error"]
    assert foreign_message == missing_message.replace(str(10**9), str(messages[0]))
    assert json.loads(call(bob, "lcm_load_session", session_id="tg-alice-1"))[
        "error"
    ] == json.loads(call(bob, "lcm_load_session", session_id="no-such"))["error"].replace(
        "no-such", "tg-alice-1"
    )
    assert (
        "no summary node"
        in json.loads(call(bob, "lcm_describe", node_id=nodes[0], session_scope="all"))["error"]
    )


@pytest.mark.both_backends
def test_the_owner_still_reads_its_own_conversation(two_people):
    alice, _ = two_people
    assert VICTIM_WORD in call(alice, "lcm_grep", query=VICTIM_WORD)
    assert VICTIM_WORD in call(alice, "lcm_recall", query=VICTIM_WORD)
    assert json.loads(call(alice, "lcm_load_session", session_id="tg-alice-1"))["count"] > 0


@pytest.mark.both_backends
def test_shared_memory_lets_the_operator_open_every_conversation(
    tmp_path: Path, where: dict[str, str]
):
    alice = engine_for(tmp_path, "tg-alice-1", "111", **where)
    fill(alice, VICTIM_WORD, seed=1, turns=12)
    team = engine_for(tmp_path, "tg-bob-1", "222", LCM_SHARED_MEMORY="1", **where)
    fill(team, ATTACKER_WORD, seed=2, turns=12)
    assert team.config.shared_memory is True
    assert VICTIM_SECRET not in call(
        team, "lcm_grep", query=VICTIM_WORD
    )  # still current by default
    assert VICTIM_WORD in call(team, "lcm_grep", query=VICTIM_WORD, session_scope="all")
    assert VICTIM_WORD in call(team, "lcm_recall", query=VICTIM_WORD)
    assert json.loads(call(team, "lcm_load_session", session_id="tg-alice-1"))["count"] > 0
    store_module.close_all()


@pytest.mark.both_backends
def test_same_owner_other_conversation_only_when_asked(tmp_path: Path, where: dict[str, str]):
    first = engine_for(tmp_path, "cli-1", None, **where)
    fill(first, VICTIM_WORD, seed=1, turns=12)
    second = engine_for(tmp_path, "cli-2", None, **where)
    fill(second, ATTACKER_WORD, seed=2, turns=12)
    assert first.core and second.core
    assert first.core.binding.conversation_id != second.core.binding.conversation_id
    assert VICTIM_SECRET not in call(second, "lcm_grep", query=VICTIM_WORD)
    assert VICTIM_WORD in call(second, "lcm_grep", query=VICTIM_WORD, session_scope="all")
    assert VICTIM_WORD in call(
        second, "lcm_grep", query=VICTIM_WORD, session_scope="session", session_id="cli-1"
    )
    assert VICTIM_WORD in call(second, "lcm_recall", query=VICTIM_WORD)
    store_id = first.core.store.messages_after(first.core.binding.conversation_id or 0, 0)[0].id
    assert (
        "session_scope='all'" in json.loads(call(second, "lcm_expand", store_id=store_id))["error"]
    )
    assert VICTIM_WORD in call(second, "lcm_expand", store_id=store_id, session_scope="all")
    store_module.close_all()


def test_the_config_key_is_validated_like_the_other_booleans():
    from hermes_lcm.config import load_config

    assert load_config({"LCM_SHARED_MEMORY": "yes"}).config.shared_memory is True
    assert load_config({}, {"shared_memory": True}).config.shared_memory is True
    loaded = load_config({"LCM_SHARED_MEMORY": "maybe"})
    assert loaded.config.shared_memory is False and any(
        "LCM_SHARED_MEMORY" in p for p in loaded.problems
    )


def test_old_rows_get_an_owner_and_the_migration_is_crash_safe(tmp_path: Path):
    path = tmp_path / "lcm.db"
    shutil.copy(FIXTURES / "lcm_schema_v1.sqlite3", path)
    with sqlite3.connect(path) as raw:
        raw.execute(
            "INSERT INTO conversations(key, created_at) VALUES ('agent:main:telegram:dm:7', 0)"
        )
        raw.execute("INSERT INTO conversations(key, created_at) VALUES ('import:1:x', 0)")
        raw.execute(
            "CREATE TABLE conversations_owner(x)"
        )  # a crash inside the migration: its index fails
    with pytest.raises((StoreError, StoreFault)):
        open_store(path)
    store_module.close_all()
    with sqlite3.connect(path) as raw:  # nothing of versions 2 and 3 was kept
        assert raw.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == "1"
        assert "owner" not in {r[1] for r in raw.execute("PRAGMA table_info(conversations)")}
        raw.execute("DROP TABLE conversations_owner")
    store = open_store(path)
    assert (
        store.schema_version() == SCHEMA_VERSION == 5
    )  # then 4 (compact keys), 5 (payload grants)
    owners = dict(sqlite3.connect(path).execute("SELECT key, owner FROM conversations").fetchall())
    assert owners.pop("agent:main:telegram:dm:7") == "chat:agent:main:telegram:dm:7"
    assert set(owners.values()) == {"local"}
    store_module.close_all()
    assert open_store(path).schema_version() == SCHEMA_VERSION  # reopening runs nothing twice
    store_module.close_all()

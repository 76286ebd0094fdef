"""The import against a database LCM-X's own engine wrote (tests/peers/lcm_x/make_db.py drives it
through the Hermes hooks with compactions and a ``/new``).

Every expectation is read from the fixture with SQL of its own, never from our importer's report.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from hermes_lcm.dag import Dag
from hermes_lcm.importers import lcmx as li
from hermes_lcm.store import close_all, open_readonly

FIXTURE = Path(__file__).resolve().parent.parent / "peers" / "lcm_x" / "lcmx.db"
FIXTURE_SHA = hashlib.sha256(FIXTURE.read_bytes()).hexdigest()


@pytest.fixture(autouse=True)
def _fixture_untouched():
    """No test writes the fixture or leaves a -wal/-shm beside it."""
    yield
    close_all()
    assert hashlib.sha256(FIXTURE.read_bytes()).hexdigest() == FIXTURE_SHA
    assert not any(Path(f"{FIXTURE}{side}").exists() for side in ("-wal", "-shm", "-journal"))


def lcmx(tmp_path: Path) -> dict[str, Any]:
    """The fixture's rows, read from a copy."""
    path = tmp_path / "x.db"
    shutil.copy(FIXTURE, path)
    con = sqlite3.connect(path)
    con.row_factory = sqlite3.Row
    try:
        msgs = [dict(r) for r in con.execute("SELECT * FROM messages ORDER BY store_id")]
        nodes = [dict(r) for r in con.execute("SELECT * FROM summary_nodes ORDER BY node_id")]
        life = {
            r["conversation_id"]: dict(r) for r in con.execute("SELECT * FROM lcm_lifecycle_state")
        }
    finally:
        con.close()
    for n in nodes:
        n["source_ids"] = json.loads(n["source_ids"])
    return {"path": path, "messages": msgs, "nodes": nodes, "lifecycle": life}


def imported(tmp_path: Path) -> tuple[dict[str, Any], dict[str, Any], Any]:
    src = lcmx(tmp_path)
    out = li.run_import(src["path"], tmp_path / "ours.db", apply=True)
    return src, out, open_readonly(tmp_path / "ours.db")


def our_rows(store, key: str) -> list:
    conv = store.conversation_by_key(key)
    assert conv is not None, key
    return store.messages_after(conv.id, 0)


def keyed(src: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """LCM-X rows by the conversation we expect them in: its gateway key, else ``session:<id>``
    (LCM-X writes a CLI session's own id as its conversation id)."""
    out: dict[str, list[dict[str, Any]]] = {}
    for m in src["messages"]:
        conv = m["conversation_id"]
        key = f"session:{m['session_id']}" if not conv or conv == m["session_id"] else conv
        out.setdefault(key, []).append(m)
    return out


def test_the_fixture_is_an_engine_run_with_compactions(tmp_path):
    src = lcmx(tmp_path)
    assert FIXTURE.stat().st_size < 300_000
    assert FIXTURE.read_bytes()[18:20] == b"\x01\x01"  # rollback journal: a read never makes a -wal
    depths = {n["depth"] for n in src["nodes"]}
    assert 0 in depths and max(depths) >= 2
    assert {n["source_type"] for n in src["nodes"]} == {"messages", "nodes"}
    life = src["lifecycle"]["telegram:chat-42"]
    assert (life["last_finalized_session_id"], life["current_session_id"]) == ("sess-a1", "sess-a2")
    assert any(m["pinned"] for m in src["messages"])
    assert {m["role"] for m in src["messages"]} == {"system", "user", "assistant", "tool"}


def test_the_dry_run_counts_what_an_apply_writes(tmp_path):
    src = lcmx(tmp_path)
    plan = li.run_import(src["path"], tmp_path / "ours.db")
    out = li.run_import(src["path"], tmp_path / "ours.db", apply=True)
    assert plan["dry_run"] and plan["balanced"]
    assert {k: plan[k] for k in ("messages", "summaries")} == {
        k: out[k] for k in ("messages", "summaries")
    }
    assert {k: plan["edges"][k] for k in ("source", "imported", "dropped")} == {
        k: out["edges"][k] for k in ("source", "imported", "dropped")
    }


def test_every_message_keeps_its_fields_and_tool_links(tmp_path):
    src, out, store = imported(tmp_path)
    assert out["verify"]["ok"] and out["balanced"], out
    by_key = keyed(src)
    assert set(by_key) == {"telegram:chat-42", "session:cli-20251001"}
    for key, rows in by_key.items():
        ours = our_rows(store, key)
        assert [
            (m.role, m.content, m.session_id, m.tool_call_id or None, m.tool_name or None)
            for m in ours
        ] == [
            (
                r["role"],
                r["content"],
                r["session_id"],
                r["tool_call_id"] or None,
                r["tool_name"] or None,
            )
            for r in rows
        ]
        assert [json.loads(m.tool_calls) if m.tool_calls else None for m in ours] == [
            json.loads(r["tool_calls"]) if r["tool_calls"] else None for r in rows
        ]
        assert [m.created_at for m in ours] == [r["observed_at"] or r["timestamp"] for r in rows]
        assert [m.source for m in ours] == [r["source"] for r in rows]
    results = [r for r in src["messages"] if r["role"] == "tool"]
    calls = {
        c["id"]: c["function"]["name"]
        for r in src["messages"]
        if r["tool_calls"]
        for c in json.loads(r["tool_calls"])
    }
    assert results and all(calls[r["tool_call_id"]] == r["tool_name"] for r in results)
    links = store.tool_link_counts()
    assert (
        links["tool_results"],
        links["without_call_id"],
        links["orphaned"],
        links["without_name"],
    ) == (len(results), 0, 0, 0), links


def _by_route(store, keys) -> dict[int, Any]:
    dag = Dag(store)
    out = {}
    for key in keys:
        conv = store.conversation_by_key(key)
        for n in dag.nodes(conv.id):
            out[int(n.route.split(":")[1])] = n
    return out


def test_every_node_keeps_its_text_time_range_and_lineage(tmp_path):
    src, out, store = imported(tmp_path)
    dag = Dag(store)
    ours = _by_route(store, keyed(src))
    assert sorted(ours) == [n["node_id"] for n in src["nodes"]]  # every LCM-X node, none dropped
    assert dag.lineage_problems() == {}
    store_ids = {}  # LCM-X store id -> our message id
    for key, rows in keyed(src).items():
        store_ids.update(
            {r["store_id"]: m.id for r, m in zip(rows, our_rows(store, key), strict=True)}
        )
    present = {n["node_id"] for n in src["nodes"]}
    relinked = 0
    for n in src["nodes"]:
        node = ours[n["node_id"]]
        assert (node.content, node.session_id) == (n["summary"], n["session_id"])
        assert (node.earliest_at, node.latest_at) == (n["earliest_at"], n["latest_at"])
        if n["source_type"] == "messages":
            assert node.depth == 0 == n["depth"]
            assert [m.id for m in dag.sources(node.id)] == [store_ids[s] for s in n["source_ids"]]
        elif any(s in present for s in n["source_ids"]):
            assert node.depth == n["depth"]
            assert sorted(c.id for c in dag.children(node.id)) == sorted(
                ours[s].id for s in n["source_ids"]
            )
        else:  # its children were deleted by LCM-X's own /new (new_session_retain_depth)
            relinked += 1
            window = [
                store_ids[r["store_id"]]
                for r in src["messages"]
                if r["session_id"] == n["session_id"]
                and n["earliest_at"] <= r["timestamp"] <= n["latest_at"]
            ]
            assert window and [m.id for m in dag.sources(node.id)] == window
    assert relinked >= 1  # the engine-made fixture has such nodes: they must not be dropped
    assert out["summaries"]["imported"] == len(src["nodes"])
    assert sum("by its time range" in w for w in out["warnings"]) == relinked


def test_context_and_lifecycle_carry_over(tmp_path):
    src, _out, store = imported(tmp_path)
    dag = Dag(store)
    for key, rows in keyed(src).items():
        conv = store.conversation_by_key(key)
        sessions = {r["session_id"] for r in rows}
        nodes = [n for n in src["nodes"] if n["session_id"] in sessions]
        children = {s for n in nodes if n["source_type"] == "nodes" for s in n["source_ids"]}
        routes = {n.route for n in dag.context(conv.id)}
        assert routes == {f"lcm-x:{n['node_id']}" for n in nodes if n["node_id"] not in children}
        life = next(
            v for v in src["lifecycle"].values() if v["last_finalized_session_id"] in sessions
        )
        frontier = max(life["current_frontier_store_id"], life["last_finalized_frontier_store_id"])
        assert conv.frontier_seq == sum(1 for r in rows if r["store_id"] <= frontier)
        assert conv.last_seq == len(rows)
    assert store.session("sess-a2").parent_session_id == "sess-a1"
    assert store.session("sess-a1").platform == "telegram"
    assert store.session("cli-20251001").platform == "cli"


def test_a_rerun_changes_nothing(tmp_path):
    src, first, store = imported(tmp_path)
    counts = store.table_counts()
    close_all()
    again = li.run_import(src["path"], tmp_path / "ours.db", apply=True)
    assert again["conversations"] == {"source": 2, "imported": 0, "skipped_existing": 2}
    assert again["balanced"] and again["edges"]["dropped"] == first["edges"]["dropped"] > 0
    assert again["messages"]["skipped_existing"] == len(src["messages"])
    close_all()
    assert open_readonly(tmp_path / "ours.db").table_counts() == counts

"""One tool call does bounded work, and says when it clamped.

Before, lcm_expand_query with the same node id 2,000 times expanded it 2,000 times (over twelve
minutes on a real history). Ids are de-duplicated, at most ``MAX_NODES`` are expanded, gathering
stops at the token budget or after ``GATHER_SECONDS``, and the answer reports the clamp.
"""

from __future__ import annotations

import json
import time

import pytest

from hermes_lcm import store as store_module
from hermes_lcm.handlers.expand_query import MAX_NODES

from ..tooltest import compacted


@pytest.mark.both_backends
def test_the_same_node_2000_times_is_expanded_once(make_engine):
    engine = make_engine()
    compacted(engine, turns=40)
    core = engine.core
    assert core is not None and core.binding.conversation_id is not None
    nodes = [n.node_id for n in core.dag.nodes(core.binding.conversation_id)]
    started = time.monotonic()
    raw = engine.handle_tool_call(
        "lcm_expand_query",
        {"question": "what happened", "mode": "evidence", "node_ids": [nodes[0]] * 2000},
    )
    took = time.monotonic() - started
    answer = json.loads(raw)
    assert "error" not in answer, answer
    assert took < 5, took
    assert answer["clamped"]["node_ids"] == {"requested": 2000, "unique": 1, "used": 1}
    refs = [b["ref"] for b in answer["evidence"]]
    assert len(refs) == len(set(refs))
    store_module.close_all()


@pytest.mark.both_backends
def test_many_distinct_ids_are_clamped(make_engine):
    engine = make_engine()
    compacted(engine, turns=40)
    labels = [f"S{i}" for i in range(1, 5001)]
    started = time.monotonic()
    answer = json.loads(
        engine.handle_tool_call(
            "lcm_expand_query", {"question": "q", "mode": "evidence", "node_ids": labels}
        )
    )
    assert time.monotonic() - started < 5
    assert (
        answer.get("clamped", {}).get("node_ids", {}).get("used") == MAX_NODES or "error" in answer
    )
    store_module.close_all()

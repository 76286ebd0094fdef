"""The harness proves itself against a throwaway probe engine (written to a temp dir, never the
repo): the plugin loads from a symlinked dir, the engine is selected, compress is called over
the threshold, a tool call reaches handle_tool_call, and the stub records what the host sent."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .harness import make_home, read_probe_log, run_host, write_probe_plugin
from .stub_llm import StubLLM, make_directive_policy

pytestmark = pytest.mark.host


def _turn(i: int) -> str:
    return f"turn {i}: " + " ".join(
        f"consider aspect {i}.{k} of the rollout plan" for k in range(40)
    )


def test_probe_engine_end_to_end(stub: StubLLM, tmp_path: Path) -> None:
    stub.policy = make_directive_policy({"find": {"query": "zebra-42"}})
    probe_src = write_probe_plugin(tmp_path / "probe_src")
    hh = make_home(
        tmp_path,
        stub,
        plugin_src=probe_src,
        plugin_dirname="lcm-probe",
        plugin_name="lcm-probe",
        engine_name="lcm-probe",
        env={"PROBE_THRESHOLD": "3000"},
    )
    turns = [_turn(i) for i in range(7)]
    turns[1] = "turn 1: remember that the vault code is ZEBRA-42. " + turns[1]
    turns[5] = "turn 5: what was the vault code? [[tool probe_grep @find]]"
    run = run_host(hh, turns)
    report = run.report
    log = read_probe_log(hh)
    kinds = [e["kind"] for e in log]

    # Loaded through the symlinked user plugin dir, selected as the context engine.
    (plugin,) = [p for p in report["plugins"] if p["key"] == "lcm-probe"]
    assert plugin["enabled"] and plugin["source"] == "user"
    assert plugin["module"] == "hermes_plugins.lcm_probe"
    assert (hh.home / "plugins" / "lcm-probe").is_symlink()
    assert report["engine"]["name"] == "lcm-probe"
    assert report["engine"]["class"] == "hermes_plugins.lcm_probe.ProbeEngine"
    assert report["engine"]["context_length"] == 64000
    assert report["context_engine_tools"] == ["probe_grep"]
    # the registered object is a template: the agent got a deep copy
    assert kinds.index("register") < kinds.index("deepcopy") < kinds.index("update_model")

    # Every turn completed; history was handed back whole each turn.
    assert len(report["turns"]) == len(turns)
    assert all(t["completed"] and not t["failed"] for t in report["turns"])

    # Compression happened, on messages without the system prompt.
    compress = [e for e in log if e["kind"] == "compress"]
    assert compress, kinds
    assert all(not e["shape"]["has_system"] for e in compress)
    assert report["engine_final"]["compression_count"] >= 1
    # ... followed by the in-place boundary notifications
    starts = [e for e in log if e["kind"] == "engine.on_session_start"]
    assert any(e["kwargs"].get("boundary_reason") == "compression" for e in starts)

    # The tool call was dispatched to handle_tool_call with the live message list.
    (call,) = [e for e in log if e["kind"] == "handle_tool_call"]
    assert call["name"] == "probe_grep" and call["args"] == {"query": "zebra-42"}
    assert call["kwargs"] == ["messages"] and call["last_msg_has_tool_calls"]
    assert call["hits"] >= 1
    tool_followups = [r for r in stub.requests_of("main") if r.tail_role() == "tool"]
    assert len(tool_followups) == 1
    assert "ZEBRA-42" in tool_followups[0].messages[-1]["content"]

    # The stub saw streaming main-agent requests with the engine's tool and realistic usage.
    mains = stub.requests_of("main")
    assert len(mains) == len(turns) + 1  # one extra call for the tool round trip
    assert all(r.body.get("stream") for r in mains)
    assert all(r.tool_names == ["probe_grep"] for r in mains)
    assert all(r.messages[0]["role"] == "system" for r in mains)
    assert all(not r.problems for r in mains), [r.problems for r in mains]
    # the newest user request always reaches the model
    per_turn_first = [r for r in mains if r.tail_role() == "user"]
    assert [r.last_user_text() for r in per_turn_first] == turns

    # Hook payloads (kwargs only) as documented in host_facts.md.
    post = [e for e in log if e["kind"] == "hook.post_llm_call"]
    assert len(post) == len(turns)
    expected_keys = {"session_id", "user_message", "assistant_response", "conversation_history"}
    assert set(post[0]["keys"]) >= expected_keys
    assert not any(e["history"]["has_system"] for e in post)
    assert json.dumps(report["session_id"]) and report["session_id"] == report["session_id_initial"]

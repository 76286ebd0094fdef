"""The host-facing contract: copies, registry, hooks, budgets learned from usage."""

from __future__ import annotations

import copy
import json
import threading

import pytest

from hermes_lcm.base.registry import live_engine
from hermes_lcm.base.tokens import count_messages
from hermes_lcm.engine import LcmEngine
from hermes_lcm.host import hooks

from .convo import conversation

pytestmark = pytest.mark.both_backends


def test_deepcopy_carries_settings_but_no_connection(tmp_path, backend_env):
    template = LcmEngine(
        env={"HERMES_HOME": str(tmp_path), "LCM_SUMMARY_PROVIDER": "extractive", **backend_env}
    )
    template.update_model("m", 64000)
    live = copy.deepcopy(template)
    live.on_session_start("s1", hermes_home=str(tmp_path))
    assert live.core is not None and template.core is None
    again = copy.deepcopy(live)  # a subagent copied from a live engine
    assert again.core is None and again.threshold_tokens == live.threshold_tokens
    assert not any(isinstance(v, type(threading.Lock())) for v in vars(again).values())


def test_threshold_follows_config_and_model_overrides(tmp_path):
    engine = LcmEngine(env={"HERMES_HOME": str(tmp_path), "LCM_MODEL_THRESHOLDS": "big-model:0.25"})
    engine.update_model("big-model-1m", 1_000_000)
    assert engine.threshold_tokens == 250_000
    engine.update_model("small", 64000)
    assert engine.threshold_tokens == int(64000 * 0.35)
    assert engine.should_compress(engine.threshold_tokens) and not engine.should_compress(100)


def test_hooks_reach_the_live_copy_by_session_id(make_engine):
    engine = make_engine(threshold=10**9, session="abc")
    assert live_engine("abc") is engine
    hooks.post_llm_call(
        session_id="abc",
        conversation_history=[
            {"role": "user", "content": "via hook"},
            {"role": "assistant", "content": "ok"},
        ],
    )
    assert engine.core.store.message_count(engine.core.binding.conversation_id) == 2
    hooks.post_llm_call(
        session_id="unknown-session", conversation_history=[{"role": "user", "content": "x"}]
    )


def test_overhead_is_learned_from_real_usage_and_respected(make_engine):
    engine = make_engine(threshold=8000)
    history = [m for t in conversation(seed=21, turns=40) for m in t]
    system = {"role": "system", "content": "You are Hermes. " * 300}
    tools = [
        {
            "type": "function",
            "function": {
                "name": f"tool_{i}",
                "description": "does things " * 20,
                "parameters": {"type": "object", "properties": {}},
            },
        }
        for i in range(15)
    ]
    hooks.pre_api_request(
        session_id="s1",
        request_messages=[system, *history[:10]],
        request={"body": {"tools": tools}},
    )
    real_overhead = 2500
    engine.update_from_response({"prompt_tokens": count_messages(history[:10]) + real_overhead})
    assert abs(engine.meter.learned - real_overhead) < 50
    out = engine.compress(list(history), current_tokens=count_messages(history) + real_overhead)
    assert count_messages(out) + real_overhead <= engine.threshold_tokens


def test_disabled_tools_are_hidden_and_refused(make_engine):
    engine = make_engine(LCM_DISABLED_TOOLS="lcm_grep")
    names = {t["name"] for t in engine.get_tool_schemas()}
    assert "lcm_grep" not in names and names
    answer = json.loads(engine.handle_tool_call("lcm_grep", {"query": "x"}))
    assert "disabled" in answer["error"]


def test_tool_calls_ingest_the_live_messages_first(make_engine):
    engine = make_engine(threshold=10**9)
    live = [
        {"role": "user", "content": "remember the port 8431 for the staging server"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "t1",
                    "type": "function",
                    "function": {
                        "name": "lcm_grep",
                        "arguments": json.dumps({"query": "staging port"}),
                    },
                }
            ],
        },
    ]
    answer = json.loads(
        engine.handle_tool_call("lcm_grep", {"query": "staging port"}, messages=live)
    )
    assert "8431" in json.dumps(answer)


def test_tool_errors_are_json_not_exceptions(make_engine):
    engine = make_engine()
    for name, args in [
        ("lcm_expand", {"node_id": "S999"}),
        ("lcm_expand", {"store_id": "abc"}),
        ("lcm_nope", {}),
        ("lcm_grep", "not a dict"),
        ("lcm_expand", {}),
    ]:
        answer = json.loads(engine.handle_tool_call(name, args))
        assert "error" in answer, (name, answer)


def test_status_numbers_read_as_a_person_reads_them(make_engine):
    """A percentage to one decimal, a time as ISO, and a mistyped setting listed once (as a note)."""
    import re

    engine = make_engine(threshold=3000, LCM_THRESHOLD="0.5")
    history = [m for t in conversation(seed=4, turns=20) for m in t]
    engine.update_from_response({"prompt_tokens": 20141})
    engine.compress(list(history), current_tokens=count_messages(history))
    status = engine.get_status()
    assert status["usage_percent"] == round(20141 / 64000 * 100, 1)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", status["last_compaction"]["at"])
    assert [n for n in status["settings_notes"] if "LCM_THRESHOLD" in n]
    assert not [p for p in status["config_problems"] if "LCM_THRESHOLD" in p]


def _request_with_overhead(engine, system_tokens_approx: int) -> None:
    system = {
        "role": "system",
        "content": "You are Hermes, mind the repository. " * (system_tokens_approx // 8),
    }
    hooks.pre_api_request(
        session_id="s1",
        request_messages=[system, {"role": "user", "content": "hi"}],
        request={"body": {"tools": []}},
    )


def test_a_threshold_below_the_hosts_overhead_is_said_in_status_doctor_and_the_log(
    make_engine, caplog, tmp_path
):
    from hermes_lcm.host.overhead import threshold_problem
    from hermes_lcm.maintenance import doctor as maintenance

    engine = make_engine(threshold=6000)
    engine.ingest_host(
        [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi"}]
    )
    with caplog.at_level("WARNING", logger="hermes_lcm"):
        _request_with_overhead(engine, 18_000)
    overhead = engine.meter.measured()
    assert overhead is not None and overhead > 15_000
    status = engine.get_status()
    problem = status["threshold_problem"]
    assert (
        problem and "every turn compacts" in problem and "LCM_ABSOLUTE_THRESHOLD_TOKENS=" in problem
    )
    assert (
        status["overhead_tokens"]["used"] == overhead
    )  # the one number status, the view and the budget use
    smallest = int(problem.split("LCM_ABSOLUTE_THRESHOLD_TOKENS=")[1].split()[0])
    assert overhead + 4000 < smallest <= overhead + 4000 + 4096 + 1000
    assert (
        threshold_problem(smallest, overhead, min(4096, smallest // 10), 128_000) is None
    )  # the value it names works
    assert any(
        "the threshold (6,000 tokens)" in r.getMessage() for r in caplog.records
    )  # the host's log
    assert engine.core is not None
    report = maintenance.doctor_report(engine.core.store, deep=False)
    check = next(c for c in report["checks"] if c["name"] == "threshold")
    assert (
        check["status"] == "warn"
        and "every turn compacts" in check["detail"]
        and report["status"] == "warn"
    )

    engine.update_from_response({"prompt_tokens": overhead + 900})
    over = engine.get_status()["over_threshold"]
    assert over["tokens"] == overhead + 900 - 6000 and "the host's own tokens" in over["cause"]
    # the budget keeps half the threshold for the conversation; the overhead is shown as measured
    budget = engine.core.budget(engine.threshold_tokens, engine.overhead([], None))
    assert (
        budget.overhead == engine.meter.measured() > 15_000
        and budget.total > 1000
        and budget.limit < 6000
    )
    _request_with_overhead(engine, 18_000)  # said once, not on every request
    events = [e for e in engine.core.store.recent_events(50) if e[2] == "threshold"]
    assert len(events) == 1


def test_a_threshold_with_room_is_ok_in_doctor(make_engine):
    from hermes_lcm.maintenance import doctor as maintenance

    engine = make_engine(threshold=60_000)
    engine.ingest_host([{"role": "user", "content": "hello"}])
    _request_with_overhead(engine, 3_000)
    assert (
        engine.get_status()["threshold_problem"] is None
        and engine.get_status()["over_threshold"] is None
    )
    assert engine.core is not None
    check = next(
        c
        for c in maintenance.doctor_report(engine.core.store, deep=False)["checks"]
        if c["name"] == "threshold"
    )
    assert check["status"] == "ok" and check["detail"].startswith(
        "ok: the threshold (60,000 tokens) leaves"
    )

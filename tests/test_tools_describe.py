"""lcm_describe, lcm_recent, lcm_expand_query and the read-only diagnostics (on SQLite and on
PostgreSQL: every test with ``make_engine``)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from hermes_lcm.base.times import parse_time, period
from hermes_lcm.engine import LcmEngine

from .tooltest import compacted, err, ok, walk

pytestmark = pytest.mark.both_backends

DAY = 86400.0
MAY_1 = 1714521600.0  # 2024-05-01T00:00:00Z


def test_describe_before_and_after_compaction(make_engine):
    engine = make_engine()
    engine.ingest_host([{"role": "user", "content": "hello"}])
    before = ok(engine, "lcm_describe")
    assert before["summaries_by_depth"] == {} and "no compaction yet" in before["note"]
    compacted(engine, turns=40)
    after = ok(engine, "lcm_describe")
    assert after["context"] and after["roots"] and after["frontier_seq"] > 0
    for item in after["roots"] + after["context"]:
        assert set(item) == {"node_id", "depth", "from", "to", "tokens", "preview"}
        assert len(item["preview"]) <= 161


def test_describe_roots_page(make_engine):
    engine = make_engine(LCM_INCREMENTAL_MAX_DEPTH="0")
    compacted(engine, turns=60)
    roots = walk(lambda c: _roots_page(engine, c), "roots")
    ids = [r["node_id"] for r in roots]
    assert (
        len(ids) == len(set(ids)) == sum(ok(engine, "lcm_describe")["summaries_by_depth"].values())
    )


def _roots_page(engine: LcmEngine, cursor: Any) -> dict[str, Any]:
    answer = ok(engine, "lcm_describe", **({"cursor": cursor} if cursor else {}))
    answer["roots"] = answer["roots"][:3]  # a small page size, as if the cap were tiny
    answer["next_cursor"] = (
        answer["roots"][-1]["node_id"] if len(answer["roots"]) == 3 else answer["next_cursor"]
    )
    return answer


def timed_history(days: int = 4, per_day: int = 30) -> list[dict[str, Any]]:
    history = []
    for d in range(days):
        for i in range(per_day):
            at = MAY_1 + d * DAY + i * 600
            history.append(
                {
                    "role": "user",
                    "content": f"day {d} item {i} about the heron " + "word " * 60,
                    "timestamp": at,
                }
            )
            history.append(
                {
                    "role": "assistant",
                    "content": f"noted day {d} item {i} " + "text " * 60,
                    "timestamp": at + 60,
                }
            )
    return history


def test_recent_lists_leaf_summaries_of_a_day(make_engine):
    engine = make_engine(threshold=5000)
    history = timed_history()
    for end in range(20, len(history) + 1, 20):
        engine.ingest_host(history[:end])
        if engine.should_compress(90000):
            engine.compress(history[:end], current_tokens=90000)
    answer = ok(engine, "lcm_recent", period="date:2024-05-02")
    assert answer["period"] == {
        "name": "date:2024-05-02",
        "from": "2024-05-02T00:00:00Z",
        "to": "2024-05-03T00:00:00Z",
    }
    assert answer["summaries"], answer
    for node in answer["summaries"]:
        assert node["depth"] == 0 and node["from"] < "2024-05-03" and node["to"] >= "2024-05-02"
    all_days = walk(
        lambda c: ok(
            engine, "lcm_recent", period="2024-05-01", limit=1, **({"cursor": c} if c else {})
        ),
        "summaries",
    )
    assert len({n["node_id"] for n in all_days}) == len(all_days)
    empty = ok(engine, "lcm_recent", period="date:2030-01-01")
    assert empty["summaries"] == [] and empty["raw_messages_in_period"] == 0


def test_recent_points_to_grep_when_nothing_is_summarized(make_engine):
    engine = make_engine()
    engine.ingest_host(timed_history(days=1, per_day=3))
    answer = ok(engine, "lcm_recent", period="date:2024-05-01")
    assert (
        answer["summaries"] == []
        and answer["raw_messages_in_period"] == 6
        and "time_from" in answer["hint"]
    )
    assert "unknown period" in err(engine, "lcm_recent", period="fortnight")
    assert ok(engine, "lcm_recent")["period"]["name"] == "today"
    assert ok(engine, "lcm_recent", limit=99)["clamped"] == {"limit": {"requested": 99, "used": 30}}
    assert "malformed cursor" in err(engine, "lcm_recent", cursor="nope")


def test_periods_are_utc_intervals():
    now = MAY_1 + 2.5 * DAY  # 2024-05-03T12:00Z, a Friday
    assert (period("today", now).since, period("yesterday", now).since) == (
        MAY_1 + 2 * DAY,
        MAY_1 + DAY,
    )
    assert period("yesterday", now).until == MAY_1 + 2 * DAY
    assert period("7d", now).since == now - 7 * DAY
    assert period("week", now).since == MAY_1 - 2 * DAY  # Monday 2024-04-29
    assert period("month", now).since == MAY_1
    assert period("date:2024-05-01").until == MAY_1 + DAY
    assert parse_time("2024-05-01T00:00:00Z") == parse_time(MAY_1 * 1000) == MAY_1
    assert parse_time("2024-05-01", end=True) == MAY_1 + DAY
    assert parse_time("2024-05-01T02:00:00+02:00") == MAY_1


def stub_llm(answer: str, seen: list[Any]) -> Any:
    def call_llm(**kwargs: Any) -> dict[str, Any]:
        seen.append(kwargs)
        return {"choices": [{"message": {"content": answer}}]}

    return call_llm


def llm_engine(tmp_path: Any, call_llm: Any, where: dict[str, str]) -> LcmEngine:
    env = {"HERMES_HOME": str(tmp_path), "LCM_SUMMARY_PROVIDER": "auxiliary", **where}
    engine = copy.deepcopy(LcmEngine(env=env, host_call_llm=call_llm))
    engine.update_model("fake-model", 64000)
    engine.on_session_start("s1", hermes_home=str(tmp_path), platform="cli")
    return engine


CHAT = [
    {"role": "user", "content": "Which port does the staging proxy listen on?"},
    {"role": "assistant", "content": "The staging proxy listens on port 8443 behind the firewall."},
    {"role": "user", "content": "and lunch options nearby?"},
    {"role": "assistant", "content": "There is a noodle bar."},
]


def test_expand_query_offline_returns_evidence(make_engine):
    engine = make_engine()
    engine.ingest_host(CHAT)
    answer = ok(engine, "lcm_expand_query", question="what port does the staging proxy use?")
    assert answer["answered"] is False and "no auxiliary model" in answer["reason"]
    texts = [b["text"] for b in answer["evidence"]]
    assert any("8443" in t for t in texts)
    assert all(b["ref"].startswith(("store_id=", "node_id=")) for b in answer["evidence"])
    small = ok(engine, "lcm_expand_query", question="staging proxy port", context_max_tokens=5)
    assert small["clamped"]["context_max_tokens"]["used"] == 200


def test_expand_query_synthesizes_through_the_auxiliary_model(tmp_path, backend_env):
    seen: list[Any] = []
    engine = llm_engine(tmp_path, stub_llm("Port 8443 [store_id=2].", seen), backend_env)
    engine.ingest_host(CHAT)
    answer = ok(engine, "lcm_expand_query", question="what port does the staging proxy use?")
    assert answer["answered"] is True and answer["answer"] == "Port 8443 [store_id=2]."
    assert "store_id=2" in answer["evidence_refs"]
    prompt = seen[-1]["messages"][-1]["content"]
    assert "8443" in prompt and "<evidence-" in prompt
    evidence = ok(engine, "lcm_expand_query", question="staging proxy port", mode="evidence")
    assert evidence["answered"] is False and evidence["reason"] == "evidence mode"


def test_expand_query_falls_back_to_evidence_when_the_model_fails(tmp_path, backend_env):
    def broken(**kwargs: Any) -> Any:
        raise TimeoutError("slow")

    engine = llm_engine(tmp_path, broken, backend_env)
    engine.ingest_host(CHAT)
    answer = ok(engine, "lcm_expand_query", question="staging proxy port")
    assert answer["answered"] is False and answer["answer_errors"] and answer["evidence"]


EXPANSION = {
    "LCM_EXPANSION_MODEL": "expand-model",
    "LCM_EXPANSION_PROVIDER": "openrouter",
    "LCM_EXPANSION_TIMEOUT_MS": "1500",
    "LCM_EXPANSION_REASONING_EFFORT": "low",
}


@pytest.mark.parametrize("refused", [False, True], ids=["taken", "refused"])
def test_expand_query_asks_its_own_model_and_retries_without_it(tmp_path, backend_env, refused):
    """LCM_EXPANSION_MODEL / _PROVIDER / _TIMEOUT_MS / _REASONING_EFFORT shape lcm_expand_query's
    call (the summary calls keep theirs); a route that refuses the override is retried without
    it, as lossless-claw does."""
    seen: list[Any] = []

    def call_llm(**kwargs: Any) -> dict[str, Any]:
        seen.append(kwargs)
        if refused and kwargs.get("model") == "expand-model":
            raise ValueError("model expand-model is not available on this provider")
        return {"choices": [{"message": {"content": "Port 8443 [store_id=2]."}}]}

    engine = llm_engine(tmp_path, call_llm, {**backend_env, **EXPANSION})
    engine.ingest_host(CHAT)
    answer = ok(engine, "lcm_expand_query", question="what port does the staging proxy use?")
    assert answer["answered"] is True
    first = seen[0]
    assert (first["model"], first["provider"], first["timeout"]) == (
        "expand-model",
        "openrouter",
        1.5,
    )
    assert first["reasoning_config"] == {"enabled": True, "effort": "low"}
    if refused:
        assert answer["route"] == "auxiliary" and len(seen) == 2
        assert "model" not in seen[1] and "provider" not in seen[1]
    else:
        assert answer["route"] == "auxiliary:openrouter/expand-model" and len(seen) == 1
    core = engine.core
    assert core is not None and [r.name for r in core.routes] == ["auxiliary"]  # summaries: theirs


def test_expand_query_on_named_nodes(make_engine):
    engine = make_engine()
    compacted(engine, turns=40)
    node = ok(engine, "lcm_describe")["context"][0]["node_id"]
    answer = ok(
        engine, "lcm_expand_query", question="what happened?", node_ids=[node], mode="evidence"
    )
    assert answer["evidence"][0]["ref"] == f"node_id={node}"
    assert "no summary node" in err(engine, "lcm_expand_query", question="x", node_ids=["S999"])


def test_status_inspect_doctor_are_metadata_only(make_engine):
    engine = make_engine()
    compacted(engine, turns=40)
    status = ok(engine, "lcm_status")
    assert status["messages_in_conversation"] > 0 and status["tools"] == {
        "available": 15,
        "disabled": [],
    }
    inspect = ok(engine, "lcm_inspect")
    assert (
        inspect["conversation"]["fresh_tail_messages"] >= 0 and inspect["sessions"][0]["id"] == "s1"
    )
    assert inspect["context_nodes"] and inspect["last_compaction"]["stop_reason"]
    doctor = ok(engine, "lcm_doctor")
    names = {c["name"] for c in doctor["checks"]}
    assert {"database", "lineage", "context_pressure", "summarizer"} <= names
    assert doctor["status"] == "ok" and doctor["deep"] is False
    deep = ok(engine, "lcm_doctor", deep=True)
    assert "integrity: ok" in next(
        c["detail"] for c in deep["checks"] if c["name"] == "fts:messages_fts"
    )
    assert "deep must be true or false" in err(engine, "lcm_doctor", deep="maybe")


def test_doctor_warns_about_context_pressure(make_engine):
    engine = make_engine()
    engine.ingest_host([{"role": "user", "content": "hi"}])
    engine.last_prompt_tokens = engine.threshold_tokens * 3
    doctor = ok(engine, "lcm_doctor")
    assert doctor["status"] == "warn" and any("context_pressure" in g for g in doctor["guidance"])

"""The tool surface: 15 schemas within the token budget, LCM_DISABLED_TOOLS, dispatch errors (the
engine tests on SQLite and on PostgreSQL)."""

from __future__ import annotations

import json

import pytest

from hermes_lcm.base.tokens import count_tokens
from hermes_lcm.engine import LcmEngine
from hermes_lcm.schemas import TOOLS, tool_parameters, tool_schemas

from .backends import break_store, raw_sql
from .tooltest import err, ok, tool

pytestmark = pytest.mark.both_backends

ALL = [
    "lcm_grep",
    "lcm_recall",
    "lcm_query_state",
    "lcm_compute",
    "lcm_compile_evidence",
    "lcm_evidence_pack",
    "lcm_retrieve",
    "lcm_recent",
    "lcm_load_session",
    "lcm_describe",
    "lcm_expand",
    "lcm_expand_query",
    "lcm_status",
    "lcm_inspect",
    "lcm_doctor",
]
EVIDENCE = [
    "lcm_query_state",
    "lcm_compute",
    "lcm_compile_evidence",
    "lcm_evidence_pack",
    "lcm_retrieve",
]


def test_all_fifteen_tools_in_order():
    assert [t["name"] for t in TOOLS] == ALL


def test_schemas_are_well_formed_function_schemas():
    for schema in TOOLS:
        assert set(schema) == {"name", "description", "parameters"}
        params = schema["parameters"]
        assert params["type"] == "object" and isinstance(params["properties"], dict)
        assert set(params.get("required", [])) <= set(params["properties"])
        for spec in params["properties"].values():
            assert spec.get("type") in ("string", "integer", "number", "boolean", "array")
        assert 20 < len(schema["description"]) < 400


def test_all_schemas_together_fit_the_token_budget():
    """As the host sends them: each wrapped as {"type": "function", "function": schema}."""
    wrapped = [{"type": "function", "function": s} for s in tool_schemas()]
    total = count_tokens(json.dumps(wrapped, ensure_ascii=False))
    assert total <= 4000, total


def test_engine_returns_all_schemas(make_engine):
    engine = make_engine()
    assert [s["name"] for s in engine.get_tool_schemas()] == ALL


def test_disabled_tools_have_no_schema_and_refuse_calls(make_engine):
    engine = make_engine(LCM_DISABLED_TOOLS="lcm_grep, lcm_doctor")
    names = [s["name"] for s in engine.get_tool_schemas()]
    assert "lcm_grep" not in names and "lcm_doctor" not in names and len(names) == 13
    assert "disabled by LCM_DISABLED_TOOLS" in err(engine, "lcm_grep", query="x")
    assert "disabled" in err(engine, "lcm_doctor")
    assert ok(engine, "lcm_status")["tools"]["disabled"] == ["lcm_doctor", "lcm_grep"]


def test_unknown_tool_and_non_object_arguments(make_engine):
    engine = make_engine()
    assert "unknown tool" in err(engine, "lcm_nope")
    answer = json.loads(engine.handle_tool_call("lcm_grep", ["not", "a", "dict"]))  # type: ignore[arg-type]
    assert "JSON object" in answer["error"]


@pytest.mark.parametrize(
    "args, fragment",
    [
        ({}, "query is required"),
        ({"query": ["a"]}, "query must be a string"),
        ({"query": "x", "limit": "ten"}, "limit must be an integer"),
        ({"query": "x", "limit": 2.5}, "limit must be an integer"),
        ({"query": "x", "limit": True}, "limit must be an integer"),
        ({"query": "x", "sort": "random"}, "sort must be one of"),
        ({"query": "x", "role": "robot"}, "role must be one of"),
        ({"query": "x", "time_from": "last tuesday"}, "time_from"),
        ({"query": "x", "time_from": "2024-05-02", "time_to": "2024-05-01"}, "before"),
        ({"query": "x", "session_scope": "session"}, "session_id is required"),
        ({"query": "x", "session_scope": "session", "session_id": "nope"}, "unknown session_id"),
        ({"query": "x", "session_id": "s1"}, "session_scope='session'"),
        ({"query": "x", "cursor": "garbage"}, "cursor"),
        ({"query": "?!"}, "no searchable words"),
    ],
)
def test_wrong_arguments_are_clear_json_errors(make_engine, args, fragment):
    engine = make_engine()
    engine.ingest_host([{"role": "user", "content": "hello world"}])
    assert fragment in err(engine, "lcm_grep", **args)


def test_numeric_strings_are_accepted_and_unknown_arguments_reported(make_engine):
    engine = make_engine()
    engine.ingest_host([{"role": "user", "content": "hello world"}])
    answer = ok(engine, "lcm_grep", query="hello", limit="3", colour="blue")
    assert answer["count"] == 1 and answer["ignored_arguments"] == ["colour"]


def test_parameters_view_matches_schema():
    assert "query" in tool_parameters("lcm_grep") and tool_parameters("lcm_status") == frozenset()
    assert tool_parameters("nope") == frozenset()


def test_calls_before_anything_is_stored(tmp_path, backend_env):
    engine = LcmEngine(
        env={"HERMES_HOME": str(tmp_path), "LCM_SUMMARY_PROVIDER": "extractive", **backend_env}
    )
    for name in ("lcm_grep", "lcm_recent", "lcm_describe", "lcm_expand_query"):
        args = {"query": "x", "question": "x"} if name in ("lcm_grep", "lcm_expand_query") else {}
        assert "nothing is stored" in err(engine, name, **args)
    assert "unknown session_id" in err(engine, "lcm_load_session", session_id="s1")
    assert ok(engine, "lcm_status")["session_mode"] == "normal"
    assert "note" in ok(engine, "lcm_inspect")
    assert ok(engine, "lcm_doctor")["status"] in ("ok", "warn")


def test_evidence_family_answers_disabled_with_how_to_enable(make_engine):
    engine = make_engine(
        LCM_EVIDENCE_TOOLS_ENABLED="false"
    )  # the three evidence tools are on by default
    for name in EVIDENCE:
        answer = ok(engine, name, question="q", refs=["1"], operation="sum")
        assert answer["status"] == "disabled" and answer["flag_on"] is False
        assert answer["flag"].startswith("LCM_") and "=true" in answer["enable"]


def test_query_state_with_its_flag_on_answers(make_engine):
    engine = make_engine(LCM_ASSERTIONS_ENABLED="true")
    answer = ok(engine, "lcm_query_state")
    assert answer["status"] == "ok" and answer["states"] == [] and "note" in answer


def test_ignored_session_refuses_recall_but_answers_diagnostics(make_engine):
    engine = make_engine(session="cron-7", LCM_IGNORE_SESSION_PATTERNS="cron-*")
    engine.ingest_host([{"role": "user", "content": "secret plans"}])
    for name, args in (
        ("lcm_grep", {"query": "secret"}),
        ("lcm_recall", {"query": "secret"}),
        ("lcm_expand", {"store_id": 1}),
        ("lcm_load_session", {"session_id": "cron-7"}),
        ("lcm_describe", {}),
        ("lcm_recent", {}),
        ("lcm_expand_query", {"question": "x"}),
    ):
        assert "LCM_IGNORE_SESSION_PATTERNS" in err(engine, name, **args)
    assert ok(engine, "lcm_status")["session_mode"] == "ignored"
    inspect = ok(engine, "lcm_inspect")
    assert (
        inspect["binding"]["mode"] == "ignored"
        and inspect["binding"]["matched_session_pattern"] == "cron-*"
    )
    assert ok(engine, "lcm_doctor")["binding"]["mode"] == "ignored"


def test_stateless_session_reads_its_conversation_without_writing(tmp_path, make_engine):
    writer = make_engine(session="main")
    writer.ingest_host([{"role": "user", "content": "the deploy key rotates on fridays"}])
    reader = make_engine(session="peek-1", LCM_STATELESS_SESSION_PATTERNS="peek-*")
    reader.core.bind("peek-1", conversation_key="session:main")
    hits = ok(
        reader,
        "lcm_grep",
        query="deploy key",
        messages=[{"role": "user", "content": "new text that must not be stored"}],
    )["hits"]
    assert hits[0]["snippet"].startswith("the «deploy» «key»")
    assert tool(reader, "lcm_grep", query="must not be stored")["count"] == 0


def test_a_failing_store_is_an_error_answer_not_an_exception(make_engine):
    engine = make_engine()
    engine.ingest_host([{"role": "user", "content": "hello"}])
    break_store(engine.core.store)
    answer = tool(engine, "lcm_grep", query="hello")
    assert "error" in answer


def test_a_foreign_database_is_a_clear_error(tmp_path, backend_env):
    where = backend_env.get("LCM_DATABASE_URL") or str(tmp_path / "other.db")
    raw_sql(where, "CREATE TABLE foo(x integer)")
    setting = {"LCM_DATABASE_URL": where} if backend_env else {"LCM_DATABASE_PATH": where}
    engine = LcmEngine(env={"HERMES_HOME": str(tmp_path), **setting})
    message = err(engine, "lcm_grep", query="x")
    assert "will not write" in message or "not written by" in message

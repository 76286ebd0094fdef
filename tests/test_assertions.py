"""The assertion sidecar (evidence/assertions.py, storage/assertions.py) and lcm_query_state, on
real engines and SQLite files: precise rule extraction, exact citations, redaction, the job off
the turn, rebuild, another owner's facts never returned, and hostile input."""

from __future__ import annotations

import copy
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hermes_lcm import store as store_module
from hermes_lcm.config import load_config
from hermes_lcm.engine import LcmEngine
from hermes_lcm.evidence.assertion_rules import extract
from hermes_lcm.evidence.assertions import AssertionJob, Assertions
from hermes_lcm.evidence.timeexpr import resolve_dates

from .backends import table_names
from .conftest import database_env, new_engine
from .tooltest import ok

ON = {"LCM_ASSERTIONS_ENABLED": "true"}
DAY = 86400.0
T0 = 1_700_000_000.0  # 2023-11-14


def facts(text: str, role: str = "user", at: float = T0) -> list[tuple[str, str, str, str]]:
    return [
        (c.kind, c.subject, c.value, c.unit)
        for c in extract(text, role, lambda t: resolve_dates(t, at))
    ]


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("The port is 8731.", ("quantity", "port", "8731", "")),
        ("Honestly it costs $40 per month.", ("quantity", "cost", "$40", "usd")),
        ("I ran 5 km this morning.", ("quantity", "ran", "5", "km")),
        ("We moved to Lisbon on 3 May.", ("state", "user location", "Lisbon", "")),
        ("Caroline moved to Boston last year.", ("state", "caroline location", "Boston", "")),
        ("The default is now Z.", ("state", "default", "Z", "")),
        ("My favourite colour is blue.", ("preference", "user favourite colour", "blue", "")),
        (
            "I started the new job yesterday.",
            ("event", "user started", "started the new job yesterday", ""),
        ),
        ("I prefer tea over coffee.", ("preference", "user prefers", "tea over coffee", "")),
        (
            "I will send the report on Friday.",
            ("commitment", "user commitment", "send the report on Friday", ""),
        ),
    ],
)
def test_the_rules_find_plain_statements(text: str, want: tuple[str, str, str, str]) -> None:
    assert facts(text) == [want]


@pytest.mark.parametrize(
    "text",
    [
        "What is the port?",
        "Is the port 8080",
        "If the port were 80 we would be fine.",
        "Suppose the default is Z.",
        "The port is not 80.",
        "The port isn't 80 anymore.",
        "```\nthe port is 80\n```",
        "Set it with `the port is 22` in the file.",
        'He said "the port is 99".',
        "    the port is 8080",
        "config.port = 80; the port is 80",
        "I started the new job.",  # an event needs a date
        "Maybe the port is 80.",
        "It is 5.",
        "",
        "Wow, the crowd energy is amazing!",
        "Boston's music scene is awesome!",
        "The gym is awesome.",  # opinions
        "My kids are so excited.",
        "It felt like they jumped off the page and became real.",
    ],
)
def test_questions_hypotheticals_negations_and_code_yield_nothing(text: str) -> None:
    assert facts(text) == []


def test_the_assistants_my_is_not_the_users() -> None:
    assert (
        facts("My favourite colour is green.", role="assistant")[0][1]
        == "assistant favourite colour"
    )


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(
    st.text(
        alphabet=st.sampled_from(
            list(
                "The port is 8731 my favourite colour blue I moved to Lisbon $40 km"
                " .?!\n`\"é\u0301😀\u202eIf we'll yesterday 3 May"
            )
        ),
        max_size=300,
    )
)
def test_every_quote_is_its_text_at_its_span(text: str) -> None:
    for cand in extract(text, "user", lambda t: resolve_dates(t, T0)):
        assert text[cand.start : cand.end] == cand.quote
        assert cand.value in cand.quote and cand.subject == cand.subject.lower()


def test_hostile_text_costs_bounded_time() -> None:
    huge = ("The port is 8731. " * 20000) + "a" * 500_000
    started = time.monotonic()
    found = extract(huge)
    assert time.monotonic() - started < 5 and len(found) <= 20
    nasty = "the " + "a a " * 50_000 + "is 5"  # one endless sentence
    started = time.monotonic()
    extract(nasty)
    assert time.monotonic() - started < 5


# -- the sidecar on a real store ---------------------------------------------------------------


_DATABASE: dict[
    str, str
] = {}  # the engines' database for the running test (a fresh schema on PostgreSQL)


@pytest.fixture(autouse=True)
def _database(backend: str) -> Any:
    """Tests marked ``both_backends`` run once more with every engine on PostgreSQL."""
    _DATABASE.update(database_env(backend))
    yield
    _DATABASE.clear()
    store_module.close_all()


def engine_on(tmp_path: Path, **env: str) -> LcmEngine:
    return new_engine(tmp_path, **{**ON, **_DATABASE, **env})


def settle(engine: LcmEngine, timeout: float = 10.0) -> None:
    """Wait until the job has read every stored message."""
    core = engine.core
    assert core is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if (
            core.store.has_assertion_tables()
            and core.store.assertion_cursor() >= core.store.last_message_id()
        ):
            return
        time.sleep(0.02)
    raise AssertionError("the assertion job did not catch up")


def said(*texts: str, at: float = T0, step: float = DAY) -> list[dict[str, Any]]:
    out = []
    for i, text in enumerate(texts):
        out.append({"role": "user", "content": text, "timestamp": at + i * step})
        out.append(
            {"role": "assistant", "content": f"Noted ({i}).", "timestamp": at + i * step + 1}
        )
    return out


def tables(path: str) -> set[str]:
    return table_names(path)


@pytest.mark.both_backends
def test_off_by_default_no_tables_and_the_disabled_answer(tmp_path: Path) -> None:
    engine = new_engine(tmp_path, **_DATABASE)
    engine.ingest_host(said("The port is 8731."))
    assert engine.core is not None
    assert "assertions" not in tables(getattr(engine.core.store, "url", engine.core.store.path))
    answer = ok(engine, "lcm_query_state", subject="port")
    assert answer["status"] == "disabled" and answer["flag"] == "LCM_ASSERTIONS_ENABLED"


@pytest.mark.both_backends
def test_query_state_latest_history_and_as_of_with_citations(tmp_path: Path) -> None:
    engine = engine_on(tmp_path)
    engine.ingest_host(said("The port is 8080.", "We talked about lunch.", "The port is now 8731."))
    settle(engine)
    answer = ok(engine, "lcm_query_state", subject="port")
    state = answer["states"][0]
    assert answer["status"] == "ok" and state["subject"] == "port" and state["value"] == "8731"
    assert [h["value"] for h in state["history"]] == ["8731", "8080"] and state["conflict"] is False
    assert engine.core is not None
    for cite in state["history"]:
        row = engine.core.store.message(cite["store_id"])
        assert row is not None and row.content[cite["span"][0] : cite["span"][1]] == cite["quote"]
    earlier = ok(engine, "lcm_query_state", subject="port", as_of="2023-11-15")
    assert earlier["states"][0]["value"] == "8080"
    assert ok(engine, "lcm_query_state", subject="port", as_of="2020-01-01")["states"] == []


@pytest.mark.both_backends
def test_two_values_at_the_same_time_stay_visible(tmp_path: Path) -> None:
    engine = engine_on(tmp_path)
    engine.ingest_host(
        [
            {"role": "user", "content": "The port is 8080.", "timestamp": T0},
            {"role": "user", "content": "Sorry, the port is 9090.", "timestamp": T0},
        ]
    )
    settle(engine)
    state = ok(engine, "lcm_query_state", subject="port")["states"][0]
    assert state["conflict"] is True and {c["value"] for c in state["conflicting"]} == {
        "8080",
        "9090",
    }


@pytest.mark.both_backends
def test_a_dated_event_holds_from_its_date(tmp_path: Path) -> None:
    engine = engine_on(tmp_path)
    engine.ingest_host(said("I started the new job yesterday."))
    settle(engine)
    cite = ok(engine, "lcm_query_state", kind="event")["states"][0]["current"]
    assert cite["date"] == "2023-11-13" and cite["time"].startswith("2023-11-13")


@pytest.mark.both_backends
def test_another_owners_assertions_never_come_back(tmp_path: Path) -> None:
    def owner(session: str, user: str) -> LcmEngine:
        base = {
            "HERMES_HOME": str(tmp_path),
            "LCM_SUMMARY_PROVIDER": "extractive",
            **ON,
            **_DATABASE,
        }
        engine = copy.deepcopy(LcmEngine(env=base))
        engine.update_model("fake-model", 64000)
        engine.on_session_start(
            session, hermes_home=str(tmp_path), platform="telegram", user_id=user
        )
        return engine

    alice = owner("alice-1", "alice")
    alice.ingest_host(said("My bank pin is 4921."))
    settle(alice)
    bob = owner("bob-1", "bob")
    bob.ingest_host(said("Hello there."))
    settle(bob)
    assert ok(bob, "lcm_query_state", subject="bank pin")["states"] == []
    assert ok(bob, "lcm_query_state")["states"] == []
    assert ok(alice, "lcm_query_state", subject="bank pin")["states"][0]["value"] == "4921"


@pytest.mark.both_backends
def test_a_forged_quote_is_refused_and_facts_go_with_their_text(tmp_path: Path) -> None:
    engine = engine_on(tmp_path)
    engine.ingest_host(said("The port is 8731.", "The timeout is 30 seconds."))
    settle(engine)
    assert engine.core is not None
    store = engine.core.store
    row = store.assertions_for(None, "port", "", None, 5)[0]
    forged = {
        **row,
        "value": "1",
        "quote": "The port is 1.",
        "span_end": row["span_start"] + 14,
        "kind": "state",
    }
    assert store.put_assertions([forged]) == 0
    with store.write() as db:  # type: ignore[attr-defined]
        db.execute("UPDATE messages SET content = 'redacted' WHERE id = ?", (row["store_id"],))
    assert store.assertions_for(None, "port", "", None, 5) == []
    assert store.assertions_for(None, "timeout", "", None, 5)[0]["unit"] == "seconds"


@pytest.mark.both_backends
def test_a_secret_never_becomes_a_value_when_redaction_is_on(tmp_path: Path) -> None:
    token = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    engine = new_engine(
        tmp_path, **_DATABASE
    )  # stored before redaction was turned on: the row holds the secret
    engine.ingest_host(said(f"My token is {token}.", "The port is 8731."))
    on = engine_on(tmp_path, session="s2", LCM_SENSITIVE_PATTERNS_ENABLED="true")
    on.ingest_host(said(f"My token is {token} again."))
    assert on.core is not None
    on.core.assertions.rebuild()
    rows = on.core.store.assertions_for(None, "", "", None, 50)
    assert rows and all(token not in r["value"] and token not in r["quote"] for r in rows)
    assert all("lcm-redacted" not in r["value"] for r in rows)
    assert {r["value"] for r in rows} >= {"8731"} and on.core.assertions.refused >= 1


@pytest.mark.both_backends
def test_rebuild_is_idempotent(tmp_path: Path) -> None:
    engine = engine_on(tmp_path)
    engine.ingest_host(
        said("The port is 8731.", "We moved to Lisbon on 3 May.", "I ran 5 km today.")
    )
    settle(engine)
    assert engine.core is not None
    sidecar, store = engine.core.assertions, engine.core.store

    def snapshot() -> list[tuple[Any, ...]]:
        return sorted(
            (r["store_id"], r["kind"], r["subject"], r["value"], r["span_start"], r["valid_from"])
            for r in store.assertions_for(None, "", "", None, 100)
        )

    before = snapshot()
    assert len(before) == 3
    first, second = sidecar.rebuild(), sidecar.rebuild()
    assert snapshot() == before and first["assertions"] == second["assertions"] == 3


@pytest.mark.both_backends
def test_the_job_runs_off_the_turn_and_bounded(tmp_path: Path) -> None:
    engine = engine_on(tmp_path)
    assert engine.core is not None
    gate = threading.Event()
    seen: list[str] = []

    def slow_dates(text: str, at: float) -> list[Any]:
        seen.append(threading.current_thread().name)
        gate.wait(5)
        return list(resolve_dates(text, at))

    sidecar = Assertions(engine.core.config, engine.core.store, dates=slow_dates)
    engine.core.assertions = sidecar
    started = time.monotonic()
    engine.ingest_host(said("The port is 8731."))
    assert time.monotonic() - started < 2  # the turn did not wait for extraction
    gate.set()
    settle(engine)
    assert seen and set(seen) == {AssertionJob.name}
    engine.ingest_host(said(*[f"The size is {i} kg." for i in range(30)], at=T0 + 100 * DAY))
    sidecar.close()
    before = engine.core.store.assertion_cursor()
    assert sidecar.step(7) == 7 and engine.core.store.assertion_cursor() > before


@pytest.mark.both_backends
def test_the_summary_routes_answer_is_checked_against_the_text(tmp_path: Path) -> None:
    config = load_config(
        {
            **ON,
            "LCM_ASSERTION_EXTRACTION_ENABLED": "true",
            "LCM_ASSERTION_EXTRACTION_MAX_SOURCES_PER_PASS": "50",
            "LCM_ASSERTION_EXTRACTION_TIMEOUT_SECONDS": "500",
        }
    ).config
    engine = new_engine(
        tmp_path, **_DATABASE
    )  # the engine's own job (rules only) must not read the message first
    assert engine.core is not None

    class Route:
        name = "fake"

        def __init__(self) -> None:
            self.timeouts: list[float] = []

        def complete(self, messages: list[dict[str, str]], timeout_s: float) -> str:
            self.timeouts.append(timeout_s)
            return (
                '[{"subject": "Team size", "kind": "quantity", "value": "12", "quote": "we are 12 people"},'
                '{"subject": "x", "kind": "state", "value": "99", "quote": "we are 12 people"},'
                '{"subject": "y", "kind": "state", "value": "a", "quote": "not in the text"},'
                '{"subject": "z", "kind": "rumour", "value": "12", "quote": "we are 12 people"}]'
            )

    route = Route()
    sidecar = Assertions(config, engine.core.store, routes=[route])
    assert sidecar.refine and sidecar.max_sources == 8 and sidecar.timeout_s == 120.0
    engine.ingest_host(said("Right now we are 12 people on the team."))
    sidecar.step(100)
    rows = [
        r
        for r in engine.core.store.assertions_for(None, "", "", None, 50)
        if r["extractor"] == "llm"
    ]
    assert [(r["subject"], r["value"], r["quote"]) for r in rows] == [
        ("team size", "12", "we are 12 people")
    ]
    # two messages (the user's, the reply): 3 refused in the first; all 4 in the reply, which has no such quote
    assert len(route.timeouts) == 2 and sidecar.refused == 3 + 4 and set(route.timeouts) == {120.0}


@pytest.mark.both_backends
def test_odd_unicode_spans_agree_with_sqlite(tmp_path: Path) -> None:
    engine = engine_on(tmp_path)
    engine.ingest_host(
        said(
            "😀 e\u0301 \u202e Ok. The port is 8731.",
            "日本語のテキスト。My favourite colour is blue.",
        )
    )
    settle(engine)
    assert engine.core is not None
    rows = engine.core.store.assertions_for(None, "", "", None, 10)
    assert {r["value"] for r in rows} == {"8731", "blue"}


def test_lcmx_extraction_settings_are_ours() -> None:
    loaded = load_config(
        {
            "LCM_ASSERTION_EXTRACTION_ENABLED": "true",
            "LCM_ASSERTION_EXTRACTION_MAX_SOURCES_PER_PASS": "6",
            "LCM_ASSERTION_EXTRACTION_TIMEOUT_SECONDS": "12.5",
        }
    )
    assert loaded.config.assertion_extraction_enabled is True
    assert loaded.config.assertion_extraction_max_sources_per_pass == 6
    assert loaded.config.assertion_extraction_timeout_seconds == 12.5
    assert not [p for p in loaded.problems if "ASSERTION_EXTRACTION" in p]


@pytest.mark.both_backends
def test_cli_status_and_rebuild(
    clean_home: Path, monkeypatch: pytest.MonkeyPatch, backend_env: dict[str, str]
) -> None:
    from hermes_lcm import store as store_module

    from .test_cli_embed import lcm

    for key, value in backend_env.items():  # the CLI reads the database the engine wrote
        monkeypatch.setenv(key, value)
    engine = new_engine(
        clean_home, **backend_env
    )  # stored while the sidecar was off: no tables yet
    engine.ingest_host(said("The port is 8731.", "We moved to Lisbon on 3 May."))
    store_module.close_all()
    code, out, err = lcm("assertions", "rebuild")
    assert code == 2 and "LCM_ASSERTIONS_ENABLED" in err
    code, out, _ = lcm("assertions")
    assert code == 0 and out["sidecar"] is None and out["enabled"] is False
    monkeypatch.setenv("LCM_ASSERTIONS_ENABLED", "true")
    code, out, _ = lcm("assertions", "rebuild")
    assert code == 0 and out["rebuilt"]["assertions"] == 2 and out["message_ids_not_read_yet"] == 0
    code, again, _ = lcm("assertions", "rebuild")
    assert again["sidecar"]["by_kind"] == out["sidecar"]["by_kind"] == {"quantity": 1, "state": 1}

"""Temporal rollups: stale marks, bounded builds off the turn, zones, failures, and host times."""

from __future__ import annotations

import json
import math
import sqlite3
import threading
import time
from datetime import date
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hermes_lcm import store as store_module
from hermes_lcm.base.times import host_time
from hermes_lcm.compaction.rollups import plan, serve, span
from hermes_lcm.config import load_config
from hermes_lcm.engine import LcmEngine
from hermes_lcm.handlers.status import core_status
from hermes_lcm.store import is_url

from .backends import table_names
from .conftest import fresh_database, new_engine

DAY = 86400.0
MAY_1 = 1714521600.0  # 2024-05-01T00:00:00Z, a Wednesday


pytestmark = pytest.mark.both_backends


def msgs(times: list[float], tag: str = "heron") -> list[dict[str, Any]]:
    out = []
    for i, at in enumerate(times):
        out.append(
            {
                "role": "user",
                "content": f"item {i} about the {tag} and the river " + "word " * 30,
                "timestamp": at,
            }
        )
        out.append(
            {
                "role": "assistant",
                "content": f"noted item {i} on the {tag} " + "text " * 30,
                "timestamp": at + 30,
            }
        )
    return out


def core_of(engine: LcmEngine) -> Any:
    assert engine.core is not None
    return engine.core


def where(engine: LcmEngine) -> str:
    """The engine's database: its file, or its PostgreSQL URL."""
    store = core_of(engine).store
    return str(getattr(store, "url", store.path))


def rows(db: Path | str) -> list[tuple[str, str, str, str]]:
    sql = "SELECT kind, period_start, tz, status FROM rollups ORDER BY 1, 2, 3"
    if is_url(str(db)):
        import psycopg

        with psycopg.connect(str(db), autocommit=True) as pg:
            return [tuple(r) for r in pg.execute(sql).fetchall()]  # type: ignore[misc]
    with sqlite3.connect(db) as con:
        return con.execute(sql).fetchall()


def tables(db: Path | str) -> set[str]:
    return table_names(str(db))


ON = {"LCM_TEMPORAL_ROLLUPS_ENABLED": "true"}


def quiet(engine: LcmEngine) -> Any:
    """The engine's core with its rollup job stopped: the test runs each pass itself."""
    core = core_of(engine)
    if core.rollups.job is not None:
        core.rollups.job.stop()
    core.rollups.job = None
    return core


def test_tables_absent_when_off_and_status_block_present(make_engine, tmp_path):
    engine = make_engine()
    engine.ingest_host(msgs([MAY_1 + 3600]))
    assert not tables(where(engine)) & {"rollups", "rollup_cursor"}
    block = core_status(core_of(engine))["temporal_rollups"]
    assert block["enabled"] is False and block["tables"] is False and block["counts"]["day"] == {}


def test_day_week_month_built_from_the_extractive_summarizer(make_engine, tmp_path):
    engine = make_engine(**ON)
    core = quiet(engine)  # built here, synchronously, to inspect each pass
    engine.ingest_host(msgs([MAY_1 + 3600, MAY_1 + 7200, MAY_1 + DAY + 3600]))
    built = core.rollups.drain()
    assert [b.kind for b in built] == ["day", "day", "week", "month"]
    assert all(b.status == "ready" for b in built)
    got = rows(where(engine))
    assert ("day", "2024-05-01", "UTC", "ready") in got and (
        "week",
        "2024-04-29",
        "UTC",
        "ready",
    ) in got
    assert ("month", "2024-05-01", "UTC", "ready") in got
    day = core.rollups.ready(
        [core.binding.conversation_id], "day", date(2024, 5, 1), date(2024, 5, 1)
    )[0]
    assert "heron" in day.content and day.tokens <= core.config.rollup_daily_max_tokens


def test_builds_per_pass_are_bounded_days_first(make_engine):
    engine = make_engine(LCM_ROLLUP_BUILDS_PER_PASS="1", **ON)
    core = quiet(engine)
    engine.ingest_host(msgs([MAY_1 + d * DAY + 60 for d in range(3)]))
    first = core.rollups.step()
    assert len(first) == 1 and first[0].kind == "day"
    kinds = [b.kind for b in core.rollups.drain()]
    assert kinds == ["day", "day", "week", "month"]


def test_a_late_message_restales_its_day_week_and_month(make_engine, tmp_path):
    engine = make_engine(**ON)
    core = quiet(engine)
    history = msgs([MAY_1 + DAY + 3600])
    engine.ingest_host(history)
    core.rollups.drain()
    assert {r[3] for r in rows(where(engine))} == {"ready"}
    history += [
        {"role": "user", "content": "a late note about the kingfisher", "timestamp": MAY_1 + 600}
    ]
    engine.ingest_host(history)
    core.rollups.scan()
    got = {(r[0], r[1]): r[3] for r in rows(where(engine))}
    assert got[("day", "2024-05-01")] == "stale" and got[("week", "2024-04-29")] == "stale"
    assert got[("month", "2024-05-01")] == "stale" and got[("day", "2024-05-02")] == "ready"
    rebuilt = core.rollups.drain()
    assert [(b.kind, b.start) for b in rebuilt] == [
        ("day", "2024-05-01"),
        ("week", "2024-04-29"),
        ("month", "2024-05-01"),
    ]
    day = core.rollups.ready(
        [core.binding.conversation_id], "day", date(2024, 5, 1), date(2024, 5, 1)
    )[0]
    assert "kingfisher" in day.content


def test_timezone_moves_a_late_evening_message_to_the_next_day(make_engine, tmp_path):
    engine = make_engine(LCM_TIMEZONE="Asia/Tokyo", **ON)
    core = quiet(engine)
    engine.ingest_host(
        [{"role": "user", "content": "the heron at night", "timestamp": MAY_1 - 1800}]
    )
    core.rollups.drain()
    days = {(r[1], r[2]) for r in rows(where(engine)) if r[0] == "day"}
    assert days == {("2024-04-30", "UTC"), ("2024-05-01", "Asia/Tokyo")}


def test_dst_days_are_23_and_25_hours():
    since, until = span("day", date(2024, 3, 31), "Europe/Paris")
    assert until - since == 23 * 3600
    since, until = span("day", date(2024, 10, 27), "Europe/Paris")
    assert until - since == 25 * 3600
    assert (
        span("month", date(2024, 2, 1), "UTC")[1] - span("month", date(2024, 2, 1), "UTC")[0]
        == 29 * DAY
    )


def test_a_bad_timezone_is_a_settings_problem():
    loaded = load_config({"LCM_TIMEZONE": "Mars/Olympus"}, {})
    assert loaded.config.timezone == "" and any("LCM_TIMEZONE" in p for p in loaded.problems)
    assert load_config({"LCM_TIMEZONE": "../../etc/passwd"}, {}).config.timezone == ""
    assert load_config({"LCM_TIMEZONE": "Asia/Tokyo"}, {}).config.timezone == "Asia/Tokyo"


def test_a_failing_summarizer_marks_failed_and_retries_later(make_engine, tmp_path):
    engine = make_engine(**ON)
    core = quiet(engine)
    engine.ingest_host(msgs([MAY_1 + 3600]))
    real = core.rollups.summarize

    def broken(*args: Any) -> Any:
        raise RuntimeError("provider down")

    core.rollups.summarize = broken
    built = core.rollups.step()
    assert built and built[0].status == "failed" and "provider down" in built[0].error
    assert core.rollups.step() == []  # not retried before retry_after_s
    status = core_status(core)["temporal_rollups"]
    assert "provider down" in status["last_error"] and status["counts"]["day"] == {"failed": 1}
    assert core.store.message_count(core.binding.conversation_id) == 2  # the sources are intact
    core.rollups.summarize, core.rollups.retry_after_s = real, 0.0
    assert [b.status for b in core.rollups.drain()] == ["ready", "ready", "ready"]


def test_rollups_build_on_the_job_thread_not_the_turn(make_engine, tmp_path):
    engine = make_engine(**ON)
    core = core_of(engine)
    threads: list[str] = []
    real = core.rollups.summarize

    def record(*args: Any) -> Any:
        threads.append(threading.current_thread().name)
        return real(*args)

    core.rollups.summarize = record
    engine.ingest_host(msgs([MAY_1 + 3600]))
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        got = rows(where(engine))
        if len(got) == 3 and {r[3] for r in got} == {"ready"}:
            break
        time.sleep(0.05)
    assert {r[3] for r in rows(where(engine))} == {"ready"}
    assert threads and set(threads) == {"hermes-lcm-rollups"}
    core.rollups.close()


def test_lcm_recent_serves_rollups_and_falls_back_to_leaves(make_engine):
    from .tooltest import ok

    engine = make_engine(**ON)
    core = quiet(engine)
    engine.ingest_host(msgs([MAY_1 + 3600]))
    before = ok(engine, "lcm_recent", period="date:2024-05-01")
    assert before["source"] == "leaves"
    core.rollups.drain()
    after = ok(engine, "lcm_recent", period="date:2024-05-01")
    assert after["source"] == "rollups" and after["rollups"][0]["kind"] == "day"
    assert "heron" in after["rollups"][0]["content"]
    engine.ingest_host(
        [*msgs([MAY_1 + 3600]), {"role": "user", "content": "late", "timestamp": MAY_1 + 60}]
    )
    core.rollups.scan()
    stale = ok(engine, "lcm_recent", period="date:2024-05-01")
    assert stale["source"] == "leaves" and stale["stale_days"] == ["2024-05-01"]


def test_plan_names_periods_in_the_zone():
    now = MAY_1 + 2.5 * DAY  # 2024-05-03T12:00Z, a Friday; 21:00 in Tokyo
    assert plan("today", now, "UTC") == ("day", date(2024, 5, 3), date(2024, 5, 3))
    assert plan("yesterday", MAY_1 + 2 * DAY - 1800, "Asia/Tokyo") == (
        "day",
        date(2024, 5, 2),
        date(2024, 5, 2),
    )
    assert plan("week", now, "UTC") == ("week", date(2024, 4, 29), date(2024, 5, 3))
    assert plan("month", now, "UTC") == ("month", date(2024, 5, 1), date(2024, 5, 3))
    assert plan("3d", now, "UTC") == ("day", date(2024, 5, 1), date(2024, 5, 3))
    assert plan("date:2024-02-30", now, "UTC") is None and plan("fortnight", now, "UTC") is None


def test_serve_prefers_the_week_rollup_then_days(make_engine):
    engine = make_engine(**ON)
    core = quiet(engine)
    engine.ingest_host(msgs([MAY_1 + 3600, MAY_1 + DAY + 3600]))
    conv = [core.binding.conversation_id]
    now = MAY_1 + 2.5 * DAY
    assert (
        serve(core.rollups, conv, "week", now).rollups == ()
    )  # nothing built yet: all days fall back
    core.rollups.drain()
    week = serve(core.rollups, conv, "week", now)
    assert [r.kind for r in week.rollups] == ["week"] and week.fallback_days == ()
    days = serve(core.rollups, conv, "3d", now)
    assert [r.start for r in days.rollups] == ["2024-05-01", "2024-05-02"]
    assert days.fallback_days == (date(2024, 5, 3),)


@pytest.mark.parametrize(
    "value, expected",
    [
        (MAY_1, MAY_1),
        (int(MAY_1), MAY_1),
        (MAY_1 * 1000, MAY_1),
        ("2024-05-01T00:00:00Z", MAY_1),
        ("2024-05-01T09:00:00+09:00", MAY_1),
        ("2024-05-01T00:00:00", MAY_1),
        (str(MAY_1), MAY_1),
        (math.nan, None),
        (math.inf, None),
        (-5, None),
        (0, None),
        ("9999-12-31T00:00:00Z", None),
        (253402214400, None),
        ("yesterday-ish", None),
        ("", None),
        (True, None),
        (None, None),
        ([1], None),
        ("x" * 1000, None),
        ("2024-13-45", None),
    ],
)
def test_host_time_reads_or_refuses(value, expected):
    assert host_time(value) == expected


def test_messages_keep_host_times_on_the_message_or_in_metadata(make_engine):
    engine = make_engine()
    engine.ingest_host(
        [
            {"role": "user", "content": "one", "timestamp": "2024-05-01T10:00:00+02:00"},
            {"role": "assistant", "content": "two", "metadata": {"timestamp": (MAY_1 + 60) * 1000}},
            {"role": "user", "content": "three", "timestamp": math.nan},
            {"role": "assistant", "content": "four", "metadata": {"timestamp": "garbage"}},
        ]
    )
    core = core_of(engine)
    stored = core.store.messages_after(core.binding.conversation_id, 0)
    assert [m.created_at for m in stored[:2]] == [MAY_1 + 8 * 3600, MAY_1 + 60]
    assert all(abs(m.created_at - time.time()) < 120 for m in stored[2:])


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(st.floats(min_value=MAY_1, max_value=MAY_1 + 40 * DAY), min_size=1, max_size=12))
def test_every_day_with_messages_has_exactly_one_day_rollup(tmp_path_factory, backend, times):
    home = tmp_path_factory.mktemp("roll")
    with fresh_database(backend) as where:
        engine = new_engine(home, **ON, **where)
        core = quiet(engine)
        engine.ingest_host(
            [
                {"role": "user", "content": f"note {i} on the heron", "timestamp": at}
                for i, at in enumerate(times)
            ]
        )
        core.rollups.drain()
        got = [r for r in rows(core.store.path) if r[0] == "day"]
        expected = {time.strftime("%Y-%m-%d", time.gmtime(at)) for at in times}
        assert sorted(r[1] for r in got) == sorted(expected) and {r[3] for r in got} == {"ready"}


def test_cli_and_slash_command_rollups(clean_home, monkeypatch, capsys, backend_env):
    from hermes_lcm.cli import main as cli
    from hermes_lcm.command import handle_command

    db = backend_env.get("LCM_DATABASE_URL") or clean_home / "lcm.db"
    for key, value in backend_env.items():  # /lcm's template reads the database from the settings
        monkeypatch.setenv(key, value)
    engine = new_engine(clean_home, **ON, **backend_env)
    quiet(engine)
    engine.ingest_host(msgs([MAY_1 + 3600]))
    store_module.close_all()
    monkeypatch.setenv("LCM_TEMPORAL_ROLLUPS_ENABLED", "true")
    assert cli.main(["--db", str(db), "rollups", "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert status["counts"]["day"] == {} and status["enabled"] is True
    assert cli.main(["--db", str(db), "rollups", "build", "--json"]) == 0
    built = json.loads(capsys.readouterr().out)
    assert [b["kind"] for b in built["built"]] == ["day", "week", "month"]
    assert built["status"]["counts"]["day"] == {"ready": 1}
    assert cli.main(["--db", str(db), "rollups", "rebuild", "day", "2024-05-01", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["marked_stale"] == 1
    assert cli.main(["--db", str(db), "rollups", "rebuild", "fortnight"]) == 2
    store_module.close_all()
    monkeypatch.setenv("LCM_ENABLE_SLASH_COMMAND", "1")
    live = new_engine(clean_home, **ON, **backend_env)
    quiet(live)
    assert "day:" in handle_command("rollups")
    assert json.loads(handle_command("--json rollups rebuild all"))["marked_stale"] == 3
    answer = json.loads(handle_command("--json rollups build"))
    assert [b["kind"] for b in answer["built"]] == ["day", "week", "month"]
    assert {b["status"] for b in answer["built"]} == {"ready"}
    assert "usage" in handle_command("rollups rebuild")


def test_replays_and_lcmx_imports_keep_original_times(tmp_path, backend_env):
    from hermes_lcm.demo.replay import flatten, make_engine, replay
    from hermes_lcm.importers.lcmx_source import host_time as lcmx_time

    assert lcmx_time({"observed_at": "2024-05-01T00:00:00Z", "timestamp": 5.0}) == MAY_1
    assert lcmx_time({"observed_at": math.nan, "timestamp": MAY_1 * 1000}) == MAY_1
    assert lcmx_time({"observed_at": "garbage"}) is None
    fixture = {
        "title": "t",
        "planted": [],
        "turns": [
            {
                "user": f"day {d}: what about the heron?",
                "timestamp": MAY_1 + d * DAY + 3600,
                "messages": [
                    {
                        "role": "assistant",
                        "content": f"the heron on day {d}",
                        "timestamp": MAY_1 + d * DAY + 3660,
                    }
                ],
            }
            for d in range(3)
        ],
    }
    assert [m.get("timestamp") for m in flatten(fixture)][:2] == [MAY_1 + 3600, MAY_1 + 3660]
    engine = make_engine(tmp_path, env={**ON, **backend_env})
    replay(engine, fixture, session_id="replayed")
    core = quiet(engine)
    stored = core.store.messages_after(core.binding.conversation_id, 0)
    assert [m.created_at for m in stored] == [
        MAY_1 + d * DAY + off for d in range(3) for off in (3600, 3660)
    ]
    core.rollups.drain()
    assert [r[1] for r in rows(core.store.path) if r[0] == "day" and r[3] == "ready"] == [
        "2024-05-01",
        "2024-05-02",
        "2024-05-03",
    ]
    store_module.close_all()


def test_a_leaf_spanning_days_marks_only_days_with_messages(make_engine, tmp_path):
    engine = make_engine(threshold=3000, **ON)
    core = quiet(engine)
    history = msgs([MAY_1 + 3600 + i * 60 for i in range(12)], "heron") + msgs(
        [MAY_1 + 5 * DAY + 3600 + i * 60 for i in range(12)], "otter"
    )
    for end in range(8, len(history) + 1, 8):
        engine.ingest_host(history[:end])
        if engine.should_compress(90000):
            engine.compress(history[:end], current_tokens=90000)
    assert core.store.depth_counts(core.binding.conversation_id).get(0), "expected leaf summaries"
    core.rollups.drain()
    days = [r[1] for r in rows(where(engine)) if r[0] == "day"]
    assert days == ["2024-05-01", "2024-05-06"]
    by_day = {
        r.start: r
        for r in core.rollups.ready(
            [core.binding.conversation_id], "day", date(2024, 5, 1), date(2024, 5, 6)
        )
    }
    assert "heron" in by_day["2024-05-01"].content and "otter" in by_day["2024-05-06"].content


def test_doctor_warns_about_failed_rollups(make_engine):
    from hermes_lcm.maintenance import doctor as maintenance

    engine = make_engine(**ON)
    core = quiet(engine)
    engine.ingest_host(msgs([MAY_1 + 3600]))

    def broken(*args: Any) -> Any:
        raise RuntimeError("provider down")

    core.rollups.summarize = broken
    core.rollups.step()
    report = maintenance.doctor_report(core.store, deep=False, config=core.config)
    check = next(c for c in report["checks"] if c["name"] == "temporal_rollups")
    assert check["status"] == "warn" and "provider down" in check["detail"]


def test_rollups_off_name_the_setting_that_turns_them_on(make_engine):
    """``/lcm rollups`` and status with rollups off say which variable turns them on."""
    engine = make_engine()
    status = engine.get_status()["temporal_rollups"]
    assert status["enabled"] is False and "LCM_TEMPORAL_ROLLUPS_ENABLED" in status["note"]

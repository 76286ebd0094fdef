"""Migration: every LCM-X and lossless-claw setting is honoured, read as an alias or
reported; no ``LCM_*`` variable and no ``lcm:`` key is ignored without a word.

The peer lists live in hermes_lcm/base/peer_settings.py with the commit and files they were extracted from
(LCMX_SOURCE, CLAW_SOURCE). These tests drive real engines on real SQLite files, and (those that
open a database: ``both_backends``) on a real PostgreSQL.
"""

from __future__ import annotations

import copy
import dataclasses
import io
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hermes_lcm import store as store_module
from hermes_lcm.base import peer_settings as compat
from hermes_lcm.config import LcmConfig, env_name, load_config
from hermes_lcm.engine import LcmEngine

pytestmark = pytest.mark.both_backends
FIELDS = [f.name for f in dataclasses.fields(LcmConfig)]
WHERE: dict[str, str] = {}  # the running test's database setting (empty: lcm.db in its home)
OUR_ENV = {env_name(name) for name in FIELDS}


@pytest.fixture(autouse=True)
def _close_stores():
    yield
    store_module.close_all()


@pytest.fixture
def on_backend(backend_env: dict[str, str], monkeypatch: pytest.MonkeyPatch):
    """The test's engines (and CLI) on its backend; each backend's run starts as a new process
    would, with no settings note logged yet (they are logged once per process)."""
    from hermes_lcm import config

    monkeypatch.setattr(config, "_ANNOUNCED", set())
    WHERE.update(backend_env)
    yield
    WHERE.clear()


def _engine(home: Path, yaml: str = "", **env: str) -> LcmEngine:
    home.mkdir(parents=True, exist_ok=True)
    if yaml:
        (home / "config.yaml").write_text("lcm:\n" + yaml, encoding="utf-8")
    base = {"HERMES_HOME": str(home), "LCM_SUMMARY_PROVIDER": "extractive", **WHERE, **env}
    engine = copy.deepcopy(LcmEngine(env=base))
    engine.update_model("m", 64_000)
    engine.on_session_start(
        "s1", hermes_home=str(home), platform="cli", model="m", context_length=64_000
    )
    return engine


def _seen(engine: LcmEngine) -> tuple[list[str], dict]:
    status = json.loads(engine.handle_tool_call("lcm_status", {}))
    doctor = json.loads(engine.handle_tool_call("lcm_doctor", {}))
    return status["settings_notes"], next(c for c in doctor["checks"] if c["name"] == "settings")


# -- the table ----------------------------------------------------------------------------------


def test_every_extracted_peer_setting_has_exactly_one_row_with_a_status_and_a_reason():
    rows = {(r.peer, r.kind, r.name): r for r in compat.TABLE}
    expected = (
        {(compat.LCMX, "env", n) for n in compat.LCMX_ENV}
        | {(compat.LCMX, "yaml", n) for n in compat.LCMX_YAML}
        | {(compat.CLAW, "env", n) for n in compat.CLAW_ENV}
        | {(compat.CLAW, "plugin", n) for n in compat.CLAW_PLUGIN}
    )
    assert set(rows) == expected and len(compat.TABLE) == len(expected)
    for row in compat.TABLE:
        assert row.status in ("same", "alias", "unsupported")
        if row.status == "unsupported":
            assert row.note, f"{row.name}: no 'what to do instead'"
        else:
            assert row.ours in FIELDS, f"{row.name} -> {row.ours} is not our field"
        if row.status == "same" and row.kind == "env":
            assert row.name in OUR_ENV  # same name, same key
    # the counts the issue quotes are lower bounds of what the peers' sources hold
    assert len(compat.LCMX_ENV) >= 75 and len(compat.CLAW_ENV) >= 32


def test_every_peer_environment_variable_is_classified_by_the_loader_and_nothing_raises():
    names = {*compat.LCMX_ENV, *compat.CLAW_ENV}
    loaded = load_config({name: "1" for name in names}, {})
    notes = " ".join(loaded.problems)
    for name in names - OUR_ENV:
        assert f"setting {name} " in notes, f"{name} ignored without a word"


def test_every_peer_yaml_and_plugin_key_is_classified_in_the_lcm_block():
    keys = {*compat.LCMX_YAML, *compat.CLAW_PLUGIN, *(n[4:].lower() for n in compat.LCMX_ENV)}
    loaded = load_config({}, {key: "1" for key in keys})
    text = " ".join(loaded.problems)
    ours = {compat.norm(f) for f in FIELDS}
    for key in keys:
        assert compat.norm(key) in ours or f"lcm.{key} " in text or f"lcm.{key}=" in text, key


def test_the_totals_come_from_the_table_and_the_module_prints_them():
    counts = compat.totals()
    for peer in (compat.LCMX, compat.CLAW):
        assert sum(counts[peer].values()) == sum(1 for r in compat.TABLE if r.peer == peer)
    out = subprocess.run(
        [sys.executable, "-m", "hermes_lcm.base.peer_settings"],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(Path(compat.__file__).parent.parent.parent)},
    ).stdout
    lcmx = counts[compat.LCMX]
    assert (
        f"LCM-X: {sum(lcmx.values())} settings: {lcmx['same']} honoured as they are, "
        f"{lcmx['alias']} read as aliases, {lcmx['unsupported']} reported." in out
    )
    assert out.strip() == compat.markdown_totals()


def test_the_migration_page_holds_the_table_as_generated():
    page = (
        Path(compat.__file__).resolve().parent.parent / "docs" / "guide" / "import-and-migrate.md"
    ).read_text(encoding="utf-8")
    block = page.split("<!-- generated: hermes_lcm.base.peer_settings.markdown_table -->\n", 1)[1]
    assert block.split("\n<!-- /generated -->")[0] == compat.markdown_table()


# -- aliases change behaviour ---------------------------------------------------------------------


def test_a_peer_alias_sets_our_key_in_the_engine_in_force(tmp_path, on_backend):
    plain = _engine(tmp_path / "a")
    assert plain.config.condense_min_nodes == 4 and plain.config.compaction_max_seconds == 45.0
    engine = _engine(
        tmp_path / "b",
        LCM_CONDENSATION_FANIN="7",
        LCM_COMPACT_UNTIL_UNDER_DEADLINE_MS="5000",
        LCM_CIRCUIT_BREAKER_COOLDOWN_MS="90000",
    )
    assert engine.ensure_core() is not None
    for config in (engine.config, engine.core.config):
        assert config.condense_min_nodes == 7
        assert config.compaction_max_seconds == 5.0  # milliseconds -> seconds
        assert config.summary_circuit_breaker_cooldown_seconds == 90.0
    notes, check = _seen(engine)
    assert any("LCM_CONDENSATION_FANIN (LCM-X): read as LCM_CONDENSE_MIN_NODES" in n for n in notes)
    assert check["status"] == "ok"  # an alias read is listed, not a warning


def test_our_key_wins_over_a_peer_alias_and_the_alias_is_reported_ignored(tmp_path):
    loaded = load_config({"LCM_CONDENSE_MIN_NODES": "5", "LCM_CONDENSED_MIN_FANOUT": "9"}, {})
    assert loaded.config.condense_min_nodes == 5
    assert any(
        "LCM_CONDENSED_MIN_FANOUT (lossless-claw): ignored, LCM_CONDENSE_MIN_NODES is set" in p
        for p in loaded.problems
    )


def test_camel_case_plugin_keys_in_the_yaml_block_are_read(tmp_path, on_backend):
    engine = _engine(tmp_path, "  freshTailCount: 9\n  maxSweepIterations: 3\n")
    assert engine.config.fresh_tail_count == 9 and engine.config.max_passes_per_compress == 3


def test_a_note_names_the_yaml_key_as_written_and_the_peers_timezone_is_read(tmp_path, on_backend):
    """lossless-claw's camel-case keys keep their spelling in the note the user reads, and its
    ``timezone`` is LCM_TIMEZONE's (the zone whose days the rollups are kept for)."""
    engine = _engine(tmp_path, "  cacheAwareCompaction: true\n  timezone: Europe/Paris\n")
    notes, _check = _seen(engine)
    assert engine.config.timezone == "Europe/Paris"
    assert [n for n in notes if "cacheAwareCompaction" in n] and not any(
        "cacheawarecompaction" in n or "timezone" in n for n in notes
    ), notes


def test_a_bad_alias_value_is_reported_under_the_peer_name_and_falls_back():
    loaded = load_config({"LCM_CIRCUIT_BREAKER_COOLDOWN_MS": "soon"}, {})
    assert loaded.config.summary_circuit_breaker_cooldown_seconds == 300.0
    assert any(
        p.startswith("LCM_CIRCUIT_BREAKER_COOLDOWN_MS='soon' is invalid") for p in loaded.problems
    )


# -- reported: status, doctor, host log --------------------------------------------------------


def test_a_typo_env_var_gets_a_did_you_mean_in_status_doctor_and_the_host_log_once(
    tmp_path, caplog, on_backend
):
    caplog.set_level(logging.WARNING, logger="hermes_lcm")
    first = _engine(tmp_path, LCM_FRESH_TAIL_COUNTT="8")
    second = _engine(tmp_path, LCM_FRESH_TAIL_COUNTT="8")  # another agent's copy, same process
    for engine in (first, second):
        notes, check = _seen(engine)
        assert notes == [
            "setting LCM_FRESH_TAIL_COUNTT: unknown key, ignored; did you mean LCM_FRESH_TAIL_COUNT?"
        ]
        assert check["status"] == "warn" and "did you mean LCM_FRESH_TAIL_COUNT?" in check["detail"]
        assert engine.config.fresh_tail_count == 32
    logged = [r.getMessage() for r in caplog.records if "LCM_FRESH_TAIL_COUNTT" in r.getMessage()]
    assert len(logged) == 1 and "did you mean LCM_FRESH_TAIL_COUNT?" in logged[0]


def test_an_unknown_yaml_key_gets_a_did_you_mean_in_status_doctor_and_the_log(
    tmp_path, caplog, on_backend
):
    caplog.set_level(logging.WARNING, logger="hermes_lcm")
    engine = _engine(tmp_path, "  leaf_chunk_tokns: 3000\n")
    notes, check = _seen(engine)
    expected = "setting config.yaml lcm.leaf_chunk_tokns: unknown key, ignored; did you mean leaf_chunk_tokens?"
    assert notes == [expected] and expected in check["detail"] and check["status"] == "warn"
    assert [r.getMessage() for r in caplog.records].count(f"hermes-lcm: {expected}") == 1


def test_an_unsupported_peer_setting_says_what_to_do_instead(tmp_path, on_backend):
    engine = _engine(
        tmp_path,
        "  pruneHeartbeatOk: true\n",
        LCM_EMBEDDING_BOUNDED_SCAN_ROWS="5000",
        LCM_ENABLED="false",
        LCM_CACHE_TTL_SECONDS="300",
    )
    notes, check = _seen(engine)
    text = " ".join(notes)
    assert (
        "LCM_CACHE_TTL_SECONDS (lossless-claw): not supported, ignored; no cache window to wait "
        "for: the prompt changes only when compress runs at LCM_CONTEXT_THRESHOLD" in text
    )
    assert (
        "LCM_EMBEDDING_BOUNDED_SCAN_ROWS (LCM-X): not supported, ignored; not used here: semantic recall"
        in text
    )
    assert (
        "LCM_ENABLED (lossless-claw): not supported, ignored; choose the engine in Hermes' config"
        in text
    )
    assert "lcm.pruneHeartbeatOk (lossless-claw): not supported, ignored" in text
    assert check["status"] == "warn" and "Migration" in check["action"]


def test_the_cli_doctor_reports_settings_too(tmp_path, monkeypatch, on_backend):
    from hermes_lcm.cli.main import main

    _engine(tmp_path).ensure_core()
    store_module.close_all()
    monkeypatch.setenv("HERMES_HOME", str(tmp_path))
    monkeypatch.setenv("LCM_SWEEP_DEADLINE_MS", "1000")
    for key, value in WHERE.items():
        monkeypatch.setenv(key, value)
    out = io.StringIO()
    main(["doctor"], out=out)
    check = next(c for c in json.loads(out.getvalue())["checks"] if c["name"] == "settings")
    assert check["status"] == "warn" and "use LCM_COMPACTION_MAX_SECONDS" in check["detail"]


def test_our_own_and_other_hermes_lcm_variables_leave_no_note():
    env = {name: "1" for name in compat.OTHER_OURS} | {
        "LCM_SUMMARY_PROVIDER": "extractive",
        "LCM_SHARED_MEMORY": "1",
    }
    assert load_config(env, {"fresh_tail_count": 3}).problems == ()


def test_nothing_raises_whatever_the_keys_and_values():
    weird = {
        "LCM_": "x",
        "LCM_CIRCUIT_BREAKER_COOLDOWN_MS": "nan",
        "LCM_COMPACT_UNTIL_UNDER_DEADLINE_MS": "1e400",
        "LCM_\u00e9": "1",
        "LCM_MAX_EXPAND_TOKENS": "",
    }
    loaded = load_config(
        weird, {1: 2, "": None, "dbPath": ["a", "b"], "cacheAwareCompaction": {"enabled": True}}
    )
    assert loaded.config is not None


def test_a_key_missing_its_qualifier_is_pointed_at_the_settings_that_have_it():
    """``LCM_THRESHOLD`` meant the context threshold, not LCM_MODEL_THRESHOLDS (the nearest spelling)."""
    from hermes_lcm.config import load_config

    (note,) = load_config({"LCM_THRESHOLD": "0.5"}).problems
    assert "did you mean LCM_CONTEXT_THRESHOLD" in note, note
    (note,) = load_config({"LCM_FRESH_TAIL": "8"}).problems
    assert "LCM_FRESH_TAIL_COUNT" in note and "LCM_FRESH_TAIL_MAX_TOKENS" in note, note
    (note,) = load_config({"LCM_SUBAGENT_SESSION": "store"}).problems
    assert note.endswith("did you mean LCM_SUBAGENT_SESSIONS?"), note

"""Settings in force from the first host call, and one function for the threshold.

The host deep-copies the registered template, calls ``update_model`` on the copy, then
``on_session_start(hermes_home=...)`` (agent/agent_init.py). Every setting, from env or from the
``lcm:`` block of config.yaml, must already shape the window at the first of those calls, and the
engine's fallback path must use the same threshold as the normal one. The tests that open the
database run on SQLite and PostgreSQL (``both_backends``).
"""

from __future__ import annotations

import copy
import sqlite3
from pathlib import Path

import pytest

from hermes_lcm import store as store_module
from hermes_lcm.base.tokens import count_messages
from hermes_lcm.config import DEFAULT_CONTEXT_LENGTH, compute_threshold, load_config
from hermes_lcm.engine import LcmEngine
from hermes_lcm.prompt.budget import budget_for, reserve_for

from .backends import raw_sql
from .convo import assert_valid_sequence, conversation

pytestmark = pytest.mark.both_backends
EXTRACTIVE = {"LCM_SUMMARY_PROVIDER": "extractive"}


@pytest.fixture(autouse=True)
def _close_stores():
    yield
    store_module.close_all()


def _home(tmp_path: Path, lcm_yaml: str) -> Path:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    (home / "config.yaml").write_text("model:\n  default: m\nlcm:\n" + lcm_yaml, encoding="utf-8")
    return home


def _host_copy(home: Path, **env: str) -> LcmEngine:
    """What the host holds after loading the plugin and building an agent: a deep copy of the template."""
    return copy.deepcopy(LcmEngine(env={"HERMES_HOME": str(home), **EXTRACTIVE, **env}))


def test_yaml_absolute_threshold_is_in_force_at_the_first_update_model(tmp_path, backend_env):
    engine = _host_copy(_home(tmp_path, "  absolute_threshold_tokens: 5000\n"), **backend_env)
    assert engine.threshold_tokens == 5000  # before the host said anything
    engine.update_model("m", 64000)
    assert engine.threshold_tokens == 5000 and engine.core is None
    assert engine.should_compress(5000) and not engine.should_compress(4999)
    engine.on_session_start(
        "s1", hermes_home=engine.hermes_home, platform="cli", model="m", context_length=64000
    )
    assert engine.threshold_tokens == 5000 and engine.config_problems == ()
    assert engine.core is not None and engine.startup_error is None


def test_yaml_ratio_and_per_model_thresholds_are_in_force_at_the_first_update_model(tmp_path):
    home = _home(tmp_path, "  context_threshold: 0.2\n  model_thresholds:\n    big-model: 0.25\n")
    engine = _host_copy(home)
    engine.update_model("small", 100_000)
    assert engine.threshold_tokens == 20_000
    assert engine.threshold_percent == pytest.approx(0.2)
    engine.update_model("big-model-1m", 1_000_000)
    assert engine.threshold_tokens == 250_000
    assert engine.get_status()["threshold_tokens"] == 250_000


def test_env_still_wins_over_yaml_from_the_start(tmp_path):
    engine = _host_copy(_home(tmp_path, "  context_threshold: 0.2\n"), LCM_CONTEXT_THRESHOLD="0.5")
    engine.update_model("m", 100_000)
    assert engine.threshold_tokens == 50_000


def test_a_home_named_only_at_session_start_loads_its_yaml_and_recomputes_the_window(
    tmp_path, monkeypatch, backend_env
):
    """No HERMES_HOME in the engine's env: the host's default home has no lcm block; the home the
    host names at on_session_start does, and its settings replace the window at once."""
    default_home = tmp_path / "default"
    default_home.mkdir()
    monkeypatch.setenv("HERMES_HOME", str(default_home))
    engine = copy.deepcopy(LcmEngine(env={**EXTRACTIVE, **backend_env}))
    engine.update_model("m", 64000)
    assert engine.threshold_tokens == int(64000 * 0.35)
    home = _home(tmp_path, "  absolute_threshold_tokens: 7000\n")
    engine.on_session_start("s1", hermes_home=str(home), platform="cli")
    assert engine.threshold_tokens == 7000
    assert engine.core is not None and engine.core.config.absolute_threshold_tokens == 7000


def test_an_edit_to_config_yaml_reaches_the_next_agent_copy(tmp_path):
    home = _home(tmp_path, "  absolute_threshold_tokens: 5000\n")
    template = LcmEngine(env={"HERMES_HOME": str(home), **EXTRACTIVE})
    first = copy.deepcopy(template)
    (home / "config.yaml").write_text("lcm:\n  absolute_threshold_tokens: 9000\n", encoding="utf-8")
    second = copy.deepcopy(template)
    assert (first.threshold_tokens, second.threshold_tokens) == (5000, 9000)


def test_a_threshold_the_host_lowered_survives_a_copy_with_the_same_settings(tmp_path):
    """conversation_compression.py lowers threshold_tokens when the auxiliary model's window is smaller."""
    live = _host_copy(_home(tmp_path, "  context_threshold: 0.5\n"))
    live.update_model("m", 400_000)
    live.threshold_tokens = 64_000
    assert copy.deepcopy(live).threshold_tokens == 64_000


# -- the one threshold function ---------------------------------------------------


@pytest.mark.parametrize(
    "env,model,window,expected",
    [
        ({}, "m", 64000, int(64000 * 0.35)),
        ({}, "m", 0, int(DEFAULT_CONTEXT_LENGTH * 0.35)),  # window not told yet
        ({"LCM_MODEL_THRESHOLDS": "tiny:0.05"}, "tiny-model", 64000, 3200),
        (
            {"LCM_MODEL_THRESHOLDS": "tiny:0.05"},
            "tiny-model",
            0,
            int(DEFAULT_CONTEXT_LENGTH * 0.05),
        ),
        ({"LCM_ABSOLUTE_THRESHOLD_TOKENS": "3000"}, "m", 64000, 3000),
        ({"LCM_ABSOLUTE_THRESHOLD_TOKENS": "3000"}, "m", 0, 3000),
        (
            {"LCM_ABSOLUTE_THRESHOLD_TOKENS": "3000", "LCM_MODEL_THRESHOLDS": "m:0.9"},
            "m",
            64000,
            3000,
        ),
    ],
)
def test_compute_threshold(env, model, window, expected):
    config = load_config(env).config
    assert compute_threshold(config, model, window).tokens == expected
    assert config.threshold_tokens_for(model, window) == expected


def test_an_absolute_threshold_above_the_window_is_a_problem_and_the_ratio_is_used(tmp_path):
    engine = _host_copy(_home(tmp_path, "  absolute_threshold_tokens: 500000\n"))
    engine.update_model("m", 64000)
    assert engine.threshold_tokens == int(64000 * 0.35)
    assert any("absolute_threshold_tokens" in p for p in engine.get_status()["config_problems"])


def _unopenable_store(tmp_path: Path, backend_env: dict[str, str]) -> dict[str, str]:
    """A database that belongs to someone else: the engine refuses it and runs on its fallback."""
    if backend_env:
        url = backend_env["LCM_DATABASE_URL"]
        raw_sql(url, "CREATE TABLE messages(x text)")  # another program's table of that name
        return {"LCM_DATABASE_URL": url}
    path = tmp_path / "foreign.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE not_ours(x)")
    return {"LCM_DATABASE_PATH": str(path)}


@pytest.mark.parametrize(
    "env,model,expected",
    [
        ({"LCM_ABSOLUTE_THRESHOLD_TOKENS": "3000"}, "m", 3000),
        ({"LCM_MODEL_THRESHOLDS": "tiny:0.05"}, "tiny-model", 3200),
    ],
)
def test_the_fallback_path_honours_absolute_and_per_model_thresholds(
    tmp_path, env, model, expected, backend_env
):
    engine = copy.deepcopy(
        LcmEngine(
            env={
                "HERMES_HOME": str(tmp_path),
                **EXTRACTIVE,
                **_unopenable_store(tmp_path, backend_env),
                **env,
            }
        )
    )
    engine.update_model(model, 64000)
    engine.on_session_start("s1", hermes_home=str(tmp_path), platform="cli")
    assert engine.core is None and engine.startup_error
    assert engine.threshold_tokens == expected
    history = [m for t in conversation(seed=5, turns=30) for m in t]
    out = engine.compress(history, current_tokens=count_messages(history))
    assert_valid_sequence(out)
    budget = budget_for(engine.config, expected, engine.overhead(history, None))
    assert 0 < count_messages(out) <= budget.total < expected


def test_the_fallback_threshold_without_a_window_is_the_same_function(tmp_path):
    """Even with threshold_tokens cleared (no window ever told), the fallback asks compute_threshold."""
    engine = LcmEngine(
        env={"HERMES_HOME": str(tmp_path), **EXTRACTIVE, "LCM_MODEL_THRESHOLDS": "tiny:0.05"}
    )
    engine.model = "tiny-model"
    engine.threshold_tokens = 0
    assert engine._threshold() == compute_threshold(engine.config, "tiny-model", 0).tokens == 6400


def test_an_absurd_reserve_is_refused_against_the_threshold(tmp_path):
    engine = _host_copy(tmp_path, LCM_RESERVE_TOKENS="50000")
    engine.update_model("m", 64000)  # threshold 22,400: a 50k reserve would leave nothing
    assert reserve_for(engine.config, engine.threshold_tokens) == 2240
    problems = engine.get_status()["config_problems"]
    assert any("reserve_tokens" in p for p in problems), problems
    budget = budget_for(engine.config, engine.threshold_tokens, 1000)
    assert budget.total == engine.threshold_tokens - 1000 - 2240
    sane = load_config({"LCM_RESERVE_TOKENS": "5000"}).config
    assert reserve_for(sane, 22_400) == 5000 and compute_threshold(sane, "m", 64000).problems == ()


def test_an_unreadable_config_yaml_is_a_problem_from_the_start_not_a_crash(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.yaml").write_text("lcm: [unclosed\n", encoding="utf-8")
    engine = _host_copy(home)
    assert any("unreadable" in p for p in engine.config_problems)
    engine.update_model("m", 64000)
    assert engine.threshold_tokens == int(64000 * 0.35) and engine.errors == []


def test_threshold_overrides_by_window_and_session_and_the_rule_in_status(tmp_path):
    """lossless-claw's contextThresholdOverrides in the lcm: block (read as
    LCM_THRESHOLD_OVERRIDES): the first rule that matches the window or the session sets the
    fraction, before the per-model ones; status names the rule in force."""
    home = _home(
        tmp_path,
        "  model_thresholds: big-model:0.5\n"
        "  contextThresholdOverrides:\n"
        "    - name: large-context-models\n"
        "      match: {modelContextWindowMin: 900000}\n"
        "      contextThreshold: 0.15\n"
        "    - name: telegram-sessions\n"
        "      match: {sessionPattern: 'telegram:**'}\n"
        "      contextThreshold: 0.3\n",
    )
    engine = _host_copy(home)
    engine.update_model("big-model", 1_000_000)
    assert engine.threshold_tokens == 150_000
    engine.update_model("big-model", 100_000)
    assert engine.threshold_tokens == 50_000  # no rule: the per-model fraction
    assert engine.get_status()["threshold_rule"] == "model_thresholds: big-model"
    engine.on_session_start("chat-7", hermes_home=str(home), platform="telegram")
    assert engine.threshold_tokens == 30_000  # the session is known now: its rule applies
    assert engine.get_status()["threshold_rule"] == "threshold_overrides: telegram-sessions"
    notes = [p for p in engine.config_problems if "contextThresholdOverrides" in p]
    assert notes and "read as LCM_THRESHOLD_OVERRIDES" in notes[0]


@pytest.mark.parametrize(
    ("rules", "model", "window", "session", "expected"),
    [
        ("model=glm window<=200000 -> 0.5", "glm-5", 200_000, ("s", "cli"), 100_000),
        ("model=glm window<=200000 -> 0.5", "glm-5", 200_001, ("s", "cli"), 140_000),
        (
            "session=agent:*:cron:** -> 0.2; window>=1 -> 0.9",
            "m",
            100_000,
            ("agent:a:cron:x", ""),
            20_000,
        ),
        (
            "session=agent:*:cron:** -> 0.2; window>=1 -> 0.9",
            "m",
            100_000,
            ("agent:a:b:c", ""),
            90_000,
        ),
    ],
)
def test_compute_threshold_with_rules(rules, model, window, session, expected):
    config = load_config({"LCM_THRESHOLD_OVERRIDES": rules, "LCM_CONTEXT_THRESHOLD": "0.7"}).config
    assert compute_threshold(config, model, window, session).tokens == expected


def test_a_bad_threshold_rule_is_reported_and_the_fraction_stands():
    loaded = load_config({"LCM_THRESHOLD_OVERRIDES": "window>=big -> 0.5"})
    assert loaded.config.threshold_overrides == ""
    assert any("LCM_THRESHOLD_OVERRIDES" in p and "window>=big" in p for p in loaded.problems)

"""Bad numbers never escape into the host.

NaN compares false with everything, so it slipped through every range check and made compress
raise ValueError mid-turn; infinities, negatives and absurd sizes were similar. Every numeric
setting, from env or config.yaml, must be rejected as a config problem that status and doctor
name by key, its default used, and every host call must go on returning a valid bounded prompt.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hermes_lcm import store as store_module
from hermes_lcm.base.setting_rules import BOUNDS
from hermes_lcm.base.tokens import count_messages
from hermes_lcm.config import (
    LcmConfig,
    compute_threshold,
    env_name,
    load_config,
)
from hermes_lcm.engine import LcmEngine
from hermes_lcm.prompt.budget import budget_for, plan_budget, reserve_for

from .convo import assert_valid_sequence, conversation

NUMERIC = [f.name for f in dataclasses.fields(LcmConfig) if f.type in ("int", "float")]
# (label, env text, YAML text): each is invalid for every numeric key.
BAD = [
    ("nan", "nan", ".nan"),
    ("inf", "inf", ".inf"),
    ("-inf", "-inf", "-.inf"),
    ("negative", "-5", "-5"),
    ("huge", str(10**30), str(10**30)),
    ("overflow", "1e400", "1.0e+400"),
    ("boolean", "true", "true"),
]
HISTORY = [m for t in conversation(seed=8, turns=30) for m in t]


@pytest.fixture(autouse=True)
def _close_stores():
    yield
    store_module.close_all()


def test_every_numeric_key_has_finite_bounds():
    assert NUMERIC and set(NUMERIC) <= set(BOUNDS)
    assert all(math.isfinite(low) and math.isfinite(high) for low, high in BOUNDS.values())


@pytest.mark.parametrize("source", ["env", "yaml"])
@pytest.mark.parametrize("label,env_text,yaml_text", BAD, ids=[b[0] for b in BAD])
@pytest.mark.parametrize("key", NUMERIC)
def test_a_bad_number_falls_back_to_the_default_and_names_its_key(
    key, label, env_text, yaml_text, source, tmp_path
):
    if source == "env":
        loaded = load_config({env_name(key): env_text})
    else:
        import yaml

        loaded = load_config({}, yaml.safe_load(f"{key}: {yaml_text}"))
    assert loaded.config == LcmConfig()
    assert len(loaded.problems) == 1 and key in loaded.problems[0].lower(), loaded.problems


def _engine(tmp_path: Path, env: dict[str, str], yaml_block: dict[str, str]) -> LcmEngine:
    """A host copy of the template with ``yaml_block`` written into config.yaml as raw YAML text."""
    home = tmp_path / "home"
    home.mkdir()
    lines = "".join(f"  {k}: {v}\n" for k, v in yaml_block.items())
    (home / "config.yaml").write_text("lcm:\n" + lines if lines else "{}\n", encoding="utf-8")
    return copy.deepcopy(
        LcmEngine(env={"HERMES_HOME": str(home), "LCM_SUMMARY_PROVIDER": "extractive", **env})
    )


def _drive(engine: LcmEngine) -> list[dict[str, Any]]:
    """Every host call of a session start and an over-threshold turn."""
    engine.update_model("m", 16_000)
    engine.on_session_start(
        "s1", hermes_home=engine.hermes_home, platform="cli", model="m", context_length=16_000
    )
    engine.ingest_host(HISTORY[:20])
    tokens = count_messages(HISTORY) + 300
    assert engine.should_compress(tokens)
    return engine.compress(list(HISTORY), current_tokens=tokens)


def _problems_seen(engine: LcmEngine) -> tuple[str, str]:
    status = json.loads(engine.handle_tool_call("lcm_status", {}))
    doctor = json.loads(engine.handle_tool_call("lcm_doctor", {}))
    config_check = next(c for c in doctor["checks"] if c["name"] == "config")
    assert config_check["status"] == "warn"
    return json.dumps(status["config_problems"]).lower(), json.dumps(config_check).lower()


@pytest.mark.parametrize("source", ["env", "yaml"])
@pytest.mark.parametrize("label,env_text,yaml_text", BAD, ids=[b[0] for b in BAD])
def test_an_engine_with_every_number_bad_serves_every_host_call(
    label, env_text, yaml_text, source, tmp_path
):
    """All numeric keys bad at once: each one falls back alone, so this is every key's run."""
    env = {env_name(k): env_text for k in NUMERIC} if source == "env" else {}
    engine = _engine(tmp_path, env, {k: yaml_text for k in NUMERIC} if source == "yaml" else {})
    out = _drive(engine)
    assert engine.errors == [] and engine.core is not None and engine.core.stats.compactions == 1
    assert out and count_messages(out) <= engine.threshold_tokens == int(16_000 * 0.35)
    assert_valid_sequence(out)
    assert {
        f.name: getattr(engine.config, f.name)
        for f in dataclasses.fields(LcmConfig)
        if f.name in NUMERIC
    } == {name: getattr(LcmConfig(), name) for name in NUMERIC}
    status, doctor = _problems_seen(engine)
    assert [k for k in NUMERIC if k not in status] == []
    assert [k for k in NUMERIC if k not in doctor] == []


@pytest.mark.parametrize("key", NUMERIC)
def test_nan_in_one_env_key_is_a_named_problem_and_compress_still_works(key, tmp_path):
    engine = _engine(tmp_path, {env_name(key): "nan"}, {})
    out = _drive(engine)
    assert engine.errors == [] and out and count_messages(out) <= engine.threshold_tokens
    assert_valid_sequence(out)
    status, doctor = _problems_seen(engine)
    assert key in status and key in doctor


@pytest.mark.parametrize("yaml_text", ["-0.5", ".nan", "1.5", "inf"])
def test_bad_per_model_ratios_are_refused(yaml_text, tmp_path):
    engine = _engine(tmp_path, {}, {"model_thresholds": "{m: " + yaml_text + "}"})
    assert engine.config.model_thresholds == ""
    out = _drive(engine)
    assert engine.errors == [] and out
    assert "model_thresholds" in _problems_seen(engine)[0]


def test_the_lcm_cli_doctor_names_bad_keys_from_env_and_yaml(tmp_path, monkeypatch):
    import io

    from hermes_lcm.cli.main import main

    engine = _engine(tmp_path, {}, {"reserve_tokens": "-.inf"})
    _drive(engine)
    store_module.close_all()
    monkeypatch.setenv("HERMES_HOME", engine.hermes_home)
    monkeypatch.setenv("LCM_SUMMARY_BUDGET_RATIO", "nan")
    out = io.StringIO()
    main(["doctor"], out=out)
    config_check = next(c for c in json.loads(out.getvalue())["checks"] if c["name"] == "config")
    assert config_check["status"] == "warn"
    assert (
        "LCM_SUMMARY_BUDGET_RATIO" in config_check["detail"]
        and "lcm.reserve_tokens" in config_check["detail"]
    )


# -- the budget math, whatever comes in --------------------------------------------

finite_or_not = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True), st.integers(-(10**6), 10**6).map(float)
)
tokens = st.integers(min_value=-(10**12), max_value=10**12)


@given(
    threshold=tokens,
    overhead=tokens,
    reserve=tokens,
    tail_count=st.integers(-5, 10**5),
    tail_max=tokens,
    target=finite_or_not,
    summary=finite_or_not,
)
def test_plan_budget_is_never_negative_nan_or_inverted(
    threshold, overhead, reserve, tail_count, tail_max, target, summary
):
    b = plan_budget(
        threshold,
        overhead,
        reserve,
        tail_count=tail_count,
        tail_max_tokens=tail_max,
        target_ratio=target,
        summary_ratio=summary,
    )
    assert b.total >= 64 and 48 <= b.goal <= b.total
    assert 0 <= b.summaries <= b.goal and 0 <= b.tail_tokens <= b.goal and b.tail_count >= 1


raw_value = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(-(10**40), 10**40),
    st.booleans(),
    st.none(),
    st.text(max_size=12),
    st.sampled_from(["nan", "inf", "-inf", "1e999", "-0", " 7 ", "0x10", "1_000"]),
    st.lists(st.integers(), max_size=3),
)
config_input = st.dictionaries(
    st.sampled_from([f.name for f in dataclasses.fields(LcmConfig)]), raw_value, max_size=8
)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(
    yaml_block=config_input,
    env_block=config_input,
    window=st.integers(-10, 10**13),
    model=st.text(max_size=8),
    overhead=st.integers(0, 10**7),
)
def test_any_config_loads_into_bounded_finite_settings_and_a_sane_budget(
    yaml_block, env_block, window, model, overhead
):
    env = {env_name(k): str(v) for k, v in env_block.items() if v is not None}
    loaded = load_config(env, yaml_block)
    config = loaded.config
    for name, (low, high) in BOUNDS.items():
        value = getattr(config, name)
        assert not isinstance(value, bool) and math.isfinite(value) and low <= value <= high, (
            name,
            value,
        )
    threshold = compute_threshold(config, model, window).tokens
    assert 1 <= threshold <= 100_000_000
    assert 0 < reserve_for(config, threshold) <= max(threshold // 2, 4096)
    budget = budget_for(config, threshold, overhead)
    assert 48 <= budget.goal <= budget.total and budget.summaries >= 0 and budget.tail_tokens >= 0


def test_a_one_token_threshold_with_proactive_recall_still_reserves_a_token():
    """Found by the property test above: threshold 1 with proactive recall on halved the reserve to 0."""
    config = load_config({"LCM_PROACTIVE_RECALL_ENABLED": "true"}, {}).config
    assert reserve_for(config, 1) == 1

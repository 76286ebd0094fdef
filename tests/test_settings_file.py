"""``lcm config get`` / ``lcm config set``: a setting with its source, and one validated value
written into config.yaml's lcm: block with every other byte of the file kept."""

from __future__ import annotations

import io
import json
import stat
from pathlib import Path
from typing import Any

import pytest
import yaml

from hermes_lcm.cli.main import main
from hermes_lcm.config import load_for_home
from hermes_lcm.maintenance.settings_file import SettingsFileError, set_setting, with_setting

ORIGINAL = (
    "# my Hermes settings\r\n"
    "model:\r\n"
    "  default: m   # keep me\r\n"
    "lcm:\r\n"
    "  freshTailCount: 7  # an old one\r\n"
    "  summary_fallback_models:\r\n"
    "    - a\r\n"
    "    - b\r\n"
    "\r\n"
    "  leaf_chunk_tokens: 3000\r\n"
    "other: {a: 1}\r\n"
)


def lcm(home: Path, monkeypatch: pytest.MonkeyPatch, *argv: str) -> tuple[int, Any]:
    monkeypatch.setenv("HERMES_HOME", str(home))
    out = io.StringIO()
    code = main(["--format", "json", *argv], out=out)
    return code, json.loads(out.getvalue()) if out.getvalue().strip() else None


def test_a_set_replaces_one_line_and_keeps_every_other_byte(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "config.yaml"
    path.write_bytes(ORIGINAL.encode())
    path.chmod(0o640)
    monkeypatch.delenv("LCM_FRESH_TAIL_COUNT", raising=False)
    code, answer = lcm(tmp_path, monkeypatch, "config", "set", "fresh_tail_count", "48")
    assert code == 0 and answer["value"] == 48
    after = path.read_bytes().decode()
    assert after == ORIGINAL.replace("  freshTailCount: 7  # an old one", "  freshTailCount: 48")
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    # a multi-line old value goes whole; a new key joins the end of the block
    code, _ = lcm(tmp_path, monkeypatch, "config", "set", "LCM_SUMMARY_FALLBACK_MODELS", "x,y")
    code2, _ = lcm(tmp_path, monkeypatch, "config", "set", "contextThreshold", "0.4")
    assert code == code2 == 0
    text = path.read_bytes().decode()
    assert '  summary_fallback_models: "x,y"\r\n\r\n  leaf_chunk_tokens: 3000\r\n' in text
    assert text.endswith("  context_threshold: 0.4\r\nother: {a: 1}\r\n")
    assert text.startswith("# my Hermes settings\r\nmodel:\r\n  default: m   # keep me\r\n")
    loaded = load_for_home({}, tmp_path).config
    assert (loaded.fresh_tail_count, loaded.summary_fallback_models) == (48, "x,y")
    assert loaded.context_threshold == 0.4 and loaded.leaf_chunk_tokens == 3000
    code, got = lcm(tmp_path, monkeypatch, "config", "get", "context_threshold")
    assert code == 0 and (got["value"], got["source"], got["default"]) == (0.4, "config.yaml", 0.35)


def test_a_bad_value_or_key_writes_nothing_and_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "config.yaml"
    path.write_bytes(ORIGINAL.encode())
    for argv, words in (
        (("fresh_tail_count", "0"), "outside 1..10000"),
        (("compaction_mode", "sometimes"), "not one of"),
        (("fresh_tail_cuont", "5"), "no setting"),
        (("leaf_chunk_tokens",), "needs a value"),
    ):
        code, answer = lcm(tmp_path, monkeypatch, "config", "set", *argv)
        assert code == 2 and words in answer["error"], answer
    assert path.read_bytes() == ORIGINAL.encode()


def test_sources_env_wins_and_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LCM_LEAF_CHUNK_TOKENS", "9000")
    code, got = lcm(tmp_path, monkeypatch, "config", "get", "leaf_chunk_tokens")
    assert (got["value"], got["source"]) == (9000, "environment")
    code, got = lcm(tmp_path, monkeypatch, "config", "get", "fresh_tail_count")
    assert got["source"] == "default"
    code, wrote = lcm(tmp_path, monkeypatch, "config", "set", "leaf_chunk_tokens", "4000")
    assert code == 0 and "wins over config.yaml" in wrote["note"]
    assert (tmp_path / "config.yaml").read_text() == "lcm:\n  leaf_chunk_tokens: 4000\n"
    assert stat.S_IMODE((tmp_path / "config.yaml").stat().st_mode) == 0o600


def test_get_without_a_key_lists_every_setting_and_changed_only_the_set_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "config.yaml").write_text("lcm:\n  freshTailCount: 7\n", encoding="utf-8")
    monkeypatch.setenv("LCM_LEAF_CHUNK_TOKENS", "9000")
    code, every = lcm(tmp_path, monkeypatch, "config", "get")
    names = [r["setting"] for r in every["items"]]
    assert code == 0 and len(names) == len(set(names)) > 50 and "problems" not in every
    by_name = {r["setting"]: r for r in every["items"]}
    assert (by_name["fresh_tail_count"]["value"], by_name["fresh_tail_count"]["source"]) == (
        7,
        "config.yaml",
    )
    assert by_name["compaction_mode"]["source"] == "default"
    code, changed = lcm(tmp_path, monkeypatch, "config", "get", "--changed")
    assert {(r["setting"], r["source"]) for r in changed["items"]} == {
        ("fresh_tail_count", "config.yaml"),
        ("leaf_chunk_tokens", "environment"),
    }
    code, _ = lcm(tmp_path, monkeypatch, "config", "set", "fresh_tail_count")
    assert code == 2  # set needs a key and a value


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", 'lcm:\n  timezone: "UTC"\n'),
        ("model: m", 'model: m\nlcm:\n  timezone: "UTC"\n'),
        ("lcm:\n", 'lcm:\n  timezone: "UTC"\n'),
        ("lcm:\n    timezone: x\n    a: 1\n", 'lcm:\n    timezone: "UTC"\n    a: 1\n'),
        ("lcm:\n  a: 1", 'lcm:\n  a: 1\n  timezone: "UTC"\n'),
    ],
)
def test_with_setting_edits_only_its_line(text: str, expected: str) -> None:
    out = with_setting(text, "timezone", '"UTC"')
    assert out == expected
    assert yaml.safe_load(out)["lcm"]["timezone"] == "UTC"


def test_an_inline_block_is_refused(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text("lcm: {fresh_tail_count: 3}\n")
    with pytest.raises(SettingsFileError, match="inline"):
        set_setting("fresh_tail_count", "5", {}, tmp_path)
    assert (tmp_path / "config.yaml").read_text() == "lcm: {fresh_tail_count: 3}\n"

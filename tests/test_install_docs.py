"""The installed documentation stays true: every config key documented with its real default,
every operator command and CLI verb documented, the skill's references all present."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import yaml

from hermes_lcm.cli.main import parser
from hermes_lcm.command import DOCTOR, VERBS
from hermes_lcm.config import LcmConfig, env_name

REPO = Path(__file__).resolve().parents[1]
GUIDE = (REPO / "docs" / "operator-guide.md").read_text(encoding="utf-8")
SKILL = REPO / "skills" / "hermes-lcm"


def documented_defaults() -> dict[str, str]:
    rows = {}
    for line in GUIDE.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and re.fullmatch(r"`LCM_[A-Z0-9_]+`", cells[0]):
            rows[cells[0].strip("`")] = cells[1]
    return rows


def same_default(doc: str, value: object) -> bool:
    if isinstance(value, bool):
        return doc == str(value).lower()
    if isinstance(value, int | float):
        try:
            return float(doc) == float(value)
        except ValueError:
            return False
    return doc == (f'"{value}"' if value == "" else str(value))


def test_every_config_key_is_documented_with_its_default():
    rows = documented_defaults()
    missing = [
        env_name(f.name) for f in dataclasses.fields(LcmConfig) if env_name(f.name) not in rows
    ]
    assert not missing, f"add these keys to docs/operator-guide.md (Configuration): {missing}"
    wrong = {
        env_name(f.name): (rows[env_name(f.name)], f.default)
        for f in dataclasses.fields(LcmConfig)
        if not same_default(rows[env_name(f.name)], f.default)
    }
    assert not wrong, f"documented defaults differ from config.py: {wrong}"
    unknown = set(rows) - {env_name(f.name) for f in dataclasses.fields(LcmConfig)}
    assert not unknown, f"documented keys that do not exist: {unknown}"


def test_every_operator_command_and_cli_verb_is_documented():
    for verb in VERBS:
        assert f"/lcm {verb}" in GUIDE, verb
    for sub in DOCTOR:
        assert f"/lcm doctor {sub}" in GUIDE, sub
    verbs = parser()._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    for verb in verbs:
        assert f"lcm {verb}" in GUIDE, verb


def test_skill_has_frontmatter_and_all_references():
    text = (SKILL / "SKILL.md").read_text(encoding="utf-8")
    front = yaml.safe_load(text.split("---")[1])
    assert front["name"] == "hermes-lcm" and len(front["description"]) > 40
    wanted = {
        "configuration",
        "architecture",
        "diagnostics",
        "recall-policy",
        "recall-tools",
        "session-lifecycle",
    }
    present = {p.stem for p in (SKILL / "references").glob("*.md")}
    assert wanted <= present
    for link in re.findall(r"\]\((references/[^)]+)\)", text):
        assert (SKILL / link).is_file(), link
    policy = (SKILL / "references" / "recall-policy.md").read_text(encoding="utf-8")
    assert "cues, not proof" in policy and "newer" in policy


def test_docs_exist_and_link_each_other():
    for name in ("operator-guide.md", "tools-reference.md", "architecture.md"):
        assert (REPO / "docs" / name).stat().st_size > 1000, name
    arch = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    for part in ("Hermes Agent (host)", "LcmEngine", "summaries", "assemble", "tools", "search"):
        assert part in arch, part

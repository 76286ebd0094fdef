"""The installed documentation stays true: every config key in the settings reference with its
real default, every operator command and CLI verb in the guide, the guide's index linking every
page, the skill's references all present."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import yaml

from hermes_lcm.cli.main import parser
from hermes_lcm.command import DOCTOR, VERBS
from hermes_lcm.config import LcmConfig, env_name

REPO = Path(__file__).resolve().parents[1]
INDEX = REPO / "docs" / "operator-guide.md"
PAGES = sorted((REPO / "docs" / "guide").glob("*.md"))
GUIDE = "\n".join(p.read_text(encoding="utf-8") for p in [INDEX, *PAGES])
SETTINGS = REPO / "docs" / "settings.md"
SKILL = REPO / "skills" / "hermes-lcm"


def documented_defaults() -> dict[str, str]:
    """The settings reference's rows: every table whose first cell is an `LCM_*` name."""
    rows = {}
    for line in SETTINGS.read_text(encoding="utf-8").splitlines():
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
    assert not missing, f"add these keys to docs/settings.md: {missing}"
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
    index = INDEX.read_text(encoding="utf-8")
    wanted = {
        "install",
        "configure",
        "operate",
        "semantic-recall",
        "privacy",
        "import-and-migrate",
        "postgresql",
        "troubleshoot",
        "security",
    }
    assert wanted <= {p.stem for p in PAGES}
    for page in PAGES:  # the index is where code and docs send a reader: it must reach every page
        assert f"(guide/{page.name})" in index, page.name
    arch = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    for part in ("Hermes Agent (host)", "LcmEngine", "summaries", "assemble", "tools", "search"):
        assert part in arch, part

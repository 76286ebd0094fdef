"""docs/cli.md's reference is the parser's: a verb or an option added without regenerating the doc
(``scripts/docs.py``), or without help text, fails here."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from hermes_lcm.cli import reference
from hermes_lcm.cli.common import subcommands
from hermes_lcm.cli.main import parser

DOC = Path(__file__).resolve().parents[1] / "docs" / "cli.md"
OPEN = "<!-- generated: hermes_lcm.cli.reference.markdown -->\n"
CLOSE = "<!-- /generated -->"


def block() -> str:
    text = DOC.read_text(encoding="utf-8")
    assert text.count(OPEN) == 1, "docs/cli.md needs exactly one reference block"
    return text.split(OPEN, 1)[1].split(CLOSE, 1)[0]


def test_the_doc_block_is_what_the_parser_prints() -> None:
    assert block() == reference.markdown(), "run .venv/bin/python scripts/docs.py"


def test_every_verb_and_option_of_the_parser_is_in_the_doc() -> None:
    text = block()
    verbs = subcommands(parser())
    assert len(verbs) >= 20
    for name, sub in verbs.items():
        assert f"\n### lcm {name}\n" in text, name
        section = text.split(f"\n### lcm {name}\n", 1)[1].split("\n### ", 1)[0]
        for action in reference.options(sub):
            for flag in action.option_strings:
                assert flag in section, f"lcm {name} {flag}"


def test_every_verb_and_option_has_help() -> None:
    assert reference.missing_help() == []


@pytest.mark.parametrize("columns", ["40", "80", "250"])
def test_the_reference_does_not_depend_on_the_terminal(
    monkeypatch: pytest.MonkeyPatch, columns: str
) -> None:
    monkeypatch.setenv("COLUMNS", columns)
    assert reference.markdown() == block()


def test_usage_lines_wrap_at_a_fixed_width() -> None:
    fences = re.findall(r"```text\n(.*?)\n```", block(), flags=re.S)
    assert fences and all(
        len(line) <= reference.WIDTH or " " not in line.strip()
        for fence in fences
        for line in fence.splitlines()
    )

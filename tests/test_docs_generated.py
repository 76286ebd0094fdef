"""The generated blocks of the docs match the code that prints them (scripts/docs.py).

A doc holds ``<!-- generated: hermes_lcm.module.function -->`` ... ``<!-- /generated -->``; the
body must be exactly what the function returns now. The tests below check every doc, then check
that the mechanism itself catches a stale block, a missing function and a broken marker, since
a checker that finds nothing would pass as well.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIX = "run .venv/bin/python scripts/docs.py to regenerate them"
REAL = "hermes_lcm.base.settings_doc.settings_reference"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("lcm_docs_script", ROOT / "scripts" / "docs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


docs = _script()


def test_every_generated_block_in_the_docs_is_current() -> None:
    problems = []
    for path in docs.doc_files():
        report = docs.regenerate(path, path.read_text(encoding="utf-8"))
        name = path.relative_to(ROOT)
        problems += [f"{name}: {error}" for error in report.errors]
        problems += [f"{name}: block {function} is stale" for function in report.stale]
    assert not problems, "\n".join([*problems, FIX])


def test_the_settings_reference_is_one_of_the_blocks() -> None:
    """Without at least one block found the test above would pass on nothing."""
    blocks, errors = docs.find_blocks((ROOT / "docs" / "settings.md").read_text(encoding="utf-8"))
    assert [b.function for b in blocks] == [REAL] and errors == []


def test_a_stale_block_is_reported_and_then_rewritten(tmp_path: Path) -> None:
    doc = tmp_path / "page.md"
    doc.write_text(f"# Page\n\n<!-- generated: {REAL} -->\nold text\n<!-- /generated -->\n\nEnd.\n")
    lines: list[str] = []
    assert docs.run([doc], check=True, out=lines.append) == 1
    assert any(REAL in line and "stale" in line and "page.md" in line for line in lines), lines
    assert lines[-1] == FIX
    assert "old text" in doc.read_text()  # --check changes nothing

    assert docs.run([doc], check=False, out=lines.append) == 0
    text = doc.read_text()
    assert "old text" not in text and text.startswith("# Page\n\n") and text.endswith("\n\nEnd.\n")
    body = text.split(f"<!-- generated: {REAL} -->\n", 1)[1].split("<!-- /generated -->")[0]
    assert body == docs.resolve(REAL)()
    assert docs.run([doc], check=True, out=lines.append) == 0


def test_text_without_a_final_newline_still_closes_on_its_own_line() -> None:
    assert docs.body_for(lambda: "| a |") == "| a |\n"
    assert docs.body_for(lambda: "| a |\n") == "| a |\n"


@pytest.mark.parametrize(
    "name",
    ["hermes_lcm.base.settings_doc.no_such_function", "hermes_lcm.no_such_module.function"],
)
def test_a_block_naming_no_function_is_an_error(tmp_path: Path, name: str) -> None:
    doc = tmp_path / "page.md"
    doc.write_text(f"<!-- generated: {name} -->\nkept\n<!-- /generated -->\n")
    report = docs.regenerate(doc, doc.read_text())
    assert len(report.errors) == 1 and name in report.errors[0]
    lines: list[str] = []
    assert docs.run([doc], check=False, out=lines.append) == 2
    assert doc.read_text().count("kept") == 1


def test_an_unclosed_block_is_an_error() -> None:
    text = f"<!-- generated: {REAL} -->\nno end\n<!-- generated: {REAL} -->\n<!-- /generated -->\n"
    blocks, errors = docs.find_blocks(text)
    assert len(blocks) == 1 and blocks[0].line == 3
    assert len(errors) == 1 and "line 1" in errors[0]

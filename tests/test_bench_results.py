"""The benchmark page says how to reproduce each figure: every result names a command whose
script exists in bench/, and docs/benchmarks.md is the rendering of the committed results."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"


def _results() -> list[dict[str, object]]:
    paths = sorted((BENCH / "results").glob("*.json"))
    assert paths, "no committed benchmark results"
    return [json.loads(p.read_text(encoding="utf-8")) for p in paths]


def test_every_result_names_a_command_whose_script_exists() -> None:
    for result in _results():
        command = str(result.get("command") or f"python bench/{result['name']}.py")
        words = shlex.split(command)
        script = next(w for w in words if w.endswith(".py"))
        assert (ROOT / script).is_file(), f"{result['name']}: {command} names no script"


def test_the_benchmark_page_is_the_rendering_of_the_results() -> None:
    sys.path.insert(0, str(BENCH))
    try:
        import report
    finally:
        sys.path.remove(str(BENCH))
    page = (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    assert report.render(list(report.iter_results())) == page


def test_a_rerun_keeps_the_notes_written_beside_a_result(tmp_path: Path, monkeypatch) -> None:
    """Notes (how a setting was tuned, what was tried) are written by hand beside a result; a
    rerun of its bench, which writes figures only, keeps them, and new notes replace them."""
    sys.path.insert(0, str(BENCH))
    try:
        import common
    finally:
        sys.path.remove(str(BENCH))
    monkeypatch.setattr(common, "RESULTS", tmp_path)
    monkeypatch.setattr(common, "render_doc", lambda: None)
    common.save_result("lab", [], {"figure": 1, "notes": "tuned on chats 1-10"})
    common.save_result("lab", [], {"figure": 2})
    saved = json.loads((tmp_path / "lab.json").read_text(encoding="utf-8"))["details"]
    assert saved == {"figure": 2, "notes": "tuned on chats 1-10"}
    common.save_result("lab", [], {"figure": 3, "notes": "new"})
    assert (
        json.loads((tmp_path / "lab.json").read_text(encoding="utf-8"))["details"]["notes"] == "new"
    )

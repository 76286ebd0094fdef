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

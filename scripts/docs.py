#!/usr/bin/env python3
"""Rewrite the generated blocks of the docs from the code, or check that none is stale.

A doc (docs/**/*.md, README.md) may hold blocks

    <!-- generated: hermes_lcm.some.module.function -->
    ...
    <!-- /generated -->

whose body is exactly what that no-argument function returns (plus a final newline when the
text has none, so the closing marker starts its own line). A reference printed from the code
cannot drift from it, and tests/test_docs_generated.py fails when a block is stale.

``.venv/bin/python scripts/docs.py`` rewrites every block; ``--check`` changes nothing and exits 1
listing the stale blocks. A block naming a function that does not exist, or left unclosed, is an
error in both modes (exit 2).
"""

from __future__ import annotations

import argparse
import importlib
import re
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OPEN = re.compile(r"<!-- generated: ([A-Za-z_][\w.]*) -->\n")
CLOSE = "<!-- /generated -->"


@dataclass(frozen=True)
class Block:
    """One generated block of a doc: the function it names and where its body lies."""

    function: str
    start: int  # the body's first character, just after the opening marker's line
    end: int  # the closing marker's first character
    line: int  # the opening marker's line, for messages


@dataclass(frozen=True)
class Report:
    """What one doc needs: its text with every block regenerated, and what was wrong."""

    path: Path
    text: str
    stale: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()

    @property
    def changed(self) -> bool:
        return bool(self.stale)


def find_blocks(text: str) -> tuple[list[Block], list[str]]:
    """The blocks of ``text`` in order, and a message for each marker that cannot be read."""
    blocks, errors, pos = [], [], 0
    while (found := OPEN.search(text, pos)) is not None:
        line = text.count("\n", 0, found.start()) + 1
        end = text.find(CLOSE, found.end())
        nested = OPEN.search(text, found.end())
        if end < 0 or (nested is not None and nested.start() < end):
            errors.append(f"line {line}: block {found.group(1)} has no {CLOSE} before the next")
            pos = found.end()
            continue
        blocks.append(Block(found.group(1), found.end(), end, line))
        pos = end + len(CLOSE)
    return blocks, errors


def resolve(dotted: str) -> Callable[[], str]:
    """The function a block names; LookupError when there is none, so a renamed function fails
    loudly instead of leaving its block unchecked."""
    module_name, _, attribute = dotted.rpartition(".")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise LookupError(f"no module {module_name!r} ({exc})") from exc
    function = getattr(module, attribute, None)
    if not callable(function):
        raise LookupError(f"{module_name} has no function {attribute!r}")
    return function


def body_for(function: Callable[[], str]) -> str:
    text = function()
    if not isinstance(text, str):
        raise TypeError(f"returned {type(text).__name__}, not text")
    return text if text.endswith("\n") else text + "\n"


def regenerate(path: Path, text: str) -> Report:
    """``text`` with every block's body replaced by what its function returns now."""
    blocks, errors = find_blocks(text)
    out, stale, pos = [], [], 0
    for block in blocks:
        out.append(text[pos : block.start])
        current = text[block.start : block.end]
        try:
            fresh = body_for(resolve(block.function))
        except (LookupError, TypeError) as exc:
            errors.append(f"line {block.line}: {block.function}: {exc}")
            fresh = current
        if fresh != current:
            stale.append(block.function)
        out.append(fresh)
        pos = block.end
    out.append(text[pos:])
    return Report(path, "".join(out), tuple(stale), tuple(errors))


def doc_files(root: Path = ROOT) -> list[Path]:
    return sorted((root / "docs").rglob("*.md")) + [p for p in (root / "README.md",) if p.is_file()]


def run(paths: Iterable[Path], check: bool, out: Callable[[str], None] = print) -> int:
    """0 when every block is current (or has been rewritten), 1 when ``check`` found stale
    blocks, 2 when a block cannot be generated at all."""
    status = 0
    for path in paths:
        report = regenerate(path, path.read_text(encoding="utf-8"))
        shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
        for error in report.errors:
            out(f"{shown}: {error}")
            status = 2
        for function in report.stale:
            out(f"{shown}: {'stale' if check else 'rewrote'} block {function}")
        if report.changed and check:
            status = max(status, 1)
        elif report.changed:
            path.write_text(report.text, encoding="utf-8")
    if status == 1:
        out("run .venv/bin/python scripts/docs.py to regenerate them")
    return status


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if stale")
    parser.add_argument("paths", nargs="*", type=Path, help="docs to read (default: all)")
    args = parser.parse_args(argv)
    if str(Path(__file__).parent) not in sys.path:  # it is when this runs as a script
        sys.path.insert(0, str(Path(__file__).parent))
    from checkout import load_package

    load_package()
    return run([p.resolve() for p in args.paths] or doc_files(), args.check)


if __name__ == "__main__":
    sys.exit(main())

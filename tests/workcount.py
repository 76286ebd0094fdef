"""Deterministic work counters for the "does not grow" tests.

A clock on a shared 2-core machine flakes (a CI neighbour doubles a median), so these tests count
work instead: lines of the package's own Python executed, and SQLite virtual-machine steps on the
store's connection. Both grow exactly when the code does more per call, which is what a growth
test asks; neither depends on the machine's load. Benchmarks in bench/ still measure time.
"""

from __future__ import annotations

import sqlite3
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import hermes_lcm

PACKAGE = str(Path(hermes_lcm.__file__).parent)
# The repo root is the package, so the venv and the tests live under it too: not the package's work.
_OUTSIDE = tuple(str(Path(PACKAGE) / d) for d in (".venv", "tests", ".pyroot"))
STEP = 100  # SQLite calls the progress handler once per this many VM instructions
T = TypeVar("T")


@dataclass(frozen=True)
class Work:
    lines: int  # lines of hermes_lcm's Python executed
    steps: int  # SQLite VM instructions on the watched connection, in units of STEP

    @property
    def total(self) -> int:
        """One figure for a median: a VM step unit weighs about as much as a line of Python."""
        return self.lines + self.steps


def measure(call: Callable[[], T], conn: sqlite3.Connection | None = None) -> tuple[T, Work]:
    """Run ``call`` once and count its work (``conn``: the connection whose VM steps count too)."""
    lines = [0]
    steps = [0]

    def local(frame: Any, event: str, arg: Any) -> Any:
        lines[0] += event == "line"
        return local

    def calls(frame: Any, event: str, arg: Any) -> Any:
        name = frame.f_code.co_filename
        return local if name.startswith(PACKAGE) and not name.startswith(_OUTSIDE) else None

    def tick() -> int:
        steps[0] += 1
        return 0

    if conn is not None:
        conn.set_progress_handler(tick, STEP)
    previous = sys.gettrace()
    sys.settrace(calls)
    try:
        result = call()
    finally:
        sys.settrace(previous)
        if conn is not None:
            conn.set_progress_handler(None, STEP)
    return result, Work(lines[0], steps[0])

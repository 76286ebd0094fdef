"""One way every long operation reports progress: a :class:`Reporter` the CLI makes, library code ticks.

Library code (importers, backfills, scrub, backup) never prints: it takes a callback ``tick(done, total)``
(absolute counts; ``total`` None when unknown) and, where it has words to say, ``note(text)``. The CLI
makes a :class:`Reporter` with :func:`start` and passes its methods down. What the reporter shows
depends on where stderr goes and on ``LCM_PROGRESS``:

- ``auto`` (the default): stderr is a terminal -> ONE updating line (label, done/total, rate, ETA)
  drawn by rich.progress; not a terminal -> nothing, except the plain ``lcm: ...`` note lines a
  verb asked to keep (``notes=True``: the backfill's lines, which scripts already read).
- ``always``: the live line even when stderr is not a terminal (a CI log that wants it).
- ``never``: nothing at all on stderr from progress (errors still are).

stdout is never touched, so ``--json`` output stays clean in every mode. rich is imported only
when a live line is drawn (``lcm status`` never pays for it).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from typing import Any, TextIO

Tick = Callable[[int, "int | None"], None]  # (done, total) -- absolute counts
Note = Callable[[str], None]
MODES = ("auto", "always", "never")
ENV = "LCM_PROGRESS"


def quiet_tick(_done: int, _total: int | None) -> None:
    """The default callback of library code: report nothing."""
    return None


def quiet_note(_text: str) -> None:
    return None


def mode(env: Mapping[str, str] | None = None) -> str:
    """``LCM_PROGRESS`` (auto, always, never); anything else reads as auto."""
    value = (os.environ if env is None else env).get(ENV, "auto").strip().lower()
    return value if value in MODES else "auto"


def _is_tty(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


class Reporter:
    """Progress of one operation: ``label``, ``total`` (None: unknown), ``done``.

    This base class draws nothing (the silent reporter); :class:`_Plain` writes note lines and
    :class:`_Live` the terminal line. Every method is cheap, so library code may tick per row.
    """

    def __init__(self, label: str, total: int | None = None) -> None:
        self.label, self.total, self.done = label, total, 0
        self.started = time.monotonic()

    def advance(self, n: int = 1) -> None:
        self.update(self.done + n, self.total)

    def set_total(self, total: int | None) -> None:
        self.update(self.done, total)

    def update(self, done: int, total: int | None = None) -> None:
        """Absolute counts (the shape of :data:`Tick`); a None total keeps the one known."""
        self.done = done
        if total is not None:
            self.total = total
        self._draw()

    def __call__(self, done: int, total: int | None = None) -> None:
        self.update(done, total)

    def relabel(self, label: str) -> None:
        """A new phase (``backup``, ``rewrite``): the label changes, the line stays one line."""
        self.label = label
        self._draw()

    def note(self, text: str) -> None:
        """A sentence about the work; kept as a plain line only where a verb asked (``notes=True``)."""
        return None

    @property
    def rate(self) -> float:
        elapsed = time.monotonic() - self.started
        return self.done / elapsed if elapsed > 0 else 0.0

    def _draw(self) -> None:
        return None

    def close(self) -> None:
        return None

    def __enter__(self) -> Reporter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Plain(Reporter):
    """No live line (stderr is not a terminal); notes become ``lcm: ...`` lines, as before."""

    def __init__(self, label: str, total: int | None, stream: TextIO) -> None:
        super().__init__(label, total)
        self.stream = stream

    def note(self, text: str) -> None:
        self.stream.write(f"lcm: {text}\n")
        self.stream.flush()


class _Live(Reporter):
    """One line redrawn in place by rich.progress: label, bar, done/total, rate and ETA."""

    def __init__(
        self, label: str, total: int | None, stream: TextIO, unit: str, force: bool
    ) -> None:
        super().__init__(label, total)
        from rich.console import (
            Console,
        )  # lazily: only a terminal that shows progress pays for rich
        from rich.progress import (
            BarColumn,
            Progress,
            ProgressColumn,
            TextColumn,
            TimeRemainingColumn,
        )
        from rich.text import Text

        class Rate(ProgressColumn):
            def render(self, task: Any) -> Text:
                speed = task.finished_speed or task.speed
                return Text("? " + unit + "/s" if speed is None else f"{speed:,.1f} {unit}/s")

        class Count(ProgressColumn):
            def render(self, task: Any) -> Text:
                total = "?" if task.total is None else f"{int(task.total):,}"
                return Text(f"{int(task.completed):,}/{total}")

        console = Console(file=stream, force_terminal=True if force else None, highlight=False)
        self.bar = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            Count(),
            Rate(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=console,
            transient=False,
            refresh_per_second=8,
        )
        self.task = self.bar.add_task(label, total=total)
        self.shown = False

    def _draw(self) -> None:
        self.bar.update(self.task, completed=self.done, total=self.total, description=self.label)
        if (
            not self.shown
        ):  # drawn at the first update: a dry run or a quick verb shows no empty line
            self.bar.start()
            self.shown = True

    def note(self, text: str) -> None:
        self.bar.console.print(f"lcm: {text}", markup=False, highlight=False)

    def close(self) -> None:
        if self.shown:
            self.bar.refresh()
            self.bar.stop()


LIVE = _Live  # isinstance(reporter, LIVE): a live line is drawn (it already shows what a summary would say)


def start(
    label: str,
    total: int | None = None,
    *,
    stream: TextIO | None = None,
    env: Mapping[str, str] | None = None,
    notes: bool = False,
    unit: str = "rows",
) -> Reporter:
    """The reporter for this process: live on a terminal (or ``LCM_PROGRESS=always``), else plain
    (``notes=True``) or silent. Use it as a context manager so the line is closed on every exit."""
    import sys

    out = sys.stderr if stream is None else stream
    chosen = mode(env)
    if chosen == "never":
        return Reporter(label, total)
    if chosen == "always" or _is_tty(out):
        return _Live(label, total, out, unit, force=chosen == "always")
    return _Plain(label, total, out) if notes else Reporter(label, total)

"""How ``lcm`` writes a result: JSON for programs, a rich table for people, ``auto`` choosing by where stdout goes.

``--format auto`` (the default) is a table when stdout is a terminal and JSON when it is piped or
redirected (as gh does), so scripts keep getting JSON without asking and people get a table.
``--format json`` and ``--format table`` force one. Tables are drawn by rich.table, with colour only
on a terminal (rich honours ``NO_COLOR``); off a terminal they are plain text with an ASCII rule and
no width limit, so ``--format table | grep`` sees whole lines. rich is imported only when a table is
drawn: JSON output (and ``lcm status`` piped) never pays for it.
"""

from __future__ import annotations

import json
from typing import Any, TextIO

FORMATS = ("auto", "json", "table")
EXIT_OK, EXIT_NOT_FOUND, EXIT_USAGE, EXIT_DATABASE, EXIT_WRITE, EXIT_INTERNAL = 0, 1, 2, 3, 4, 5
CELL_WIDTH = 60
# A text value longer than this (or on several lines) is shown whole as a block, not cut to a cell.
LONG_TEXT = 200


def resolve(fmt: str, out: TextIO) -> str:
    """``auto`` made concrete for ``out``: table on a terminal, JSON anywhere else (StringIO included)."""
    if fmt != "auto":
        return fmt
    try:
        return "table" if out.isatty() else "json"
    except (AttributeError, ValueError, OSError):
        return "json"


def emit(result: dict[str, Any], fmt: str, out: TextIO) -> None:
    if resolve(fmt, out) == "json":
        out.write(json.dumps(result, indent=2, ensure_ascii=False, default=str) + "\n")
        return
    console = _console(out)
    items = result.get("items")
    if isinstance(items, list):
        console.print(
            table(items, console.is_terminal, console.width if console.is_terminal else None)
        )
        rest = {k: v for k, v in result.items() if k != "items"}
        if rest:
            console.print()
            _keyvalues(console, rest)
        return
    _keyvalues(console, result)


def _console(out: TextIO) -> Any:
    from rich.console import Console  # lazily: only a table pays for rich

    probe = Console(file=out)
    # Off a terminal: no colour, no width limit (a pipe is not 80 columns wide).
    return (
        probe
        if probe.is_terminal
        else Console(file=out, width=1_000_000, color_system=None, highlight=False)
    )


def cell(value: Any, width: int = CELL_WIDTH) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    text = text.replace("\n", " ")
    return text if len(text) <= width else text[: width - 1] + "…"


# The columns a person needs to name a row in the next command: never cut, never left out.
KEY_COLUMNS = frozenset(
    {
        "id",
        "store_id",
        "node_id",
        "seq",
        "role",
        "conversation_id",
        "session_id",
        "depth",
        "kind",
        "name",
        "status",
        "parent_id",
        "child_id",
        "ref",
        "key",
        "session_key",
    }
)
# The text a row is about: what a narrow terminal keeps longest of the other columns, cut to fit.
TEXT_COLUMNS = frozenset({"content", "snippet", "text", "preview", "summary", "detail", "reason"})
# What a column other than those keeps at the least on a narrow terminal (a text column more,
# or its cut would say nothing), and the room between columns.
_MIN_OTHER = 8
_MIN_TEXT = 30
_GAP = 3


def table(rows: list[dict[str, Any]], colour: bool = False, width: int | None = None) -> Any:
    """A rich Table of ``rows`` (columns: every key, in first-seen order); "(no rows)" when empty.

    ``width`` (a terminal's): the key columns (:data:`KEY_COLUMNS`, and the first column) keep
    their whole values; the others are cut to fit, and when even that is too wide the last of them
    are left out, which a caption says (``--format json`` has every column). Off a terminal
    (``width`` None) every column is whole, up to :data:`CELL_WIDTH`.
    """
    from rich import box
    from rich.table import Table
    from rich.text import Text

    if not rows:
        return Text("(no rows)")
    columns = list(dict.fromkeys(k for r in rows for k in r))
    cells = {c: [cell(r.get(c, "")) for r in rows] for c in columns}
    fits = {c: max(len(c), *(len(v) for v in cells[c])) for c in columns}
    keys = {c for c in columns if c in KEY_COLUMNS} | {columns[0]}
    shown, left_out = list(columns), []
    constant: dict[str, str] = {}
    if width is not None:
        squeezed: dict[str, int] = {}  # a text column kept narrower than _MIN_TEXT: its room

        def least(c: str) -> int:
            if c in keys or c.endswith("_at"):  # a time cut short says nothing: whole or left out
                return fits[c]
            if c in squeezed:
                return squeezed[c]
            return min(fits[c], _MIN_TEXT if c in TEXT_COLUMNS else _MIN_OTHER)

        def need(names: list[str]) -> int:
            return sum(least(c) for c in names) + _GAP * len(names)

        if need(shown) > width and len(rows) > 1:  # a value every row has: said once, under it
            for c in columns[1:]:
                if len(set(cells[c])) == 1 and cells[c][0] not in ("", "null"):
                    constant[c] = cells[c][0]
                    shown.remove(c)
        while need(shown) > width and any(c not in keys for c in shown):
            others = [c for c in reversed(shown) if c not in keys]
            drop = next(  # times and counts go first, the row's text last
                (c for c in others if _minor(c)),
                next((c for c in others if c not in TEXT_COLUMNS), others[0]),
            )
            if drop in TEXT_COLUMNS and drop not in squeezed:
                spare = width - need([c for c in shown if c != drop]) - _GAP
                if spare >= _MIN_OTHER:  # some of the text beats none of it
                    squeezed[drop] = spare
                    continue
            left_out.append(drop)
            shown.remove(drop)
        left_out = [c for c in columns if c in left_out]
    rule = box.Box(
        "    \n    \n -  \n    \n    \n    \n    \n    \n", ascii=True
    )  # header, then a '-' rule
    plural = "s" if len(left_out) > 1 else ""
    notes = []
    if constant:
        notes.append("(in every row: " + ", ".join(f"{c} {v}" for c, v in constant.items()) + ")")
    if left_out:
        notes.append(
            f"({len(left_out)} column{plural} left out to fit {width} columns: {', '.join(left_out)}; "
            "--format json has every column)"
        )
    caption = "\n".join(notes) or None
    grid = Table(
        box=rule,
        show_edge=False,
        pad_edge=False,
        header_style="bold cyan" if colour else "",
        highlight=False,
        caption=caption,
        caption_justify="left",
    )
    room = (
        _share(
            width
            - sum(fits[c] + _GAP for c in shown if c in keys)
            - _GAP * sum(c not in keys for c in shown),
            {c: fits[c] for c in shown if c not in keys},
            {c: least(c) for c in shown if c not in keys},
        )
        if width is not None
        else dict(fits)
    )
    for name in shown:  # a narrow terminal cuts long cells of the other columns, never a key column
        whole = name in keys
        size = fits[name] if whole else room[name]
        grid.add_column(
            name,
            no_wrap=True,
            overflow="fold" if whole else "ellipsis",
            min_width=size,
            max_width=size,
        )
    for i in range(len(rows)):
        grid.add_row(*(Text(cells[c][i]) for c in shown))
    return grid


def _block(console: Any, key: Any, text: str, pad: str) -> None:
    """A long or multi-line text as a block under its key, every character of it as stored (the
    verb's own paging says whether it is all): written past rich, which would expand tabs, and
    indented as YAML's ``|`` does; the terminal wraps long lines."""
    console.print(key, "|")
    console.file.write(
        "".join(pad + line for line in text.splitlines(keepends=True)).rstrip("\n") + "\n"
    )
    console.file.flush()


def _minor(column: str) -> bool:
    """A time or a count: what a narrow terminal leaves out first (the text and the names stay)."""
    return column.endswith(("_at", "_chars", "_count", "tokens")) or column in (
        "truncated",
        "source",
        "sessions",
    )


def _share(total: int, wants: dict[str, int], least: dict[str, int]) -> dict[str, int]:
    """``total`` columns of width shared out: each gets what it wants when all fit, else the
    narrow ones theirs and the rest an equal share, none less than its ``least``."""
    out: dict[str, int] = {}
    left = dict(wants)
    while left:
        fair = (total - sum(out.values())) // len(left)
        small = {c: w for c, w in left.items() if w <= max(fair, least[c])}
        if not small:
            floor = {c: least[c] for c in left if least[c] >= fair}
            if not floor:
                out.update({c: fair for c in left})
                break
            out.update(floor)  # a text column's least first, the rest share what is left
            left = {c: w for c, w in left.items() if c not in floor}
            continue
        out.update(small)
        left = {c: w for c, w in left.items() if c not in small}
    return out


def _keyvalues(console: Any, value: Any, indent: int = 0) -> None:
    """Nested dicts as ``key: value`` lines; a list of dicts as an indented table."""
    from rich.padding import Padding
    from rich.text import Text

    pad = "  " * indent
    if isinstance(value, dict):
        for k, v in value.items():
            key = Text(f"{pad}{k}:", style="bold" if console.is_terminal else "")
            if isinstance(v, dict | list) and v:
                console.print(key)
                _keyvalues(console, v, indent + 1)
            elif isinstance(v, str) and (len(v) > LONG_TEXT or "\n" in v):
                _block(console, key, v, pad + "  ")
            else:
                console.print(key, Text(cell(v, LONG_TEXT)))
        return
    if isinstance(value, list):
        if value and all(isinstance(v, dict) for v in value):
            # not expanded: off a terminal the console is 1,000,000 columns wide, and an expanded
            # padding would fill every line of the nested table out to it with spaces
            width = max(20, console.width - 2 * indent) if console.is_terminal else None
            console.print(
                Padding(
                    table(value, console.is_terminal, width), (0, 0, 0, 2 * indent), expand=False
                )
            )
            return
        for v in value:
            console.print(Text(f"{pad}- {cell(v, 200)}"))
        return
    console.print(Text(f"{pad}{cell(value, 200)}"))


EXIT_INTERRUPTED = 130  # Ctrl-C, as a shell reports SIGINT
EXIT_PIPE = (
    141  # the reader closed the pipe early (`lcm export | head`), as a shell reports SIGPIPE
)
RESUME = {
    "import": "each conversation is written in one transaction and an in-place upgrade swaps only at the end: "
    "run the same command again to resume (conversations already imported are skipped)",
    "backfill-outputs": "rows are rewritten batch by batch and listed in the manifest: run the same command "
    "(same --manifest) again to resume",
    "gc-payloads": "only orphan files were removed: run `lcm gc-payloads --apply` again to finish",
    "embed": "run `lcm embed --apply` again to resume (rows already embedded are not sent again)",
    "rollups": "each period is built in its own transaction: run `lcm rollups build` again to finish",
    "assertions": "the sidecar keeps its cursor: run `lcm assertions rebuild` again (or let the engine's job "
    "continue from the cursor)",
    "redact": "rows are rewritten batch by batch: run `lcm redact --apply` again to finish (rows already "
    "redacted are found clean)",
    "backup": "no backup file was left behind: run `lcm backup` again",
    "migrate-to-postgres": "every batch is committed with its cursor: run the same command again to resume "
    "(rows already copied are not copied twice)",
}


def reader_gone(out: TextIO) -> int:
    """The reader of ``out`` went away (``| head``): end quietly, as a program killed by SIGPIPE
    would. ``out`` is pointed at /dev/null so the interpreter's last flush cannot raise again."""
    import contextlib
    import os

    with contextlib.suppress(Exception):  # a StringIO has no descriptor: nothing to flush there
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, out.fileno())
        os.close(devnull)
    return EXIT_PIPE


def resume_hint(words: list[str]) -> str:
    """How to go on after Ctrl-C, for the verb in ``words`` (the raw arguments)."""
    verb = next((w for w in words if w in RESUME), None)
    return RESUME[verb] if verb else "nothing was written: run the command again"


class CliError(Exception):
    """A failure the CLI reports as one line and an exit code (the verb modules raise it too)."""

    def __init__(self, message: str, code: int = EXIT_NOT_FOUND, **extra: Any) -> None:
        super().__init__(message)
        self.code, self.extra = code, extra

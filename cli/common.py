"""What every ``lcm`` verb family shares: the one way a verb is added, the arguments several verbs
take (each defined here once, so ``--conversation`` or ``--json`` reads the same in every verb's
``--help``), the number types that keep ids in SQLite's range, and the settings in force.

A family module (cli/*.py) exposes ``register(subparsers) -> None`` and adds its verbs with
:func:`verb`; main.py calls every family's ``register``. This module imports only argparse and
the config front door: it is loaded on every ``lcm`` start, so it must stay light.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, TypeAlias

from ..config import LoadedConfig, load_for_home
from .output import EXIT_USAGE, FORMATS, CliError

# SQLite's INTEGER range: an id or cursor beyond it names nothing we could store.
ID_MAX = (1 << 63) - 1
PAGE_MAX = 500

# What a verb needs opened before its handler runs: the database read-only ("open"), the
# database when it exists ("if-present": doctor reports a missing one), or nothing ("none":
# the verb names its own source, like ``import`` and ``migrate-to-postgres``).
StoreUse = Literal["open", "if-present", "none"]
Handler = Callable[[Any, argparse.Namespace], "dict[str, Any] | None"]
# What every family's ``register`` receives: ``lcm``'s subparsers action.
Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"

DB_HELP = (
    "database file or postgresql:// URL (default: LCM_DATABASE_URL, config.yaml "
    "lcm.database_url, LCM_DATABASE_PATH, lcm.database_path, $HERMES_HOME/lcm.db; "
    "HERMES_PROFILE selects a profile)"
)
FORMAT_HELP = "output format (default auto: a table on a terminal, JSON when piped)"


class Parser(argparse.ArgumentParser):
    """argparse whose usage errors are CliErrors: one line and exit 2, like every other failure."""

    def error(self, message: str) -> Any:
        where = self.prog.removeprefix("lcm").strip()  # main() already says "lcm: error:"
        if where == "" and "required: COMMAND" in message:
            message = (
                f"a command is required, one of: {', '.join(verbs(self))} "
                "(lcm COMMAND --help for one)"
            )
        usage = " ".join(self.format_usage().split())
        raise CliError(f"{where}: {message}" if where else message, EXIT_USAGE, hint=usage)


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The verbs a parser has, by name, in the order ``lcm --help`` lists them."""
    actions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(actions[0].choices) if actions else {}


def verbs(parser: argparse.ArgumentParser) -> list[str]:
    return list(subcommands(parser))


def global_options(parser: argparse.ArgumentParser, *, after_command: bool = False) -> None:
    """``--db`` and ``--format``: before the command they are documented; after it
    (``lcm status --db x.db``) they are accepted too, without repeating them in every verb's help."""
    if after_command:
        parser.add_argument("--db", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
        parser.add_argument(
            "--format", choices=FORMATS, default=argparse.SUPPRESS, help=argparse.SUPPRESS
        )
        return
    parser.add_argument("--db", help=DB_HELP)
    parser.add_argument("--format", choices=FORMATS, default="auto", help=FORMAT_HELP)


_AFTER_COMMAND = Parser(add_help=False)
global_options(_AFTER_COMMAND, after_command=True)


def verb(
    subparsers: Subparsers,
    name: str,
    handler: Handler,
    help_text: str,
    *,
    store: StoreUse = "open",
) -> argparse.ArgumentParser:
    """Add one verb: its help is also its ``--help`` description; ``store`` is what main() opens."""
    cmd: argparse.ArgumentParser = subparsers.add_parser(
        name, help=help_text, description=help_text, parents=[_AFTER_COMMAND]
    )
    cmd.set_defaults(handler=handler, store_use=store)
    return cmd


def bounded(low: int, high: int = ID_MAX) -> Callable[[str], int]:
    """An int argument within [low, high] (ids, cursors, offsets stay in SQLite's range)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{value} is out of range ({low}..{high})")
        return value

    parse.__name__ = "integer"
    return parse


ID, COUNT, OFFSET, POSITIVE = bounded(0), bounded(0, PAGE_MAX * 1000), bounded(0), bounded(1)

_AGE_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 7 * 86_400}
_MAX_AGE_S = 100 * 365 * 86_400


def RECENCY(text: str) -> float:
    """An age (``30m``, ``12h``, ``7d``, ``2w``; a bare number is days) in seconds."""
    raw = text.strip().lower()
    unit = raw[-1] if raw and raw[-1] in _AGE_UNITS else "d"
    number = raw[:-1] if raw and raw[-1] in _AGE_UNITS else raw
    try:
        value = float(number) * _AGE_UNITS[unit]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an age: {text!r} (30m, 12h, 7d, 2w)") from None
    if not 0 < value <= _MAX_AGE_S:
        raise argparse.ArgumentTypeError(f"{text!r}: an age above 0 and at most 100 years")
    return value


def page_limit(value: int) -> int:
    """``--limit`` checked where it is used: 0 parses (COUNT) but pages nothing."""
    if value < 1 or value > PAGE_MAX:
        raise CliError(f"--limit must be between 1 and {PAGE_MAX}", EXIT_USAGE)
    return value


# -- arguments several verbs take ------------------------------------------------------------


def paged(cmd: argparse.ArgumentParser, limit: int = 50) -> None:
    """Keyset pagination: ``--after`` takes the previous page's ``next_cursor``."""
    cmd.add_argument(
        "--limit", type=COUNT, default=limit, metavar="N", help=f"page size (1-{PAGE_MAX})"
    )
    cmd.add_argument("--after", type=ID, metavar="CURSOR", help="the previous page's next_cursor")


def conversation(
    cmd: argparse.ArgumentParser, help_text: str = "conversation id", *, required: bool = False
) -> None:
    # --conversation-id: lossless-claw's spelling, which its users type
    cmd.add_argument(
        "--conversation",
        "--conversation-id",
        dest="conversation",
        type=ID,
        required=required,
        metavar="ID",
        help=help_text,
    )


def max_chars(cmd: argparse.ArgumentParser, default: int) -> None:
    cmd.add_argument(
        "--max-chars",
        type=OFFSET,
        default=default,
        metavar="N",
        help="cut each content to this many characters (0 = all)",
    )


def source_window(cmd: argparse.ArgumentParser) -> None:
    """The page of a summary node's sources (its messages, or its child nodes) shown."""
    cmd.add_argument(
        "--source-offset",
        type=OFFSET,
        default=0,
        metavar="N",
        help="skip this many of the node's sources",
    )
    cmd.add_argument(
        "--source-limit",
        type=COUNT,
        default=20,
        metavar="N",
        help="show at most this many sources (1-500)",
    )


def json_flag(cmd: argparse.ArgumentParser) -> None:
    """``--json``: the older spelling of ``--format json`` some verbs keep for scripts (main()
    applies it before the verb runs, so errors are JSON too)."""
    cmd.add_argument("--json", action="store_true", help="same as --format json")


def apply_flag(cmd: argparse.ArgumentParser, help_text: str) -> None:
    """``--apply``: every writing verb is a dry run without it."""
    cmd.add_argument("--apply", action="store_true", help=help_text)


# -- the settings in force ----------------------------------------------------------------------


def hermes_home(env: dict[str, str]) -> Path:
    """``HERMES_HOME`` (or ``~/.hermes``), narrowed to ``profiles/<HERMES_PROFILE>`` when set."""
    base = Path(env.get("HERMES_HOME") or Path.home() / ".hermes").expanduser()
    profile = env.get("HERMES_PROFILE", "").strip()
    if profile and profile != "default" and base.name != profile:
        return base / "profiles" / profile
    return base


def loaded() -> LoadedConfig:
    """The settings the engine would run with here, and their problems (doctor lists them)."""
    env = dict(os.environ)
    return load_for_home(env, hermes_home(env))


def settings() -> Any:
    """The settings in force (read when a verb runs, so a test's environment is honoured)."""
    return loaded().config

"""``lcm config get [KEY]`` and ``lcm config set KEY VALUE``: one setting (or every one, or only
the ones set) with where it came from, or one validated value written into config.yaml's ``lcm:``
block (maintenance/settings_file.py; the rest of the file is kept byte for byte). The verb opens
no database."""

from __future__ import annotations

import argparse
import os
from typing import Any

from . import common
from .common import Subparsers
from .output import EXIT_USAGE, EXIT_WRITE, CliError


def register(subparsers: Subparsers) -> None:
    c = common.verb(
        subparsers,
        "config",
        run,
        "settings: 'get' one's value and source (environment, config.yaml, default), or every "
        "one's without a key; 'set' WRITES one validated value into config.yaml's lcm: block",
        store="none",
    )
    c.add_argument("mode", choices=("get", "set"), metavar="get|set", help="read or write")
    c.add_argument(
        "key",
        nargs="?",
        help="the setting (fresh_tail_count, LCM_FRESH_TAIL_COUNT, freshTailCount); "
        "get without one lists them all",
    )
    c.add_argument("value", nargs="?", help="the value to write (set)")
    c.add_argument(
        "--changed",
        action="store_true",
        help="get: only the settings the environment or config.yaml sets",
    )


def run(_store: None, args: argparse.Namespace) -> dict[str, Any]:
    from ..maintenance.settings_file import (
        SettingsFileError,
        all_settings,
        get_setting,
        set_setting,
    )

    env = dict(os.environ)
    home = common.hermes_home(env)
    try:
        if args.mode == "get":
            if args.value is not None:
                raise CliError("config get takes no value", EXIT_USAGE)
            if args.key is None:
                return all_settings(env, home, changed_only=args.changed)
            return get_setting(args.key, env, home)
        if args.key is None or args.value is None:
            raise CliError("config set needs a value: lcm config set KEY VALUE", EXIT_USAGE)
        return set_setting(args.key, args.value, env, home)
    except SettingsFileError as exc:
        raise CliError(str(exc), EXIT_USAGE) from exc
    except OSError as exc:
        raise CliError(f"config.yaml cannot be written: {exc}", EXIT_WRITE) from exc

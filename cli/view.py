"""``lcm view``: write the conversation's page (viewer/) and say where it is.

Read-only on the database like the rest of ``lcm``; the one file it writes is the page (mode
0600: it holds the conversation), by default ``lcm-views/lcm-view-<id>.html`` beside the database
(under the Hermes home, ``lcm-views/pg-<tag>/``, for a PostgreSQL URL).
``--open`` hands the file to the system's browser; nothing is served and nothing is fetched.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ..base import progress
from ..store import Store
from . import common
from .common import Subparsers
from .output import CliError


def open_in_browser(path: str) -> bool:
    """Ask the system's browser to show the file; False where there is none (a server, CI)."""
    import webbrowser  # lazy, like the viewer: `lcm status` must not pay for `lcm view`

    try:
        return bool(webbrowser.open(Path(path).as_uri()))
    except Exception:  # noqa: BLE001 - no browser is an answer, not a failure
        return False


def register(subparsers: Subparsers) -> None:
    cmd = common.verb(
        subparsers,
        "view",
        handler,
        "WRITES one self-contained HTML page (the summary DAG, compactions, search, database "
        "growth) for a conversation; the database is untouched",
    )
    common.conversation(cmd, "conversation id (default: the one with the newest message)")
    cmd.add_argument(
        "--output",
        help="file to write (default: lcm-views/lcm-view-<id>.html beside the database; "
        "under the Hermes home for a URL)",
    )
    cmd.add_argument("--open", action="store_true", help="open the page in the system's browser")


def handler(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    from ..viewer import ViewError, write_page

    try:
        with progress.start("lcm view: reading messages", unit="messages") as line:
            written = write_page(store, args.output, args.conversation, tick=line.update)
    except ViewError as exc:
        raise CliError(str(exc)) from exc
    if args.open:
        written["opened"] = open_in_browser(written["path"])
    written["hint"] = "open it in a browser (it works from file://, offline)"
    return written

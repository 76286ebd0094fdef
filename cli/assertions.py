"""``lcm assertions`` for the ``lcm`` CLI: the sidecar's status, and ``rebuild``.

``status`` reads only (counts by kind and extractor, the cursor, the messages not read
yet). ``rebuild`` WRITES: it drops every assertion and extracts again from the first message
with the rules (the summary route's refinement runs only in the engine's job); the same store
gives the same facts.
"""

from __future__ import annotations

import argparse
from typing import Any

from ..base import progress as pg
from ..store import Store, is_read_only_file, open_store, writable_target
from . import common
from .common import Subparsers
from .output import EXIT_DATABASE, CliError

EXIT_NOT_ENABLED = 2  # the setting is off: a usage problem, like a bad flag


def status(store: Store, config: Any) -> dict[str, Any]:
    """What the sidecar holds; ``enabled`` is the setting, ``sidecar`` what the database has."""
    stats = store.assertion_stats()
    waiting = max(0, store.last_message_id() - int(stats.get("cursor", 0))) if stats else None
    return {
        "enabled": bool(config.assertions_enabled),
        "llm_refinement": bool(config.assertion_extraction_enabled),
        "sidecar": stats or None,
        "message_ids_not_read_yet": waiting,
    }


def rebuild(store: Store, config: Any) -> dict[str, Any]:
    from ..base.sensitive import Policy, Redactor
    from ..evidence import Assertions  # lazy: its rules compile ~70 ms of regexes

    if not config.assertions_enabled:
        raise CliError(
            "assertions are off: set LCM_ASSERTIONS_ENABLED=true first", EXIT_NOT_ENABLED
        )
    if is_read_only_file(store):
        raise CliError(
            f"the database {store.path} is read-only: lcm assertions rebuild writes", EXIT_DATABASE
        )
    try:
        writable = open_store(writable_target(store))
    except Exception as exc:
        raise CliError(
            f"cannot open the database {store.path} for writing: {exc}", EXIT_DATABASE
        ) from exc
    redactor = (
        Redactor(Policy.parse(config.sensitive_patterns), writable.secret("redaction"))
        if config.sensitive_patterns_enabled
        else None
    )
    sidecar = Assertions(config, writable, redactor)
    last = writable.last_message_id()
    with pg.start("assertions rebuild", last, unit="ids") as line:

        def between_steps() -> bool:  # each step commits its facts and the cursor together
            line.update(writable.assertion_cursor(), last)
            return False

        rebuilt = sidecar.rebuild(should_stop=between_steps)
    return {"rebuilt": rebuilt, "refused": sidecar.refused, **status(writable, config)}


def register(subparsers: Subparsers) -> None:
    cmd = common.verb(
        subparsers,
        "assertions",
        handler,
        "the assertion sidecar (lcm_query_state): status, or rebuild (WRITES: drops "
        "the assertions and extracts them again from every stored message)",
    )
    cmd.add_argument(
        "action",
        nargs="?",
        choices=("status", "rebuild"),
        metavar="status|rebuild",
        default="status",
        help="status reads; rebuild writes",
    )


def handler(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    if args.action == "rebuild":
        return rebuild(store, common.settings())
    return status(store, common.settings())

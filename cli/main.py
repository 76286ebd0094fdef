"""``lcm``: read the hermes-lcm database without a running agent.

``--format auto`` by default: a rich table when stdout is a terminal, JSON when it is piped or
redirected (``--format json|table`` forces one; cli/output.py). Long verbs report progress on
stderr through progress.py (one live line on a terminal; ``LCM_PROGRESS=auto|always|never``), and
Ctrl-C exits 130 with one line saying how to resume. Keyset pagination
(``--after`` takes the previous page's ``next_cursor``), and read-only: the
database is opened with ``mode=ro`` and ``query_only``. Two commands say
otherwise: ``backup`` writes one new backup file (never the database), and
``doctor --deep`` opens a writable connection for FTS5's integrity-check inside
a transaction that is always rolled back.

Exit codes: 0 ok; 1 not found or a failed doctor check; 2 usage (a bad argument:
unknown option, a number out of range); 3 the database is missing, unreadable, not a
database, foreign or newer than this program; 4 a file to write cannot be written
(``export --output``, ``backup --dest``); 5 an internal error (a bug: please report it);
130 interrupted by Ctrl-C (one line says how to resume); 141 the reader closed the pipe early
(``lcm export | head``: the output stops there, quietly).
Every failure is one line on stderr (``lcm: error: ...``), plus ``{"error": ...}`` on stdout
with ``--format json``; nothing is written to the target, and no traceback is shown.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import TextIO

# Only what every verb needs is imported here: `lcm status` must answer within 100 ms, so the
# family modules import their work (embeddings, assertions, maintenance, search...) inside their
# handlers, and a run imports and registers only the family of the verb it was given.
from .. import __version__
from ..store import Store, StoreError, StoreFault
from . import pg as cli_pg
from .common import Parser, global_options
from .database import open_db, resolve_db
from .output import (
    EXIT_DATABASE,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    EXIT_WRITE,
    FORMATS,
    CliError,
    emit,
    reader_gone,
    resolve,
    resume_hint,
)

# The verb families (modules of this package), in the order ``lcm --help`` lists their verbs:
# each module's ``register(subparsers)`` adds its verbs (cli/common.py says how).
FAMILIES = (
    "status",
    "browse",
    "grep",
    "upkeep",
    "export",
    "redact",
    "embed",
    "rollups",
    "assertions",
    "view",
    "migrate",
    "importer",
    "payloads",
    "settings",
)
# Which family registers each verb, so ``lcm VERB`` imports and registers that family alone (the
# whole parser costs a cold start ~20 ms of argparse and imports); a test checks it against what
# the families register.
VERB_FAMILY = {
    "status": "status",
    "conversations": "browse",
    "sessions": "browse",
    "messages": "browse",
    "summaries": "browse",
    "expand": "browse",
    "grep": "grep",
    "doctor": "upkeep",
    "backup": "upkeep",
    "retention": "upkeep",
    "export": "export",
    "redact": "redact",
    "embed": "embed",
    "rollups": "rollups",
    "assertions": "assertions",
    "view": "view",
    "migrate-to-postgres": "migrate",
    "import": "importer",
    "gc-payloads": "payloads",
    "backfill-outputs": "payloads",
    "config": "settings",
}


def family(name: str) -> ModuleType:
    return importlib.import_module(f".{name}", __package__)


def asked_verb(argv: Sequence[str]) -> str | None:
    """The verb ``argv`` names, when it names a known one before any option it cannot read past
    (a value-taking global option's value is skipped)."""
    words = list(argv)
    i = 0
    while i < len(words):
        word = words[i]
        if word in ("--db", "--format"):
            i += 2
            continue
        if word.startswith("-"):
            if word.startswith(("--db=", "--format=")):
                i += 1
                continue
            return None  # --help, --version, ...: the whole parser answers
        return word if word in VERB_FAMILY else None
    return None


def failure(exc: BaseException, opening: Path | str | None = None) -> CliError:
    """The one mapping from any failure below the CLI to what the operator sees (and the exit code). ``opening``:
    the database whose open failed; it cannot be read, whatever the failure (unreadable, a directory, not SQLite)."""
    if isinstance(exc, CliError):
        return exc
    if isinstance(opening, str):
        opening = cli_pg.redacted(opening)
    what = f"{exc.__class__.__name__}: {exc}"
    if isinstance(exc, OSError):
        where = f" ({exc.filename})" if exc.filename else ""
        text = f"{exc.strerror or exc}{where}"
        return CliError(
            f"cannot read the database {opening}: {text}" if opening else f"cannot write: {text}",
            EXIT_DATABASE if opening else EXIT_WRITE,
        )
    if opening is not None:
        return CliError(f"cannot read the database {opening}: {exc}", EXIT_DATABASE)
    if isinstance(exc, StoreError | StoreFault):
        return CliError(f"cannot read the database: {exc}", EXIT_DATABASE)
    if isinstance(exc, OverflowError | ValueError):
        return CliError(f"bad value: {exc}", EXIT_USAGE)
    return CliError(f"internal error ({what}); please report it", EXIT_INTERNAL)


def parser(verb: str | None = None) -> argparse.ArgumentParser:
    """The ``lcm`` parser: the global options, then every family's verbs (or, given a ``verb``,
    only its family's)."""
    p = Parser(
        prog="lcm",
        description="Read the hermes-lcm database without a running agent "
        "(read-only unless a command says otherwise).",
    )
    global_options(p)
    p.add_argument(
        "--version",
        action="version",
        version=f"hermes-lcm {__version__}",
        help="print the version and exit",
    )
    sub = p.add_subparsers(dest="verb", required=True, metavar="COMMAND")
    for name in (VERB_FAMILY[verb],) if verb in VERB_FAMILY else FAMILIES:
        family(name).register(sub)
    return p


def main(
    argv: Sequence[str] | None = None, out: TextIO | None = None, err: TextIO | None = None
) -> int:
    """Run one verb. Every failure, whichever layer raised it, leaves here as one CliError:
    its exit code, one line on stderr and (``--format json``) an ``{"error": ...}`` object."""
    out, err = out or sys.stdout, err or sys.stderr
    fmt = resolve(_asked_format(argv), out)
    store: Store | None = None
    try:
        words = sys.argv[1:] if argv is None else argv
        args = parser(asked_verb(words)).parse_args(words)
        if getattr(args, "json", False):  # the older spelling some verbs keep (common.json_flag)
            args.format = "json"
        fmt = args.format = resolve(args.format, out)
        args.exit_code, args.out = EXIT_OK, out
        path, args.db_origin = resolve_db(args.db, dict(os.environ))
        args.db_path = path
        wanted = args.store_use  # common.verb: "open", "if-present" (doctor) or "none"
        present = cli_pg.is_url(path) or Path(path).exists()
        if wanted == "open" or (wanted == "if-present" and present):
            try:
                store = open_db(path, args.db_origin)
            except Exception as exc:
                raise failure(exc, opening=path) from exc
        result = args.handler(store, args)
        if result is not None:
            try:
                emit(result, args.format, out)
            except (
                SystemExit
            ):  # rich ends a print whose reader left this way (stdout already /dev/null)
                return reader_gone(out)
        out.flush()  # a reader that left shows here, inside the try
        if getattr(args, "error_line", None):
            err.write(f"lcm: error: {_one_line(args.error_line)}\n")
    except BrokenPipeError:
        return reader_gone(out)
    except (Exception, KeyboardInterrupt) as exc:  # noqa: BLE001 - the one place failures become exit codes
        error = interrupted(argv) if isinstance(exc, KeyboardInterrupt) else failure(exc)
        # scrubbed: an error may quote the database given (a keyword/value string taken for a path, a
        # driver's message quoting a URL's token) with its password
        message, extra = cli_pg.scrubbed(str(error)), cli_pg.scrubbed_value(error.extra)
        if fmt == "json":
            out.write(
                json.dumps(
                    {"error": message, "exit_code": error.code, **extra}, indent=2, default=str
                )
                + "\n"
            )
        hint = extra.get("hint")
        err.write(
            f"lcm: error: {_one_line(message)}{' (' + _one_line(str(hint)) + ')' if hint else ''}\n"
        )
        return error.code
    finally:
        if store is not None:
            store.close()
    return int(args.exit_code)


def _asked_format(argv: Sequence[str] | None) -> str:
    """``--format X`` in the raw arguments: the error format before parsing succeeded."""
    words = list(sys.argv[1:] if argv is None else argv)
    for i, w in enumerate(words):
        value = (
            w[len("--format=") :]
            if w.startswith("--format=")
            else (words[i + 1 : i + 2] or [""])[0]
            if w == "--format"
            else ""
        )
        if value in FORMATS:
            return value
    return "auto"


def interrupted(argv: Sequence[str] | None) -> CliError:
    """Ctrl-C: exit 130 and one line saying how to go on (each writing verb commits whole steps)."""
    words = list(sys.argv[1:] if argv is None else argv)
    return CliError(f"interrupted; {resume_hint(words)}", EXIT_INTERRUPTED)


def _one_line(text: str) -> str:
    return " ".join(text.split())


if __name__ == "__main__":
    raise SystemExit(main())

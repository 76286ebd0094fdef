"""``lcm``: read the hermes-lcm database without a running agent.

``--format auto`` by default: a rich table when stdout is a terminal, JSON when it is piped or
redirected (``--format json|table`` forces one; cli_output.py). Long verbs report progress on
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
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

# Only what every verb needs is imported here: `lcm status` must answer in well under 150 ms, so the verb
# modules import their work (embeddings, assertions, maintenance, search...) inside their handlers.
from .. import __version__
from ..base import progress as pg
from ..base.display import iso
from ..config import LoadedConfig, load_config, load_for_home, read_yaml_block
from ..dag import Dag
from ..store import (
    ForeignDatabase,
    NewerSchema,
    Store,
    StoreError,
    StoreFault,
    detect_source,
    open_readonly,
    open_store,
)
from . import assertions as cli_assertions
from . import embed as cli_embed
from . import migrate as cli_migrate
from . import payloads as cli_payloads
from . import pg as cli_pg
from . import redact as cli_redact
from . import rollups as cli_rollups
from . import view as view_verb
from .browse import (
    ID_MAX,
    PAGE_MAX,
    cmd_conversations,
    cmd_expand,
    cmd_grep,
    cmd_messages,
    cmd_sessions,
    cmd_summaries,
)
from .export import cmd_export
from .output import (
    EXIT_DATABASE,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_NOT_FOUND,
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

if TYPE_CHECKING:
    pass


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


class _Parser(argparse.ArgumentParser):
    """argparse whose usage errors are CliErrors: one line and exit 2, like every other failure."""

    def error(self, message: str) -> Any:
        where = self.prog.removeprefix("lcm").strip()  # main() already says "lcm: error:"
        if where == "" and "required: COMMAND" in message:
            message = f"a command is required, one of: {', '.join(self._verbs())} (lcm COMMAND --help for one)"
        usage = " ".join(self.format_usage().split())
        raise CliError(f"{where}: {message}" if where else message, EXIT_USAGE, hint=usage)

    def _verbs(self) -> list[str]:
        actions = [a for a in self._actions if isinstance(a, argparse._SubParsersAction)]
        return list(actions[0].choices) if actions else []


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


ID, COUNT, OFFSET = bounded(0), bounded(0, PAGE_MAX * 1000), bounded(0)


def hermes_home(env: dict[str, str]) -> Path:
    """``HERMES_HOME`` (or ``~/.hermes``), narrowed to ``profiles/<HERMES_PROFILE>`` when set."""
    base = Path(env.get("HERMES_HOME") or Path.home() / ".hermes").expanduser()
    profile = env.get("HERMES_PROFILE", "").strip()
    if profile and profile != "default" and base.name != profile:
        return base / "profiles" / profile
    return base


def resolve_db(explicit: str | None, env: dict[str, str]) -> tuple[Path | str, str]:
    """(path or postgresql:// URL, how it was chosen): --db, LCM_DATABASE_URL, config.yaml lcm.database_url,
    LCM_DATABASE_PATH, config.yaml lcm.database_path, HERMES_HOME (the engine's order: startup.locate)."""
    if explicit:
        return (explicit if cli_pg.is_url(explicit) else Path(explicit).expanduser()), "--db"
    home = hermes_home(env)
    loaded = load_config(env, read_yaml_block(home)[0])
    if loaded.config.database_url:
        return loaded.config.database_url, "LCM_DATABASE_URL" if loaded.sources.get(
            "database_url"
        ) == "env" else "config.yaml"
    if loaded.config.database_path:
        origin = (
            "LCM_DATABASE_PATH" if loaded.sources.get("database_path") == "env" else "config.yaml"
        )
        return Path(loaded.config.database_path).expanduser(), origin
    return home / "lcm.db", "HERMES_HOME" if env.get("HERMES_HOME") else "~/.hermes"


def no_database(path: Path, origin: str) -> CliError:
    """A database that does not exist yet: which setting chose the path, and how to choose another."""
    chosen = f"HERMES_HOME={os.environ.get('HERMES_HOME')}" if origin == "HERMES_HOME" else origin
    # scrubbed: a keyword/value connection string given to --db is taken for a path, password and all
    return CliError(
        f"no database at {cli_pg.scrubbed(str(path))}",
        EXIT_DATABASE,
        hint=f"the path comes from {chosen}; Hermes creates it at the first turn it stores with "
        "context.engine: lcm (lcm doctor says whether it can); to read another, give --db PATH "
        "or set HERMES_HOME or LCM_DATABASE_PATH",
    )


def open_db(path: Path | str, origin: str = "--db") -> Store:
    if cli_pg.is_url(path):
        try:  # read-only: this store refuses every write() (doctor --deep and backup say otherwise)
            return open_readonly(path)
        except (
            StoreError,
            StoreFault,
        ) as exc:  # ForeignDatabase, NewerSchema, cannot connect (URL without password)
            raise CliError(str(exc), EXIT_DATABASE) from exc
    path = Path(path)
    if not path.exists():
        raise no_database(path, origin)
    if path.is_dir():
        raise CliError(
            f"{path} is a directory, not a database file",
            EXIT_DATABASE,
            hint="give --db the file (e.g. DIR/lcm.db) or set LCM_DATABASE_PATH to it",
        )
    try:
        return open_readonly(path)
    except ForeignDatabase as exc:
        raise CliError(str(exc), EXIT_DATABASE, hint=foreign_hint(path)) from exc
    except NewerSchema as exc:
        raise CliError(
            str(exc), EXIT_DATABASE, hint="upgrade hermes-lcm to read this database"
        ) from exc
    except StoreError as exc:
        raise CliError(str(exc), EXIT_DATABASE) from exc


def foreign_hint(path: Path) -> str:
    from ..importers.lcmx import command_for, is_lcmx  # lazy: the error path only

    if is_lcmx(path):
        return (
            f"{path} is an LCM-X database: upgrade it in place with `{command_for(path)}` (dry run without "
            "--apply; the original is kept as <db>.lcm-x-backup), or let the engine do it at start "
            "(LCM_MIGRATE_ON_START=1, the default)"
        )
    kind = detect_source(path)
    if kind == "lossless-claw":
        return (
            f"{path} is a lossless-claw/OpenClaw database: import it with `python scripts/import_lossless_claw.py "
            f"--source-db {path} --target-db NEW.db` (dry-run first), and point LCM_DATABASE_PATH elsewhere"
        )
    return f"{path} was written by another program; hermes-lcm never writes to it. Set LCM_DATABASE_PATH to a new file"


# -- small helpers ------------------------------------------------------------------------------


# -- verbs ------------------------------------------------------------------------------------------


def cmd_status(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    dag = Dag(store)
    facts = store.database_header()
    counts = store.table_counts()
    depth = store.depth_counts(None)
    newest = store.recent_events(5)
    return {
        "database_path": store.path,
        "chosen_by": args.db_origin,
        "lcm_version": __version__,
        **cli_pg.sizes(store, facts),
        "schema_version": facts["schema_version"],
        "journal_mode": facts["journal_mode"],
        "counts": counts,
        "summaries_by_depth": depth,
        "lineage_problems": sorted(dag.lineage_problems()),
        "embeddings": cli_embed.status(store, _config(args)),
        "temporal_rollups": store.rollup_stats(),
        "assertions": cli_assertions.status(store, _config(args)),
        "recent_events": [
            {"at": iso(a), "level": lv, "kind": k, "detail": d[:300]} for a, lv, k, d in newest
        ],
    }


def cmd_doctor(store: Store | None, args: argparse.Namespace) -> dict[str, Any]:
    from ..host import install as hostinstall
    from ..maintenance import doctor as mt

    host = hostinstall.install_report(hermes_home(dict(os.environ)), dict(os.environ))
    if store is None:  # no database yet: whether Hermes can make one is the news
        missing = no_database(Path(args.db_path), args.db_origin)
        args.exit_code = EXIT_DATABASE
        args.error_line = (
            f"{missing} ({missing.extra['hint']})"  # the one stderr line every failure has
        )
        report = mt.checks_report(
            [
                mt.Check("host", **host),
                mt.Check("database", "fail", str(missing), str(missing.extra["hint"])),
            ],
            {"path": cli_pg.scrubbed(str(args.db_path)), "exists": False},
        )
        return {"error": str(missing), "exit_code": EXIT_DATABASE, **report}
    report_store = store
    if args.deep:
        report_store = open_store(cli_pg.target_of(store))
    loaded = _loaded()
    report = mt.doctor_report(
        report_store,
        deep=args.deep,
        config=loaded.config,
        config_problems=loaded.problems,
        host=host,
    )
    if report["status"] == "fail":
        args.exit_code = EXIT_NOT_FOUND
    return report


def cmd_backup(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    from ..maintenance import backups as mt

    directory = (
        Path(args.dest) if args.dest else mt.backup_dir(store.path, _config(args).backup_dir)
    )
    blocker = next(
        (p for p in (directory, *directory.parents) if p.exists() and not p.is_dir()), None
    )
    if blocker is not None:
        raise CliError(f"cannot write the backup: {blocker} is not a directory", EXIT_WRITE)
    if cli_pg.is_url(store.path):
        result, args.exit_code = cli_pg.backup(store, directory)
        return result
    with pg.start(
        "backup", unit="pages"
    ) as line:  # Ctrl-C mid-copy: the temp file goes, no backup is left
        saved = mt.backup(store, directory, progress=line.update)
    return {
        "status": "ok",
        "backup": saved.path,
        "bytes": saved.bytes,
        "seconds": saved.seconds,
        "restore": "stop Hermes, move lcm.db, lcm.db-wal, lcm.db-shm aside, copy the backup to lcm.db, start it",
    }


def cmd_retention(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    from ..maintenance import retention as mt

    return mt.retention_report(store, top=args.top)


def _config(args: argparse.Namespace) -> Any:
    return _loaded().config


def _loaded() -> LoadedConfig:
    """The settings the engine would run with here, and their problems (doctor lists them)."""
    env = dict(os.environ)
    return load_for_home(env, hermes_home(env))


# -- argument parsing ------------------------------------------------------------------------------

Handler = Callable[[Store, argparse.Namespace], "dict[str, Any] | None"]


def parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="lcm",
        description="Read the hermes-lcm database without a running agent "
        "(read-only unless a command says otherwise).",
    )
    p.add_argument(
        "--db",
        help="database file or postgresql:// URL (default: LCM_DATABASE_URL, config.yaml "
        "lcm.database_url, LCM_DATABASE_PATH, lcm.database_path, $HERMES_HOME/lcm.db; HERMES_PROFILE "
        "selects a profile)",
    )
    p.add_argument(
        "--format",
        choices=FORMATS,
        default="auto",
        help="output format (default auto: a table on a terminal, JSON when piped)",
    )
    p.add_argument("--version", action="version", version=f"hermes-lcm {__version__}")
    sub = p.add_subparsers(dest="verb", required=True, metavar="COMMAND")
    # --db and --format are also accepted after the command (``lcm status --db x.db``).
    shared = _Parser(add_help=False)
    shared.add_argument("--db", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    shared.add_argument(
        "--format", choices=FORMATS, default=argparse.SUPPRESS, help=argparse.SUPPRESS
    )

    def add(name: str, handler: Handler, help_text: str) -> argparse.ArgumentParser:
        cmd = sub.add_parser(name, help=help_text, description=help_text, parents=[shared])
        cmd.set_defaults(handler=handler)
        return cmd

    def paged(cmd: argparse.ArgumentParser, limit: int = 50) -> None:
        cmd.add_argument("--limit", type=COUNT, default=limit, help=f"page size (1-{PAGE_MAX})")
        cmd.add_argument("--after", type=ID, help="cursor: the previous page's next_cursor")

    add("status", cmd_status, "database path, sizes, counts, recent engine events")
    paged(
        add("conversations", cmd_conversations, "conversations with message/summary/session counts")
    )
    s = add("sessions", cmd_sessions, "sessions (host session ids), optionally of one conversation")
    s.add_argument("--conversation", type=ID)
    paged(s)
    m = add(
        "messages", cmd_messages, "raw messages: 'tail' (newest) or 'page' (keyset, oldest first)"
    )
    m.add_argument("mode", choices=("tail", "page"), metavar="tail|page")
    m.add_argument("--conversation", type=ID)
    m.add_argument("--session")
    m.add_argument(
        "--max-chars",
        type=OFFSET,
        default=2000,
        help="cut content to this many characters (0 = all)",
    )
    paged(m, 20)
    sm = add(
        "summaries",
        cmd_summaries,
        "summary nodes: 'list' a conversation's, or 'show' one with lineage",
    )
    sm.add_argument("mode", choices=("list", "show"), metavar="list|show")
    sm.add_argument("node", nargs="?", help="node id for show (S12)")
    sm.add_argument("--conversation", type=ID)
    sm.add_argument("--depth", type=ID)
    sm.add_argument("--max-chars", type=OFFSET, default=400)
    sm.add_argument("--source-offset", type=OFFSET, default=0)
    sm.add_argument("--source-limit", type=COUNT, default=20)
    paged(sm)
    g = add("grep", cmd_grep, "full-text search of messages and summaries (natural language works)")
    g.add_argument("query")
    g.add_argument("--conversation", type=ID)
    g.add_argument("--limit", type=COUNT, default=20, help="hits per kind")
    g.add_argument("--kind", choices=("all", "messages", "summaries"), default="all")
    g.add_argument(
        "--include-in-context", action="store_true", help="rank what the prompt shows in place"
    )
    g.add_argument(
        "--include-lcm-traffic",
        action="store_true",
        help="also search lcm_* tool calls and results",
    )
    e = add("expand", cmd_expand, "one node's sources or one message's exact content, paged")
    e.add_argument("--node")
    e.add_argument("--message", type=ID)
    e.add_argument("--source-offset", type=OFFSET, default=0)
    e.add_argument("--source-limit", type=COUNT, default=20)
    e.add_argument("--content-offset", type=OFFSET, default=0)
    e.add_argument("--max-chars", type=OFFSET, default=20000)
    d = add("doctor", cmd_doctor, "read-only health checks with guidance")
    d.add_argument(
        "--deep", action="store_true", help="also run FTS5 integrity-check (writable, rolled back)"
    )
    b = add(
        "backup",
        cmd_backup,
        "WRITES one verified backup file (online backup API); the database is untouched",
    )
    b.add_argument("--dest", help="directory (default LCM_BACKUP_DIR or <db dir>/lcm-backups)")
    x = add("export", cmd_export, "a conversation as JSONL (exact messages) or Markdown")
    x.add_argument("--conversation", type=ID, required=True)
    x.add_argument("--as", dest="as_", choices=("jsonl", "markdown"), default="jsonl")
    x.add_argument("--output", help="file to write (default stdout)")
    x.add_argument("--include-summaries", action="store_true")
    r = add(
        "retention",
        cmd_retention,
        "what the database holds by conversation and age, and how to bound it",
    )
    r.add_argument("--top", type=bounded(1, PAGE_MAX), default=20)
    cli_redact.register(add, _config)
    for verbs in (
        cli_embed,
        cli_rollups,
        cli_assertions,
        view_verb,
        cli_migrate,
    ):  # embed ... migrate-to-postgres
        verbs.register(add, _config, CliError)
    i = add(
        "import",
        cmd_import,
        "import an LCM-X database (dry run unless --apply; WRITES with --apply): without "
        "--target-db it is upgraded in place, the original kept as <db>.lcm-x-backup",
    )
    i.add_argument("kind", choices=("lcm-x",))
    i.add_argument("--source-db", required=True, help="the LCM-X database")
    i.add_argument(
        "--target-db",
        help="a hermes-lcm database to import into (default: upgrade the source in place)",
    )
    i.add_argument(
        "--apply",
        action="store_true",
        help="write (default: a dry run with the reconciliation report)",
    )
    i.add_argument("--json", action="store_true", help="JSON output (the default format)")
    cli_payloads.add_verbs(add, _config, CliError)  # gc-payloads, backfill-outputs
    return p


def cmd_import(_store: Store | None, args: argparse.Namespace) -> dict[str, Any]:
    """``lcm import lcm-x``: runs without opening --db (the source is usually not ours yet)."""
    from ..base import sensitive
    from ..importers.lcmx import ImportFailure
    from ..importers.lcmx import run_import as run_lcmx_import

    if args.json:
        args.format = "json"
    try:
        settings = _config(args)
        with pg.start("import lcm-x", unit="msgs") as line:
            out = run_lcmx_import(
                args.source_db,
                args.target_db,
                apply=args.apply,
                backup_dir=settings.backup_dir,
                redact_patterns=sensitive.redaction_patterns(settings),
                progress=line.update,
            )
    except ImportFailure as exc:
        raise CliError(str(exc), EXIT_DATABASE) from exc
    if not out.get("balanced", True) or not out.get("verify", {"ok": True})["ok"]:
        args.exit_code = EXIT_NOT_FOUND
    return out


def main(
    argv: Sequence[str] | None = None, out: TextIO | None = None, err: TextIO | None = None
) -> int:
    """Run one verb. Every failure, whichever layer raised it, leaves here as one CliError:
    its exit code, one line on stderr and (``--format json``) an ``{"error": ...}`` object."""
    out, err = out or sys.stdout, err or sys.stderr
    fmt = resolve(_asked_format(argv), out)
    store: Store | None = None
    try:
        args = parser().parse_args(argv)
        fmt = args.format = resolve(args.format, out)
        args.exit_code, args.out = EXIT_OK, out
        path, args.db_origin = resolve_db(args.db, dict(os.environ))
        args.db_path = path
        absent = args.verb == "doctor" and not cli_pg.is_url(path) and not Path(path).exists()
        if (
            args.verb not in ("import", cli_migrate.VERB) and not absent
        ):  # these name their own source
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

"""``lcm embed`` for the ``lcm`` CLI: the dry run, ``--warmup`` and the resumable ``--apply`` backfill.

The dry run calls no provider: rows, estimated tokens and cost, the model, and whether text
leaves this machine. ``--apply`` opens its own writable connection, warms the model up (tables
and model id), then embeds batch by batch with progress on stderr; Ctrl-C stops after the batch
under way, and running it again resumes (what has no vector yet is the state). Progress is
progress.py's one live line on a terminal; off a terminal, one summary line when the backfill ends.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from collections.abc import Callable
from types import FrameType
from typing import TYPE_CHECKING, Any

from ..base import progress as pg
from ..base.redact import clip
from ..store import Store, StoreError, StoreFault, is_read_only_file, open_store, writable_target
from . import common
from .common import POSITIVE, Subparsers
from .output import CliError

if TYPE_CHECKING:  # embed/ and embedder import numpy and httpx: `lcm status` must not pay them
    from ..embed import Embedder, Progress

EXIT_NOT_ENABLED = 2  # the settings: embeddings off, or a flag that does not fit
EXIT_DATABASE = 3  # read-only, locked, or otherwise not writable
EXIT_PROVIDER = 6  # the provider cannot be built or does not answer
EXIT_INTERRUPTED = 130  # Ctrl-C: stopped after the batch under way
RESUME = "run `lcm embed --apply` again to resume (rows already embedded are not sent again)"


def _stderr(line: str) -> None:
    sys.stderr.write(f"lcm: {line}\n")
    sys.stderr.flush()


def run(
    store: Store,
    settings: Any,
    env: dict[str, str],
    *,
    apply: bool = False,
    warmup: bool = False,
    limit: int | None = None,
    write: Callable[[str], None] = _stderr,
) -> dict[str, Any]:
    """The verb's work; ``store`` is the CLI's read-only view (a writable one is opened to write)."""
    from ..embed import Embedder, ProviderError, provider_for  # lazy: numpy, httpx

    if not settings.embeddings_enabled:
        raise CliError(
            "embeddings are not enabled: set LCM_EMBEDDINGS_ENABLED=true and LCM_EMBEDDING_PROVIDER "
            "(openai, voyage, ollama or local)",
            EXIT_NOT_ENABLED,
        )
    try:
        provider = provider_for(settings, env)
    except ProviderError as exc:
        raise CliError(f"embedding provider problem: {clip(str(exc), 300)}", EXIT_PROVIDER) from exc
    assert provider is not None
    if not (apply or warmup):
        embedder = Embedder(store, provider, settings)
        known = embedder.adopt_known_model()
        plan = embedder.backlog().as_dict()
        return {
            "dry_run": True,
            **plan,
            "provider_copy_redacted": embedder.redactor is not None,
            "model_id": embedder.model_id if known else None,
            "vectors": store.vector_stats(),
            "next": "lcm embed --apply (lcm embed --warmup only loads the model and creates the tables)",
        }
    target = _writable(store)
    embedder = Embedder(target, provider, settings, _key(target))
    if apply and pg.mode() != "never":
        write(
            f"loading {provider.name} and counting the rows without a vector"
        )  # the first second says something
    try:
        info = embedder.warmup()
    except ProviderError as exc:
        raise CliError(f"embedding provider problem: {clip(str(exc), 300)}", EXIT_PROVIDER) from exc
    except (StoreError, StoreFault, OSError) as exc:
        raise CliError(f"cannot write the database {store.path}: {exc}", EXIT_DATABASE) from exc
    if warmup:
        return {"warmup": "ok", **info, "backlog_rows": embedder.backlog().rows}
    return _backfill(embedder, info, limit, write)


def _backfill(
    embedder: Embedder,
    info: dict[str, Any],
    limit: int | None,
    write: Callable[[str], None],
) -> dict[str, Any]:
    from ..embed import (
        Progress,
        ProviderError,  # lazy: numpy, httpx
    )

    stop = {"asked": False}
    line = pg.start("embed", notes=True)
    say = line.note if isinstance(line, pg.LIVE) else write  # above the live line, not through it

    def on_sigint(signum: int, frame: FrameType | None) -> None:
        if stop["asked"]:
            raise KeyboardInterrupt
        stop["asked"] = True
        say("stopping after the batch under way (Ctrl-C again to stop now)")

    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, on_sigint) if main_thread else None
    last: list[Progress] = []

    def on_progress(p: Progress) -> None:
        last[:] = [p]
        line.update(p.done, p.total)

    try:
        progress = embedder.backfill(
            on_progress=on_progress, should_stop=lambda: stop["asked"], limit=limit
        )
    except KeyboardInterrupt:
        stop["asked"] = True
        progress = Progress(embedder.embedded, embedder.embedded, 0.0)
    except ProviderError as exc:
        raise CliError(
            f"embedding provider problem after {embedder.embedded} rows: {clip(str(exc), 300)}; "
            f"{RESUME}",
            EXIT_PROVIDER,
        ) from exc
    except (StoreError, StoreFault, OSError) as exc:
        raise CliError(f"cannot write the database: {exc}; {RESUME}", EXIT_DATABASE) from exc
    finally:
        line.close()
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
    if last and not isinstance(line, pg.LIVE):
        write(last[-1].line())  # off a terminal: one summary line (the live line said it already)
    remaining = embedder.backlog().rows
    built = [] if stop["asked"] else _build_indexes(embedder)
    out = {
        "applied": True,
        **info,
        "embedded": progress.done,
        "seconds": round(progress.seconds, 2),
        "rows_per_second": round(progress.rate, 1),
        "remaining": remaining,
        "interrupted": stop["asked"],
        "indexes_built": built,
    }
    if stop["asked"]:  # the error line is the one line that says how to resume
        raise CliError(
            f"interrupted after {progress.done} rows, {remaining} left; {RESUME}",
            EXIT_INTERRUPTED,
            **out,
        )
    return out


def _build_indexes(embedder: Any) -> list[str]:
    """PostgreSQL's approximate indexes a model with vectors lacks, built without blocking writers
    (after a refusal, a dropped index or an interrupted build; a new model's comes with its first rows)."""
    try:
        return embedder.store.build_vector_indexes()
    except (StoreError, StoreFault, OSError) as exc:
        raise CliError(f"cannot build the vector index: {exc}; {RESUME}", EXIT_DATABASE) from exc


def status(store: Store, settings: Any, env: dict[str, str] | None = None) -> dict[str, Any]:
    """``lcm status``'s embeddings block: the model, where text goes, the backlog; no provider call."""
    if not settings.embeddings_enabled:
        return {"enabled": False, "note": "off (LCM_EMBEDDINGS_ENABLED)"}
    from ..embed import (
        Embedder,
        provider_for,  # lazy, only when on: numpy and httpx
    )

    try:
        provider = provider_for(settings, dict(os.environ) if env is None else env)
        assert provider is not None
        embedder = Embedder(store, provider, settings)
        embedder.adopt_known_model()
        return {
            "enabled": True,
            "model": provider.name,
            "sent_off_this_machine": not provider.local,
            "model_id": embedder.model_id,
            "backlog_rows": embedder.backlog().rows,
            "vectors": store.vector_stats(),
        }
    except Exception as exc:  # noqa: BLE001 - status never fails: the problem is what it shows
        return {"enabled": True, "problem": clip(str(exc), 300)}


def _writable(store: Store) -> Store:
    if is_read_only_file(store):
        raise CliError(
            f"the database {store.path} is read-only: lcm embed --apply writes vectors",
            EXIT_DATABASE,
        )
    try:
        return open_store(writable_target(store))
    except Exception as exc:
        raise CliError(
            f"cannot open the database {store.path} for writing: {exc}", EXIT_DATABASE
        ) from exc


def _key(store: Store) -> bytes:
    try:
        return store.secret("redaction")
    except Exception as exc:
        raise CliError(
            f"cannot write the database {store.path} (locked?): {exc}", EXIT_DATABASE
        ) from exc


def register(subparsers: Subparsers) -> None:
    cmd = common.verb(
        subparsers,
        "embed",
        handler,
        "semantic recall's vectors: a dry run (rows, tokens, cost, what leaves this "
        "machine); WRITES with --apply (resumable backfill, progress on stderr) or --warmup",
    )
    common.apply_flag(
        cmd,
        "embed every row without a vector (Ctrl-C stops after the batch under way; run again "
        "to resume)",
    )
    cmd.add_argument(
        "--warmup", action="store_true", help="only load the model and create the vector tables"
    )
    cmd.add_argument("--limit", type=POSITIVE, help="embed at most this many rows")
    common.json_flag(cmd)


def handler(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    if args.warmup and args.apply:
        raise CliError(
            "--warmup and --apply: choose one (--apply warms up first)", EXIT_NOT_ENABLED
        )
    return run(
        store,
        common.settings(),
        dict(os.environ),
        apply=args.apply,
        warmup=args.warmup,
        limit=args.limit,
    )

"""``lcm migrate-to-postgres``: one hermes-lcm SQLite file moved into PostgreSQL, ids kept.

A dry run (the default) says what would be copied and what the target holds, and writes nothing.
``apply`` copies table by table in batches, each one transaction that also moves the table's
cursor (storage/pg/copy.py), so a killed run resumes where it stopped and a finished one is a
no-op; the secrets in ``meta`` move first (a redaction key or the summary block's seal that
changed would stop matching what is stored). ``verify`` compares counts, a checksum of every
message and summary, and what search and expand answer for a sample, on both sides. The source
is opened read-only and never written.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..base.progress import Tick, quiet_tick
from ..dag import Dag
from ..search.query import build_query
from ..search.searcher import POOL, SUMMARY_POOL, Scope, Searcher, SearchRequest
from ..store import (
    ForeignDatabase,
    NewerSchema,
    Store,
    StoreError,
    detect_source,
    directory_of,
    open_readonly,
    open_store,
    redacted,
)

DEFAULT_BATCH = 2000
SAMPLE = 8


class MigrateError(Exception):
    """A migration that cannot run (the message says why and what to do)."""


def _copy() -> Any:
    from ..storage.pg import copy  # the driver is imported only when a migration runs

    return copy


def open_source(path: str | Path) -> Store:
    """The source, read-only: ours (any schema we know), or a clear error naming what upgrades it."""
    where = Path(path).expanduser()
    if not where.is_file():
        raise MigrateError(f"{where} is not a file")
    kind = detect_source(where)
    if kind == "lossless-claw":
        raise MigrateError(
            f"{where} is a lossless-claw database: import it into a hermes-lcm file first "
            f"(scripts/import_lossless_claw.py --source-db {where} --apply), then migrate that file"
        )
    try:
        return open_readonly(where)
    except ForeignDatabase as exc:
        from .lcmx import command_for, is_lcmx

        if is_lcmx(where):
            raise MigrateError(
                f"{where} is an LCM-X database: upgrade it first with `{command_for(where)}`, "
                "then migrate it"
            ) from exc
        raise MigrateError(str(exc)) from exc
    except (NewerSchema, StoreError) as exc:
        raise MigrateError(str(exc)) from exc


def _source_id(path: str | Path) -> str:
    return str(Path(path).expanduser().resolve())


def plan(source_db: str | Path, url: str) -> dict[str, Any]:
    """The dry run: counts and size of the source, the target's state; nothing written."""
    copy = _copy()
    source = open_source(source_db)
    try:
        counts = copy.source_counts(source)
        secrets = sorted(k for k in copy.source_meta(source) if k.startswith("secret:"))
        state = copy.probe(url)
        payloads = Path(source_db).expanduser().parent / "lcm-payloads"
        return {
            "apply": False,
            "source": str(source_db),
            "target": redacted(url),
            "target_state": state.state,
            "target_detail": state.detail or None,
            "would_copy": counts,
            "secrets": secrets,
            "not_copied": copy.optional_counts(source),
            "bytes": Path(source_db).expanduser().stat().st_size,
            "payload_files": sum(1 for p in payloads.rglob("*") if p.is_file())
            if payloads.is_dir()
            else 0,
            "can_apply": _refusal(state, _source_id(source_db)) is None,
            "refusal": _refusal(state, _source_id(source_db)),
        }
    finally:
        source.close()


def _refusal(state: Any, source_id: str) -> str | None:
    if state.state == "foreign":
        return f"the target {state.detail}: give a URL to an empty database or schema"
    if state.state == "in use":
        return "the target already holds conversations written by hermes-lcm (ids would clash): use an empty schema"
    if state.state in ("partial", "migrated") and state.source != source_id:
        return f"the target holds a migration of another file ({state.source})"
    return None


def apply(
    source_db: str | Path,
    url: str,
    batch: int = DEFAULT_BATCH,
    tick: Tick = quiet_tick,
    note: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Copy everything (resumable), then the payload files, then :func:`verify`."""
    copy = _copy()
    source_id = _source_id(source_db)
    source = open_source(source_db)
    try:
        state = copy.probe(url)
        refusal = _refusal(state, source_id)
        if refusal:
            raise MigrateError(refusal)
        target = open_store(url)
        total = sum(copy.source_counts(source).values())
        copy.write_meta(target, {**copy.source_meta(source), copy.SOURCE_KEY: source_id})
        done = sum(copy.target_counts(target).values())
        have = copy.source_tables(source)
        tick(done, total)
        copied: dict[str, int] = {}
        for table in copy.TABLES:
            if table.name not in have:
                continue

            def step(n: int) -> None:
                nonlocal done
                done += n
                tick(done, total)

            copied[table.name] = copy.copy_table(source, target, table, batch, step)
        if any(copied.values()) or state.state != "migrated":
            copy.reset_sequences(target)
            copy.write_meta(target, {copy.DONE_KEY: "1"})
        payloads = copy_payloads(Path(source_db), url)
        if note:
            note(
                f"copied {sum(copied.values())} rows; payload files: {payloads['copied']} copied to "
                f"{payloads['directory']}"
            )
        return {
            "apply": True,
            "source": str(source_db),
            "target": redacted(url),
            "copied": copied,
            "resumed": state.state == "partial",
            "payloads": payloads,
            "not_copied": copy.optional_counts(source),
            "verify": verify_stores(source, target),
        }
    finally:
        source.close()


def copy_payloads(source_db: Path, url: str) -> dict[str, Any]:
    """Payload files beside the source go where the PostgreSQL store keeps them (under $HERMES_HOME);
    a file already there with the same size is skipped (a resumed run)."""
    origin = source_db.expanduser().parent / "lcm-payloads"
    dest = directory_of(url)
    copied = 0
    if origin.is_dir():
        for path in sorted(origin.rglob("*")):
            if not path.is_file():
                continue
            into = dest / path.relative_to(origin)
            if into.is_file() and into.stat().st_size == path.stat().st_size:
                continue
            into.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            shutil.copy2(path, into)
            copied += 1
    return {"directory": str(dest), "copied": copied}


def verify(source_db: str | Path, url: str) -> dict[str, Any]:
    source = open_source(source_db)
    try:
        target = open_readonly(url)
        try:
            return verify_stores(source, target)
        finally:
            target.close()
    finally:
        source.close()


def verify_stores(source: Store, target: Store) -> dict[str, Any]:
    """Counts per table, every message's and summary's checksum, and a sample's search and expand."""
    copy = _copy()
    counts, found = copy.source_counts(source), copy.target_counts(target)
    mismatched = {
        t: {"source": n, "target": found.get(t)} for t, n in counts.items() if found.get(t) != n
    }
    sums = copy.checksums(source, target)
    bad_sums = [t for t, (a, b) in sums.items() if a != b]
    sample = _sample(source, target)
    ok = not mismatched and not bad_sums and not sample["differs"]
    return {
        "ok": ok,
        "counts": counts,
        "count_mismatch": mismatched,
        "checksum_mismatch": bad_sums,
        "checksums": {t: a for t, (a, _) in sums.items()},
        "sample": sample,
    }


def _sample(source: Store, target: Store) -> dict[str, Any]:
    """Messages spread over the file: each reads back whole (expand), and a word of it finds the
    same messages on both sides (grep)."""
    ids = _copy().message_ids(source)
    step = max(1, len(ids) // SAMPLE)
    picked = ids[::step][:SAMPLE]
    differs: list[str] = []
    skipped = 0
    for message_id in picked:
        a, b = source.message(message_id), target.message(message_id)
        if a is None or b is None or a.to_host() != b.to_host():
            differs.append(f"expand {message_id}")
            continue
        word, found = _rare_word(source, a.content)
        if word is None:
            skipped += 1
        elif found != _grep(target, word):
            differs.append(f"grep {word!r}")
    return {"messages": picked, "differs": differs, "grep_skipped": skipped}


def _rare_word(store: Store, text: str, tries: int = 4) -> tuple[str | None, list[tuple[str, int]]]:
    """A word of ``text`` matching fewer rows than search reranks (POOL, SUMMARY_POOL): below it
    every match is a candidate on both backends; above it each backend's own ranking picks which, so sets may differ."""
    words = sorted(
        {w for w in text.split() if w.isalpha() and len(w) > 4}, key=lambda w: (-len(w), w)
    )
    for word in words[:tries]:
        found = _grep(store, word)
        messages = sum(1 for kind, _ in found if kind == "message")
        if messages < POOL and len(found) - messages < SUMMARY_POOL:
            return word, found
    return None, []


def _grep(store: Store, word: str, pages: int = 20) -> list[tuple[str, int]]:
    """Every hit of ``word`` (all pages: ties may rank in another order, the set may not differ)."""
    request, found = (
        SearchRequest(build_query(word), Scope("all"), limit=500),
        list[tuple[str, int]](),
    )
    for _ in range(pages):
        page = Searcher(store, Dag(store), request).page()
        found.extend((h.kind, h.id) for h in page.hits)
        if page.next_cursor is None:
            break
        request = replace(request, cursor=page.next_cursor)
    return sorted(found)

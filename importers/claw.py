"""Import OpenClaw history into a hermes-lcm database (used by scripts/import_lossless_claw.py).

Two source families, one reader each:

* a lossless-claw SQLite database (``claw_sqlite``): raw messages, and with
  ``include_summaries`` its summary DAG with lineage;
* OpenClaw JSONL session transcripts (``claw_jsonl``): the active branch of each file.

Both fill the records of ``claw_report``; ``claw_write`` plans and writes them. This module is
the job around them: which source and target, the read-only view for a dry run, the backup
before an apply, and the report's balance.

Dry-run is the default: nothing is written, the report says what would be.
``apply`` checks and reads the whole source first, backs the target up (when it
exists), then writes the whole import in one transaction. Every imported row carries its provenance:
the session id and ``source`` column name the import, and each message's
fingerprint is a hash of its source identity, so re-running with the same
``import_id`` skips what is already there (``skipped_existing``) and imports
only what is new. Summary nodes keep their source id in ``route``.

No SQL here: the lossless-claw schema is read through ``store.ClawDatabase``
(storage/claw.py), and our own database through store.py / dag.py.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..base.progress import Tick, quiet_tick
from ..ingest.steps import import_normalizer
from ..maintenance.backups import backup_before_import
from ..storage.claw import ReadableCopy
from ..store import Store, StoreError, detect_source, open_readonly, open_store
from .claw_jsonl import jsonl_scan, narrowed, read_jsonl, state_dir_sessions
from .claw_report import ImportFailure, Report, SourceConversation
from .claw_sqlite import LosslessClawReader
from .claw_write import Importer


def default_import_id(kind: str, sources: Sequence[str | Path]) -> str:
    digest = hashlib.blake2b(
        "\n".join(sorted(str(Path(s).resolve()) for s in sources)).encode(), digest_size=6
    ).hexdigest()
    return f"{kind}-{digest}"


def run_import(
    *,
    target_db: str | Path,
    source_db: str | Path | None = None,
    jsonl: Sequence[str | Path] = (),
    jsonl_dirs: Sequence[str | Path] = (),
    import_id: str | None = None,
    include_summaries: bool = False,
    apply: bool = False,
    agent: str = "",
    backup_dir: str = "",
    redact_patterns: str | None = None,
    progress: Tick = quiet_tick,
    state_dir: str | Path | None = None,
    since: float | None = None,
    limit: int | None = None,
) -> dict[str, Any]:
    """Plan (dry-run) or apply one import; returns the reconciliation report. ``progress``: the
    apply's messages done of the total, after each conversation (all commit in one transaction).
    ``state_dir``: an OpenClaw state directory, its agents' session directories read as JSONL;
    ``since`` (a timestamp) and ``limit`` narrow the batch of session files (lossless-claw's
    migration flags).

    An apply first plans like a dry run; when nothing is new it stops there, so a
    re-run neither writes nor takes another backup.
    """
    if state_dir is not None:
        jsonl_dirs = [*jsonl_dirs, *state_dir_sessions(state_dir)]
    if (source_db is None) == (not jsonl and not jsonl_dirs):
        raise ImportFailure("give either a source database or JSONL files/directories (not both)")
    if source_db is not None and (since is not None or limit is not None):
        raise ImportFailure("--since and --limit narrow JSONL session files, not a database")
    kind = "lossless-claw" if source_db is not None else "openclaw-jsonl"
    files, links = jsonl_scan(jsonl, jsonl_dirs) if source_db is None else ([], [])
    sources = [str(Path(source_db).resolve())] if source_db is not None else [str(f) for f in files]
    target = Path(target_db).expanduser().resolve()
    job = _Job(
        kind,
        Path(source_db).expanduser() if source_db is not None else None,
        files,
        target,
        import_id or default_import_id(kind, sources),
        include_summaries,
        agent,
        backup_dir,
        sources,
        links,
        redact_patterns,
        since,
        limit,
    )
    if apply and target.exists():
        plan = job.run(apply=False)
        if plan["would_import"] == 0 and plan["summaries"]["would_import"] == 0:
            return {
                **plan,
                "dry_run": False,
                "note": "nothing new to import: target untouched, no backup taken",
            }
    return job.run(apply, progress)


@dataclass(frozen=True)
class _Job:
    kind: str
    source_db: Path | None
    files: list[Path]
    target: Path
    import_id: str
    include_summaries: bool
    agent: str
    backup_dir: str
    sources: list[str]
    links: list[str] = field(default_factory=list)
    # Redaction is on (LCM_SENSITIVE_PATTERNS): applied to every message, field and summary written.
    redact_patterns: str | None = None
    since: float | None = None  # JSONL session files modified before this are left out
    limit: int | None = None  # at most this many session files, the oldest first

    def run(self, apply: bool, progress: Tick = quiet_tick) -> dict[str, Any]:
        report = Report(
            self.kind, self.sources, str(self.target), self.import_id, dry_run=not apply
        )
        report.skipped_symlinks = list(self.links)
        for link in self.links:
            report.warn(
                f"{link}: a symlink, skipped (only regular files in a JSONL directory are read)"
            )
        if self.source_db is None and self.include_summaries:
            report.warn("JSONL sessions carry no summary DAG: --include-summaries ignored")
        started = time.monotonic()
        # The whole source is checked and read before the target is created or touched.
        conversations = self._read_source(report)
        importer = Importer(report, self.kind, apply, progress=progress)
        importer.store, release = _target_store(self.target, report, apply, self.backup_dir)
        try:
            if importer.store is not None:
                importer.normalizer = import_normalizer(
                    self.target.parent / "lcm-payloads", importer.store, self.redact_patterns
                )
            importer.run(conversations)
        finally:
            if importer.store is not None and importer.store.readonly:
                importer.store.close()
            release()
        out = report.as_dict()
        # every scanned row lands in exactly one bucket
        out["balanced"] = report.scanned == (
            report.eligible
            + report.skipped_empty
            + report.skipped_unsupported
            + report.invalid_rows
        )
        out["seconds"] = round(time.monotonic() - started, 3)
        return out

    def _read_source(self, report: Report) -> list[SourceConversation]:
        if self.source_db is None:
            files = narrowed(self.files, self.since, self.limit, report)
            return [c for c in (read_jsonl(f, report, self.agent) for f in files) if c is not None]
        reader = LosslessClawReader(self.source_db, report)
        try:
            return reader.read_all(self.include_summaries)
        finally:
            reader.close()


def _nothing() -> None:
    """No private copy to remove."""


def _target_store(
    target: Path, report: Report, apply: bool, backup_dir: str
) -> tuple[Store | None, Any]:
    """Read-only view for a dry run; for apply, a verified backup first, then the writer."""
    if not target.exists():
        if not apply:
            return None, _nothing
        return open_store(target), _nothing
    if detect_source(target) != "hermes-lcm":
        raise ImportFailure(
            f"target {target} is not a hermes-lcm database; refusing to write to it"
        )
    if apply:
        if not os.access(target.parent, os.W_OK):
            raise ImportFailure(
                f"target directory {target.parent} is not writable; nothing imported"
            )
        try:
            report.backup_path = backup_before_import(target, backup_dir)
        except StoreError as exc:
            raise ImportFailure(str(exc)) from exc
        return open_store(target), _nothing
    # a dry run against a target in a read-only directory reads a private copy (SQLite cannot open
    # a WAL database read-only where it cannot create the -shm)
    copy = ReadableCopy(target, always_copy=True)
    try:
        return open_readonly(copy.path), copy.cleanup
    except StoreError as exc:
        copy.cleanup()
        raise ImportFailure(str(exc)) from exc

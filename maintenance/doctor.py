"""Backups, doctor scans and the narrow backup-first repairs behind ``/lcm`` and the ``lcm`` CLI.

The rule everywhere: read-only first, apply second, backup before any mutation.
Each ``*_scan`` only reads. Each ``*_apply`` re-plans, returns ``status: noop``
without writing anything (not even a backup) when there is nothing to do, else
takes a verified backup, makes the one narrow change the scan described, and
re-scans so the caller can see the result. Running an apply twice is therefore
a no-op the second time.

Nothing here deletes a message or a summary node that belongs to a live
conversation: rotate only moves a frontier, repair only rebuilds indexes and
recreates triggers, source only relabels, lifecycle only removes empty rows.
Only ``clean`` removes data, whole conversations matched by the operator's own
ignore patterns, and only with ``LCM_DOCTOR_CLEAN_APPLY_ENABLED=true``.

The read-only checks here are the shared diagnostics of ``/lcm doctor``,
``lcm doctor`` and any tool that wants them (:func:`doctor_report`).
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..base import private
from ..base.display import (
    file_sizes,
    iso,
)  # display.py: `lcm status` reads sizes without importing this module
from ..base.patterns import SessionPatterns
from ..base.peer_settings import is_ignored_note, is_settings_note
from ..base.progress import Tick
from ..base.redact import redact_value
from ..base.sensitive import Policy
from ..base.startup import local_home
from ..dag import Dag
from ..prompt.assemble import tail_start
from ..prompt.blocks import Item, group
from ..store import Store, database_tag, is_url, open_readonly, verify_backup
from . import fork_turns, payload_gc

ROTATE_SLOT = "rotate-latest"
PROBE_ROWS = 24
_WORD = re.compile(r"[^\W_]{3,}", re.UNICODE)
SAFE, INSPECT, BACKUP_FIRST = "safe-ignore", "inspect", "backup-first cleanup"
_RANK = {"ok": 0, "skip": 0, "warn": 1, "fail": 2}


class MaintenanceError(RuntimeError):
    """An operation refused for a stated reason (shown to the operator as is)."""


# -- backups -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Backup:
    path: str
    bytes: int
    seconds: float
    source: str


def backup_dir(db_path: str | os.PathLike[str], configured: str = "") -> Path:
    """Where backups go: ``LCM_BACKUP_DIR`` if set, else ``<db dir>/lcm-backups``."""
    if configured:
        return Path(configured).expanduser()
    if is_url(
        db_path
    ):  # a server's database: this machine's Hermes home (pg_dump is the backup there)
        return local_home() / "lcm-backups"
    return Path(db_path).expanduser().resolve().parent / "lcm-backups"


def backup(
    store: Store, directory: str | os.PathLike[str], label: str = "", progress: Tick | None = None
) -> Backup:
    """A new timestamped, verified snapshot of the whole database; ``progress(pages_done, pages_total)``
    while it copies (an exception from it, such as Ctrl-C, leaves no file behind)."""
    stamp = datetime.now(UTC).strftime(
        "%Y%m%dT%H%M%S.%fZ"
    )  # seconds, then their fraction: two backups a second
    suffix = f"-{label}" if label else ""
    if is_url(store.path):
        return snapshot(store, Path(directory) / f"{_stem(store)}-{stamp}{suffix}.dump")
    target = Path(directory) / f"{_stem(store)}-{stamp}{suffix}.sqlite3"
    return snapshot(store, target, progress)


def _stem(store: Store) -> str:
    """Backup names: the file's stem, or ``lcm-pg-<tag>`` for a server's database (one tag per URL)."""
    return f"lcm-pg-{database_tag(store.path)}" if is_url(store.path) else Path(store.path).stem


def backup_before_import(target: Path, configured: str = "") -> str:
    """A verified ``pre-import`` backup of the hermes-lcm database ``target``, read through a
    read-only view, before an importer writes to it; the backup's path."""
    view = open_readonly(target)
    try:
        return backup(view, backup_dir(target, configured), "pre-import").path
    finally:
        view.close()


def rotate_slot(store: Store, directory: str | os.PathLike[str]) -> Path:
    return (
        Path(directory)
        / f"{_stem(store)}-{ROTATE_SLOT}.{'dump' if is_url(store.path) else 'sqlite3'}"
    )


def snapshot(store: Store, target: Path, progress: Tick | None = None) -> Backup:
    """Write ``target`` atomically: copy to a temp file, verify, fsync, rename over.

    The copy uses SQLite's online backup API in one step (a consistent snapshot
    while writers continue); the file is switched to a rollback journal so it is
    one self-contained file that can be copied back as ``lcm.db``.
    """
    if is_url(store.path):
        return _dumped(store, target)
    started = time.monotonic()
    private.make_dir(target.parent)
    # An exclusive 0600 file with an unpredictable name: the copy is as private as the database,
    # and no planted file or symlink can take its place.
    fd, temp = private.temp_file(target.parent, f".{target.name}.")
    os.close(fd)
    try:
        store.backup_to(temp, progress) if progress is not None else store.backup_to(temp)
        _verify(temp)
        with open(temp, "rb") as handle:
            os.fsync(handle.fileno())
        os.replace(temp, target)
        _fsync_dir(target.parent)
    finally:
        temp.unlink(missing_ok=True)
    return Backup(
        str(target), target.stat().st_size, round(time.monotonic() - started, 3), store.path
    )


def _dumped(store: Store, target: Path) -> Backup:
    """A server's database before a writing command: a verified ``pg_dump`` (pg_backup.py); without
    pg_dump here the command refuses, naming the dump to take first (every apply backs up first)."""
    from . import pg_backup

    done = pg_backup.dump_to(store, target)
    if not done.path:
        raise MaintenanceError(
            f"pg_dump and pg_restore are not on PATH: nothing was changed. Back up first with "
            f"`{done.command}`, or install the PostgreSQL client tools"
        )
    return Backup(done.path, done.bytes, done.seconds, store.path)


def _verify(path: Path) -> None:
    problem = verify_backup(path)
    if problem is not None:
        raise MaintenanceError(f"backup verification failed for {path}: {problem}")


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def payload_stats(db_path: str, store: Store | None = None) -> dict[str, Any]:
    """Payload files beside the database, or (a PostgreSQL ``store``) its payload rows."""
    if store is not None and is_url(db_path):
        rows = getattr(store, "payload_list")()  # noqa: B009 - PgStore's method, not in the Store protocol
        return {
            "directory": "(the payloads table)",
            "files": len(rows),
            "bytes": sum(r[1] for r in rows),
        }
    directory = Path(db_path).parent / "lcm-payloads"
    if directory.is_symlink():  # the engine refuses to write or read through it; so does the count
        return {"directory": str(directory), "files": 0, "bytes": 0, "symlink": True}
    files = (
        [p for p in directory.glob("*.payload") if p.is_file() and not p.is_symlink()]
        if directory.is_dir()
        else []
    )
    return {
        "directory": str(directory),
        "files": len(files),
        "bytes": sum(p.stat().st_size for p in files),
    }


# -- doctor: read-only checks ---------------------------------------------------------------


@dataclass
class Check:
    name: str
    status: str
    detail: str
    action: str | None = None
    command: str | None = None
    data: dict[str, Any] = field(default_factory=dict)


def fts_scan(store: Store, deep: bool = True) -> dict[str, Any]:
    """Per FTS table: rows missing from / stale in the index, rows a search cannot find,
    and (``deep``, writable connection) FTS5's own integrity-check. Plus missing triggers."""
    tables: dict[str, Any] = {}
    for table in store.fts_tables():
        info: dict[str, Any] = store.fts_counts(table)
        info["unfindable_ids"] = _probe(store, table)
        info["integrity"] = _integrity(store, table) if deep else "skipped"
        info["needs_rebuild"] = bool(
            info["missing_ids"]
            or info["stale_ids"]
            or info["unfindable_ids"]
            or info["integrity"] not in (None, "skipped", "skipped (read-only connection)")
        )
        tables[table] = info
    return {"tables": tables, "missing_triggers": store.missing_triggers()}


def _probe(store: Store, table: str) -> list[int]:
    """Rows whose own first word the index cannot find (a damaged or drifted index)."""
    failed = []
    for rowid, content in store.fts_sample(table, PROBE_ROWS):
        match = _WORD.search(content)
        if match is None:
            continue
        if not store.fts_finds(table, rowid, '"' + match.group(0) + '"'):
            failed.append(rowid)
    return failed


def _integrity(store: Store, table: str) -> str | None:
    if store.readonly:
        return "skipped (read-only connection)"
    return store.fts_integrity(table)


def _fts_checks(scan: dict[str, Any]) -> list[Check]:
    checks = []
    for table, info in scan["tables"].items():
        if info["needs_rebuild"]:
            detail = (
                f"{len(info['missing_ids'])} rows missing from the index, {len(info['stale_ids'])} stale "
                f"entries, {len(info['unfindable_ids'])} sampled rows unfindable, integrity: "
                f"{info['integrity'] or 'ok'}"
            )
            checks.append(
                Check(
                    f"fts:{table}",
                    "fail",
                    detail,
                    BACKUP_FIRST,
                    "/lcm doctor repair apply",
                    {k: v for k, v in info.items() if k != "needs_rebuild"},
                )
            )
        else:
            checks.append(
                Check(
                    f"fts:{table}",
                    "ok",
                    f"{info['indexed_rows']} rows indexed; integrity: {info['integrity'] or 'ok'}",
                )
            )
    if scan["missing_triggers"]:
        checks.append(
            Check(
                "fts:triggers",
                "fail",
                f"missing triggers {scan['missing_triggers']}: new rows are not indexed",
                BACKUP_FIRST,
                "/lcm doctor repair apply",
            )
        )
    return checks


def doctor_report(
    store: Store,
    *,
    deep: bool = True,
    config: Any = None,
    config_problems: Iterable[str] = (),
    live_sessions: Iterable[str] = (),
    semantic: Any = None,
    host: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Every read-only check with a status, and guidance for each warning or failure. ``host``: whether
    Hermes' own Python loads the plugin and its config selects it (``hostinstall.install_report``)."""
    dag = Dag(store)
    facts = store.database_facts()
    checks = [_database_check(store, facts)]
    checks.extend(_fts_checks(fts_scan(store, deep)))
    checks.append(_lineage_check(dag))
    checks.append(_source_check(store))
    checks.append(tool_link_check(store))
    min_age = float(getattr(config, "empty_lifecycle_min_age_hours", 24.0))
    checks.append(_lifecycle_check(store, min_age, live_sessions))
    patterns = str(getattr(config, "ignore_session_patterns", "") or "")
    checks.append(_clean_check(store, patterns, live_sessions))
    checks.append(_harness_check(store))
    checks.append(_payload_check(store))
    problems = [p for p in config_problems if not is_settings_note(p)]
    checks.append(
        Check(
            "config",
            "warn" if problems else "ok",
            "; ".join(problems) or "no problems",
            INSPECT if problems else None,
            data={"problems": problems},
        )
    )
    checks.append(_settings_check([p for p in config_problems if is_settings_note(p)]))
    checks.append(_privacy_check(config))
    checks.append(_embeddings_check(config, store, semantic))
    checks.append(_rollups_check(config, store))
    checks.append(_events_check(store))
    checks.append(_threshold_check(store))
    if host is not None:
        checks.insert(0, Check("host", **host))
    database = {
        "path": store.path,
        **({} if is_url(store.path) else file_sizes(store.path)),
        **{k: v for k, v in facts.items() if k != "bytes_by_table"},
    }
    return checks_report(checks, database)


def checks_report(checks: list[Check], database: dict[str, Any]) -> dict[str, Any]:
    """The doctor's report of ``checks``: the worst status, each check, and guidance for each problem."""
    status = max((c.status for c in checks), key=lambda s: _RANK.get(s, 0))
    report: dict[str, Any] = redact_value(
        {  # events stored by older versions may quote a provider's error
            "status": status,
            "database": database,
            "checks": [
                {k: v for k, v in asdict(c).items() if v or k in ("name", "status")} for c in checks
            ],
            "guidance": [
                f"{c.name}: {c.action}"
                + (f" -> {c.command}" if c.command else "")
                + f" ({c.detail})"
                for c in checks
                if c.status in ("warn", "fail")
            ],
        }
    )
    return report


def _privacy_check(config: Any) -> Check:
    """Whether secrets are redacted before storage, and by which kinds (never a secret)."""
    if not getattr(config, "sensitive_patterns_enabled", False):
        return Check(
            "privacy",
            "ok",
            "redaction off (LCM_SENSITIVE_PATTERNS_ENABLED): messages are stored as sent",
            data={"redaction": False},
        )
    policy = Policy.parse(str(config.sensitive_patterns))
    return Check(
        "privacy",
        "warn" if policy.problems else "ok",
        f"redaction on: {', '.join(policy.names)}"
        + (f"; {'; '.join(policy.problems)}" if policy.problems else ""),
        "fix LCM_SENSITIVE_PATTERNS" if policy.problems else None,
        data={"redaction": True, "kinds": list(policy.names), "problems": list(policy.problems)},
    )


def _embeddings_check(config: Any, store: Store, semantic: Any) -> Check:
    """Semantic recall: off is fine; on, the provider must be buildable and answer (semantic.py)."""
    if not getattr(config, "embeddings_enabled", False):
        return Check("embeddings", "ok", "off (LCM_EMBEDDINGS_ENABLED)", data={"enabled": False})
    if semantic is None:  # the CLI: a view of its own over its read-only store
        from ..embed import (
            Semantic,
        )  # lazily: numpy and httpx would slow `lcm status`, which imports this module

        semantic = Semantic(config, store, os.environ)
    status, detail, data = semantic.doctor()
    action = (
        "fix the LCM_EMBEDDING_* settings or the provider; search runs on full text meanwhile"
        if status != "ok"
        else None
    )
    return Check(
        "embeddings", status, detail, action, "lcm embed" if status != "ok" else None, data=data
    )


def _rollups_check(config: Any, store: Store) -> Check:
    """Temporal rollups: off is fine; on, failed builds and periods stale for over an hour warn."""
    if not getattr(config, "temporal_rollups_enabled", False):
        return Check(
            "temporal_rollups", "ok", "off (LCM_TEMPORAL_ROLLUPS_ENABLED)", data={"enabled": False}
        )
    stats = store.rollup_stats()
    counts = stats.get("counts") or {}
    failed = sum(c.get("failed", 0) for c in counts.values())
    oldest = stats.get("oldest_stale_at")
    late = oldest is not None and time.time() - oldest > 3600
    detail = (
        f"{failed} failed, counts {counts}"
        + (f"; last failure {stats['last_failure']}" if failed else "")
        + ("; stale for over an hour" if late else "")
    )
    bad = bool(failed) or late
    return Check(
        "temporal_rollups",
        "warn" if bad else "ok",
        detail,
        "check the summary route; failed periods are retried" if bad else None,
        "lcm rollups build" if bad else None,
        data={"enabled": True, **stats},
    )


def _settings_check(notes: list[str]) -> Check:
    """Settings of LCM-X or lossless-claw and unknown keys: ignored ones warn, aliases read are only listed."""
    ignored = [n for n in notes if is_ignored_note(n)]
    if not notes:
        return Check("settings", "ok", "every LCM_* variable and lcm: key is a hermes-lcm setting")
    return Check(
        "settings",
        "warn" if ignored else "ok",
        "; ".join(notes),
        "rename or remove them (docs/operator-guide.md, Migration)" if ignored else None,
        data={"notes": notes},
    )


def _database_check(store: Store, facts: dict[str, Any]) -> Check:
    ok = facts["quick_check"] == ["ok"]
    detail = (
        f"schema {facts['schema_version']}, journal {facts['journal_mode']}, quick_check "
        f"{'ok' if ok else facts['quick_check'][:3]}"
    )
    if not ok:
        return Check(
            "database",
            "fail",
            detail,
            INSPECT,
            "restore the newest good backup (docs/operator-guide.md)",
        )
    if str(facts["journal_mode"]).lower() not in ("wal", "postgresql") and not store.readonly:
        return Check("database", "warn", detail + " (expected wal)", INSPECT)
    return Check("database", "ok", detail)


def _lineage_check(dag: Dag) -> Check:
    problems = dag.lineage_problems()
    if problems:
        return Check(
            "lineage",
            "fail",
            f"broken DAG invariants: {sorted(problems)}",
            INSPECT,
            "lcm summaries show <node> ; restore from backup if rows were edited by hand",
            problems,
        )
    return Check(
        "lineage", "ok", "every node reaches raw messages; context and frontiers consistent"
    )


def _source_check(store: Store) -> Check:
    total, ids = store.blank_source_ids(10)
    if total:
        return Check(
            "source",
            "warn",
            f"{total} messages with a blank source (legacy or hand-written rows)",
            BACKUP_FIRST,
            "/lcm doctor source apply",
            {"count": total, "sample_ids": ids},
        )
    return Check("source", "ok", "no blank sources")


def tool_link_check(store: Store) -> Check:
    """Tool results keep their link: a tool_call_id naming an earlier assistant call in the same conversation.

    A result without one (an importer that dropped it) or pointing at no call cannot be paired when the
    history is replayed to a model. A warning with counts, not a failure: a genuinely orphaned row
    (its call was never stored) is history, not damage."""
    counts = store.tool_link_counts()
    total, missing, orphans = counts["tool_results"], counts["without_call_id"], counts["orphaned"]
    if missing or orphans:
        return Check(
            "tool_links",
            "warn",
            f"{missing} of {total} tool results have no tool_call_id, {orphans} name "
            "a call no earlier assistant message made (unpaired when replayed)",
            INSPECT,
            data=counts,
        )
    return Check(
        "tool_links",
        "ok",
        f"all {total} tool results link to an earlier assistant call",
        data=counts,
    )


def _lifecycle_check(store: Store, min_age_hours: float, live: Iterable[str]) -> Check:
    scan = lifecycle_scan(store, min_age_hours, live)
    if scan["count"]:
        return Check(
            "lifecycle",
            "warn",
            f"{scan['count']} empty session rows older than {min_age_hours} h",
            SAFE,
            "/lcm doctor clean lifecycle apply (optional)",
            {"count": scan["count"]},
        )
    return Check("lifecycle", "ok", "no empty lifecycle rows past the age limit")


def _clean_check(store: Store, patterns: str, live: Iterable[str]) -> Check:
    if not patterns:
        return Check(
            "clean", "skip", "LCM_IGNORE_SESSION_PATTERNS is empty: no junk-session candidates"
        )
    scan = clean_scan(store, patterns, live)
    if scan["conversations"]:
        return Check(
            "clean",
            "warn",
            f"{len(scan['conversations'])} conversations stored before their sessions "
            "matched LCM_IGNORE_SESSION_PATTERNS",
            BACKUP_FIRST,
            "/lcm doctor clean (preview), then apply",
            {"conversation_ids": [c["conversation_id"] for c in scan["conversations"]][:20]},
        )
    return Check("clean", "ok", "no stored conversation matches the ignore patterns")


def _payload_check(store: Store) -> Check:
    stats = payload_stats(store.path, store)
    if stats.get("symlink"):
        return Check(
            "payloads",
            "fail",
            f"{stats['directory']} is a symlink: payloads stay inline, none is read through it",
            INSPECT,
            "replace the link with a directory of your own (mode 0700)",
            data=stats,
        )
    refs = payload_gc.doctor_data(store)  # counts and refs only, never a payload's content
    detail = f"{stats['files']} payload files, {stats['bytes']} bytes"
    if refs["missing_files"]:
        return Check(
            "payloads",
            "warn",
            f"{detail}; {refs['missing_files']} referenced payload files are missing "
            "(lcm_expand cannot page them)",
            INSPECT,
            "restore lcm-payloads/ from a copy of it",
            data={**stats, **refs},
        )
    if refs["orphans"]:
        return Check(
            "payloads",
            "warn",
            f"{detail}; {refs['orphans']} files ({refs['orphan_bytes']} bytes) no row references",
            SAFE,
            "lcm gc-payloads (preview), then --apply",
            data={**stats, **refs},
        )
    return Check(
        "payloads",
        "ok",
        f"{detail}; every file referenced, every reference has its file",
        data={**stats, **refs},
    )


def _events_check(store: Store) -> Check:
    errors = [
        (iso(at), kind, detail)
        for at, level, kind, detail in store.recent_events(50)
        if level == "error"
    ]
    if errors:
        return Check(
            "events",
            "warn",
            f"{len(errors)} recent engine errors, newest: {errors[0][2][:200]}",
            INSPECT,
            data={"errors": errors[:10]},
        )
    return Check("events", "ok", "no recent engine errors")


def _threshold_check(store: Store) -> Check:
    """The engine's last verdict on its threshold against the host's measured overhead (an event)."""
    newest = next(
        (
            (at, level, detail)
            for at, level, kind, detail in store.recent_events(200)
            if kind == "threshold"
        ),
        None,
    )
    if newest is None:
        return Check(
            "threshold",
            "skip",
            "not measured yet: the engine checks it at the first request it sees",
        )
    at, level, detail = newest
    if level == "warning":
        return Check(
            "threshold",
            "warn",
            detail,
            "raise the threshold as said, then restart Hermes",
            data={"at": iso(at)},
        )
    return Check("threshold", "ok", f"{detail} (at {iso(at)})")


# -- payload GC -----------------------------------------------------------------------------


def gc_payloads_scan(
    store: Store, grace_seconds: float = payload_gc.GRACE_SECONDS
) -> dict[str, Any]:
    """Which payload files no message or summary references (read-only)."""
    plan = payload_gc.scan(store, grace_seconds)
    plan["orphan_refs"] = plan.pop("removable_refs")[:100]
    return plan


def gc_payloads_apply(
    store: Store,
    directory: str | os.PathLike[str],
    grace_seconds: float = payload_gc.GRACE_SECONDS,
    progress: Tick | None = None,
) -> dict[str, Any]:
    """Backup first (``progress`` follows its pages), then remove the orphans the scan found, re-checked
    under the write lock."""
    plan = payload_gc.scan(store, grace_seconds)
    refs = plan.pop("removable_refs")
    if plan["status"] == "noop":
        return plan
    saved = backup(store, directory, "pre-gc-payloads", progress)
    done = payload_gc.remove(store, refs, grace_seconds)
    return {
        **plan,
        "status": "applied",
        "backup": asdict(saved),
        "removed": len(done["removed"]),
        "bytes_freed": done["bytes_freed"],
        "kept": done["kept"],
        "removed_refs": done["removed"][:100],
    }


# -- doctor repair ------------------------------------------------------------------------


def repair_scan(store: Store) -> dict[str, Any]:
    scan = fts_scan(store, deep=True)
    rebuild = [t for t, info in scan["tables"].items() if info["needs_rebuild"]]
    actions = [f"recreate trigger {name}" for name in scan["missing_triggers"]]
    actions += [f"rebuild {table} from its content table" for table in rebuild]
    return {
        "status": "ready" if actions else "noop",
        "actions": actions,
        "rebuild": rebuild,
        "missing_triggers": scan["missing_triggers"],
        "fts": scan["tables"],
    }


def repair_apply(store: Store, directory: str | os.PathLike[str]) -> dict[str, Any]:
    plan = repair_scan(store)
    if plan["status"] == "noop":
        return {**plan, "applied": []}
    saved = backup(store, directory, "pre-repair")
    applied = [f"recreated trigger {n}" for n in store.restore_triggers(plan["missing_triggers"])]
    for table in plan["rebuild"]:
        store.fts_rebuild(table)
        applied.append(f"rebuilt {table}")
    after = repair_scan(store)
    return {
        "status": "applied",
        "backup": asdict(saved),
        "applied": applied,
        "after": after["status"],
        "remaining": after["actions"],
    }


# -- doctor source ------------------------------------------------------------------------


def source_scan(store: Store) -> dict[str, Any]:
    total, ids = store.blank_source_ids(20)
    return {
        "status": "ready" if total else "noop",
        "blank_source_rows": total,
        "sample_ids": ids,
        "action": "set source='unknown' on these rows" if total else None,
    }


def source_apply(store: Store, directory: str | os.PathLike[str]) -> dict[str, Any]:
    plan = source_scan(store)
    if plan["status"] == "noop":
        return plan
    saved = backup(store, directory, "pre-source")
    updated = store.normalize_blank_sources()
    return {
        "status": "applied",
        "backup": asdict(saved),
        "updated": updated,
        "remaining": store.blank_source_ids(1)[0],
    }


# -- doctor clean lifecycle --------------------------------------------------------------------


def lifecycle_scan(
    store: Store, min_age_hours: float, live_sessions: Iterable[str] = ()
) -> dict[str, Any]:
    """Session rows that never stored a message or a summary, older than the age limit,
    excluding sessions live in this process."""
    live = set(live_sessions)
    cutoff = time.time() - min_age_hours * 3600
    rows = [r for r in store.empty_sessions(cutoff) if r["id"] not in live]
    return {
        "status": "ready" if rows else "noop",
        "count": len(rows),
        "min_age_hours": min_age_hours,
        "sessions": [{**r, "started_at": iso(r["started_at"])} for r in rows[:50]],
        "session_ids": [r["id"] for r in rows],
    }


def lifecycle_apply(
    store: Store,
    directory: str | os.PathLike[str],
    min_age_hours: float,
    live_sessions: Iterable[str] = (),
    *,
    allowed: bool,
) -> dict[str, Any]:
    plan = lifecycle_scan(store, min_age_hours, live_sessions)
    if plan["status"] == "noop":
        return _public(plan)
    if not allowed:
        raise MaintenanceError(
            "clean apply is disabled: set LCM_DOCTOR_CLEAN_APPLY_ENABLED=true in a trusted "
            "operator context, then run it again"
        )
    saved = backup(store, directory, "pre-lifecycle")
    deleted = store.delete_empty_sessions(plan["session_ids"])
    return {"status": "applied", "backup": asdict(saved), "deleted": deleted}


def _public(plan: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in plan.items() if k != "session_ids"}


# -- doctor clean (junk sessions) ---------------------------------------------------------------


def clean_scan(store: Store, patterns: str, live_sessions: Iterable[str] = ()) -> dict[str, Any]:
    """Conversations every one of whose sessions matches LCM_IGNORE_SESSION_PATTERNS.

    Such rows were stored before the operator excluded those sessions; ignored
    sessions never write now. A conversation with any live or non-matching
    session is never a candidate.
    """
    compiled = SessionPatterns.parse(patterns)
    live = set(live_sessions)
    by_conversation: dict[int, list[tuple[str, str, str | None]]] = {}
    for session_id, conversation_id, platform in store.all_sessions():
        by_conversation.setdefault(conversation_id, []).append(
            (
                session_id,
                platform,
                compiled.match(session_id, platform) if compiled.patterns else None,
            )
        )
    candidates = []
    for conversation_id, sessions in sorted(by_conversation.items()):
        if all(matched for _, _, matched in sessions) and not any(
            s in live for s, _, _ in sessions
        ):
            candidates.append(
                {
                    "conversation_id": conversation_id,
                    "sessions": [{"id": s, "platform": p, "pattern": m} for s, p, m in sessions],
                    "messages": store.message_count(conversation_id),
                }
            )
    return {
        "status": "ready" if candidates else "noop",
        "patterns": list(compiled.patterns),
        "conversations": candidates,
    }


def clean_apply(
    store: Store,
    directory: str | os.PathLike[str],
    patterns: str,
    live_sessions: Iterable[str] = (),
    *,
    allowed: bool,
) -> dict[str, Any]:
    plan = clean_scan(store, patterns, live_sessions)
    if plan["status"] == "noop":
        return plan
    if not allowed:
        raise MaintenanceError(
            "clean apply is disabled: set LCM_DOCTOR_CLEAN_APPLY_ENABLED=true in a trusted "
            "operator context, then run it again"
        )
    saved = backup(store, directory, "pre-clean")
    deleted = store.delete_conversations([c["conversation_id"] for c in plan["conversations"]])
    return {"status": "applied", "backup": asdict(saved), "deleted": deleted}


# -- doctor clean harness (the host's review forks stored as the user: fork_turns.py) -------------


def harness_apply(
    store: Store,
    directory: str | os.PathLike[str],
    *,
    allowed: bool,
    rebuild: fork_turns.Rebuild | None = None,
) -> dict[str, Any]:
    plan = fork_turns.scan(store)
    if plan["status"] == "noop":
        return fork_turns.public(plan)
    if not allowed:
        raise MaintenanceError(
            "clean apply is disabled: set LCM_DOCTOR_CLEAN_APPLY_ENABLED=true in a trusted "
            "operator context, then run it again"
        )
    return fork_turns.apply(
        store, plan, lambda: asdict(backup(store, directory, "pre-harness")), rebuild
    )


def _harness_check(store: Store) -> Check:
    scan = fork_turns.scan(store)
    if scan["harness_turns"]:
        return Check(
            "harness",
            "warn",
            f"{scan['harness_turns']} turns of the host's review forks are stored as the "
            f"user's ({scan['messages']} messages, {scan['summaries_rebuilt']} summaries built from them)",
            BACKUP_FIRST,
            "/lcm doctor clean harness (preview), then apply",
            {"conversations": scan["conversations"][:20]},
        )
    return Check("harness", "ok", "no turn of the host's review forks is stored")


# -- doctor retention ----------------------------------------------------------------------------

AGE_BUCKETS_DAYS = (7, 30, 90, 365)


def retention_report(store: Store, now: float | None = None, top: int = 20) -> dict[str, Any]:
    """What the database holds, by conversation and age, and how to bound it (read-only)."""
    now = time.time() if now is None else now
    cutoffs = [now - days * 86400 for days in AGE_BUCKETS_DAYS]
    rows = store.retention_rows(cutoffs)
    totals = {
        "conversations": len(rows),
        "messages": sum(r["messages"] for r in rows),
        "message_bytes": sum(r["message_bytes"] for r in rows),
        "summaries": sum(r["summaries"] for r in rows),
        "summary_bytes": sum(r["summary_bytes"] for r in rows),
    }
    older = {
        f"older_than_{d}d": sum(r["older_than"][i] for r in rows)
        for i, d in enumerate(AGE_BUCKETS_DAYS)
    }
    idle = [r for r in rows if r["last_at"] is not None and r["last_at"] < cutoffs[2]]
    largest = sorted(rows, key=lambda r: r["message_bytes"] + r["summary_bytes"], reverse=True)[
        :top
    ]
    return {
        "database": {"path": store.path, **file_sizes(store.path)},
        "bytes_by_table": store.database_facts().get("bytes_by_table"),
        "payloads": payload_stats(store.path, store),
        "totals": totals,
        "messages_by_age": older,
        "idle_conversations_90d": {
            "count": len(idle),
            "message_bytes": sum(r["message_bytes"] for r in idle),
        },
        "largest_conversations": [_retention_row(r) for r in largest],
        "how_to_bound": _bounding_guidance(totals, idle),
    }


def _retention_row(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "conversation_id": row["conversation_id"],
        "key": row["key"],
        "messages": row["messages"],
        "message_bytes": row["message_bytes"],
        "summaries": row["summaries"],
        "summary_bytes": row["summary_bytes"],
        "first_at": iso(row["first_at"]),
        "last_at": iso(row["last_at"]),
        **{f"older_than_{d}d": row["older_than"][i] for i, d in enumerate(AGE_BUCKETS_DAYS)},
    }


def _bounding_guidance(totals: dict[str, Any], idle: Sequence[dict[str, Any]]) -> list[str]:
    tips = [
        "Keep noisy lanes out: add them to LCM_IGNORE_SESSION_PATTERNS (cron:*, ...); rows already stored "
        "become /lcm doctor clean candidates (preview first; apply is backup-first and needs "
        "LCM_DOCTOR_CLEAN_APPLY_ENABLED=true).",
        "Archive before removing: `lcm export --conversation ID --as jsonl` keeps an exact copy of a "
        "conversation outside the database.",
        "Empty lifecycle rows: /lcm doctor clean lifecycle (preview), then apply.",
        "Start a fresh database for a new era: `lcm backup`, stop Hermes, move lcm.db aside (or set "
        "LCM_DATABASE_PATH), restart; the old file stays readable with `lcm --db OLD ...`.",
        "Space freed by deletions is reused by SQLite; to shrink the file itself, stop Hermes and run "
        "`sqlite3 lcm.db 'VACUUM'` after taking a backup.",
    ]
    if idle:
        tips.insert(
            0,
            f"{len(idle)} conversations have been idle for 90+ days; export them, then consider "
            "excluding their sessions via patterns and cleaning them.",
        )
    return tips


# -- rotate ---------------------------------------------------------------------------------------


def rotate_scan(
    store: Store, conversation_id: int, tail_count: int, tail_max_tokens: int = 0
) -> dict[str, Any]:
    """Where a rotate would move the frontier: past every raw message before the fresh tail."""
    state = store.conversation(conversation_id)
    raw = store.messages_after(conversation_id, state.frontier_seq)
    groups = group([Item.stored(m) for m in raw])
    start = tail_start(groups, tail_count, tail_max_tokens if tail_max_tokens > 0 else 1 << 62)
    before = [item for g in groups[:start] for item in g]
    seq_of = {m.id: m.seq for m in raw}
    target = state.frontier_seq
    if start < len(groups) and groups[start][0].store_id in seq_of:
        target = max(state.frontier_seq, seq_of[groups[start][0].store_id or 0] - 1)
    return {
        "status": "ready" if target > state.frontier_seq else "noop",
        "conversation_id": conversation_id,
        "frontier_seq": state.frontier_seq,
        "last_seq": state.last_seq,
        "target_frontier_seq": target,
        "raw_messages_leaving_prompt": sum(1 for m in raw if m.seq <= target),
        "replayable_before_tail": len(before),
        "tail_messages": sum(len(g) for g in groups[start:]),
        "note": "raw rows stay stored and recoverable (lcm_load_session, lcm_expand); no summary is made",
    }


def rotate_apply(
    store: Store,
    conversation_id: int,
    mode: str,
    directory: str | os.PathLike[str],
    tail_count: int,
    tail_max_tokens: int = 0,
) -> dict[str, Any]:
    if mode != "normal":
        raise MaintenanceError(f"rotate refuses a {mode} session: it stores nothing of its own")
    plan = rotate_scan(store, conversation_id, tail_count, tail_max_tokens)
    if plan["status"] == "noop":
        return {**plan, "backup": None}
    saved = snapshot(store, rotate_slot(store, directory))
    moved = store.advance_frontier(conversation_id, plan["target_frontier_seq"])
    state = store.conversation(conversation_id)
    return {
        **plan,
        "status": "applied" if moved else "noop",
        "frontier_seq_after": state.frontier_seq,
        "backup": asdict(saved),
        "rotated_at": iso(time.time()),
    }


def last_rotate(store: Store, directory: str | os.PathLike[str]) -> dict[str, Any]:
    slot = rotate_slot(store, directory)
    return {
        "last_rotate_at": iso(slot.stat().st_mtime) if slot.exists() else None,
        "rotate_backup": str(slot) if slot.exists() else None,
    }

"""The doctor's read-only checks of what the database holds: integrity, indexes, lineage, rows
a narrow repair or a cleanup could fix, payload files, and the engine's own recorded events.

Each check returns one :class:`Check` with a status and, for a warning or a failure, the action
and the command that addresses it (the doctor's guidance). Nothing here writes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..base.display import iso
from ..dag import Dag
from ..store import Store
from . import fork_turns, payload_gc, summary_health
from .cleanup import clean_scan, lifecycle_scan
from .retention import payload_stats

PROBE_ROWS = 24
_WORD = re.compile(r"[^\W_]{3,}", re.UNICODE)
# What an operator should do about a warning: nothing, look closer, or run the backup-first fix.
SAFE, INSPECT, BACKUP_FIRST = "safe-ignore", "inspect", "backup-first cleanup"


@dataclass(frozen=True)
class Check:
    """One check's verdict; ``action`` and ``command`` say what to do about a warning or failure."""

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


def fts_checks(scan: dict[str, Any]) -> list[Check]:
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


def database_check(store: Store, facts: dict[str, Any]) -> Check:
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
            "restore the newest good backup (docs/guide/operate.md, Backups and restore)",
        )
    if str(facts["journal_mode"]).lower() not in ("wal", "postgresql") and not store.readonly:
        return Check("database", "warn", detail + " (expected wal)", INSPECT)
    return Check("database", "ok", detail)


def lineage_check(dag: Dag) -> Check:
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


def source_check(store: Store) -> Check:
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


def lifecycle_check(store: Store, min_age_hours: float, live: Iterable[str]) -> Check:
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


def clean_check(store: Store, patterns: str, live: Iterable[str]) -> Check:
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


def payload_check(store: Store) -> Check:
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


def events_check(store: Store) -> Check:
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


# Failed preparations in a day that make the doctor warn: one is a provider's bad minute.
PREPARE_FAILURES_WARN = 3


def preparer_check(store: Store, now: float) -> Check:
    """The preparer (deferred compaction) records each run its summary calls stopped; several in a
    day mean its compactions are made inline again, inside the user's turn."""
    failures = [
        (at, detail)
        for at, level, kind, detail in store.recent_events(200)
        if kind == "prepare" and at >= now - 86_400
    ]
    if len(failures) >= PREPARE_FAILURES_WARN:
        return Check(
            "preparer",
            "warn",
            f"{len(failures)} preparations stopped on a failed summary call in the last day, "
            f"newest: {failures[0][1][:200]}; compaction ran inside the turn instead",
            "check the summary route (LCM_SUMMARY_MODEL, its key and endpoint) in status",
            data={"failures": [(iso(a), d[:200]) for a, d in failures[:10]]},
        )
    if failures:
        return Check("preparer", "ok", f"{len(failures)} failed preparation(s) in the last day")
    return Check("preparer", "ok", "no failed preparation in the last day")


def threshold_check(store: Store) -> Check:
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


# The newest summaries doctor checks (about 0.8 s); ``lcm doctor repair summaries`` checks all.
DOCTOR_SUMMARIES = 20_000


def summaries_check(store: Store) -> Check:
    """Stored summaries that are not summaries (empty, an error text, a refusal, ...)."""
    scan = summary_health.scan(store, newest=DOCTOR_SUMMARIES)
    which = (
        f"the newest {scan['checked']:,} summaries (lcm doctor repair summaries checks all)"
        if scan["only_newest"]
        else f"{scan['checked']} summaries"
    )
    if scan["broken"]:
        reasons = sorted({s["reason"].split(" (")[0] for s in scan["summaries"]})
        return Check(
            "summaries",
            "warn",
            f"{scan['broken']} of {which} are broken ({'; '.join(reasons)})",
            BACKUP_FIRST,
            "lcm doctor repair summaries (preview), then --apply; or /lcm doctor repair "
            "summaries apply",
            {"conversations": scan["conversations"][:20], "summaries": scan["summaries"][:10]},
        )
    return Check("summaries", "ok", f"{which} checked, none broken")


def harness_check(store: Store) -> Check:
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

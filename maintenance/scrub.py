"""``lcm redact``: secrets in history stored before redaction was on, counted, then rewritten.

Redaction (sensitive.py) is forward-only: it runs on what is ingested from the moment it is on.
This rewrites what was stored before, in the form live ingest writes now, so the two cannot be
told apart:

* A message is rebuilt as the host gave it (``StoredMessage.to_host``) and passed through the
  ingest pipeline with the redaction step (``ingest.Normalizer``, keyed by the store's own
  ``redaction`` secret): content, parts, tool calls and the host's other fields (``extra``, as
  parsed JSON values) come out as live ingest would store them, and so does the fingerprint, so a
  host that re-sends the raw message is recognised (alignment) and nothing is stored twice.
* A large output kept in a payload file (outputs.py stub) whose text holds a secret gets a new
  file with the redacted text (its keyed ref), the row's stub names the new ref and its grant
  moves to it, and the old file is removed once the rewrite is committed and no row holds a
  grant of it (a row that only quotes the stub keeps no secret at rest).
  Only a stub the row was granted is rewritten so: a stub a row merely quotes is text.
* Summaries and events are redacted as text (summaries_fts is deleted and re-inserted: it has no
  UPDATE trigger; messages_fts follows its trigger).

A dry run (the default) writes nothing and shows counts and store ids, never a secret. ``apply``
takes a verified backup first (it still holds the secrets: the result says so), rewrites in
batches of one write transaction each (a batch is all old or all new, whatever fails; a rerun
finishes: redaction is a fixed point, so rewritten rows are not changed again), with SQLite's
``secure_delete`` on, then merges the FTS indexes, VACUUMs and truncates the WAL, so the old bytes
survive in no database file. A manifest (JSON, 0600; table, id, kinds and counts) is written next
to the backup.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..base import payloads, private
from ..base.outputs import parse_stub, stub
from ..base.payloads import KIND_OUTPUT, OUTPUT_MIME, PayloadGuard
from ..base.records import PayloadRef, StoredMessage
from ..base.sensitive import PREFIX, Policy, Redactor
from ..ingest.steps import Normalizer, RedactStep
from ..store import Store, StoreError, StoreFault, blobs_of, directory_of, ref_key
from . import backups, checks, payload_rekey

BATCH_ROWS = 200
# After each batch the write lock is left free for about as long as the batch held it (at most
# this long): a live engine's ingest waiting on it (SQLite's busy handler sleeps up to 100 ms
# between tries) gets its turn instead of waiting out the whole rewrite.
MAX_PAUSE_S = 0.1
SHOWN_IDS = 50  # store ids listed per table in a dry run (all of them are in the manifest)
_MARK = re.compile(re.escape(PREFIX) + r"([A-Za-z][A-Za-z0-9_]*)")
TABLES = ("messages", "summaries", "events")

RowHook = Callable[[str, int], None]


def marks(texts: Iterable[str | None]) -> Counter[str]:
    """Placeholders per kind in these texts (what a rewrite added is new minus old)."""
    found: Counter[str] = Counter()
    for text in texts:
        if text:
            found.update(_MARK.findall(text))
    return found


def _added(old: Iterable[str | None], new: Iterable[str | None]) -> Counter[str]:
    return marks(new) - marks(old)


@dataclass(frozen=True)
class PayloadChange:
    old_ref: str
    new_ref: str
    text: str
    kinds: Counter[str]


@dataclass(frozen=True)
class RowChange:
    """What one row becomes: its new columns, the secrets per kind, a payload file to replace."""

    table: str
    row_id: int
    kinds: Counter[str]
    fields: dict[str, Any] = field(default_factory=dict)
    text: str = ""
    payload: PayloadChange | None = None
    grants: tuple[PayloadRef, ...] = ()  # payloads the rewrite's ingest kept for the row

    def entry(self) -> dict[str, Any]:
        item: dict[str, Any] = {"table": self.table, "id": self.row_id, "kinds": dict(self.kinds)}
        if self.payload is not None:
            item["payload"] = {
                "old_ref": self.payload.old_ref,
                "new_ref": self.payload.new_ref,
                "kinds": dict(self.payload.kinds),
            }
        return item


class Rewriter:
    """Computes each stored row's redacted form (no writes: apply writes what it returns)."""

    def __init__(self, store: Store, redactor: Redactor, preview_chars: int) -> None:
        self.store = store
        self.redactor = redactor
        self.preview_chars = preview_chars
        self.guard = PayloadGuard(
            directory_of(store.path), blobs=blobs_of(store), key=ref_key(store)
        )
        self.normalizer = Normalizer(self.guard, steps=[RedactStep(redactor)], redactor=redactor)

    def message(self, m: StoredMessage) -> RowChange | None:
        host = m.to_host()
        payload = self._payload(m) if m.parts is None else None
        if payload is not None:
            host["content"] = stub(payload.text, payload.new_ref, self.preview_chars)
        record = self.normalizer.normalize(host)
        extra = record.extra
        if m.extra and not m.extra_fields():  # not a JSON object: kept, redacted as text
            extra = self.redactor.redact(m.extra)
        new = {
            "content": record.content,
            "parts": record.parts,
            "tool_calls": record.tool_calls,
            "extra": extra,
            "tokens": record.tokens,
            "fingerprint": record.fingerprint,
        }
        kinds = _added(
            (m.parts if m.parts is not None else m.content, m.tool_calls, m.extra),
            (
                record.parts if record.parts is not None else record.content,
                record.tool_calls,
                extra,
            ),
        )
        if not kinds and payload is None:
            return None
        return RowChange(
            "messages", m.id, kinds, fields=new, payload=payload, grants=record.payload_refs
        )

    def _payload(self, m: StoredMessage) -> PayloadChange | None:
        info = parse_stub(m.content)
        if info is None or info.ref not in self.store.granted_refs([m.id]).get(m.id, set()):
            return None
        try:
            text, _total = self.guard.read(info.ref, 0, 1 << 62)
        except (OSError, ValueError):
            return None  # the file is gone or unsafe: the stub is redacted as text
        redacted = self.redactor.redact(text)
        if redacted == text:
            return None
        return PayloadChange(
            info.ref, self.guard.ref_for(redacted), redacted, _added((text,), (redacted,))
        )

    def text(self, table: str, row_id: int, text: str) -> RowChange | None:
        redacted = self.redactor.redact(text)
        if redacted == text:
            return None
        return RowChange(
            table, row_id, _added((text,), (redacted,)) or Counter({"other": 1}), text=redacted
        )

    def batch(self, table: str, after_id: int, limit: int) -> tuple[list[RowChange], int | None]:
        """The changes of the ``limit`` rows after ``after_id``, and the last id read (None: no rows)."""
        changes: list[RowChange] = []
        if table == "messages":
            rows = self.store.message_rows_after(after_id, limit)
            self.normalizer.forget()
            for m, _fingerprint in rows:
                change = self.message(m)
                if change is not None:
                    changes.append(change)
            return changes, (rows[-1][0].id if rows else None)
        texts = self.store.text_rows_after(table, after_id, limit)
        for row_id, text in texts:
            change = self.text(table, row_id, text)
            if change is not None:
                changes.append(change)
        return changes, (texts[-1][0] if texts else None)


def redactor_of(store: Store, patterns: str) -> Redactor:
    """The redactor live ingest uses on this store (same policy text, the store's own key)."""
    policy = Policy.parse(patterns)
    try:  # a read-only view cannot create the key; a dry run's counts need none
        key = os.urandom(32) if store.readonly else store.secret("redaction")
    except (StoreError, StoreFault):
        key = os.urandom(32)
    return Redactor(policy, key)


def _summary(changes: Iterable[RowChange]) -> dict[str, Any]:
    tables: dict[str, Any] = {t: {"rows": 0, "secrets": Counter(), "store_ids": []} for t in TABLES}
    files: dict[str, Any] = {"files": 0, "secrets": Counter()}
    for change in changes:
        info = tables[change.table]
        info["rows"] += 1
        info["secrets"].update(change.kinds)
        if len(info["store_ids"]) < SHOWN_IDS:
            info["store_ids"].append(change.row_id)
        if change.payload is not None:
            files["files"] += 1
            files["secrets"].update(change.payload.kinds)
    for info in (*tables.values(), files):
        info["secrets"] = dict(sorted(info["secrets"].items()))
    return {
        "tables": tables,
        "payload_files": files,
        "rows": sum(t["rows"] for t in tables.values()),
    }


def scan(
    store: Store, patterns: str, preview_chars: int, batch_rows: int = BATCH_ROWS
) -> dict[str, Any]:
    """What ``apply`` would change: rows and secrets per table and kind, store ids; writes nothing."""
    redactor = redactor_of(store, patterns)
    rewriter = Rewriter(store, redactor, preview_chars)
    changes: list[RowChange] = []
    with rewriter.guard.placeholders_only():
        for table in TABLES:
            after: int | None = 0
            while after is not None:
                found, last = rewriter.batch(table, after, batch_rows)
                changes.extend(found)
                after = last
    out = _summary(changes)
    return {
        "status": "ready" if out["rows"] else "noop",
        "mode": "dry run (nothing written; --apply rewrites)",
        "policy": list(redactor.policy.names),
        "problems": list(redactor.policy.problems),
        **out,
    }


def apply(
    store: Store,
    patterns: str,
    preview_chars: int,
    backup_dir: str | os.PathLike[str],
    *,
    batch_rows: int = BATCH_ROWS,
    on_row: RowHook | None = None,
) -> dict[str, Any]:
    """Backup, then rewrite every row that holds a secret (see the module docstring).

    ``on_row`` is called for each rewritten row inside its batch's transaction (tests make it raise
    to prove a failed batch leaves every row old or new)."""
    if store.readonly:
        raise backups.MaintenanceError("lcm redact --apply needs a writable database")
    started = time.monotonic()
    payload_rekey.upgrade(
        store
    )  # old refs keyed and granted first: a stub is rewritten by its grant
    saved = backups.backup(store, backup_dir, "pre-redact")
    manifest_path = Path(saved.path).with_name(Path(saved.path).stem + ".redact-manifest.json")
    redactor = redactor_of(store, patterns)
    rewriter = Rewriter(store, redactor, preview_chars)
    done: list[RowChange] = []
    removed: list[str] = []
    status = "failed"
    # From now on this database holds redacted rows: a core started with redaction off still
    # recognises them (ingest's shadow step), so the host's raw copies are not stored again.
    store.mark("redaction")
    before = store.secure_delete(True)
    try:
        for table in TABLES:
            after: int | None = 0
            while after is not None:
                after = _apply_batch(
                    store, rewriter, table, after, batch_rows, on_row, done, removed
                )
        store.fts_optimize()
        if done:
            store.record_event("info", "redact", json.dumps(_summary(done)["tables"], default=str))
        checkpoint = store.vacuum_and_truncate()
        status = "applied" if done else "noop"
    finally:
        store.secure_delete(before)
        _write_manifest(
            manifest_path,
            {
                "status": status,
                "backup": saved.path,
                "policy": list(redactor.policy.names),
                "rows": [c.entry() for c in done],
                "removed_payload_refs": removed,
            },
        )
    scan_after = checks.fts_scan(store, deep=True)
    return {
        "status": status,
        **_summary(done),
        "backup": saved.path,
        "backup_note": "the backup was made before the rewrite and still holds the old secrets: "
        "delete it (and older backups) once you no longer need them",
        "manifest": str(manifest_path),
        "removed_payload_files": len(removed),
        "checkpoint": checkpoint,
        "fts_sound": not any(t["needs_rebuild"] for t in scan_after["tables"].values()),
        "seconds": round(time.monotonic() - started, 3),
    }


def _apply_batch(
    store: Store,
    rewriter: Rewriter,
    table: str,
    after: int,
    batch_rows: int,
    on_row: RowHook | None,
    done: list[RowChange],
    removed: list[str],
) -> int | None:
    """One batch in one write transaction; old payload files go after it committed."""
    started = time.monotonic()
    with store.write():
        changes, last = rewriter.batch(table, after, batch_rows)
        for change in changes:
            if change.payload is not None:
                payloads.put(rewriter.guard, change.payload.new_ref, change.payload.text)
            if table == "messages":
                store.rewrite_message(change.row_id, change.fields)
                if change.payload is not None:  # the grant follows the stub to the redacted file
                    store.revoke_payloads(change.row_id, [change.payload.old_ref])
                    store.grant_payloads(
                        [
                            (
                                change.row_id,
                                PayloadRef(change.payload.new_ref, KIND_OUTPUT, OUTPUT_MIME),
                            )
                        ]
                    )
                store.grant_payloads([(change.row_id, p) for p in change.grants])
            else:
                store.rewrite_text(table, change.row_id, change.text)
            if on_row is not None:
                on_row(table, change.row_id)
    done.extend(changes)
    time.sleep(min(MAX_PAUSE_S, max(0.005, time.monotonic() - started)))
    # An old file goes once no row holds a grant of it any more: a row that merely quotes its stub
    # could never read it, and must not keep the secret's bytes at rest.
    for ref in sorted({c.payload.old_ref for c in changes if c.payload is not None}):
        if store.payload_grant(ref, None) is None:
            payloads.remove(rewriter.guard, ref)
            removed.append(ref)
    return last


def _write_manifest(path: Path, data: dict[str, Any]) -> None:
    """Atomically, 0600: a temp file of its own, fsynced, renamed into place."""
    private.make_dir(path.parent)
    fd, temp = private.temp_file(path.parent, f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(data, handle, indent=2, sort_keys=True)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, path)
    finally:
        temp.unlink(missing_ok=True)


def command(
    store: Store,
    patterns: str,
    preview_chars: int,
    backup_dir: str | os.PathLike[str],
    do_apply: bool,
    enabled: bool,
    configured: str,
    on_row: RowHook | None = None,
) -> dict[str, Any]:
    """The ``lcm redact`` / ``/lcm redact`` verb: a dry run, or apply. ``enabled`` and
    ``configured``: the live settings, which the result warns about when they differ. ``on_row``:
    apply's per-row hook (the CLI counts progress with it)."""
    result = (
        apply(store, patterns, preview_chars, backup_dir, on_row=on_row)
        if do_apply
        else scan(store, patterns, preview_chars)
    )
    notes = []
    if not enabled:
        notes.append(
            "LCM_SENSITIVE_PATTERNS_ENABLED is off: new messages are stored unredacted; turn it on "
            "(with the same LCM_SENSITIVE_PATTERNS) so what is stored from now on matches"
        )
    if patterns != configured:
        notes.append(
            "the policy used differs from LCM_SENSITIVE_PATTERNS: a rewritten message the host re-sends "
            "is recognised only when live ingest uses the same policy"
        )
    return {**result, "notes": notes} if notes else result

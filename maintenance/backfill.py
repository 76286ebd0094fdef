"""Backfill: tool results stored inline before large-output externalization was on, moved to files.

Each tool row of at least the threshold becomes what the live step stores (outputs.stub: head,
tail, counts and the ref) and its exact text (redacted first when redaction is on) goes to
``lcm-payloads/<ref>.payload``, the same content-addressed file the live step writes (the ref keyed
by the database's secret), and the row is granted it in the transaction that rewrites it, as live
ingest grants a row the payload it kept. The row keeps its fingerprint, so alignment still
recognises the host's copy of the message, and the FTS index follows the new content through the
update trigger. Rollback withdraws the grant with the stub.

Order of work per batch, so a killed run resumes with the same manifest: write the files (a file
already there is checked byte for byte), save the manifest with the batch's entries (atomically,
0600), then rewrite the batch's rows in one transaction, each only if it still holds the text read.
A crash before the commit leaves the rows inline (the next run picks them again, finds the same
files, replaces the same entries); after it, the entries already describe the stubs.

The manifest holds metadata only (row ids, refs, digests, counts; no content, no session ids) and a
MAC keyed with this database's own secret: a manifest of another database, or an edited one, is
refused. Rollback puts a row's text back from its file only if the row still holds exactly the stub
the manifest recorded and the file's digest matches (a manifest written before the database's refs
were keyed names the old ref: its alias is followed, payload_rekey.py).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ..base import outputs, private
from ..base.payloads import KIND_OUTPUT, OUTPUT_MIME, REF_SECRET, retarget
from ..base.progress import Tick, quiet_tick
from ..base.records import PayloadRef
from ..base.sensitive import UNSCANNED, Redactor
from ..base.tokens import count_tokens
from ..store import Store, blobs_of, directory_of, is_url
from . import backups, payload_gc, payload_rekey

FORMAT = "hermes-lcm backfill-outputs manifest"
VERSION = 1
BATCH = 100
# A dry run only sizes the stubs: any key gives a ref of the same length, and none is written.
_SIZING_KEY = bytes(32)
Progress = Callable[[str], None]


class BackfillError(backups.MaintenanceError):
    """A refused backfill or rollback (a foreign or edited manifest, a file that does not match)."""


@dataclass(frozen=True)
class Entry:
    """One rewritten row: what rollback needs to check and restore, no content."""

    store_id: int
    ref: str
    sha256: str  # of the row's original text
    payload_sha256: str  # of the file's text (differs from sha256 only when redaction changed it)
    chars: int
    tokens: int  # the row's token count before
    stub_sha256: str


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _quiet(_line: str) -> None:
    return None


def scan(
    store: Store,
    threshold_chars: int,
    preview_chars: int,
    progress: Progress = _quiet,
    tick: Tick = quiet_tick,
) -> dict[str, Any]:
    """The dry run: rows, characters and tokens a backfill would move out (nothing is written)."""
    rows = chars = saved = 0
    after = 0
    while True:
        page = store.inline_tool_rows(threshold_chars, after, BATCH)
        for row_id, length, tokens, text in page:
            rows += 1
            chars += length
            saved += max(
                0,
                tokens
                - count_tokens(
                    outputs.stub(text, outputs.ref_for(text, _SIZING_KEY), preview_chars)
                ),
            )
            after = row_id
        if page:
            progress(f"scanned {rows} rows")
            tick(rows, None)
        if len(page) < BATCH:
            break
    return {
        "status": "ready" if rows else "noop",
        "database": store.path,
        "payload_dir": str(directory_of(store.path)),
        "threshold_chars": threshold_chars,
        "preview_chars": preview_chars,
        "rows": rows,
        "chars": chars,
        "estimated_tokens_saved": saved,
    }


# -- the manifest -----------------------------------------------------------------------------


def _key(store: Store) -> bytes:
    return store.secret("backfill-manifest")


def _mac(key: bytes, body: dict[str, Any]) -> str:
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
    return hmac.new(key, canonical, hashlib.sha256).hexdigest()


def _identity(store: Store) -> str:
    """Which database a manifest belongs to: the resolved file, or the URL (without its password)."""
    return store.path if is_url(store.path) else str(Path(store.path).resolve())


def _body(store: Store, preview_chars: int, entries: dict[int, Entry]) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "version": VERSION,
        "database": _identity(store),
        "payload_dir": str(directory_of(store.path)),
        "preview_chars": preview_chars,
        "rows": [asdict(entries[i]) for i in sorted(entries)],
    }


def save_manifest(store: Store, path: Path, preview_chars: int, entries: dict[int, Entry]) -> None:
    """Write the manifest whole or not at all: a 0600 temp file beside it, renamed over it."""
    body = _body(store, preview_chars, entries)
    data = json.dumps({**body, "mac": _mac(_key(store), body)}, indent=1).encode()
    private.make_dir(path.parent)
    fd, temp = private.temp_file(path.parent, f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, path)
    finally:
        temp.unlink(missing_ok=True)


def load_manifest(store: Store, path: Path) -> tuple[int, dict[int, Entry]]:
    """(preview_chars, entries) of a manifest this database wrote; refuses any other."""
    try:
        raw = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise BackfillError(f"cannot read the manifest {path}: {exc}") from exc
    if not isinstance(raw, dict) or raw.get("format") != FORMAT or raw.get("version") != VERSION:
        raise BackfillError(f"{path} is not a backfill-outputs manifest")
    if raw.get("database") != _identity(store):
        raise BackfillError(
            f"{path} was written for another database ({raw.get('database')}), not {store.path}"
        )
    body = {k: v for k, v in raw.items() if k != "mac"}
    if not hmac.compare_digest(str(raw.get("mac", "")), _mac(_key(store), body)):
        raise BackfillError(
            f"{path} was changed after it was written, or belongs to another database: refused"
        )
    try:
        entries = {int(r["store_id"]): Entry(**r) for r in raw["rows"]}
        return int(raw["preview_chars"]), entries
    except (KeyError, TypeError, ValueError) as exc:
        raise BackfillError(f"{path}: malformed rows ({exc})") from exc


# -- apply ------------------------------------------------------------------------------------


def _write_payload(store: Store, directory: Path, ref: str, text: str) -> None:
    """The file (PostgreSQL: the row) of ``ref``, written once; one already there must hold exactly ``text``."""
    data = text.encode("utf-8", "surrogatepass")
    blobs = blobs_of(store)
    if blobs is not None:
        blobs.payload_put(ref, data)
        if blobs.payload_get(ref) != data:
            raise BackfillError(f"payload {ref} exists with other bytes; not overwritten")
        return
    private.make_dir(directory, refuse_link=True)
    if (
        not private.write_new(directory, f"{ref}.payload", data)
        and private.read_in(directory, f"{ref}.payload") != data
    ):
        raise BackfillError(f"payload file {ref}.payload exists with other bytes; not overwritten")


def apply(
    store: Store,
    manifest: Path,
    backup_dir: str | os.PathLike[str],
    threshold_chars: int,
    preview_chars: int,
    redactor: Redactor | None,
    progress: Progress = _quiet,
    tick: Tick = quiet_tick,
) -> dict[str, Any]:
    """Backup, then move each candidate row's text to its file and the row to the stub, batch by batch."""
    entries: dict[int, Entry] = {}
    if manifest.exists():
        preview_chars, entries = load_manifest(store, manifest)
    plan = scan(store, threshold_chars, preview_chars)
    if plan["status"] == "noop":
        if not manifest.exists():
            save_manifest(store, manifest, preview_chars, entries)
        return {**plan, "manifest": str(manifest), "rewritten": 0, "manifest_rows": len(entries)}
    saved = backups.backup(store, backup_dir, "pre-backfill")
    progress(f"backup {saved.path}")
    payload_rekey.upgrade(store)
    key = store.secret(REF_SECRET)
    directory = directory_of(store.path)
    rewritten = files = 0
    after = 0
    while True:
        page = store.inline_tool_rows(threshold_chars, after, BATCH)
        if not page:
            break
        after = page[-1][0]
        changes = []
        for row_id, length, tokens, original in page:
            kept = redactor.redact(original) if redactor is not None else original
            if kept.startswith(UNSCANNED):  # the redactor withheld it whole: keep the row as it is
                progress(f"row {row_id} left inline: redaction could not scan it")
                continue
            ref = outputs.ref_for(kept, key)
            text = outputs.stub(kept, ref, preview_chars)
            _write_payload(store, directory, ref, kept)
            files += 1
            entries[row_id] = Entry(
                row_id, ref, _sha(original), _sha(kept), length, tokens, _sha(text)
            )
            changes.append((row_id, original, text, count_tokens(text)))
        save_manifest(store, manifest, preview_chars, entries)
        progress(f"files written for {len(changes)} rows; rewriting them")
        with store.write():  # each rewritten row is granted its file in the same transaction
            swapped = store.swap_contents(changes)
            store.grant_payloads(
                [(i, PayloadRef(entries[i].ref, KIND_OUTPUT, OUTPUT_MIME)) for i in swapped]
            )
        rewritten += len(swapped)
        progress(f"rewritten {rewritten} of {plan['rows']} rows")
        tick(rewritten, plan["rows"])
    return {
        **plan,
        "status": "applied",
        "backup": asdict(saved),
        "manifest": str(manifest),
        "rewritten": rewritten,
        "files_checked": files,
        "manifest_rows": len(entries),
        "redacted": redactor is not None,
    }


# -- rollback -----------------------------------------------------------------------------------


def rollback(
    store: Store,
    manifest: Path,
    backup_dir: str | os.PathLike[str],
    *,
    do_apply: bool,
    progress: Progress = _quiet,
    tick: Tick = quiet_tick,
) -> dict[str, Any]:
    """Each manifest row back to its text from the file, where the row still is exactly the stub."""
    _preview, entries = load_manifest(store, manifest)
    directory = directory_of(store.path)
    aliases = store.ref_aliases()
    ready: list[tuple[int, str, str, int]] = []
    refs: dict[int, str] = {}
    skipped: dict[str, int] = {}
    for entry in entries.values():
        message = store.message(entry.store_id)
        ref = aliases.get(entry.ref, entry.ref)  # the keyed name of an old manifest's ref
        why = None
        if message is None:
            why = "row gone"
        elif _sha(retarget(message.content, {ref: entry.ref})) != entry.stub_sha256:
            why = "row no longer holds the stub"
        else:
            refs[entry.store_id] = ref
            data = payload_gc.bytes_of(store, directory, ref)  # its file, or its row
            if data is None:
                why = "payload file missing"
            elif hashlib.sha256(data).hexdigest() != entry.payload_sha256:
                why = "payload file digest differs"
            else:
                ready.append(
                    (
                        entry.store_id,
                        message.content,
                        data.decode("utf-8", "surrogatepass"),
                        entry.tokens,
                    )
                )
        if why:
            skipped[why] = skipped.get(why, 0) + 1
    out: dict[str, Any] = {
        "status": "ready" if ready else "noop",
        "manifest": str(manifest),
        "manifest_rows": len(entries),
        "restorable": len(ready),
        "skipped": skipped,
    }
    if not do_apply or not ready:
        return out
    saved = backups.backup(store, backup_dir, "pre-rollback")
    restored = 0
    for start in range(0, len(ready), BATCH):
        with store.write():  # the text is back: the row no longer holds the stub its grant was for
            back = store.swap_contents(ready[start : start + BATCH])
            for row_id in back:
                store.revoke_payloads(row_id, [refs[row_id]])
        restored += len(back)
        progress(f"restored {restored} of {len(ready)} rows")
        tick(restored, len(ready))
    return {**out, "status": "applied", "backup": asdict(saved), "restored": restored}

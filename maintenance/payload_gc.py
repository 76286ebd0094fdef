"""Payload files no row references any more: find them, and remove them without racing a writer.

Payload files (``lcm-payloads/<ref>.payload`` beside the database) hold base64 payloads
(``[lcm-payload ref=...]``, payloads.py) and externalized tool outputs (``[lcm-output ref=...]``,
outputs.py). Rows are never deleted by the engine, but the operator's cleanups (``lcm doctor clean``,
``clean lifecycle``) and a backfill rollback can leave files no message (content, parts, tool calls,
extra) and no summary names. An output file can itself name a payload (a tool printed a placeholder),
so references are followed through referenced files too, and a file the refs upgrade renamed
(payload_rekey.py) counts as named by its old ref until the rows are rewritten.

Only names of the form ``<24 hex>.payload`` that are regular files are ever touched; a symlinked
directory is refused and a symlink inside it is reported, never followed. Removal races an ingest
that wrote (or re-used) a file and has not committed its row yet; three things close that gap:

* a file younger than the grace period is kept (a writer writes the file just before its row, and
  ``private.write_new`` touches a file it finds already, so a file about to be referenced is fresh);
* the references are scanned again while holding the database's write lock, so a row committed
  after the first scan is seen;
* each file is first renamed aside and its age read again: a touch that came before the rename
  shows, and one after it finds no file and writes a new one. A fresh file is put back.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from ..base import private
from ..storage.payload_dir import blobs_of, directory_of
from ..store import Store, StoreFault

MENTION = re.compile(r"\[lcm-(?:payload|output) ref=([0-9a-f]{24})")
OUTPUT_MENTION = re.compile(r"\[lcm-output ref=([0-9a-f]{24})")
FILE_NAME = re.compile(r"^([0-9a-f]{24})\.payload$")
GRACE_SECONDS = 600.0
PAGE = 500
SAMPLE = 20


@dataclass(frozen=True)
class PayloadFile:
    ref: str
    bytes: int
    mtime: float


@dataclass
class Inventory:
    """What the payload directory holds and what the database references (metadata only)."""

    directory: Path
    files: dict[str, PayloadFile] = field(default_factory=dict)
    # Names in the directory that are not ours to touch: symlinks, other files, leftovers.
    ignored: list[str] = field(default_factory=list)
    refused: str | None = None
    # ref -> the first row naming it, as ("message"|"summary"|"payload", id or ref).
    referenced: dict[str, tuple[str, Any]] = field(default_factory=dict)

    @property
    def orphans(self) -> list[str]:
        return sorted(ref for ref in self.files if ref not in self.referenced)

    @property
    def missing(self) -> list[str]:
        """Refs a row names whose file is absent."""
        return sorted(ref for ref in self.referenced if ref not in self.files)


def list_files(directory: Path) -> tuple[dict[str, PayloadFile], list[str], str | None]:
    """The payload files of ``directory`` (regular files named ``<ref>.payload``), the names
    ignored, and why the directory itself is refused (a symlink), never following a link."""
    if directory.is_symlink():
        return {}, [], f"{directory} is a symlink; refusing to look through it"
    if not directory.is_dir():
        return {}, [], None
    files: dict[str, PayloadFile] = {}
    ignored: list[str] = []
    dfd = private.open_dir(directory)
    try:
        for name in sorted(os.listdir(dfd)):
            found = FILE_NAME.match(name)
            try:
                info = os.stat(name, dir_fd=dfd, follow_symlinks=False)
            except FileNotFoundError:
                continue
            if found is None or not stat.S_ISREG(info.st_mode):
                ignored.append(name)
                continue
            files[found.group(1)] = PayloadFile(found.group(1), info.st_size, info.st_mtime)
    finally:
        os.close(dfd)
    return files, ignored, None


def references(
    store: Store, directory: Path, files: dict[str, PayloadFile]
) -> dict[str, tuple[str, Any]]:
    """Every ref a message or a summary names, and the refs named inside referenced output files
    (a tool may have printed a placeholder; a base64 payload file cannot name anything)."""
    found: dict[str, tuple[str, Any]] = {}
    outputs: set[str] = set()
    for kind in ("message", "summary"):
        after = 0
        while True:
            page = store.payload_mentions(kind, after, PAGE)
            for row_id, text in page:
                for ref in MENTION.findall(text):
                    found.setdefault(ref, (kind, row_id))
                outputs.update(OUTPUT_MENTION.findall(text))
            if len(page) < PAGE:
                break
            after = page[-1][0]
    for old, new in _aliases(store).items():  # a file an upgrade renamed before its rows followed
        if old in found:
            found.setdefault(new, found[old])
        if old in outputs:
            outputs.add(new)
    queue = sorted(ref for ref in outputs if ref in files)
    seen = set(queue)
    while queue:
        ref = queue.pop()
        data = bytes_of(store, directory, ref)
        if data is None:
            continue
        text = data.decode("utf-8", "surrogatepass")
        if "[lcm-" not in text:
            continue
        for inner in MENTION.findall(text):
            found.setdefault(inner, ("payload", ref))
        for inner in OUTPUT_MENTION.findall(text):
            if inner in files and inner not in seen:
                seen.add(inner)
                queue.append(inner)
    return found


def _aliases(store: Store) -> dict[str, str]:
    """The old refs of a database whose refs were upgraded (payload_rekey.py), and their new names;
    none for a read-only view of a layout that has no such table yet."""
    try:
        return store.ref_aliases()
    except StoreFault:
        return {}


def bytes_of(store: Store, directory: Path, ref: str) -> bytes | None:
    """A payload's bytes: its file, or (PostgreSQL) its row; None when absent."""
    blobs = blobs_of(store)
    if blobs is not None:
        return blobs.payload_get(ref)
    try:
        return private.read_in(directory, f"{ref}.payload")
    except OSError:
        return None


def _stored(store: Store, directory: Path) -> tuple[dict[str, PayloadFile], list[str], str | None]:
    """:func:`list_files`, or a PostgreSQL store's payload rows (their created_at as the age)."""
    if blobs_of(store) is None:
        return list_files(directory)
    rows = cast(Any, store).payload_list()
    return {ref: PayloadFile(ref, size, at) for ref, size, at in rows}, [], None


def inventory(store: Store) -> Inventory:
    directory = directory_of(store.path)
    files, ignored, refused = _stored(store, directory)
    inv = Inventory(directory, files, ignored, refused)
    inv.referenced = references(store, directory, files)
    return inv


def scan(
    store: Store, grace_seconds: float = GRACE_SECONDS, now: float | None = None
) -> dict[str, Any]:
    """The preview: files, bytes, the orphans (and which of them are old enough to remove), missing files."""
    now = time.time() if now is None else now
    inv = inventory(store)
    orphans = inv.orphans
    removable = [r for r in orphans if now - inv.files[r].mtime >= grace_seconds]
    missing = inv.missing
    return {
        "status": "ready" if removable else "noop",
        "directory": str(inv.directory),
        **({"refused": inv.refused} if inv.refused else {}),
        "files": len(inv.files),
        "bytes": sum(f.bytes for f in inv.files.values()),
        "referenced_files": len(inv.files) - len(orphans),
        "orphans": len(orphans),
        "orphan_bytes": sum(inv.files[r].bytes for r in orphans),
        "removable": len(removable),
        "removable_refs": removable,
        "removable_bytes": sum(inv.files[r].bytes for r in removable),
        "kept_as_fresh": len(orphans) - len(removable),
        "grace_seconds": grace_seconds,
        "missing_files": len(missing),
        "missing_sample": [
            {"ref": r, "kind": inv.referenced[r][0], "id": inv.referenced[r][1]}
            for r in missing[:SAMPLE]
        ],
        "ignored_names": inv.ignored[:SAMPLE],
        "ignored": len(inv.ignored),
    }


def remove(store: Store, refs: list[str], grace_seconds: float = GRACE_SECONDS) -> dict[str, Any]:
    """Remove the files of ``refs`` that are still orphans and old, under the database's write lock."""
    directory = directory_of(store.path)
    removed: list[str] = []
    kept: dict[str, str] = {}
    freed = 0
    with store.write():  # no row can be committed while we look and delete
        files, _ignored, refused = _stored(store, directory)
        if refused:
            return {"removed": [], "kept": {}, "bytes_freed": 0, "refused": refused}
        live = references(store, directory, files)
        blobs = blobs_of(store)
        if blobs is not None:  # rows, not files: deleted in this same transaction, if still old
            for ref in refs:
                kept_why = "referenced now" if ref in live else "gone" if ref not in files else None
                size = 0 if kept_why else blobs.payload_delete(ref, time.time() - grace_seconds)
                if kept_why or not size:
                    kept[ref] = kept_why or "fresh"
                else:
                    removed.append(ref)
                    freed += size
            return {"removed": removed, "kept": kept, "bytes_freed": freed}
        dfd = private.open_dir(directory)
        try:
            for ref in refs:
                if ref in live:
                    kept[ref] = "referenced now"
                    continue
                if ref not in files:
                    kept[ref] = "gone"
                    continue
                why, size = _remove_one(dfd, ref, grace_seconds)
                if why:
                    kept[ref] = why
                else:
                    removed.append(ref)
                    freed += size
        finally:
            os.close(dfd)
    return {"removed": removed, "kept": kept, "bytes_freed": freed}


def _remove_one(dfd: int, ref: str, grace_seconds: float) -> tuple[str | None, int]:
    """Rename the file aside, read its age there, delete it or put it back; (why kept, bytes)."""
    name = f"{ref}.payload"
    aside = f".{name}.gc-{secrets.token_hex(6)}"
    try:
        os.rename(
            name, aside, src_dir_fd=dfd, dst_dir_fd=dfd
        )  # moves a link itself, never its target
    except FileNotFoundError:
        return "gone", 0
    info = os.stat(aside, dir_fd=dfd, follow_symlinks=False)
    if stat.S_ISREG(info.st_mode) and time.time() - info.st_mtime >= grace_seconds:
        os.unlink(aside, dir_fd=dfd)
        return None, info.st_size
    with contextlib.suppress(FileExistsError):  # a writer made it anew meanwhile: same bytes
        os.link(aside, name, src_dir_fd=dfd, dst_dir_fd=dfd, follow_symlinks=False)
    os.unlink(aside, dir_fd=dfd)
    return ("fresh" if stat.S_ISREG(info.st_mode) else "not a regular file"), 0


def doctor_data(store: Store) -> dict[str, Any]:
    """What ``lcm doctor`` shows of payload references: counts and refs, never content."""
    found = scan(store, grace_seconds=0)
    return {
        k: found[k]
        for k in (
            "directory",
            "files",
            "bytes",
            "orphans",
            "orphan_bytes",
            "missing_files",
            "missing_sample",
            "ignored",
        )
    } | ({"refused": found["refused"]} if "refused" in found else {})

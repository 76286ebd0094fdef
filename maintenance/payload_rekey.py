"""Payload refs keyed by the database, and the one-time upgrade of a database written before.

Refs are an HMAC of the content under the database's ``payload_refs`` secret (outputs.ref_for);
who may read a payload is the grants the engine writes with the rows it kept payloads for
(storage/payload_refs.py). A database written before (schema 4 and older) has neither: its refs
are the unkeyed sha256 prefix of the content, in the stubs and placeholders of its rows and in
the payload files' names. :func:`upgrade` runs once per database, at the engine's start (and
before ``lcm redact`` or a backfill writes), after the schema migration made the tables:

1. The plan: every old ref a row or summary names whose file (PostgreSQL: payload row) holds the
   content it names (its name is the sha256 of its bytes) gets the keyed ref of those bytes.
   Only referenced files are renamed; an orphan keeps its name until ``gc-payloads``.
2. SQLite: the plan is committed to ``payload_ref_aliases`` first (the journal), then each file is
   renamed (touched, so gc's grace period keeps it). A rerun finds the journal and renames what
   is left; a file whose new name exists already is the same bytes and the old name goes.
3. One write transaction: every row naming an old ref gets the new ref in its text (content,
   parts, tool calls, extra; FTS and vectors follow by trigger), its fingerprint as the new text
   hashes (only when it was the old text's: alignment keeps working) and its token count; the
   grants of old rows (the rule below); summaries' text; then the database is marked done. On
   PostgreSQL the payload rows move in the same transaction, so the whole upgrade is one.
   A crash before the commit leaves every row old, and the next start does it all again.

Which old rows the engine wrote cannot be read off a row, so the grants of old data follow a rule:
an old payload belongs to the owner of the first row (in id order) that holds it the way the
engine writes it, and every row of that owner holding it so is granted. "The way the engine
writes it": a large output's stub is the whole text (or a whole text part) of a tool result that
is not one of our lcm_* tools' answers, and its counts and preview are those of the file; a
placeholder's chars and mime are those of the file. Why the first: the engine writes a payload's
file just before the row that names it, so whoever named it first stored the content; anyone
later either stored the same content again or quoted it. A header pasted into text, a stub in a
user's or the assistant's message, a placeholder whose counts are not the file's grant nothing.
The cost: another owner who stored the very same content before the upgrade gets no grant for
that old copy (the next time the engine stores it for them, they do).

A host that hands back a stub or placeholder with an old ref (a compress gave it one) is known by
the aliases: the payload guard renames old refs on ingest (payloads.retarget), so the message
is the row it was.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import stat
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from ..base import private
from ..base.outputs import line_count, parse_stub, ref_for
from ..base.payloads import (
    KIND_OUTPUT,
    KIND_PAYLOAD,
    OUTPUT_MIME,
    REF_SECRET,
    PayloadGuard,
    retarget,
)
from ..base.records import PayloadRef, StoredMessage
from ..base.tokens import count_tokens
from ..ingest.normalize import fingerprint_of
from ..storage.payload_dir import ref_key
from ..store import Store, StoreError, StoreFault, blobs_of, directory_of
from .payload_gc import MENTION, bytes_of

log = logging.getLogger("hermes_lcm")

DONE = (
    "payload-refs-keyed"  # store.mark: this database's old refs are upgraded (or it never had any)
)
PAGE = 500
_PLACEHOLDER = re.compile(r"\[lcm-payload ref=([0-9a-f]{24}) mime=(\S+) chars=(\d+)\]")
_OMITTED = re.compile(r"(.*)\n\[\.\.\. (\d+) chars not shown \.\.\.\]\n(.*)", re.S)
_TEXT_TYPES = ("text", "input_text", "output_text")
RowHook = Callable[[int], None]


def legacy_ref(data: bytes) -> str:
    """The ref the old scheme gave these bytes: the unkeyed sha256 prefix."""
    return hashlib.sha256(data).hexdigest()[:24]


def open_guard(store: Store, min_base64_chars: int) -> PayloadGuard:
    """The engine's payload guard for ``store``: refs keyed by its secret, old refs known by their
    aliases; the database's old refs upgraded first (once). A failed upgrade is logged and tried
    again at the next start: until then its old payloads open for nobody."""
    try:
        upgrade(store)
    except (StoreError, StoreFault, OSError) as exc:
        log.warning(
            "hermes-lcm: payload refs not upgraded yet (%s); retried at the next start", exc
        )
    return PayloadGuard(
        directory_of(store.path),
        min_base64_chars,
        blobs=blobs_of(store),
        key=store.secret(REF_SECRET),
        aliases=store.ref_aliases(),
    )


def reading_guard(store: Store) -> PayloadGuard:
    """A guard that only reads ``store``'s payloads (the shell's ``lcm grep --content-scope``
    and ``lcm expand --ref``): no upgrade, no secret created (a read-only view gets a throwaway
    key, which reading by ref never needs)."""
    return PayloadGuard(
        directory_of(store.path),
        blobs=blobs_of(store),
        key=ref_key(store),
        aliases=store.ref_aliases(),
    )


def upgrade(store: Store, on_row: RowHook | None = None) -> dict[str, Any]:
    """Upgrade a database's old refs (see the module docstring); a no-op once done. ``on_row`` is
    called for each rewritten row inside the transaction (tests make it raise to prove a failed
    upgrade keeps every row old)."""
    if store.readonly:
        return {"status": "read-only"}
    if store.marked(DONE):
        return {"status": "done"}
    key = store.secret(REF_SECRET)
    directory, blobs = directory_of(store.path), blobs_of(store)
    moved = 0
    if blobs is None:
        store.put_ref_aliases(
            _plan(store, directory, key)
        )  # the journal, committed before any rename
        moved = _rename(directory, store.ref_aliases())
    with store.write():
        if store.marked(DONE):
            return {"status": "done"}
        if blobs is not None:
            plan = _plan(store, directory, key)
            for old, new in sorted(plan.items()):
                data = blobs.payload_get(old)
                if data is not None:
                    blobs.payload_put(new, data)
                    moved += blobs.payload_delete(old) > 0
            store.put_ref_aliases(plan)
        counts = _rewrite(store, store.ref_aliases(), _reader(store, directory), on_row)
        store.mark(DONE)
    if counts["rows"] or moved:
        log.info(
            "hermes-lcm: payload refs upgraded: %s rows, %s grants, %s payloads renamed",
            counts["rows"],
            counts["grants"],
            moved,
        )
    return {"status": "upgraded", "payloads_renamed": moved, **counts}


def _mentioned(store: Store) -> set[str]:
    """Every ref a message or a summary names (payload_gc's reading of the rows)."""
    found: set[str] = set()
    for kind in ("message", "summary"):
        after = 0
        while page := store.payload_mentions(kind, after, PAGE):
            for row_id, text in page:
                found.update(MENTION.findall(text))
                after = row_id
            if len(page) < PAGE:
                break
    return found


def _plan(store: Store, directory: Path, key: bytes) -> dict[str, str]:
    """old ref -> keyed ref for each named ref whose stored bytes are the content it names."""
    known = store.ref_aliases()
    plan: dict[str, str] = {}
    for ref in sorted(_mentioned(store) - set(known)):
        data = bytes_of(store, directory, ref)
        if data is not None and legacy_ref(data) == ref:
            plan[ref] = ref_for(data.decode("utf-8", "surrogatepass"), key)
    return plan


def _rename(directory: Path, aliases: Mapping[str, str]) -> int:
    """Each old file to its new name (never through a link: a name that is not a regular file is
    left alone); a new name already there holds the same bytes, so the old one just goes."""
    if not aliases or directory.is_symlink() or not directory.is_dir():
        return 0
    moved = 0
    dfd = private.open_dir(directory)
    try:
        for old, new in sorted(aliases.items()):
            try:
                info = os.stat(f"{old}.payload", dir_fd=dfd, follow_symlinks=False)
            except FileNotFoundError:
                continue
            if not stat.S_ISREG(info.st_mode):
                continue
            try:  # another process upgrading at once may have moved it meanwhile: then it is done
                if _exists(dfd, f"{new}.payload"):
                    os.unlink(f"{old}.payload", dir_fd=dfd)
                else:
                    os.rename(f"{old}.payload", f"{new}.payload", src_dir_fd=dfd, dst_dir_fd=dfd)
                    os.utime(
                        f"{new}.payload", dir_fd=dfd, follow_symlinks=False
                    )  # fresh: gc's grace keeps it
            except FileNotFoundError:
                continue
            moved += 1
    finally:
        os.close(dfd)
    return moved


def _exists(dfd: int, name: str) -> bool:
    try:
        os.stat(name, dir_fd=dfd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True


def _reader(store: Store, directory: Path) -> Callable[[str], str | None]:
    """A payload's text by (new) ref, or None; the last few are kept (a stub's rows read it again)."""
    cache: dict[str, str | None] = {}

    def read(ref: str) -> str | None:
        if ref not in cache:
            if len(cache) >= 8:
                cache.pop(next(iter(cache)))
            data = bytes_of(store, directory, ref)
            cache[ref] = None if data is None else data.decode("utf-8", "surrogatepass")
        return cache[ref]

    return read


def _rewrite(
    store: Store,
    aliases: Mapping[str, str],
    read: Callable[[str], str | None],
    on_row: RowHook | None,
) -> dict[str, int]:
    """Every row naming an old ref gets the new ones, and the old rows their grants (in the caller's
    transaction); the summaries' text too."""
    first: dict[str, str] = {}  # new ref -> the owner who held it first as the engine writes it
    rows = grants = 0
    after = 0
    while page := store.ref_rows_after(after, PAGE):
        for message, fingerprint, owner in page:
            after = message.id
            granted = [
                p
                for p in _engine_held(message, aliases, read)
                if first.setdefault(p.ref, owner) == owner
            ]
            fields = _renamed(message, fingerprint, aliases)
            if fields is not None:
                store.rewrite_message(message.id, fields)
                rows += 1
                if on_row is not None:
                    on_row(message.id)
            if granted:
                store.grant_payloads([(message.id, p) for p in granted])
                grants += len(granted)
    after = 0
    while summaries := store.payload_mentions("summary", after, PAGE):
        for row_id, text in summaries:
            after = row_id
            if (new := retarget(text, aliases)) != text:
                store.rewrite_text("summaries", row_id, new)
    return {"rows": rows, "grants": grants}


def _renamed(
    m: StoredMessage, fingerprint: str, aliases: Mapping[str, str]
) -> dict[str, Any] | None:
    """The row's columns with its old refs renamed (None: it names none); the fingerprint follows
    the text only where it was the text's own (an import's or a backfill's stays)."""
    content = retarget(m.content, aliases)
    parts, calls, extra = (
        None if v is None else retarget(v, aliases) for v in (m.parts, m.tool_calls, m.extra)
    )
    if (content, parts, calls, extra) == (m.content, m.parts, m.tool_calls, m.extra):
        return None
    head = {"role": m.role, "tool_call_id": m.tool_call_id}
    if fingerprint == fingerprint_of(head, (m.content, m.parts, m.tool_calls)):
        fingerprint = fingerprint_of(head, (content, parts, calls))
    tokens = (
        m.tokens
        + count_tokens(content)
        - count_tokens(m.content)
        + count_tokens(calls or "")
        - count_tokens(m.tool_calls or "")
    )
    return {
        "content": content,
        "parts": parts,
        "tool_calls": calls,
        "extra": extra,
        "tokens": max(1, tokens),
        "fingerprint": fingerprint,
    }


def _engine_held(
    m: StoredMessage, aliases: Mapping[str, str], read: Callable[[str], str | None]
) -> list[PayloadRef]:
    """The (new) payloads an old row holds the way the engine writes them (the module docstring)."""
    found: dict[str, PayloadRef] = {}
    if m.role == "tool" and not (m.tool_name or "").startswith("lcm_"):
        for text in _texts(m):
            info = parse_stub(text)
            new = aliases.get(info.ref) if info is not None else None
            whole = read(new) if new is not None else None
            if new is not None and whole is not None and _engine_stub(text, whole):
                found[new] = PayloadRef(new, KIND_OUTPUT, OUTPUT_MIME)
    for text in (m.content, m.parts or "", m.tool_calls or ""):
        for old, mime, chars in _PLACEHOLDER.findall(text) if "[lcm-payload ref=" in text else ():
            new = aliases.get(old)
            whole = read(new) if new is not None and new not in found else None
            if (
                new is not None
                and whole is not None
                and int(chars) == len(whole)
                and _mime_of(whole) == mime
            ):
                found[new] = PayloadRef(new, KIND_PAYLOAD, mime)
    return list(found.values())


def _texts(m: StoredMessage) -> Iterator[str]:
    """The whole texts of a row: its content, or each text part of its structured content."""
    if m.parts is None:
        yield m.content
        return
    try:
        parts = json.loads(m.parts)
    except ValueError:
        return
    for part in parts if isinstance(parts, list) else ():
        if (
            isinstance(part, dict)
            and part.get("type") in _TEXT_TYPES
            and isinstance(part.get("text"), str)
        ):
            yield part["text"]


def _engine_stub(text: str, whole: str) -> bool:
    """Is ``text`` the stub outputs.stub makes of ``whole`` (its counts, its head and tail)? A
    preview the payload guard changed (a base64 run in it became a placeholder) is held to its
    counts only."""
    info = parse_stub(text)
    _header, newline, body = text.partition("\n")
    if info is None or not newline or info.chars != len(whole) or info.lines != line_count(whole):
        return False
    if body == whole:
        return True
    cut = _OMITTED.fullmatch(body)
    if cut is None:
        return "[lcm-payload ref=" in body
    head, omitted, tail = cut.group(1), int(cut.group(2)), cut.group(3)
    if "[lcm-payload ref=" in head + tail:
        return True
    return (
        len(head) + omitted + len(tail) == len(whole)
        and whole.startswith(head)
        and whole.endswith(tail)
    )


def _mime_of(whole: str) -> str:
    """The mime the payload guard names a payload's placeholder by (payloads.PayloadGuard)."""
    if not whole.startswith("data:"):
        return "application/base64"
    return whole[5:].split(";", 1)[0] or "application/octet-stream"

"""The always-on payload guard: inline ``data:...;base64`` URIs and long base64
runs never reach SQLite.

Each payload is written once to a content-addressed file beside the database
and replaced by a short placeholder naming its ref. The placeholder is a fixed
point (guarding it again changes nothing), so a message the host sends back
with the placeholder has the same identity as the original. If the file cannot
be written the text stays inline: losing data is worse than a large row. A message's
identity (its fingerprint) is computed on the placeholder form either way, so a
message stored inline after a failed write is the same message when it comes back.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from . import private
from .outputs import ref_for
from .records import PayloadRef
from .redact import guard_logger

log = guard_logger(__name__)

# Possessive quantifiers: each part's alphabet excludes the delimiter after it, so giving back
# characters can never help a match; without them a near-miss costs a backtrack per character.
_DATA_URI = re.compile(
    r"data:([\w.+-]++/[\w.+-]++)?+((?:;[\w-]++=[\w.-]++)*+);base64,([A-Za-z0-9+/=_-]{16,})"
)
_REF = re.compile(r"^[0-9a-f]{24}$")
PLACEHOLDER_PREFIX = "[lcm-payload ref="
# The name of the database secret refs are keyed by (store.secret).
REF_SECRET = "payload_refs"
# What a grant says a payload is: a large tool output (outputs.py) or an inline base64 payload.
KIND_OUTPUT = "output"
KIND_PAYLOAD = "payload"
OUTPUT_MIME = "text/plain"
# Every place our own text names a ref: a stub's header (twice), a placeholder, a tool hint.
MENTION = re.compile(r"(\[lcm-(?:output|payload) ref=|externalized_ref=)([0-9a-f]{24})")
# Bytes of the base64 alphabet map to "A", every other byte to a space: a long run in the text is
# then a plain substring search, which C does at memory speed (the regex costs ~10 ns a character).
_RUN_TABLE = bytes(
    ord("A") if chr(b).isascii() and (chr(b).isalnum() or chr(b) in "+/") else ord(" ")
    for b in range(256)
)


@dataclass(frozen=True)
class PayloadInfo:
    ref: str
    path: Path
    chars: int
    mime: str


class Blobs(Protocol):
    """Where payload bytes live when not in files: a PostgreSQL store's ``payloads`` table, so every
    host sharing the database reads what any host wrote (storage/pg/payloads.py)."""

    def payload_put(self, ref: str, data: bytes) -> None: ...
    def payload_get(self, ref: str) -> bytes | None: ...
    def payload_delete(self, ref: str, older_than: float | None = None) -> int: ...


def retarget(text: str, aliases: Mapping[str, str]) -> str:
    """``text`` with every ref our own text forms name (:data:`MENTION`) renamed by ``aliases``;
    the very same string when none is named."""
    if "ref=" not in text or MENTION.search(text) is None:
        return text
    return MENTION.sub(lambda m: m.group(1) + aliases.get(m.group(2), m.group(2)), text)


class PayloadGuard:
    def __init__(
        self,
        directory: str | os.PathLike[str],
        min_base64_chars: int = 2048,
        blobs: Blobs | None = None,
        key: bytes | None = None,
        aliases: Mapping[str, str] | None = None,
    ) -> None:
        self.directory = Path(directory)
        self.blobs = blobs  # set: the bytes go to the database, never to ``directory``
        # The database's ref key (store.secret("payload_refs")); a guard of no database (a scratch
        # normalizer) gets one of its own, so its refs mean nothing anywhere else either.
        self.key = key if key is not None else os.urandom(32)
        self.aliases: Mapping[str, str] = aliases or {}
        self._kept: list[PayloadRef] | None = None
        self.min_chars = min_base64_chars
        # A run may only start where the previous character is outside the alphabet: without
        # that, every position inside a shorter run (say 2,000 letters) is tried again, which is
        # quadratic (minutes on a few megabytes of such runs). Matches are the same either way.
        self._long_run = re.compile(
            rf"(?<![A-Za-z0-9+/])[A-Za-z0-9+/]{{{min_base64_chars},}}={{0,2}}"
        )
        self.failures = 0
        # Why payload files cannot be written (a symlinked directory), for status and doctor.
        self.problem: str | None = None
        self._dry = False

    def ref_for(self, text: str) -> str:
        """The ref of ``text`` in this guard's database."""
        return ref_for(text, self.key)

    def guard_text(self, text: str) -> str:
        """``text`` with each payload replaced by its placeholder (and each old ref by its new one)."""
        if self.aliases:
            text = retarget(text, self.aliases)
        if "base64," not in text and len(text) < self.min_chars:
            return text
        if "base64," in text:
            text = _DATA_URI.sub(self._replace_uri, text)
        if len(text) >= self.min_chars and self._may_have_long_run(text):
            text = self._long_run.sub(
                lambda m: self._externalize(m.group(0), "application/base64"), text
            )
        return text

    def _may_have_long_run(self, text: str) -> bool:
        """A cheap pre-check for the long-run regex (exact: no false negatives)."""
        probe = text.encode("ascii", "replace").translate(
            _RUN_TABLE
        )  # non-ASCII becomes "?", then " "
        return b"A" * self.min_chars in probe

    def guard_value(self, value: Any) -> Any:
        """Guard every string inside a JSON-like value (message parts, tool calls)."""
        return _map_strings(value, self.guard_text)

    @contextmanager
    def placeholders_only(self) -> Iterator[None]:
        """Within: every payload becomes its placeholder and no file is written.

        This is a message's identity whether or not its payload file could be written,
        so a message kept inline by a failed write is recognised when it comes back.
        """
        self._dry = True
        try:
            yield
        finally:
            self._dry = False

    @contextmanager
    def collecting(self) -> Iterator[list[PayloadRef]]:
        """Within: every payload this guard keeps (writes, or finds written) is listed in the list
        yielded. Those are the grants of the row being prepared: what the engine itself put in it,
        never a ref the row's text merely names. Nothing is listed in :meth:`placeholders_only`."""
        outer, self._kept = self._kept, []
        try:
            yield self._kept
        finally:
            self._kept = outer

    def _replace_uri(self, match: re.Match[str]) -> str:
        return self._externalize(match.group(0), match.group(1) or "application/octet-stream")

    def _externalize(self, payload: str, mime: str) -> str:
        ref = self.ref_for(payload)
        if not self.keep(ref, payload, KIND_PAYLOAD, mime):
            return payload
        return f"{PLACEHOLDER_PREFIX}{ref} mime={mime} chars={len(payload)}]"

    def keep(self, ref: str, text: str, kind: str = KIND_OUTPUT, mime: str = OUTPUT_MIME) -> bool:
        """Write ``text`` to the file of ``ref`` once (nothing in :meth:`placeholders_only`); False,
        counted in :attr:`failures`, when it cannot be written: the caller keeps the text inline.
        Shared by every kind of payload file (a large tool output too: outputs.py); a kept one is
        listed as a grant while :meth:`collecting`."""
        try:
            if not self._dry:
                self._write_once(ref, text)
        except OSError as exc:
            self.failures += 1
            log.warning("hermes-lcm: payload %s kept inline, file write failed: %s", ref, exc)
            return False
        if self._kept is not None and not self._dry:
            self._kept.append(PayloadRef(ref, kind, mime))
        return True

    def _write_once(self, ref: str, payload: str) -> None:
        """Write the file once, through an exclusive 0600 temp file with an unpredictable name,
        renamed into place: a symlink planted at a temp name or at the directory redirects nothing,
        and a symlinked directory is refused (kept in ``problem`` for status and doctor). With ``blobs``:
        one row, written once; a database failure is an OSError here (the text stays inline)."""
        if self.blobs is not None:
            try:
                self.blobs.payload_put(ref, payload.encode("utf-8", "surrogatepass"))
            except Exception as exc:  # WriteFailed, StoreFault: the caller keeps the text inline
                raise OSError(f"payload {ref} not stored: {exc}") from exc
            return
        try:
            private.make_dir(self.directory, refuse_link=True)
            private.write_new(
                self.directory, self.path_for(ref).name, payload.encode("utf-8", "surrogatepass")
            )
        except private.UnsafePath as exc:
            self.problem = str(exc)
            raise
        self.problem = None

    def path_for(self, ref: str) -> Path:
        """The file of ``ref``; refuses anything that is not a plain ref (no traversal)."""
        if not _REF.match(ref):
            raise ValueError(f"not a payload ref: {ref!r}")
        return self.directory / f"{ref}.payload"

    def read(self, ref: str, offset: int = 0, limit: int = 20000) -> tuple[str, int]:
        """A page of a payload's text and its total length."""
        path = self.path_for(ref)
        if self.blobs is not None:
            found = self.blobs.payload_get(ref)
            if found is None:
                raise FileNotFoundError(f"no payload {ref}")
            data = found
        else:
            try:
                data = private.read_in(
                    self.directory, path.name
                )  # no symlink followed, at the file or its directory
            except OSError as exc:
                raise FileNotFoundError(f"no payload {ref}") from exc
        text = data.decode("utf-8", "surrogatepass")
        return text[offset : offset + limit], len(text)


def put(guard: PayloadGuard, ref: str, text: str) -> None:
    """Store ``text`` as payload ``ref`` or raise OSError (``lcm redact`` and backfill must not go on)."""
    guard.path_for(ref)
    guard._write_once(ref, text)


def remove(guard: PayloadGuard, ref: str) -> None:
    """Forget payload ``ref``: its file, or its row."""
    if guard.blobs is not None:
        guard.blobs.payload_delete(ref)
    else:
        guard.path_for(ref).unlink(missing_ok=True)


def _map_strings(value: Any, fn: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return fn(value)
    if isinstance(value, list):
        return [_map_strings(v, fn) for v in value]
    if isinstance(value, dict):
        return {k: _map_strings(v, fn) for k, v in value.items()}
    return value

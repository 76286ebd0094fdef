"""Which of the host's messages are new: alignment of the host's list with the store.

The host hands over overlapping copies of the same history many times a turn
(hooks, tool calls, compress, session end; in API/gateway mode the whole
history every turn). Which messages are new is decided by alignment, not by
position: the incoming list is matched against the conversation's stored tail
by message fingerprint, and only what follows the match is stored. Positional
cursors are what gave the reference systems their duplicate rows.

What proves a match is the store, not a message's shape: short replies ("ok",
"done") and tool calls reusing an id like ``call_0`` repeat, so an anchor is
certain only when the messages before it agree with the stored ones up to a row
the conversation holds once, or over ``WINDOW`` messages up to where the host's
list (or the conversation) begins. After a crash the store may hold part of a turn
the host never acknowledged; the host's list is then behind the store's tail, and
a repeated reply's newest stored copy is the wrong one, so every stored position of
a fingerprint is tried.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..base.records import MessageIn
from ..base.tokens import written_text
from ..prompt.blocks import CUT_MARKER, IMAGE_MARKER, TEXT_MARKER
from ..store import StoredPrints
from .hostlist import HostList
from .steps import Normalizer

# Consecutive agreeing messages that confirm an alignment anchor.
WINDOW = 8
# How many of a fingerprint's newest stored positions alignment tries beyond the stored tail.
LOCATE_POSITIONS = 4
# Agreeing pairs that make a run ending at the start of the stored tail (not the conversation's) certain.
CUT_RUN = 32
# A note the prompt left in a message (blocks.py), naming the stored row the message is.
_REPLAY_REF = re.compile(
    "(?:" + "|".join(re.escape(m) for m in (CUT_MARKER, IMAGE_MARKER, TEXT_MARKER)) + r")(\d+)\]"
)
SHORT_TAIL = 64
# Tool results looked back over for the call a result answers (a longer run has no caller here).
CALLER_SCAN = 256
# Newest host messages searched for an object our last prompt handed over.
HANDED_SCAN = 4096


def caller_of(messages: Sequence[Any], index: int) -> Mapping[str, Any] | None:
    """The assistant message whose calls the tool result at ``index`` answers: the one before
    the run of tool messages it sits in (None for any other message, or when there is none)."""
    if not isinstance(messages[index], Mapping) or messages[index].get("role") != "tool":
        return None
    before, floor = index - 1, max(-1, index - 1 - CALLER_SCAN)
    while (
        before > floor
        and isinstance(messages[before], Mapping)
        and messages[before].get("role") == "tool"
    ):
        before -= 1
    found = messages[before] if before >= 0 else None
    return found if isinstance(found, Mapping) and found.get("tool_calls") else None


class _FromEnd:
    """The incoming messages that are kept, newest first, as ``(index, fingerprint)``.

    Computed lazily: a usual turn fingerprints only the few newest messages, so
    the cost does not grow with the length of the history the host re-sends.
    Messages matching an ignore pattern are skipped here, before alignment.
    """

    def __init__(
        self,
        host: HostList,
        normalizer: Normalizer,
        original: Callable[[int], str | None] | None = None,
        strict: bool = False,
        present: Callable[[Sequence[str]], set[str]] | None = None,
    ) -> None:
        self.host, self.messages = host, host.messages
        self.normalizer, self.original = normalizer, original
        self.present = present
        self.strict = strict
        self.kept: list[tuple[int, str]] = []
        self.by_index: dict[int, str] = {}
        self.next_index = len(host) - 1

    def get(self, rank: int) -> tuple[int, str] | None:
        while len(self.kept) <= rank and self.next_index >= 0:
            index = self.next_index
            self.next_index -= 1
            message = self.messages[index]
            kept = self.host.is_storable(index)
            caller = caller_of(self.messages, index) if self.normalizer.ignoring else None
            fingerprint = self.normalizer.fingerprint_if_kept(message, caller) if kept else None
            if fingerprint is not None and self.original is not None:
                fingerprint = self._original(message) or fingerprint
            if fingerprint is not None and self.present is not None:
                fingerprint = self._as_stored(message, fingerprint)
            if fingerprint is not None:
                self.kept.append((index, fingerprint))
                self.by_index[index] = fingerprint
        return self.kept[rank] if rank < len(self.kept) else None

    def _as_stored(self, message: Mapping[str, Any], fingerprint: str) -> str:
        """The fingerprint the store holds ``message`` under: its own, or an alternate when it was
        stored before an optional ingest step was turned on or off (ingest.Normalizer.alternates)."""
        alternates = self.normalizer.alternates(message)
        if not alternates or self.present is None:
            return fingerprint
        candidates = (fingerprint, *alternates)
        held = self.present(candidates)
        return next((fp for fp in candidates if fp in held), fingerprint)

    def _original(self, message: Mapping[str, Any]) -> str | None:
        """A message the assembler cut or stripped of an image names its stored row; it is that row."""
        content = message.get("content")
        text = written_text(content)
        if "[lcm: " not in text:
            return None
        found = _REPLAY_REF.search(text)
        return self.original(int(found.group(1))) if found and self.original else None

    def cached(self, index: int) -> str | None:
        return self.by_index.get(index)


def _once_in(tail: Sequence[str], stored: StoredPrints) -> frozenset[str]:
    """The tail's fingerprints the whole conversation holds once (one held twice in the tail never is)."""
    counts: dict[str, int] = {}
    for fingerprint in tail:
        counts[fingerprint] = counts.get(fingerprint, 0) + 1
    single = [fingerprint for fingerprint, n in counts.items() if n == 1]
    return frozenset(stored.once(single)) if single else frozenset()


@dataclass(frozen=True)
class _Evidence:
    """How well the messages before a candidate anchor agree with the stored ones before it."""

    agreeing: int  # consecutive agreeing pairs of predecessors
    proven: bool  # the anchor or an agreeing predecessor is a row the conversation holds once
    contradicted: (
        bool  # the run ended at a disagreeing pair (else one side, or the window, ran out)
    )
    cut: bool = False  # it ran out at the start of a tail that is not the conversation's start

    def confirms(self, minimum: int) -> bool:
        """Nothing disagrees before the run ends (at a row held once, where the incoming list
        begins, or where the conversation begins) and at least ``minimum`` pairs agree. A row
        held once proves the stored side only: a new message may repeat it ("hi" again), hence
        the minimum. A run cut short by the end of the stored window proves nothing."""
        return not self.contradicted and not self.cut and self.agreeing >= minimum

    @property
    def plausible(self) -> bool:
        """It agrees as far as a fixed ``WINDOW`` looks."""
        return self.agreeing >= WINDOW - 1

    @property
    def long(self) -> bool:
        """It agrees over ``WINDOW`` up to where the host's list or the conversation begins, or
        over ``CUT_RUN`` up to the start of the stored window (a few short repeats at the
        window's start may agree by chance; half the window of them hardly does)."""
        return self.agreeing >= (CUT_RUN if self.cut else WINDOW - 1)

    def certain(self, minimum: int) -> bool:
        """Enough to stop looking: proven by a row held once, or long; nothing disagrees on the way."""
        return not self.contradicted and self.agreeing >= minimum and (self.proven or self.long)

    def admissible(self, minimum: int) -> bool:
        """Worth keeping as a candidate: confirmed over a shorter run (one side began early),
        or agreeing over ``WINDOW`` and disagreeing (or the window ending) only further back."""
        return self.confirms(minimum) or self.plausible


def _evidence(
    incoming: _FromEnd,
    rank: int,
    tail: Sequence[str],
    j: int,
    once: frozenset[str],
    minimum: int,
    complete: bool,
) -> _Evidence:
    """Walk back from incoming[rank] = tail[j] while the pairs agree.

    The walk stops as soon as it has passed ``minimum`` pairs and a row the conversation holds
    once (proof: that message can be nowhere else), at the first disagreement, or where the
    incoming list or the tail begins (``complete``: the tail begins where the conversation
    does). Short replies ("ok", a tool result reusing ``call_0``) prove nothing alone; only
    their agreeing context does. Bounded by the tail's length.
    """
    # While messages wait unstored (strict), a row held once is not proof on its own: a model that
    # repeats a long reply would make the new, unstored reply pass for the stored one, and
    # everything between them for stored. The message before it must agree where there is one.
    need = max(minimum, 1) if incoming.strict else minimum
    k, proven = 0, False
    while True:
        proven = proven or tail[j - k] in once
        if proven and k >= need:
            return _Evidence(k, True, False)
        k += 1
        before = incoming.get(rank + k)
        if before is None or j - k < 0:
            return _Evidence(k - 1, proven, False, cut=before is not None and not complete)
        if before[1] != tail[j - k]:
            return _Evidence(k - 1, proven, True)


def _too_long(incoming: _FromEnd, rank: int, j: int, complete: bool) -> bool:
    """When the tail is the whole conversation, an anchor may not claim more history than it has."""
    return complete and incoming.get(rank + j + 1) is not None


class _Candidates:
    """The best anchor found so far that was not certain enough to stop at."""

    def __init__(self) -> None:
        self.best: tuple[tuple[bool, int, bool, int, int], tuple[int, int]] | None = None

    def offer(self, evidence: _Evidence, newest: bool, rank: int, found: tuple[int, int]) -> None:
        """More agreement wins (a row held once first); on a tie the newest stored row, then
        the latest incoming message, then the newest position."""
        score = (evidence.proven, evidence.agreeing, newest, -rank, found[1])
        if self.best is None or score > self.best[0]:
            self.best = (score, found)


def new_start(
    incoming: _FromEnd,
    tail: Sequence[str],
    complete: bool = False,
    once: frozenset[str] = frozenset(),
    certain_only: bool = False,
) -> tuple[int, int | None]:
    """Index of the first incoming message not already stored, and the position in
    ``tail`` of the stored message just before it (None when nothing matched).

    First choice: the latest incoming message equal to the newest stored one and
    certainly that row (see :class:`_Evidence`). Else the latest incoming message equal
    to any stored tail message, tried at every position it holds in the tail (a short
    reply repeats; its newest copy may belong to a turn the host never acknowledged) and
    certain with at least one agreeing predecessor. Else the candidate with the most
    agreement. Else nothing in the incoming list is stored yet. ``once`` holds the tail's
    fingerprints the conversation holds once; ``complete`` says the tail is the whole
    conversation. A usual turn stops at a certain anchor among the newest messages; only
    an uncertain one (a short list, a short conversation) looks further. ``certain_only``
    leaves out the uncertain candidates (the caller looks beyond the tail first).
    """
    if not tail:
        return 0, None
    last = len(tail) - 1
    candidates = _Candidates()
    rank = 0
    while (item := incoming.get(rank)) is not None:
        if item[1] == tail[last] and not _too_long(incoming, rank, last, complete):
            evidence = _evidence(incoming, rank, tail, last, once, 0, complete)
            if evidence.certain(0):
                return item[0] + 1, last
            if evidence.admissible(0) and not certain_only:
                candidates.offer(evidence, True, rank, (item[0] + 1, last))
        rank += 1
    positions: dict[str, list[int]] = {}
    for j, fingerprint in enumerate(tail):
        positions.setdefault(fingerprint, []).append(j)
    rank = 0
    while (item := incoming.get(rank)) is not None:
        certain = _Candidates()
        for j in positions.get(item[1], ()):
            if _too_long(incoming, rank, j, complete):
                continue
            evidence = _evidence(incoming, rank, tail, j, once, 1, complete)
            if evidence.certain(1) or (evidence.admissible(1) and not certain_only):
                (certain if evidence.certain(1) else candidates).offer(
                    evidence, j == last, rank, (item[0] + 1, j)
                )
        if certain.best is not None:
            return certain.best[1]
        rank += 1
    return candidates.best[1] if candidates.best is not None else (0, None)


@dataclass(frozen=True)
class Seen:
    """How far into the host's list the last ingest got: its length and last fingerprint.

    Between compactions the host only appends to its list, so when the new list
    extends the one we saw (and nobody else stored rows since), the new messages
    are simply the ones past that length: exact even for repetitive content,
    where alignment by content alone is ambiguous.
    """

    count: int
    fingerprint: str
    stored_fingerprint: str = ""
    # The host's message object at ``count - 1``: the same object proves the same list
    # even when its content repeats ("ok", "continue").
    anchor: Any = field(default=None, compare=False, repr=False)
    # The stored seq of the list's last stored message (where the host's list ends in the store).
    end_seq: int | None = field(default=None, compare=False)

    @property
    def stored(self) -> str:
        """The fingerprint the store's newest row must have for the list to extend."""
        return self.stored_fingerprint or self.fingerprint


class Selection:
    """A selector for :meth:`Store.append`; remembers what it saw for the next call.

    It works on the host's list as given and touches only its newest part on a
    usual turn, so its cost does not grow with a history the host re-sends whole.
    """

    def __init__(
        self,
        normalizer: Normalizer,
        host: HostList,
        seen: Seen | None,
        fresh_start: bool = False,
        strict: bool = False,
        limit: int | None = None,
        handed: Mapping[int, tuple[Any, int]] | None = None,
        also: Seen | None = None,
    ) -> None:
        self.normalizer = normalizer
        # A second list the host may go on with: after a prompt that kept unstored messages, the
        # host's own list (stored up to a prefix) as well as the prompt (core._remember_stored_part).
        self.also = also
        # The message objects our last prompt handed the host, by id(): (the object, its store id).
        # The same object in the host's list is that stored row, whatever surrounds it.
        self.handed = handed or {}
        # At most this many records per run (None: all): a bounded ingest stores a huge list as a
        # series of prefixes, each its own transaction (see LcmCore._ingest).
        self.limit = limit
        # Index just past the last message selected when ``limit`` cut the run short (None: the run
        # selected every new message); the messages from there on wait for the next run.
        self.cut: int | None = None
        # The host's list, each message viewed once for the whole host call (hostlist.py).
        self.host = host
        self.messages = host.messages
        self.seen_before = seen
        self.fresh_start = fresh_start
        # Where a wrong "already stored" would lose messages (some wait unstored): anchors must not
        # be contradicted by the message before them, and the remembered list must be the same object.
        self.strict = strict
        self.seen_after: Seen | None = None
        self.extended = False
        self.last = host.last()
        # The stored seq the host's list ends at, once selected (None: nothing in it is stored).
        self.end_seq: int | None = None
        self._now: Seen | None = None
        # Index of the first message not stored yet, and whether the stored messages before it
        # end with the conversation's newest row (set by each run; see LcmCore.keep_unstored).
        self.start: int | None = None
        self.follows_newest = False

    @property
    def empty(self) -> bool:
        return self.last is None

    def seen_now(self) -> Seen | None:
        """Where the host's list stands; computed once per selection (the list does not change
        during one host call, and the newest message may be megabytes long)."""
        if self.last is None:
            return None
        if self._now is None:
            anchor = self.messages[self.last]
            self._now = Seen(len(self.messages), self.normalizer.fingerprint(anchor), anchor=anchor)
        return self._now

    def __call__(self, stored: StoredPrints) -> list[MessageIn]:
        incoming = _FromEnd(
            self.host, self.normalizer, stored.fingerprint_of, self.strict, stored.present
        )
        start = 0 if self.fresh_start else self._extension(stored)
        self.extended = start is not None
        anchor_seq = self._extension_end(stored) if start else None
        if start is None:
            start, anchor_seq = self._align(incoming, stored)
            start, anchor_seq = max(
                (start, anchor_seq), self._handed_anchor(stored), key=lambda a: a[0]
            )
        self.start = start
        self.follows_newest = (
            self.extended or self.fresh_start or self._after_newest(incoming, start, stored)
        )
        records = self._records(incoming, start)
        # New records go after the newest row, so the list then ends at the last of them;
        # else it ends at the stored message it was aligned on.
        self.end_seq = stored.last_seq() + len(records) if records else anchor_seq
        self.seen_after = self._prefix_seen(records) if self.cut is not None else self._whole_seen()
        # A cut selection is followed by the next chunk of the same list: keep what was prepared (a bulk import's cost).
        self.normalizer.forget(keep=self.cut is not None)
        return records

    def _records(self, incoming: _FromEnd, start: int) -> list[MessageIn]:
        """The records of the kept messages from ``start`` on, in order; at most ``limit`` of them
        (then :attr:`cut` says where the rest begins)."""
        messages, records, last = self.messages, list[MessageIn](), start
        self.cut = None
        limit = len(messages) if self.limit is None else max(1, self.limit)
        for index in range(start, len(messages)):
            if not self.host.is_storable(index):
                continue
            caller = caller_of(messages, index) if self.normalizer.ignoring else None
            fingerprint = incoming.cached(index) or self.normalizer.fingerprint_if_kept(
                messages[index], caller
            )
            if fingerprint is None:
                continue
            if len(records) == limit:
                self.cut = last + 1
                break
            records.append(self.normalizer.normalize(messages[index], fingerprint))
            last = index
        return records

    def _whole_seen(self) -> Seen | None:
        now = self.seen_now()
        return replace(now, end_seq=self.end_seq) if now is not None else None

    def _prefix_seen(self, records: list[MessageIn]) -> Seen:
        """What a run cut short leaves stored: the host's list up to its last selected message.

        The next run extends exactly this prefix (same message object at ``count - 1``, the
        store's newest row its record), so it resumes at the first message not stored, even
        when that message repeats the one before it ("ok", "ok").
        """
        assert self.cut is not None
        anchor = self.messages[self.cut - 1]
        fingerprint = self.normalizer.fingerprint(anchor)
        stored = records[-1].fingerprint
        return Seen(
            self.cut,
            fingerprint,
            "" if stored == fingerprint else stored,
            anchor=anchor,
            end_seq=self.end_seq,
        )

    def _extension_end(self, stored: StoredPrints) -> int:
        """Where the list seen before ends in the store (the newest row when not recorded)."""
        seen = self.seen_before
        return seen.end_seq if seen is not None and seen.end_seq is not None else stored.last_seq()

    @staticmethod
    def _after_newest(incoming: _FromEnd, start: int, stored: StoredPrints) -> bool:
        """Is the newest kept message before ``start`` the conversation's newest row (or is
        nothing stored at all)? Only then does the unstored rest continue the store."""
        newest = stored.tail(1)
        if not newest:
            return True
        rank = 0
        while (item := incoming.get(rank)) is not None:
            if item[0] < start:
                return item[1] == newest[0]
            rank += 1
        return False

    def _extension(self, stored: StoredPrints) -> int | None:
        """Where the new messages start when the list extends one seen before (the list seen
        last, else :attr:`also`); that list becomes :attr:`seen_before`."""
        for seen in (self.seen_before, self.also):
            start = self._extends(seen, stored)
            if start is not None:
                self.seen_before = seen
                return start
        return None

    def _extends(self, seen: Seen | None, stored: StoredPrints) -> int | None:
        if seen is None or not 0 < seen.count <= len(self.messages):
            return None
        last = self.host.last(seen.count)
        if last is None or self.normalizer.fingerprint(self.messages[last]) != seen.fingerprint:
            return None
        if stored.tail(1) != [seen.stored]:
            return None
        if self.messages[last] is not seen.anchor and (
            self.strict or not self._names_newest_row(seen, stored)
        ):
            return None  # while messages wait unstored only the very same list object extends
        return seen.count

    @staticmethod
    def _names_newest_row(seen: Seen, stored: StoredPrints) -> bool:
        """Another object with the fingerprint seen last is the newest row only when the
        conversation holds that fingerprint once: a short reply or a tool result reusing
        ``call_0`` at the same index of another list may be any of its copies."""
        return seen.stored == seen.fingerprint and bool(stored.once([seen.fingerprint]))

    def _handed_anchor(self, stored: StoredPrints) -> tuple[int, int | None]:
        """After the newest message object our last prompt handed over, and still unchanged: that
        object is its stored row, even where the prompt left gaps (a pinned request, rows behind
        the frontier) that content alignment cannot see across. Scans at most HANDED_SCAN messages."""
        if not self.handed:
            return 0, None
        messages = self.messages
        for index in range(len(messages) - 1, max(-1, len(messages) - 1 - HANDED_SCAN), -1):
            entry = self.handed.get(id(messages[index]))
            if entry is None or entry[0] is not messages[index]:
                continue
            row = stored.row_of(entry[1])
            if row is not None and row[1] in self.normalizer.fingerprints(messages[index]):
                return index + 1, row[0]
        return 0, None

    def _align(self, incoming: _FromEnd, stored: StoredPrints) -> tuple[int, int | None]:
        """Find where the host's list meets the store: the newest rows first, then anywhere.
        Returns the first new index and the stored seq of the message before it."""
        rows = stored.tail_rows(SHORT_TAIL)
        tail = [fingerprint for _, fingerprint in rows]
        once, complete = _once_in(tail, stored), len(tail) < SHORT_TAIL
        start, j = new_start(
            incoming, tail, complete=complete, once=once, certain_only=not complete
        )
        if j is None and not complete:
            # Nothing certain among the newest rows: an anchor further back proven by a row held
            # once beats an uncertain one here (an old slice re-sent whose first messages match
            # the window's start by chance); a mere run of repeats there does not (it may be chance).
            start, seq = self._locate(incoming, stored, proven_only=True)
            if seq is not None:
                return start, seq
            start, j = new_start(incoming, tail, once=once)
            if j is None:
                return self._locate(incoming, stored)
        return (start, rows[j][0]) if j is not None else (0, None)

    def _locate(
        self, incoming: _FromEnd, stored: StoredPrints, proven_only: bool = False
    ) -> tuple[int, int | None]:
        """The newest incoming message stored anywhere in the conversation, confirmed
        like any anchor against the stored messages before it, at the best of its
        newest stored positions (``proven_only``: only an anchor a row held once proves)."""
        while incoming.get(len(incoming.kept)) is not None:
            pass
        present = stored.present([fp for _, fp in incoming.kept])
        once = frozenset(stored.once(sorted(present)))
        for rank, (_, fingerprint) in enumerate(incoming.kept):
            if fingerprint not in present:
                continue
            best: tuple[tuple[bool, int, int], int] | None = None
            for seq in stored.seqs(fingerprint, LOCATE_POSITIONS):
                window = stored.window(seq, WINDOW)
                j = len(window) - 1
                if _too_long(incoming, rank, j, seq <= WINDOW):
                    continue
                evidence = _evidence(incoming, rank, window, j, once, 1, seq <= WINDOW)
                if (
                    evidence.certain(1) and evidence.proven
                    if proven_only
                    else evidence.admissible(1)
                ):
                    score = (evidence.proven, evidence.agreeing, seq)
                    best = max(best, (score, seq)) if best is not None else (score, seq)
            if best is not None:
                return self._forward(incoming, stored, rank, best[1])
        return 0, None

    @staticmethod
    def _forward(incoming: _FromEnd, stored: StoredPrints, rank: int, seq: int) -> tuple[int, int]:
        """From the anchor incoming[rank] = stored ``seq``, follow the host's list while it repeats
        the stored rows after it: a short reply there has too many stored copies to be found by
        itself, but its place is known. Returns the first new index and the seq before it."""
        following = [incoming.kept[r] for r in range(rank - 1, -1, -1)]  # oldest first
        index = incoming.kept[rank][0]
        for start in range(0, len(following), 500):
            chunk = following[start : start + 500]
            rows = stored.after(seq, len(chunk))
            for (next_index, fingerprint), (next_seq, stored_fingerprint) in zip(
                chunk, rows, strict=False
            ):
                if fingerprint != stored_fingerprint:
                    return index + 1, seq
                index, seq = next_index, next_seq
            if len(rows) < len(chunk):
                break
        return index + 1, seq

"""What the core remembers of the host's list between host calls, and the bounded ingest on it.

The host hands over overlapping copies of its history many times a turn. Knowing how far the list
it goes on with is stored (:class:`~.align.Seen`), which message objects our last prompt handed it,
and whether messages wait unstored (a refused write, a time bound that ran out) lets each call
store exactly what follows: nothing twice, skipped or reordered, by position where content alone
would be ambiguous. It also decides whether the prompt we built is the host's list already, so
that the list goes back as given.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from typing import Any

from ..base.outputs import PREFIX as OUTPUT_PREFIX
from ..base.payloads import PLACEHOLDER_PREFIX
from ..base.stats import Stats
from ..base.tokens import written_text
from ..base.wire import problems
from ..prompt.assemble import is_block, same_block
from ..prompt.blocks import Item
from ..store import Store
from .align import Seen, Selection
from .hostlist import HostList
from .steps import Normalizer

# New messages stored per transaction when a host call brings many (the store's rows per INSERT
# statement): the time bound is checked between these, never on a usual turn's few messages.
INGEST_CHUNK_ROWS = 2000

# The newest messages of the stored list that a host list must repeat, as the same objects or with
# the same fingerprints at the same places, for its prefix to count as stored while the store can
# be neither read nor written (ListMemory.stored_prefix).
PROOF_MESSAGES = 8


class ListMemory:
    """How far the host's list is stored, as the last host calls left it (see the module docstring)."""

    def __init__(self, store: Store, normalizer: Normalizer, stats: Stats) -> None:
        self.store, self.normalizer, self.stats = store, normalizer, stats
        self.fresh_start = False  # the context was started afresh: the next list is all new
        self.seen: Seen | None = None
        self.seen_also: Seen | None = None  # see remember_stored_part
        # The last PROOF_MESSAGES messages of the lists ``seen`` and ``seen_also`` describe.
        self.proof: tuple[Any, ...] = ()
        self.proof_also: tuple[Any, ...] = ()
        # The host's own list as the last stored ingest left it, with its proof: a host that
        # re-sends its whole history goes on with that list, not with our prompt (``seen``).
        self.ingested: tuple[Seen, tuple[Any, ...]] | None = None
        # The message objects the last compress handed the host (align.Selection.handed).
        self.handed: dict[int, tuple[Any, int]] = {}
        # The stored seq the list of the last ingest ends at (None: unknown, or nothing of it stored).
        self.position: int | None = None
        # A write failed since the last stored ingest: host messages may wait unstored, so which of
        # them are stored is decided strictly (align.Selection.strict) until one is stored again.
        self.backlog = False
        # The last ingest's selection when time ran out before every new message was stored (its
        # ``cut`` is the first one waiting); None when the last ingest stored everything.
        self.pending: Selection | None = None

    def forget(self) -> None:
        """What was remembered of the host's list belongs to the conversation it was seen in."""
        self.seen = self.seen_also = None
        self.proof = self.proof_also = ()
        self.ingested = None
        self.handed = {}
        self.pending = None

    def ingest(
        self,
        host: HostList,
        conversation_id: int | None,
        session_id: str,
        source: str,
        end: float,
        chunk_rows: int,
    ) -> int:
        """Store the new messages as a series of prefixes, one transaction each, and stop after
        the one during which ``end`` (monotonic) passed (checked only between chunks of
        ``chunk_rows``: a usual turn is one chunk and never looks at the clock).

        Each chunk ends by remembering the stored prefix as the list seen (:meth:`Selection.cut`),
        so the next chunk, or the next host call, extends exactly that prefix: nothing is stored
        twice, skipped or reordered. What is left is :attr:`pending`. ``conversation_id`` None:
        the session stores nothing.
        """
        self.position = None
        self.pending = None
        if conversation_id is None or not len(host):
            return 0
        select = self.selection(host, strict=self.backlog, limit=chunk_rows)
        if select.empty:
            return 0
        if self._unchanged_since_last(select):
            assert self.seen is not None
            self.position = self.seen.end_seq
            return 0
        stored = self._store(select, conversation_id, session_id, source)
        while select.cut is not None and time.monotonic() < end:
            select = self.selection(host, strict=True, limit=chunk_rows)  # the rest waits meanwhile
            stored += self._store(select, conversation_id, session_id, source)
        if select.cut is not None:
            self.pending, self.backlog = select, True
            self.stats.ingest_backlog = len(host) - select.cut
        return stored

    def selection(self, host: HostList, strict: bool, limit: int | None) -> Selection:
        """Which of ``host`` is new; ``limit`` None: the probe of what waits unstored, which
        neither stores nor trusts the objects handed over."""
        return Selection(
            self.normalizer,
            host,
            self.seen,
            fresh_start=self.fresh_start,
            strict=strict,
            limit=limit,
            handed=self.handed if limit is not None else None,
            also=self.seen_also,
        )

    def _store(self, select: Selection, conversation_id: int, session_id: str, source: str) -> int:
        """One transaction: store what ``select`` picks and remember how far the host's list is stored."""
        ids = self.store.append(conversation_id, session_id, source, select)
        self.position = select.end_seq
        self.fresh_start = False
        if ids or select.extended or self.seen is None:
            # A list that only re-read stored messages (the host's pre-compression copy at session
            # end, a replay) is not the one the host goes on with: keep the last that was.
            self.seen, self.seen_also = select.seen_after, None
            self.proof, self.proof_also = _proof(select.messages, self.seen), ()
            if self.seen is not None:
                self.ingested = self.seen, self.proof
        self.stats.stored += len(ids)
        self.stats.unstored_messages = self.stats.ingest_backlog = 0
        self.backlog = False
        return len(ids)

    def _unchanged_since_last(self, select: Selection) -> bool:
        """The host re-sent exactly the list we saw last: skip the write transaction.

        Exactly: the same length and the same message object at its end. An equal fingerprint
        is not enough: a list of the same length ending in another "ok" is another list.
        """
        now = select.seen_now()
        return (
            not self.fresh_start
            and self.seen is not None
            and now == self.seen
            and now is not None
            and now.anchor is self.seen.anchor
        )

    def remember_stored_part(
        self, out: list[dict[str, Any]], newest: dict[str, Any], conversation_id: int | None
    ) -> None:
        """The host goes on with ``out``: it is stored up to ``newest`` (the store's newest row), so
        the next ingest stores what follows, by position rather than by content (repeated replies
        would make content alignment take an unstored message for a stored one)."""
        count = next(i for i, m in enumerate(out) if m is newest) + 1
        stored = self.store.last_fingerprint(conversation_id) if conversation_id else None
        self.remember_prefix(out, count, stored or "")

    def remember_prefix(self, out: Sequence[Any], count: int, stored: str) -> None:
        """The host goes on with ``out``, whose first ``count`` messages are stored (the last of them
        matching the store's newest row, whose fingerprint is ``stored``), or with its own list."""
        newest = out[count - 1]
        self.seen_also, self.proof_also = self.seen, self.proof
        self.seen = Seen(count, self.normalizer.fingerprint(newest), stored, anchor=newest)
        self.proof = _proof(out, self.seen)

    def stored_prefix(self, host: HostList) -> tuple[int, Seen] | None:
        """How many of ``host``'s first messages are stored, told without reading the store, and
        the remembered list that says so; None when that cannot be told.

        Only a store that can be neither read nor written needs it, so that the prompt may leave
        out what is stored and stay bounded: ``host`` must be as long as a list the last stored
        ingest (or our last prompt) left, and repeat that list's newest :data:`PROOF_MESSAGES`
        messages at the same places, as the same objects or with the same fingerprints. Any doubt
        (a rewritten or shorter list, a fresh start) says nothing is known.
        """
        if self.fresh_start:
            return None
        lists = [(self.seen, self.proof), (self.seen_also, self.proof_also), self.ingested]
        for seen, proof in (known for known in lists if known is not None):
            if seen is None or not proof or seen.count > len(host):
                continue
            start = seen.count - len(proof)
            if all(
                new is old or (isinstance(new, Mapping) and self._same(new, old))
                for old, new in zip(proof, host.messages[start : seen.count], strict=True)
            ):
                return seen.count, seen
        return None

    def _same(self, new: Mapping[str, Any], old: Any) -> bool:
        fingerprint = self.normalizer.fingerprint
        return isinstance(old, Mapping) and fingerprint(new) == fingerprint(old)

    def remember_output(
        self,
        result: list[dict[str, Any]],
        items: Mapping[int, Item],
        conversation_id: int,
        upto: int | None,
        last_seq: int,
    ) -> None:
        """The host continues from the list we return: the next ingest extends it.

        Only when that list ends at the newest stored row: an answer bounded before
        it (the host keeps the newer messages itself and appends them) is found by
        alignment instead, which sees those messages are stored already.
        ``items``: the prompt items by id() of their message; ``last_seq``: the conversation's
        newest seq when ``result`` was assembled.
        """
        self.handed = {
            id(m): (m, items[id(m)].store_id or 0)
            for m in result
            if id(m) in items and items[id(m)].message is m
        }
        ours = HostList(result, self.normalizer.seal)
        seen = Selection(self.normalizer, ours, None).seen_now()
        self.seen_also, self.proof_also = None, ()
        if seen is None or (upto is not None and upto < last_seq):
            self.seen, self.proof = None, ()
            return
        stored = self.store.last_fingerprint(conversation_id)
        self.seen = Seen(
            seen.count, seen.fingerprint, stored or "", anchor=seen.anchor, end_seq=last_seq
        )
        self.proof = _proof(result, self.seen)


def _proof(messages: Sequence[Any], seen: Seen | None) -> tuple[Any, ...]:
    """The newest messages of the list ``seen`` describes (references: nothing is fingerprinted
    unless the store fails)."""
    if seen is None:
        return ()
    return tuple(messages[max(0, seen.count - PROOF_MESSAGES) : seen.count])


def same_prompt(normalizer: Normalizer, ours: Sequence[dict[str, Any]], theirs: HostList) -> bool:
    """Is the prompt we built the host's list already? Same summaries, and the same
    messages in the same order by their provider-visible identity (the host's own
    fields, which we may not have, do not count). The identity counts a payload and the
    placeholder naming its file as one, but the provider would get the payload itself
    (50 MB of base64): a message whose stored copy names a file the host's does not is a change."""
    if len(ours) != len(theirs) or problems(theirs.messages):
        return False  # a list a provider would reject is never handed back as it is
    try:
        return all(
            same_block(mine, host)
            if is_block(mine)
            else theirs.is_storable(index)
            and normalizer.fingerprint(mine) == normalizer.fingerprint(host)
            and not any(
                names_payload(mine, p) and not names_payload(host, p)
                for p in (PLACEHOLDER_PREFIX, OUTPUT_PREFIX)
            )
            for index, (mine, host) in enumerate(zip(ours, theirs.messages, strict=True))
        )
    finally:
        normalizer.forget()


def names_payload(message: Any, prefix: str = PLACEHOLDER_PREFIX) -> bool:
    """Does the message name a payload file (the payload guard moved an inline payload out, or,
    with outputs.PREFIX, a large tool output is its stub)?"""
    content = message.get("content") if isinstance(message, dict) else None
    text = written_text(content)
    calls = message.get("tool_calls") if isinstance(message, dict) else None
    return prefix in text or (bool(calls) and prefix in json.dumps(calls, default=str))

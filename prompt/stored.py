"""Stored rows as prompt items, kept between assemblies.

Every compress assembles the prompt from the conversation's newest rows, and most of them were in
the last prompt too. A row changes after it is stored only by an operator's rewrite (scrub, rekey,
backfill), which bumps a counter every assembly reads, so its item is built once and reused until
then; only the rows not cached yet are read whole (a row may be megabytes of tool output).
"""

from __future__ import annotations

from ..base.records import ConversationState, StoredMessage, SummaryNode
from ..store import Store
from .blocks import Item

# Prompt items kept between assemblies (rows never change once stored).
ITEM_CACHE_SIZE = 8192


class StoredItems:
    """The item cache of one core, and the reads of the rows a prompt is built from."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.cache: dict[int, Item] = {}
        # Per conversation, the newest seq whose row came whole into the cache as part of a
        # window: rows after it are read whole with the window's ids, in the same call.
        self.newest: dict[int, int] = {}
        self.rewrites = 0  # the database's rewrite counter the cached items were read under
        # Context summaries by id: a summary is written once (a rewrite moves the counter), and
        # the context list of a long conversation is tens of kilobytes to read again every turn.
        self.nodes: dict[int, SummaryNode] = {}

    def prompt(
        self, conversation_id: int, window: int, upto: int | None
    ) -> tuple[ConversationState, list[Item], list[SummaryNode], Item | None]:
        """Everything an assembly reads, in one store call: the conversation, the newest
        ``window`` raw rows as items, the context summaries and the pinned request."""
        held = list(self.nodes)
        reads = self.store.prompt_reads(
            conversation_id, window, upto, self.newest.get(conversation_id, 0), held
        )
        if reads.rewrites != self.rewrites:  # an operator rewrote stored text: items may be stale
            self._clear()
            self.rewrites = reads.rewrites
            if len(reads.nodes) < len(reads.node_ids):  # read as held, and held no longer
                return self.prompt(conversation_id, window, upto)
        # the held summaries first: building the items may clear the caches (they are full)
        nodes = self._nodes(reads.node_ids, reads.nodes)
        given = {m.id: m for m in reads.rows}
        items = self._items(reads.ids, given)
        if reads.rows:
            self.newest[conversation_id] = max(
                self.newest.get(conversation_id, 0), reads.rows[-1].seq
            )
        request = self.item(reads.request) if reads.request is not None else None
        return reads.state, items, nodes, request

    def _nodes(self, ids: list[int], given: list[SummaryNode]) -> list[SummaryNode]:
        """The context summaries in order, the ones not held taken into the cache; only the
        context list's are kept (what left it is not asked for again)."""
        fresh = {n.id: n for n in given}
        self.nodes = {i: fresh.get(i) or self.nodes[i] for i in ids}
        return [self.nodes[i] for i in ids]

    def _items(self, ids: list[int], given: dict[int, StoredMessage]) -> list[Item]:
        """``ids`` as items: cached, built from ``given`` rows, or read whole by id."""
        items = {i: self.cache[i] for i in ids if i in self.cache}
        missing = [i for i in ids if i not in items and i not in given]
        rows = [given[i] for i in ids if i not in items and i in given]
        fetched = {m.id: Item.stored(m) for m in rows + self.store.messages_by_ids(missing)}
        items.update(fetched)
        if len(self.cache) + len(fetched) > ITEM_CACHE_SIZE:
            self._clear()
        if len(self.cache) + len(fetched) <= ITEM_CACHE_SIZE:
            self.cache.update(fetched)
        return [items[i] for i in ids]

    def _clear(self) -> None:
        self.cache.clear()
        self.newest.clear()  # the rows before it are no longer held
        self.nodes.clear()

    def item(self, message: StoredMessage) -> Item:
        """Items are immutable per stored row; reuse them across assemblies."""
        item = self.cache.get(message.id)
        if item is None:
            if len(self.cache) >= ITEM_CACHE_SIZE:
                self._clear()
            item = self.cache[message.id] = Item.stored(message)
        return item

    def by_message(self) -> dict[int, Item]:
        """The cached items by id() of their message (which of a prompt's messages are rows)."""
        return {id(item.message): item for item in self.cache.values()}

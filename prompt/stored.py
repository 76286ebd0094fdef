"""Stored rows as prompt items, kept between assemblies.

Every compress assembles the prompt from the conversation's newest rows, and most of them were in
the last prompt too. A row never changes once stored, so its item is built once and reused; only
the rows not cached yet are read whole (a row may be megabytes of tool output).
"""

from __future__ import annotations

from ..base.records import ConversationState, StoredMessage
from ..store import Store
from .blocks import Item

# Prompt items kept between assemblies (rows never change once stored).
ITEM_CACHE_SIZE = 8192


class StoredItems:
    """The item cache of one core, and the reads of the rows a prompt is built from."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.cache: dict[int, Item] = {}

    def raw(
        self, conversation_id: int, after_seq: int, window: int, upto: int | None
    ) -> list[Item]:
        """The newest ``window`` raw rows as prompt items; only rows not cached yet are read whole."""
        ids = self.store.message_ids_newest(conversation_id, after_seq, window, upto)
        items = {i: self.cache[i] for i in ids if i in self.cache}
        fetched = {
            m.id: Item.stored(m)
            for m in self.store.messages_by_ids([i for i in ids if i not in items])
        }
        items.update(fetched)
        if len(self.cache) + len(fetched) > ITEM_CACHE_SIZE:
            self.cache.clear()
        if len(self.cache) + len(fetched) <= ITEM_CACHE_SIZE:
            self.cache.update(fetched)
        return [items[i] for i in ids]

    def item(self, message: StoredMessage) -> Item:
        """Items are immutable per stored row; reuse them across assemblies."""
        item = self.cache.get(message.id)
        if item is None:
            if len(self.cache) >= ITEM_CACHE_SIZE:
                self.cache.clear()
            item = self.cache[message.id] = Item.stored(message)
        return item

    def newest_request(self, state: ConversationState, upto: int | None = None) -> Item | None:
        """The request to pin: the newest user message a person sent at or before ``upto``,
        never host scaffolding (a todo snapshot, a nudge) that arrived after it."""
        message = self.store.newest_request(state.id, upto)
        return self.item(message) if message is not None else None

    def by_message(self) -> dict[int, Item]:
        """The cached items by id() of their message (which of a prompt's messages are rows)."""
        return {id(item.message): item for item in self.cache.values()}

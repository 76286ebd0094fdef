"""What the model can already see: the rows of the current prompt, so a search can list them last.

A search made from inside a turn finds, first of all, the request being answered (stored a
moment earlier, with the very words of the query) and the fresh tail around it. Those hits
cost the model a slot and tell it nothing new; the rows it cannot see (compacted out, other
conversations) are the ones it searched for. The prompt is rebuilt from the store, so the
store says what is in it: every raw row after the frontier, the pinned request, and the
summaries in the context list.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..store import Store


@dataclass(frozen=True)
class Visible:
    """The rows of one conversation's current prompt."""

    conversation_id: int
    after_seq: int  # raw rows with a higher seq are shown (the frontier)
    request_id: int | None  # the pinned request, shown although the frontier passed it
    node_ids: frozenset[int]  # summaries in the context list

    def shows_message(self, conversation_id: int, seq: int, message_id: int) -> bool:
        return conversation_id == self.conversation_id and (
            seq > self.after_seq or message_id == self.request_id
        )

    def shows_summary(self, node_id: int) -> bool:
        return node_id in self.node_ids


def visible_now(store: Store, conversation_id: int) -> Visible:
    """The prompt as the next assembly builds it from the store (the same frontier, request
    and context list); a message the budget squeezed out of it still counts as shown. Read as
    an assembly reads them, in one store call (no raw rows: the frontier says which are shown)."""
    reads = store.prompt_reads(conversation_id, 0, None, 0)
    state, request = reads.state, reads.request
    pinned = request.id if request is not None and request.seq <= state.frontier_seq else None
    nodes = frozenset(reads.node_ids)
    return Visible(conversation_id, state.frontier_seq, pinned, nodes)

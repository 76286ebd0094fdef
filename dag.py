"""The summary DAG: nodes, their edges to sources, and the active context.

A node is never deleted. Every node has at least one edge, and following
edges from any node always ends at raw messages: a depth-0 node points at
messages, a deeper node at child nodes. The active context of a conversation
is an ordered list of node ids (``context_items``) plus a frontier: raw
messages with ``seq`` above the frontier are in context verbatim. Both change
together in one transaction per compaction (:meth:`Dag.publish`).

The tables and their SQL are the data layer's (``storage/summaries.py``); this
is the DAG's vocabulary for the services and the rule each node must keep.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .base.records import NewNode, StoredMessage, SummaryNode
from .store import Store


class Dag:
    def __init__(self, store: Store) -> None:
        self.store = store

    # -- writing ------------------------------------------------------------

    def add_node(self, node: NewNode) -> int:
        """Insert a node and its edges atomically; exactly one edge kind is allowed."""
        if bool(node.message_ids) == bool(node.child_ids):
            raise ValueError("a node links either messages or child nodes, and at least one")
        return self.store.add_summary(node)

    def publish(self, conversation_id: int, summary_ids: Sequence[int], frontier_seq: int) -> None:
        """Replace the active context of a conversation in one transaction (the frontier never moves back)."""
        self.store.publish_context(conversation_id, summary_ids, frontier_seq)

    # -- reading ------------------------------------------------------------

    def context(self, conversation_id: int) -> list[SummaryNode]:
        return self.store.context_nodes(conversation_id)

    def node(self, node_id: int) -> SummaryNode | None:
        return self.store.summary(node_id)

    def nodes(
        self, conversation_id: int, limit: int = 1000, after_id: int = 0
    ) -> list[SummaryNode]:
        return self.store.summaries(conversation_id, limit, after_id)

    def children(self, node_id: int) -> list[SummaryNode]:
        return self.store.child_summaries(node_id)

    def sources(self, node_id: int, offset: int = 0, limit: int = -1) -> list[StoredMessage]:
        """The raw messages a depth-0 node was made from, in order."""
        return self.store.summary_sources(node_id, offset, limit)

    def edge_count(self, node_id: int) -> int:
        return self.store.edge_count(node_id)

    def descendant_message_ids(self, node_id: int) -> list[int]:
        """Every raw message under a node, following edges down any depth."""
        return self.store.descendant_message_ids(node_id)

    def parents(self, kind: str, child_id: int) -> list[int]:
        return self.store.parent_ids(kind, child_id)

    def depth_counts(self, conversation_id: int) -> dict[int, int]:
        return self.store.depth_counts(conversation_id)

    # -- operator surface (cli/, maintenance/, importers/) ---------------------------

    def nodes_page(
        self,
        conversation_id: int | None,
        depth: int | None,
        after_id: int,
        limit: int,
        since: float | None = None,
    ) -> list[SummaryNode]:
        return self.store.summaries_page(conversation_id, depth, after_id, limit, since)

    def ancestors(self, node_id: int) -> list[SummaryNode]:
        """Every node above this one (its parents, their parents, ...), nearest depth first."""
        return self.store.ancestors(node_id)

    def in_context(self, node_id: int) -> bool:
        return self.store.in_context(node_id)

    def lineage_problems(self, sample: int = 10) -> dict[str, dict[str, Any]]:
        """Every broken DAG invariant: count and a few offending ids (empty dict when sound)."""
        return self.store.lineage_problems(sample)

    def node_ids_by_route(self, conversation_id: int, prefix: str) -> dict[str, int]:
        """route -> node id for nodes whose route starts with ``prefix`` (import provenance)."""
        return self.store.node_ids_by_route(conversation_id, prefix)

    # -- retrieval for the lcm_* tools (search.py, handlers/describe.py) ------------------------------

    def summary_id_bounds(
        self, conversation_id: int | None, conversation_ids: Sequence[int] | None = None
    ) -> tuple[int, int]:
        """First and last node id of a conversation, of several (an owner's), or of the whole store."""
        return self.store.summary_id_bounds(conversation_id, conversation_ids)

    def summary_hits(
        self,
        match: str,
        *,
        order: str,
        limit: int,
        bounds: tuple[int, int] | None,
        conversation_id: int | None = None,
        session_id: str | None = None,
        source: str | None = None,
        exclude_ids: Sequence[int] = (),
        conversation_ids: Sequence[int] | None = None,
    ) -> list[tuple[SummaryNode, float]]:
        """Summaries matching ``match`` in scope, "rank" (bm25) or "recent" order. A ``source``
        keeps nodes with at least one descendant raw message from that source (lineage)."""
        return self.store.summary_hits(
            match,
            order=order,
            limit=limit,
            bounds=bounds,
            conversation_id=conversation_id,
            session_id=session_id,
            source=source,
            exclude_ids=exclude_ids,
            conversation_ids=conversation_ids,
        )

    def summaries_in_period(
        self,
        conversation_id: int | None,
        since: float,
        until: float,
        *,
        depth: int | None,
        after: tuple[float, int] | None,
        limit: int,
        conversation_ids: Sequence[int] | None = None,
    ) -> list[SummaryNode]:
        """Nodes whose time span overlaps [since, until), oldest first, keyset-paged by (earliest_at, id)."""
        return self.store.summaries_in_period(
            conversation_id,
            since,
            until,
            depth=depth,
            after=after,
            limit=limit,
            conversation_ids=conversation_ids,
        )

    def roots(self, conversation_id: int, after_id: int, limit: int) -> list[SummaryNode]:
        """Nodes no other node points at (the tops of the DAG), in id order."""
        return self.store.root_summaries(conversation_id, after_id, limit)

    def descendant_span(self, node_id: int) -> tuple[int, int | None, int | None]:
        """How many raw messages lie under a node, and their smallest and largest store id."""
        return self.store.descendant_span(node_id)

"""A stored summary written again from its sources, for the repairs that rewrite summaries in
place (``fork_turns`` after removing turns, ``summary_health`` for broken ones).

A leaf is made from its messages, a condensed summary from its children's text; rebuilding goes
leaves first and deepest last, so a rewritten child feeds the summary above it. The node, its
edges and the context are never touched: only its text, so lineage holds.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from ..base.records import SummaryNode
from ..compaction.summarize import CallGuard, SourceItem, summarize
from ..store import Store

# (source texts as (label, text), the most tokens the new text may have) -> the new text.
Rebuild = Callable[[Sequence[tuple[str, str]], int], str]


def node_sources(store: Store, node: SummaryNode) -> list[tuple[str, str]]:
    """What ``node`` is made from, as (label, text): a leaf's messages, a condensed node's children."""
    if node.depth == 0:
        return [(f"#{m.id} {m.role}", m.content) for m in store.summary_sources(node.id)]
    return [(c.node_id, c.content) for c in store.child_summaries(node.id)]


def source_tokens(store: Store, node: SummaryNode) -> int:
    if node.depth == 0:
        return sum(m.tokens for m in store.summary_sources(node.id))
    return sum(c.tokens for c in store.child_summaries(node.id))


def leaves_first(nodes: Iterable[SummaryNode]) -> list[SummaryNode]:
    """The order to rebuild in: by depth, then as they were made."""
    return sorted(nodes, key=lambda n: (n.depth, n.id))


def extractive_rebuild(sources: Sequence[tuple[str, str]], target: int) -> str:
    """The offline summarizer's text for ``sources`` within ``target`` tokens (no LLM, no network)."""
    items = [SourceItem(label, text) for label, text in sources]
    return summarize(
        items,
        depth=0,
        target_tokens=max(16, target),
        focus=None,
        routes=[],
        guard=CallGuard(),
        deadline=None,
    ).text

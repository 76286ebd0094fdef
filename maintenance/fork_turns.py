"""Turns of the host's background review forks that earlier versions stored as the user's.

Before hermes-lcm told the host's forks apart (hostagents.py), the review fork's hook, which
carries the user's session id, stored its harness prompt ("Review the conversation above and
...") and the fork's reply in the user's conversation, where a later compaction replayed the
prompt to the model as the user's words. :func:`scan` finds those turns (a user row opening with
one of the host's review prompts, and the rows after it up to the next user row) and the
summaries made from them; :func:`apply` removes the turns, after the backup its caller takes, and
rebuilds those summaries from what is left of their sources: each leaf from its remaining
messages, then every summary above them from its children. Node ids, edges between summaries
and the context stay as they were, so lineage holds; no other row changes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..base.hostagents import harness_prompts
from ..store import Store
from .rebuild import Rebuild, extractive_rebuild, leaves_first, node_sources

# Text of a summary none of whose sources is left after the cleanup (its node stays: lineage holds).
HARNESS_ONLY_NOTE = (
    "(This summary covered only a host review turn, removed by lcm doctor clean harness.)"
)
_PRIVATE = ("message_ids", "leaf_ids", "above_ids")


def scan(store: Store) -> dict[str, Any]:
    """Turns of the host's background review forks (their harness prompt and the fork's reply)
    stored in a user's conversation by versions before the fork check, and the summaries built
    from them (those made from the rows, and every summary above those)."""
    turns = store.harness_turns(harness_prompts())
    ids = [i for t in turns for i in t["message_ids"]]
    leaves = store.summaries_over(ids)
    above = sorted({a.id for n in leaves for a in store.ancestors(n)} - set(leaves))
    by_conversation: dict[int, int] = {}
    for t in turns:
        by_conversation[t["conversation_id"]] = by_conversation.get(t["conversation_id"], 0) + 1
    return {
        "status": "ready" if turns else "noop",
        "harness_turns": len(turns),
        "messages": len(ids),
        "conversations": [
            {"conversation_id": c, "harness_turns": n} for c, n in sorted(by_conversation.items())
        ],
        "summaries_rebuilt": len(leaves) + len(above),
        "message_ids": ids,
        "leaf_ids": leaves,
        "above_ids": above,
    }


def apply(
    store: Store,
    plan: dict[str, Any],
    take_backup: Callable[[], dict[str, Any]],
    rebuild: Rebuild | None = None,
) -> dict[str, Any]:
    """Remove the turns of ``plan`` (:func:`scan`), after ``take_backup``, and rebuild the summaries
    made from them: each from its remaining sources (a summary left with none keeps its place and
    says so), then every summary above them from its children, deepest last. The new text is never
    longer than the old (its token count is the target), so no prompt budget grows."""
    remake = rebuild or extractive_rebuild
    saved = take_backup()
    deleted = store.delete_messages(plan["message_ids"])
    leaves = [n for n in (store.summary(i) for i in plan["leaf_ids"]) if n is not None]
    above = [n for n in (store.summary(i) for i in plan["above_ids"]) if n is not None]
    for node in leaves + leaves_first(above):
        sources = node_sources(store, node)
        store.rewrite_text(
            "summaries", node.id, remake(sources, node.tokens) if sources else HARNESS_ONLY_NOTE
        )
    return {
        "status": "applied",
        "backup": saved,
        "deleted": deleted,
        "summaries_rebuilt": len(plan["leaf_ids"]) + len(above),
        "after": public(scan(store)),
    }


def public(plan: dict[str, Any]) -> dict[str, Any]:
    """The plan as shown: counts and conversations, not the row ids."""
    return {k: v for k, v in plan.items() if k not in _PRIVATE}

"""What is added to the turn's user message before the model answers (the host's ``pre_llm_call``):
proactive recall's block (proactive.py) and the pre-answer evidence brief (evidence/preanswer.py).

Both are sealed, untrusted, off by default and within their own budgets; the brief reuses the
recall block's search when both are on, so a turn costs one search. A failure of one block is
reported through ``on_error`` and leaves the other. Nothing here knows about Hermes: hooks.py
hands it the bound core and the message.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from ..base.tokens import content_text
from ..core import MODE_NORMAL, LcmCore
from ..evidence import preanswer_active
from ..search.visible import Visible, visible_now


def context(core: LcmCore, user_message: Any, on_error: Callable[[str], None]) -> str | None:
    """The blocks for ``user_message`` joined, or None when neither is on or has anything."""
    blocks = []
    for name, make in (("recall", recall_block), ("evidence", evidence_block)):
        try:
            block = make(core, user_message)
        except Exception as exc:  # noqa: BLE001 - one block's failure never costs the turn or the other
            on_error(f"hook pre_llm_call {name}: {exc}")
            continue
        if block:
            blocks.append(block)
    return "\n\n".join(blocks) if blocks else None


def _visible(core: LcmCore) -> Visible | None:
    conversation_id = core.binding.conversation_id
    return visible_now(core.store, conversation_id) if conversation_id is not None else None


def recall_block(core: LcmCore, user_message: Any, shared: bool | None = None) -> str | None:
    """The proactive-recall block for the newest user message, None when the setting is off, the
    session is ignored or stateless, or nothing relevant was found."""
    config = core.config
    if not config.proactive_recall_enabled or core.binding.mode != MODE_NORMAL:
        return None
    reach = core.reach(config.shared_memory if shared is None else shared)
    return core.proactive.recall(
        content_text(user_message), core.binding.conversation_id, reach, _visible(core)
    ).block


def evidence_block(core: LcmCore, user_message: Any) -> str | None:
    """The pre-answer brief, from the recall block's search when it ran this turn."""
    config = core.config
    if not preanswer_active(config) or core.binding.mode != MODE_NORMAL:
        return None
    text = content_text(user_message)
    recalled = core.proactive.last(text) if config.proactive_recall_enabled else None
    brief = core.preanswer.brief(
        text,
        conversation_id=core.binding.conversation_id,
        reach=core.reach(config.shared_memory),
        visible=_visible(core),
        budget_tokens=config.preanswer_evidence_budget_tokens,
        anchor=time.time(),
        tz=config.timezone,
        pool=recalled.pool if recalled is not None else None,
        exclude=frozenset(h.id for h in recalled.hits if h.kind == "message")
        if recalled is not None
        else frozenset(),
    )
    return brief.block

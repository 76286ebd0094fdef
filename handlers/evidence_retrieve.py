"""lcm_retrieve's body: the bounded controller (evidence/retrieve.py) for one question.

Off unless LCM_ADAPTIVE_RETRIEVAL_ENABLED (config ``adaptive_retrieval_enabled``): then it keeps
the family's disabled answer (handlers/evidence.py), which says how to turn it on. On, it runs the
controller within the caller's reach and answers the pack, the calls made and what is missing; the
pack is cut to the answer's size cap like every other answer (``finish``).
"""

from __future__ import annotations

from typing import Any

from ..evidence import MAX_QUESTION_CHARS, PACK_TOKENS, retrieve
from .evidence import disabled_tool
from .toolkit import Args, Ctx, ToolError


def lcm_retrieve(ctx: Ctx, args: Args) -> dict[str, Any]:
    if not ctx.config.adaptive_retrieval_enabled:
        return disabled_tool("lcm_retrieve")(ctx, args)
    question = str(args.text("question", required=True))
    if len(question) > MAX_QUESTION_CHARS:
        raise ToolError(
            f"question is longer than {MAX_QUESTION_CHARS} characters; ask one question"
        )
    found = retrieve(
        ctx.core.store,
        ctx.core.dag,
        question,
        conversation_id=ctx.conversation_id,
        reach=ctx.reach(),
        visible=ctx.visible(),
        budget_tokens=PACK_TOKENS,
        tz=ctx.config.timezone,
    )
    return {"tool": "lcm_retrieve", **found.as_dict()}

"""lcm_grep inside externalized tool outputs (``content_scope`` externalized | both, LCM-X's):
which payloads are in reach (the conversation's rows, or the ``externalized_refs`` named, each
checked like lcm_expand checks it); the bounded scan itself is search/outputs.py."""

from __future__ import annotations

from typing import Any

from ..search.outputs import MAX_REFS, scan_outputs, words_of
from .expand import payload_owner
from .toolkit import Args, Ctx, ToolError


def scan_in_reach(ctx: Ctx, args: Args, query: str, limit: int) -> dict[str, Any]:
    words = words_of(query)
    if not words:
        raise ToolError("the query has no word to look for in the outputs")
    named = args.raw.get("externalized_refs")
    if named is not None:
        if not isinstance(named, list) or not all(isinstance(r, str) for r in named):
            raise ToolError("externalized_refs must be a list of refs (24 hex characters each)")
        owners = [(ref, payload_owner(ctx, args, ref.strip())[0].id) for ref in named[:MAX_REFS]]
    else:
        everywhere = args.choice("session_scope", ("current", "all"), "current") == "all"
        reach = ctx.reach() if everywhere else (ctx.conversation(),)
        owners = [(g.ref, g.message_id) for g in ctx.core.store.output_grants(reach, MAX_REFS + 1)]
    found = scan_outputs(ctx.core.guard.read, owners, words, limit)
    answer: dict[str, Any] = {
        "externalized_hits": [
            {
                "externalized_ref": h.ref,
                "referenced_by": h.owner,
                "content_offset": h.offset,
                "line": h.line,
                "expand": f"lcm_expand externalized_ref={h.ref} content_offset={h.offset}",
            }
            for h in found.hits
        ],
        "externalized_scanned": found.scanned,
        "externalized_words": list(found.words),
    }
    if found.stopped:
        answer["externalized_stopped"] = found.stopped
    return answer

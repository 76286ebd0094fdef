"""lcm_grep inside externalized tool outputs (``content_scope`` externalized | both, LCM-X's).

A large tool output is stored as a stub (its head, tail and ref) and its whole text in a payload
file, so full-text search sees only the stub. This scan reads the payload files of the
conversation's rows in reach (or the ``externalized_refs`` named, each checked like lcm_expand
checks it) and returns the lines that hold every word of the query, each with the character
offset lcm_expand pages from. It is bounded: at most MAX_REFS files and MAX_CHARS characters
read per call, newest outputs first, and the answer says when it stopped.
"""

from __future__ import annotations

import re
from typing import Any

from ..base.display import ELLIPSIS, cut
from .expand import payload_owner
from .toolkit import Args, Ctx, ToolError

MAX_REFS = 50
MAX_CHARS = 20_000_000
LINE_CHARS = 300
_WORD = re.compile(r"[^\W_]+(?:[._/-][^\W_]+)*", re.UNICODE)
_OPERATORS = {"and", "or", "not"}


def words_of(query: str) -> list[str]:
    """The query's words (identifiers whole), lower-cased, operators left out."""
    return [w for w in (m.group(0).lower() for m in _WORD.finditer(query)) if w not in _OPERATORS]


def scan_outputs(ctx: Ctx, args: Args, query: str, limit: int) -> dict[str, Any]:
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
    hits: list[dict[str, Any]] = []
    read = 0
    stopped = None
    for ref, owner in owners[:MAX_REFS]:
        if len(hits) >= limit:
            stopped = f"limit {limit} reached"
            break
        if read >= MAX_CHARS:
            stopped = f"read {MAX_CHARS:,} characters"
            break
        try:
            text, total = ctx.core.guard.read(ref, 0, MAX_CHARS - read)
        except (FileNotFoundError, OSError):
            continue  # a payload file gone: lcm_doctor reports it
        read += len(text)
        offset = 0
        for line in text.splitlines(keepends=True):
            lowered = line.lower()
            if all(w in lowered for w in words):
                hits.append(
                    {
                        "externalized_ref": ref,
                        "referenced_by": owner,
                        "content_offset": offset,
                        "line": cut(line.rstrip("\r\n"), LINE_CHARS, ELLIPSIS)[0],
                        "expand": f"lcm_expand externalized_ref={ref} content_offset={offset}",
                    }
                )
                if len(hits) >= limit:
                    break
            offset += len(line)
        if len(text) < total:
            stopped = f"read {MAX_CHARS:,} characters"
            break
    if stopped is None and len(owners) > MAX_REFS:
        stopped = f"scanned the newest {MAX_REFS} outputs"
    answer: dict[str, Any] = {
        "externalized_hits": hits,
        "externalized_scanned": min(len(owners), MAX_REFS),
        "externalized_words": words,
    }
    if stopped:
        answer["externalized_stopped"] = stopped
    return answer

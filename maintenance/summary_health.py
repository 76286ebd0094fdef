"""Broken summaries: found by doctor, made again from their sources by ``doctor repair summaries``.

A summary written by an older version, by a peer (an import), or by a model whose answer slipped
past a check can be unusable: empty, the provider's error text instead of a summary, a refusal,
reasoning with no answer, the prompt's own envelope, an answer cut before its closing line, or
longer than what it summarizes. The summary stays in the prompt and the tools serve it, so the
model reads "[ERROR] provider returned 500" as its memory. :func:`scan` applies the answer checks
the summarizer applies at write time (compaction/prompts.py) to what is stored; :func:`apply`,
after a backup, writes each broken summary again from its sources (a leaf from its messages, a
condensed summary from its children, deepest last), through the live engine's summarizer when
there is one, else offline. The node, its edges and the context stay as they were, so lineage
holds; the old text is kept in the events table (``summary_repair``) and whole in the backup.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from ..base.records import SummaryNode
from ..base.tokens import count_tokens
from ..compaction.fitting import FOOTER_PREFIX
from ..compaction.prompts import clean_answer, is_refusal
from ..store import Store
from .backups import backup
from .rebuild import Rebuild, extractive_rebuild, leaves_first, node_sources, source_tokens

# A summary's text is only this suspicious when it is short: a long summary may well mention an
# error the conversation was about.
_ERROR_MAX_TOKENS = 80
_PROVIDER_ERROR = re.compile(
    r"^\s*(?:\[\s*error\s*\]|error\s*:|\{\s*\"error\"|http\s*[45]\d\d\b|traceback \(most recent)"
    r"|provider returned (?:an? )?(?:error|[45]\d\d)|internal server error|rate limit(?:ed)? exceeded",
    re.I,
)
_ENVELOPE = re.compile(r"</?transcript-[0-9a-f]{8,}>")
# Over-long is judged only for summaries this large (a small one costs the prompt little).
_LONG_TOKENS = 500
_LLM_LEVELS = ("normal", "aggressive")
MAX_LISTED = 50


def problem(node: SummaryNode, source_tokens: Callable[[], int]) -> str | None:
    """Why ``node``'s stored text is not a usable summary, or None."""
    text = node.content
    if not text.strip():
        return "empty"
    if not clean_answer(text):
        return "reasoning only, no summary"
    if _ENVELOPE.search(text):
        return "holds the summary prompt's envelope (it followed text it summarized)"
    # the text's own size (the stored count may be of the text an older write replaced); only
    # a short text is counted, as only a short one can be an error or a refusal
    short = len(text) <= _ERROR_MAX_TOKENS * 8 and count_tokens(text) <= _ERROR_MAX_TOKENS
    if short and _PROVIDER_ERROR.search(text):
        return "the provider's error text, not a summary"
    if short and is_refusal(text, count_tokens(text)):
        return "a refusal, not a summary"
    imported = node.route.startswith("import")
    if node.level in _LLM_LEVELS and not imported and FOOTER_PREFIX not in text:
        return "truncated: the answer's closing line is missing"
    if node.tokens > _LONG_TOKENS:
        sources = node.source_tokens or source_tokens()
        if sources and node.tokens > sources:
            return f"longer than what it summarizes ({node.tokens} > {sources} tokens)"
    return None


def scan(
    store: Store, conversation_id: int | None = None, newest: int | None = None
) -> dict[str, Any]:
    """The broken summaries, per conversation (every one's, or one's); ``newest``: only the
    newest that many of the store (doctor's bound: a check costs about 40 microseconds a
    summary, and a repair checks them all)."""
    start = store.summary_id_before_newest(newest) if newest is not None else 0
    broken: list[dict[str, Any]] = []
    checked, after = 0, start
    while True:
        nodes = store.summaries_page(conversation_id, None, after, 1000)
        if not nodes:
            break
        for node in nodes:
            checked += 1
            why = problem(node, lambda n=node: source_tokens(store, n))  # type: ignore[misc]
            if why:
                broken.append(
                    {
                        "conversation_id": node.conversation_id,
                        "node_id": node.node_id,
                        "id": node.id,
                        "depth": node.depth,
                        "reason": why,
                        "text": node.content[:120],
                    }
                )
        after = nodes[-1].id
    per: dict[int, int] = {}
    for b in broken:
        per[b["conversation_id"]] = per.get(b["conversation_id"], 0) + 1
    return {
        "status": "ready" if broken else "noop",
        "checked": checked,
        "only_newest": bool(start),
        "broken": len(broken),
        "conversations": [{"conversation_id": c, "broken": n} for c, n in sorted(per.items())],
        "summaries": [{k: v for k, v in b.items() if k != "id"} for b in broken[:MAX_LISTED]],
        "ids": [b["id"] for b in broken],
    }


def public(plan: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in plan.items() if k != "ids"}


def repair(
    store: Store,
    directory: str | os.PathLike[str],
    *,
    conversation_id: int | None = None,
    write: bool = False,
    rebuild: Rebuild | None = None,
) -> dict[str, Any]:
    """``doctor repair summaries``: the broken ones (a dry run), or, with ``write``, a backup and
    each of them made again (:func:`apply`)."""
    plan = scan(store, conversation_id)
    if not write or plan["status"] == "noop":
        return public(plan)
    return apply(
        store, plan, lambda: asdict(backup(store, directory, "pre-summary-repair")), rebuild
    )


def apply(
    store: Store,
    plan: dict[str, Any],
    take_backup: Callable[[], dict[str, Any]],
    rebuild: Rebuild | None = None,
) -> dict[str, Any]:
    """Write each summary of ``plan`` (:func:`scan`) again from its sources, after ``take_backup``;
    the old text goes to the events table. Leaves first, then the condensed ones (which are made
    from their children's text), so a repaired leaf feeds the summary above it."""
    remake = rebuild or extractive_rebuild
    nodes = [n for n in (store.summary(i) for i in plan["ids"]) if n is not None]
    if not nodes:
        return {"status": "noop", "repaired": 0, "after": public(scan(store))}
    saved = take_backup()
    repaired, failed = [], []
    for node in leaves_first(nodes):
        sources = node_sources(store, node)
        target = max(128, min(1200, source_tokens(store, node) // 4 or 128))
        text = remake(sources, target) if sources else ""
        if not text.strip():
            failed.append({"node_id": node.node_id, "reason": "no source text to summarize"})
            continue
        store.record_event(
            "info",
            "summary_repair",
            json.dumps({"node_id": node.node_id, "old_text": node.content}, ensure_ascii=False),
            node.conversation_id,
        )
        store.rewrite_text("summaries", node.id, text)
        repaired.append(node.node_id)
    return {
        "status": "applied",
        "backup": saved,
        "repaired": len(repaired),
        "repaired_nodes": repaired[:MAX_LISTED],
        "failed": failed[:MAX_LISTED],
        "old_text": "in the events table (kind summary_repair) and whole in the backup",
        "after": public(scan(store)),
    }

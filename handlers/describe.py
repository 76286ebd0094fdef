"""lcm_describe and lcm_recent: maps and time windows of the summary DAG, metadata first.

lcm_describe shows structure without loading content: the conversation's DAG (context nodes,
roots, counts), one node's subtree, or a payload's metadata. lcm_recent lists the summaries of
a natural UTC period: the ready temporal rollups of its days (or its week/month) when they are
on, and leaf summaries for the days without a ready one; ``source`` says which it used.
"""

from __future__ import annotations

import time
from typing import Any

from ..base.display import ELLIPSIS, cut, iso
from ..base.records import SummaryNode
from ..base.times import period
from ..compaction.rollups import Served, serve, span
from .expand import OUTPUT_MIME, find_node, output_info, payload_owner
from .toolkit import Args, Ctx, ToolError, fit, share

PREVIEW = 160


def brief(node: SummaryNode) -> dict[str, Any]:
    """A node without its content: id, depth, time span, size and a one-line preview."""
    return {
        "node_id": node.node_id,
        "depth": node.depth,
        "from": iso(node.earliest_at),
        "to": iso(node.latest_at),
        "tokens": node.tokens,
        "preview": cut(" ".join(node.content.split()), PREVIEW, ELLIPSIS)[0],
    }


def _after(cursor: str | None) -> int:
    if not cursor:
        return 0
    try:
        return max(0, int(str(cursor).lstrip("S")))
    except ValueError as exc:
        raise ToolError(f"malformed cursor {cursor!r}; pass next_cursor unchanged") from exc


def lcm_describe(ctx: Ctx, args: Args) -> dict[str, Any]:
    if args.has("node_id") and args.has("externalized_ref"):
        raise ToolError("give node_id or externalized_ref, not both")
    if args.has("externalized_ref"):
        return _describe_payload(ctx, args)
    if args.has("node_id"):
        return _describe_node(ctx, args)
    return _describe_conversation(ctx, args)


def _describe_conversation(ctx: Ctx, args: Args) -> dict[str, Any]:
    conv = ctx.conversation()
    store, dag = ctx.core.store, ctx.core.dag
    state = store.conversation(conv)
    depths = dag.depth_counts(conv)
    answer: dict[str, Any] = {
        "conversation_id": conv,
        "messages": state.last_seq,
        "frontier_seq": state.frontier_seq,
        "raw_in_context_from_seq": state.frontier_seq + 1,
        "summaries_by_depth": {str(d): n for d, n in sorted(depths.items())},
        "context": [brief(n) for n in dag.context(conv)],
        **store.subagent_links(conv),  # a subagent stored as its own conversation, and its parent
    }
    if not depths:
        answer["note"] = (
            "no compaction yet: every message is still raw; use lcm_grep or lcm_load_session"
        )
        return answer
    after = _after(args.text("cursor"))
    roots = dag.roots(conv, after, 31)
    shown = fit(answer, "roots", [brief(n) for n in roots[:30]], ctx.cap)
    answer["next_cursor"] = roots[shown - 1].node_id if shown and len(roots) > shown else None
    answer["next"] = "lcm_describe node_id=... for a subtree, lcm_expand node_id=... for text"
    return answer


def _describe_node(ctx: Ctx, args: Args) -> dict[str, Any]:
    node = find_node(ctx, args)
    dag = ctx.core.dag
    count, first, last = dag.descendant_span(node.id)
    after = _after(args.text("cursor"))
    answer: dict[str, Any] = {
        **brief(node),
        "conversation_id": node.conversation_id,
        "session_id": node.session_id,
        "level": node.level,
        "route": node.route,
        "source_tokens": node.source_tokens,
        "in_context": dag.in_context(node.id),
        "ancestors": [n.node_id for n in dag.ancestors(node.id)],
        "descendant_messages": {
            "count": count,
            "first_store_id": first,
            "last_store_id": last,
            "first_seq": node.first_seq,
            "last_seq": node.last_seq,
        },
    }
    if node.depth > 0:
        children = [c for c in dag.children(node.id) if c.id > after]
        shown = fit(answer, "children", [brief(c) for c in children], ctx.cap)
        answer["next_cursor"] = children[shown - 1].node_id if shown < len(children) else None
    else:
        answer["sources"] = (
            f"{dag.edge_count(node.id)} raw messages: lcm_expand node_id={node.node_id}"
        )
    return answer


def _describe_payload(ctx: Ctx, args: Args) -> dict[str, Any]:
    ref = str(args.text("externalized_ref")).strip()
    owner, mime = payload_owner(ctx, args, ref)
    try:
        _, total = ctx.core.guard.read(ref, 0, 0)
        readable = True
    except (FileNotFoundError, OSError):
        total, readable = 0, False
    info = output_info(owner.content + (owner.parts or ""), ref) if mime == OUTPUT_MIME else None
    extra: dict[str, Any] = (
        {"lines": info[1], "kind": "large tool output"} if info is not None else {}
    )
    return {
        "externalized_ref": ref,
        "mime": mime,
        "chars": total if readable or info is None else info[0],
        **extra,
        "readable": readable,
        "referenced_by": {
            "store_id": owner.id,
            "role": owner.role,
            "session_id": owner.session_id,
            "at": iso(owner.created_at),
        },
        "next": f"lcm_expand externalized_ref={ref} (paged by content_offset)"
        if readable
        else "payload file missing: run lcm_doctor",
    }


def lcm_recent(ctx: Ctx, args: Args) -> dict[str, Any]:
    window = period(args.text("period"))
    scope = args.choice("session_scope", ("current", "all"), "current")
    conv = None if scope == "all" else ctx.conversation()
    reach = ctx.reach() if conv is None else None
    limit = args.integer("limit", 10, 1, 30)
    after = _recent_cursor(args.text("cursor"))
    dag = ctx.core.dag
    nodes = dag.summaries_in_period(
        conv,
        window.since,
        window.until,
        depth=0,
        after=after,
        limit=limit + 1,
        conversation_ids=reach,
    )
    each = share(ctx.cap, limit)
    items = []
    for n in nodes[:limit]:
        item = {**brief(n), "content": cut(n.content, each, ELLIPSIS)[0]}
        del item["preview"]
        if conv is None:
            item["conversation_id"] = n.conversation_id
        items.append(item)
    answer: dict[str, Any] = {
        "period": {"name": window.label, "from": iso(window.since), "to": iso(window.until)},
        "session_scope": scope,
        "source": "leaves",
    }
    if not ctx.core.rollups.enabled:
        answer["note"] = "leaf summaries: temporal rollups are off (LCM_TEMPORAL_ROLLUPS_ENABLED)"
    served = (
        serve(
            ctx.core.rollups,
            [conv] if conv is not None else list(reach or []),
            args.text("period"),
            time.time(),
        )
        if after is None
        else None
    )
    if served is not None and served.rollups:
        items = _with_rollups(answer, served, items, nodes, each)
    elif served is not None and served.stale_days:
        answer["stale_days"] = [d.isoformat() for d in served.stale_days]
    shown = fit(answer, "summaries", items, ctx.cap)
    answer["count"] = shown
    last = nodes[shown - 1] if shown else None
    answer["next_cursor"] = (
        f"{last.earliest_at!r}:{last.id}" if last is not None and len(nodes) > shown else None
    )
    if not nodes and after is None:
        raw = ctx.core.store.messages_in_period(
            conv, window.since, window.until, conversation_ids=reach
        )
        answer["raw_messages_in_period"] = raw if raw < 1000 else "1000+"
        answer["hint"] = (
            "no summaries cover this period yet; use lcm_grep with time_from/time_to"
            if raw
            else "nothing stored in this period"
        )
    return answer


def _with_rollups(
    answer: dict[str, Any],
    served: Served,
    items: list[dict[str, Any]],
    nodes: list[SummaryNode],
    each: int,
) -> list[dict[str, Any]]:
    """Put ready rollups in the answer; keep only the leaves of days that fall back to them."""
    answer["rollups"] = [
        {
            "kind": r.kind,
            "start": r.start,
            "tz": r.tz,
            "conversation_id": r.conversation_id,
            "tokens": r.tokens,
            "built_at": iso(r.built_at) if r.built_at else None,
            "source_summary_ids": list(r.source_ids),
            "content": cut(r.content, each, ELLIPSIS)[0],
        }
        for r in served.rollups
    ]
    spans = [span("day", d, served.tz) for d in served.fallback_days]
    kept = [
        i
        for i, n in zip(items, nodes, strict=False)
        if any(n.earliest_at < until and n.latest_at >= since for since, until in spans)
    ]
    answer["source"] = "rollups" if not kept else "rollups+leaves"
    answer["rollup_timezone"] = served.tz
    answer["leaf_days"] = [d.isoformat() for d in served.fallback_days]
    if served.stale_days:
        answer["stale_days"] = [d.isoformat() for d in served.stale_days]
    return kept


def _recent_cursor(cursor: str | None) -> tuple[float, int] | None:
    if not cursor:
        return None
    at, _, node = str(cursor).rpartition(":")
    try:
        return float(at), int(node)
    except ValueError as exc:
        raise ToolError(f"malformed cursor {cursor!r}; pass next_cursor unchanged") from exc

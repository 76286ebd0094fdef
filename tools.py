"""The lcm_* tools: bounded JSON answers over the store and the DAG."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from .records import node_label, parse_node_label
from .schemas import tool_names
from .search import build_query

if TYPE_CHECKING:
    from .engine import LcmEngine


class ToolError(ValueError):
    """A clear, expected refusal returned to the model as JSON."""


def dispatch(engine: LcmEngine, name: str, args: Mapping[str, Any] | None) -> str:
    if name in engine.config.disabled_tool_names:
        return _json({"error": f"{name} is disabled by LCM_DISABLED_TOOLS"}, engine)
    handler = HANDLERS.get(name)
    if handler is None or name not in tool_names():
        return _json({"error": f"unknown tool {name!r}"}, engine)
    if args is not None and not isinstance(args, Mapping):
        return _json({"error": "arguments must be a JSON object"}, engine)
    try:
        return _json(handler(engine, dict(args or {})), engine)
    except ToolError as exc:
        return _json({"error": str(exc)}, engine)


def _json(value: dict[str, Any], engine: LcmEngine) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    cap = engine.config.tool_response_max_chars
    if len(text) > cap:
        text = json.dumps({"error": "response over the size cap; narrow the request", "cap_chars": cap})
    return text


def _core(engine: LcmEngine) -> Any:
    core = engine.ensure_core()
    if core is None:
        raise ToolError(engine.startup_error or "hermes-lcm store unavailable")
    if core.binding.conversation_id is None:
        raise ToolError(f"no stored conversation for this session (mode {core.binding.mode})")
    return core


def _int(args: Mapping[str, Any], key: str, default: int, low: int, high: int) -> int:
    raw = args.get(key, default)
    try:
        value = int(raw if raw is not None else default)
    except (TypeError, ValueError) as exc:
        raise ToolError(f"{key} must be an integer, got {raw!r}") from exc
    return min(high, max(low, value))


def _snippet(text: str, terms: tuple[str, ...], width: int = 240) -> str:
    lowered = text.lower()
    words = [t.strip('"* ').split()[0].lower() for t in terms if t.strip('"* ')]
    pos = min((lowered.find(w) for w in words if lowered.find(w) >= 0), default=0)
    start = max(0, pos - width // 3)
    snippet = text[start:start + width]
    return ("…" if start else "") + snippet + ("…" if start + width < len(text) else "")


def lcm_grep(engine: LcmEngine, args: dict[str, Any]) -> dict[str, Any]:
    core = _core(engine)
    query = build_query(str(args.get("query") or ""))
    if query.empty:
        raise ToolError("query is empty")
    limit = _int(args, "limit", 10, 1, 50)
    conv = core.binding.conversation_id
    hits: list[dict[str, Any]] = []
    for message, score in core.store.search_messages(query.match, conv, limit):
        hits.append({"store_id": message.id, "role": message.role, "seq": message.seq, "score": round(score, 3),
                     "snippet": _snippet(message.content, query.terms)})
    for node, score in core.dag.search(query.match, conv, limit):
        hits.append({"node_id": node_label(node.id), "depth": node.depth, "score": round(score, 3),
                     "snippet": _snippet(node.content, query.terms)})
    hits.sort(key=lambda h: h["score"])
    return {"query": query.match, "count": len(hits[:limit]), "hits": hits[:limit]}


def lcm_expand(engine: LcmEngine, args: dict[str, Any]) -> dict[str, Any]:
    core = _core(engine)
    if ("node_id" in args) == ("store_id" in args):
        raise ToolError("give exactly one of node_id or store_id")
    if "store_id" in args:
        message = core.store.message(_int(args, "store_id", 0, 0, 2**62))
        if message is None or message.conversation_id != core.binding.conversation_id:
            raise ToolError(f"no message {args['store_id']} in this conversation")
        offset = _int(args, "content_offset", 0, 0, 2**62)
        page = engine.config.tool_response_max_chars // 2
        text = message.content[offset:offset + page]
        more = offset + page < len(message.content)
        return {"store_id": message.id, "role": message.role, "content": text, "content_offset": offset,
                "next_content_offset": offset + page if more else None, "content_chars": len(message.content)}
    try:
        node_id = parse_node_label(args["node_id"])
    except ValueError as exc:
        raise ToolError(str(exc)) from exc
    node = core.dag.node(node_id)
    if node is None or node.conversation_id != core.binding.conversation_id:
        raise ToolError(f"no summary node {args['node_id']} in this conversation")
    offset = _int(args, "source_offset", 0, 0, 2**62)
    limit = _int(args, "source_limit", 10, 1, 50)
    if node.depth == 0:
        sources = [{"store_id": m.id, "role": m.role, "content": m.content[:2000],
                    "truncated": len(m.content) > 2000} for m in core.dag.sources(node_id, offset, limit)]
    else:
        sources = [{"node_id": c.node_id, "depth": c.depth, "content": c.content[:2000]}
                   for c in core.dag.children(node_id)[offset:offset + limit]]
    total = core.dag.edge_count(node_id)
    nxt = offset + len(sources)
    return {"node_id": node.node_id, "depth": node.depth, "summary": node.content, "sources": sources,
            "source_offset": offset, "next_source_offset": nxt if nxt < total else None, "source_count": total}


def lcm_status(engine: LcmEngine, args: dict[str, Any]) -> dict[str, Any]:
    from .status import engine_status

    return engine_status(engine)


HANDLERS: dict[str, Callable[[Any, dict[str, Any]], dict[str, Any]]] = {
    "lcm_grep": lcm_grep,
    "lcm_expand": lcm_expand,
    "lcm_status": lcm_status,
}

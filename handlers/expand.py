"""lcm_expand and lcm_load_session: from ids back to the exact stored text.

Lossless recovery, in bounded pages that always move forward: a node's sources page by
``source_offset``; one message's long content (or its tool calls) by ``content_offset``; a
payload file by ``content_offset``; a session's transcript by ``after_store_id``. A message
that fits the page comes back whole in its exact provider form (``message``).
"""

from __future__ import annotations

import json
import re
from typing import Any

from ..base.display import ELLIPSIS, cut, iso
from ..base.outputs import line_count
from ..base.payloads import KIND_OUTPUT
from ..base.records import StoredMessage, SummaryNode, node_label, parse_node_label
from ..evidence import Ref
from .toolkit import Args, Ctx, ToolError, dumps, fit, share

_PLACEHOLDER = re.compile(r"\[lcm-payload ref=([0-9a-f]{24}) mime=(\S+) chars=(\d+)\]")
# A large tool output's stub (outputs.stub): its ref, chars and lines.
_OUTPUT = re.compile(r"\[lcm-output ref=([0-9a-f]{24}) chars=(\d+) lines=(\d+)")
OUTPUT_MIME = "text/plain"  # payloads.OUTPUT_MIME: a large tool output
BIG = 2**62
MAX_REFS = 20
PAYLOAD_FRAME = 1000  # ref, mime, counts, offsets and the format note of a payload page


def _page_chars(ctx: Ctx, frame: int = 3000) -> int:
    """The text one page carries: the cap less room for the answer's other fields (a message's
    metadata and hints need up to 3,000 characters; a payload's page ``PAYLOAD_FRAME``)."""
    return max(500, ctx.cap - frame)


def _page(full: str, offset: int, chars: int) -> str:
    """The slice of ``full`` at ``offset`` whose JSON encoding is at most ``chars`` long: control
    characters and backslashes encode to up to six characters each, so a page of ``chars``
    characters of such text would push the answer over the size cap and the text could not be
    paged back at all. Never empty before the end, so a paged walk always progresses."""
    text = full[offset : offset + chars]
    while len(text) > 1 and (encoded := len(dumps(text))) > chars:
        text = text[: max(1, len(text) * chars * 9 // (encoded * 10))]
    return text


def compact_calls(raw: str | None, limit: int) -> list[dict[str, Any]] | None:
    """Tool calls with long arguments cut (the exact JSON is one lcm_expand away)."""
    if not raw:
        return None
    try:
        calls = json.loads(raw)
    except ValueError:
        return [{"raw": _page(raw, 0, limit)}]
    out = []
    for call in calls if isinstance(calls, list) else [calls]:
        function = call.get("function", {}) if isinstance(call, dict) else {}
        arguments = function.get("arguments") if isinstance(function, dict) else None
        text = arguments if isinstance(arguments, str) else dumps(arguments)
        shown = _page(text, 0, limit)
        out.append(
            {
                "id": _short(call.get("id")) if isinstance(call, dict) else None,
                "name": _short(function.get("name")) if isinstance(function, dict) else None,
                "arguments": shown + (ELLIPSIS if len(shown) < len(text) else ""),
            }
        )
        if len(out) >= 8:  # the rest is one lcm_expand part='tool_calls' away
            out.append({"omitted_calls": len(calls) - len(out) if isinstance(calls, list) else 0})
            break
    return out


def _short(value: Any) -> Any:
    """An id or name as the host gave it, cut when it is not a short string."""
    return (
        _page(value, 0, 120)
        if isinstance(value, str)
        else None
        if value is None
        else _page(dumps(value), 0, 120)
    )


def exact_ref(store_id: int, start: int, end: int, total: int) -> str:
    """The evidence tools' ref of the characters [start, end) of a message's text shown: the bare
    id when that is all of it (lcm_evidence_pack, lcm_compute, lcm_compile_evidence read it)."""
    whole = start == 0 and end >= total
    return Ref(store_id).label if whole else Ref(store_id, start, max(end, start + 1)).label


def message_item(message: StoredMessage, limit: int, exact: bool = False) -> dict[str, Any]:
    """A raw message inside a listing, its text cut to ``limit`` JSON-encoded characters (escapes
    included, so a listing of odd text stays within the cap) with the way to the rest; with
    ``exact`` (include_exact_ref), the ref of the text shown."""
    text = _page(message.content, 0, limit)
    was_cut = len(text) < len(message.content)
    item: dict[str, Any] = {
        "store_id": message.id,
        "seq": message.seq,
        "role": message.role,
        "at": iso(message.created_at),
        "content": text,
    }
    if exact:
        item["exact_ref"] = exact_ref(message.id, 0, len(text), len(message.content))
    calls = compact_calls(message.tool_calls, max(200, limit // 2))
    if calls:
        item["tool_calls"] = calls
    if message.tool_call_id:
        item["tool_call_id"] = message.tool_call_id
    if message.tool_name:
        item["name"] = message.tool_name
    if was_cut:
        item["chars"] = len(message.content)
        item["more"] = f"lcm_expand store_id={message.id} content_offset={len(text)}"
    if message.parts is not None:
        item["structured"] = True
    return item


def node_item(node: SummaryNode, limit: int) -> dict[str, Any]:
    text, was_cut = cut(node.content, limit, ELLIPSIS)
    item = {
        "node_id": node.node_id,
        "depth": node.depth,
        "from": iso(node.earliest_at),
        "to": iso(node.latest_at),
        "content": text,
    }
    if was_cut:
        item["more"] = f"lcm_expand node_id={node.node_id}"
    return item


# --------------------------------------------------------------------------- lcm_expand


def lcm_expand(ctx: Ctx, args: Args) -> dict[str, Any]:
    given = [k for k in ("node_id", "store_id", "externalized_ref") if args.has(k)]
    if len(given) != 1:
        raise ToolError("give exactly one of node_id, store_id or externalized_ref")
    if given[0] == "store_id":
        return _expand_message(ctx, args)
    if given[0] == "externalized_ref":
        return _expand_payload(ctx, args)
    return _expand_node(ctx, args)


def find_node(ctx: Ctx, args: Args, key: str = "node_id") -> SummaryNode:
    label = args.text(key, required=True)
    try:
        node_id = parse_node_label(str(label))
    except ValueError as exc:
        raise ToolError(f"{key} must look like S12, got {label!r}") from exc
    node = ctx.core.dag.node(node_id)
    hint = (
        ""
        if ctx.conversation_id is None or ctx.core.dag.depth_counts(ctx.conversation_id)
        else " (no compaction has happened yet: nothing is summarized; use lcm_grep or lcm_load_session)"
    )
    missing = f"no summary node {node_label(node_id)}{hint}"
    if node is None:
        raise ToolError(missing)
    ctx.readable(node.conversation_id, args, f"node {node.node_id}", missing)
    return node


def _expand_node(ctx: Ctx, args: Args) -> dict[str, Any]:
    node = find_node(ctx, args)
    dag = ctx.core.dag
    offset = args.integer("source_offset", 0, 0, BIG)
    limit = args.integer("source_limit", 10, 1, 50)
    total = dag.edge_count(node.id)
    each = share(ctx.cap, limit)
    if node.depth == 0:
        exact = args.flag("include_exact_ref")
        items = [message_item(m, each, exact) for m in dag.sources(node.id, offset, limit)]
    else:
        items = [node_item(c, each) for c in dag.children(node.id)[offset : offset + limit]]
    answer: dict[str, Any] = {
        "node_id": node.node_id,
        "depth": node.depth,
        "from": iso(node.earliest_at),
        "to": iso(node.latest_at),
        "summary": cut(node.content, ctx.cap // 4, ELLIPSIS)[0],
        "parents": [node_label(p) for p in dag.parents("summary", node.id)],
        "source_kind": "messages" if node.depth == 0 else "summaries",
        "source_count": total,
        "source_offset": offset,
    }
    shown = fit(answer, "sources", items, ctx.cap)
    answer["next_source_offset"] = offset + shown if offset + shown < total else None
    return answer


def _expand_message(ctx: Ctx, args: Args) -> dict[str, Any]:
    store_id = args.integer("store_id", 0, 0, BIG)
    message = ctx.core.store.message(store_id)
    missing = f"no message with store_id {store_id}"
    if message is None:
        raise ToolError(missing)
    ctx.readable(message.conversation_id, args, f"store_id {store_id}", missing)
    part = args.choice("part", ("content", "tool_calls"), "content") or "content"
    offset = args.integer("content_offset", 0, 0, BIG)
    if part == "content":
        full, fmt = (message.content, "text") if message.parts is None else (message.parts, "json")
    else:
        full, fmt = message.tool_calls or "", "json"
    if offset > len(full):
        raise ToolError(f"content_offset {offset} is past the end ({len(full)} chars)")
    answer: dict[str, Any] = {
        "store_id": message.id,
        "conversation_id": message.conversation_id,
        "session_id": message.session_id,
        "seq": message.seq,
        "role": message.role,
        "at": iso(message.created_at),
        "source": message.source,
        "summarized_in": [node_label(p) for p in ctx.core.dag.parents("message", message.id)],
    }
    page = _page_chars(ctx)
    # Rebuilding and dumping a 50 MB message for every page costs a fraction of a second each; its
    # stored form is at most 12x its dump (an astral character escaped as two \uXXXX).
    # The conversation as the model saw it, not provider replay data (extra=False).
    host = (
        message.to_host(extra=False)
        if offset == 0 and part == "content" and len(full) <= page * 12
        else None
    )
    exact = args.flag("include_exact_ref")
    if host is not None and len(dumps(host)) <= page:
        answer["message"] = host
        answer["complete"] = True
        if exact:
            answer["exact_ref"] = Ref(message.id).label
    else:
        text = _page(full, offset, page)
        nxt = offset + len(text)
        answer.update(
            {
                "part": part,
                "content_format": fmt,
                "content_offset": offset,
                "content": text,
                "content_chars": len(full),
                "next_content_offset": nxt if nxt < len(full) else None,
            }
        )
        if exact:  # a span of the text; a JSON page (parts, tool calls) is named by its message
            answer["exact_ref"] = (
                exact_ref(message.id, offset, nxt, len(full))
                if part == "content" and fmt == "text"
                else Ref(message.id).label
            )
        if part == "content" and message.tool_calls:
            answer["tool_calls_chars"] = len(message.tool_calls)
            answer["tool_calls_hint"] = "part='tool_calls' pages the exact tool-call JSON"
    # The payloads this page shows (a whole message's, or the page's own), at most MAX_REFS: a text
    # of many placeholders must not list them all on every page and overflow the cap.
    shown = full if "message" in answer else answer["content"]
    refs = (
        sorted({r[0] for r in _PLACEHOLDER.findall(shown)}) if "[lcm-payload ref=" in shown else []
    )
    refs += (
        sorted({r[0] for r in _OUTPUT.findall(shown)} - set(refs))
        if "[lcm-output ref=" in shown
        else []
    )
    if refs:
        answer["externalized_refs"] = refs[:MAX_REFS]
        if len(refs) > MAX_REFS:
            answer["externalized_refs_omitted"] = len(refs) - MAX_REFS
    return answer


def payload_owner(ctx: Ctx, args: Args, ref: str) -> tuple[StoredMessage, str]:
    """The row in reach the engine itself kept payload ``ref`` for (its grant), and its mime.

    Payloads are scoped like messages, but by grant, never by text: a row that merely names the ref
    (a user typing a placeholder, a tool printing someone's stub) grants nothing, and a ref in no
    grant in reach answers exactly like one that does not exist, so none can be probed."""
    try:
        ctx.core.guard.path_for(ref)
    except ValueError as exc:
        raise ToolError(f"externalized_ref must be 24 hex characters, got {ref!r}") from exc
    everywhere = args.choice("session_scope", ("current", "all"), "current") == "all"
    grant = ctx.core.store.payload_grant(ref, ctx.reach() if everywhere else (ctx.conversation(),))
    message = ctx.core.store.message(grant.message_id) if grant is not None else None
    if grant is None or message is None:
        raise ToolError(
            f"payload {ref} is not referenced in this conversation"
            + ("" if everywhere else "; pass session_scope='all' if it belongs to another")
        )
    return message, OUTPUT_MIME if grant.kind == KIND_OUTPUT else grant.mime


def _expand_payload(ctx: Ctx, args: Args) -> dict[str, Any]:
    ref = str(args.text("externalized_ref", required=True)).strip()
    owner, mime = payload_owner(ctx, args, ref)
    offset = args.integer("content_offset", 0, 0, BIG)
    try:
        text, total = ctx.core.guard.read(ref, offset, _page_chars(ctx, PAYLOAD_FRAME))
    except (FileNotFoundError, OSError) as exc:
        raise ToolError(
            f"payload file for {ref} is missing or unreadable ({exc}); run lcm_doctor"
        ) from exc
    if offset > total:
        raise ToolError(f"content_offset {offset} is past the end ({total} chars)")
    text = _page(
        text, 0, _page_chars(ctx, PAYLOAD_FRAME)
    )  # odd text encodes longer: keep the answer within the cap
    nxt = offset + len(text)
    answer: dict[str, Any] = {
        "externalized_ref": ref,
        "mime": mime,
        "referenced_by": owner.id,
        "chars": total,
    }
    info = output_info(owner.content + (owner.parts or ""), ref) if mime == OUTPUT_MIME else None
    if info is not None:
        answer["lines"] = info[1]
        inner = _wrapped_output_lines(ctx, ref, text, offset)
        if inner is not None:  # the host's {"output": ...} wrapper: its text is one line of JSON
            answer["output_lines"] = inner
            answer["format"] = (
                "JSON: the host's wrapper of a command's output; lines counts the JSON, "
                "output_lines the output field's own lines (its \\n)"
            )
    answer.update(
        {
            "content_offset": offset,
            "content": text,
            "next_content_offset": nxt if nxt < total else None,
        }
    )
    return answer


def _wrapped_output_lines(ctx: Ctx, ref: str, page: str, offset: int) -> int | None:
    """The lines of the ``output`` field when a large output is the host's JSON wrapper of a
    command's output (its terminal tool), told on the first page only."""
    if offset != 0 or not page.startswith("{"):
        return None
    try:
        whole = json.loads(ctx.core.guard.read(ref, 0, BIG)[0])
    except (ValueError, OSError):
        return None
    output = whole.get("output") if isinstance(whole, dict) else None
    return line_count(output) if isinstance(output, str) else None


def output_info(text: str, ref: str) -> tuple[int, int] | None:
    """(chars, lines) of the large output ``ref`` when ``text`` holds its stub, else None."""
    if "[lcm-output ref=" not in text:
        return None
    return next(((int(m[1]), int(m[2])) for m in _OUTPUT.findall(text) if m[0] == ref), None)


# --------------------------------------------------------------------------- lcm_load_session


def lcm_load_session(ctx: Ctx, args: Args) -> dict[str, Any]:
    session_id = str(args.text("session_id", required=True))
    facts = ctx.core.store.session_facts(session_id)
    if facts is None or not ctx.in_reach(int(facts["conversation_id"])):  # another owner's: unknown
        raise ToolError(f"unknown session_id {session_id!r}")
    after = args.integer("after_store_id", 0, 0, BIG)
    limit = args.integer("limit", 20, 1, 100)
    rows = ctx.core.store.session_messages(session_id, after, limit + 1)
    each = share(ctx.cap, min(limit, max(1, len(rows))))
    exact = args.flag("include_exact_ref")
    items = [message_item(m, each, exact) for m in rows[:limit]]
    answer: dict[str, Any] = {
        "session_id": session_id,
        "conversation_id": facts["conversation_id"],
        "platform": facts["platform"],
        "started_at": iso(facts["started_at"]),
        "ended_at": iso(facts["ended_at"]),
        "messages_total": facts["messages"],
        "after_store_id": after,
    }
    shown = fit(answer, "messages", items, ctx.cap)
    answer["count"] = shown
    answer["next_cursor"] = items[shown - 1]["store_id"] if shown and len(rows) > shown else None
    return answer

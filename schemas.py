"""The 15 lcm_* tool schemas shown to the model.

Every token here is paid on every turn of every session, so descriptions say only when to use
which tool and what comes back (all 15 together stay under 4,000 o200k tokens; tested).
``LCM_DISABLED_TOOLS`` hides a tool: no schema, and a call is refused.
"""

from __future__ import annotations

from typing import Any

_INT = {"type": "integer"}
_STR = {"type": "string"}
_BOOL = {"type": "boolean"}


def _desc(kind: dict[str, Any], text: str) -> dict[str, Any]:
    return {**kind, "description": text}


# What a search leaves for last or out by default (handlers/grep.visibility): hits already in the prompt,
# and LCM's own tool traffic.
_SEEN = {
    "include_in_context": _desc(_BOOL, "rank hits already in your prompt in place (default: last)"),
    "include_lcm_traffic": _desc(
        _BOOL, "also search lcm_* tool calls/results (copies of stored rows)"
    ),
}


def _enum(values: list[str], text: str) -> dict[str, Any]:
    return {"type": "string", "enum": values, "description": text}


_SCOPE = _enum(
    ["current", "session", "all"],
    "current conversation (default); session: only session_id; all: every "
    "stored conversation (explicit opt-in)",
)
_CURSOR = _desc(_STR, "next_cursor from the previous page")
_LIMIT = _INT
_REFS = {"type": "array", "items": _STR}
_EXACT_REF = _desc(
    _BOOL,
    "each message also carries exact_ref (store_id:start-end of the text shown) for evidence tools",
)


def _tool(
    name: str,
    description: str,
    properties: dict[str, Any] | None = None,
    required: list[str] | None = None,
) -> dict[str, Any]:
    params: dict[str, Any] = {"type": "object", "properties": properties or {}}
    if required:
        params["required"] = required
    return {"name": name, "description": description, "parameters": params}


def _disabled_family_tool(
    name: str, description: str, properties: dict[str, Any], required: list[str] | None = None
) -> dict[str, Any]:
    return _tool(
        name, description + " Opt-in; answers status: disabled when off.", properties, required
    )


TOOLS: list[dict[str, Any]] = [
    _tool(
        "lcm_grep",
        "Keyword search of this conversation's full history, incl. turns compacted out of your context: raw "
        'messages and summaries. Questions, exact identifiers/paths, "quoted phrases", prefix* all work. '
        "Returns snippets with store_id/node_id for lcm_expand (context:true = turn next to a strong match).",
        {
            "query": _STR,
            "session_scope": _SCOPE,
            "session_id": _STR,
            "role": _enum(
                ["user", "assistant", "tool", "system"], "raw messages of this role only"
            ),
            "source": _desc(_STR, "platform, e.g. cli, telegram, unknown"),
            "time_from": _desc(_STR, "ISO date/time (UTC) or epoch seconds"),
            "time_to": _STR,
            "sort": _enum(["relevance", "recency"], "default relevance"),
            "mode": _enum(
                ["full_text", "hybrid", "semantic"], "hybrid/semantic add meaning (embeddings on)"
            ),
            "limit": _desc(_LIMIT, "default 10, max 50"),
            "cursor": _CURSOR,
            "content_scope": _enum(
                ["inline", "externalized", "both"],
                "externalized/both: also the lines of large tool outputs kept as payloads",
            ),
            "externalized_refs": _desc(
                _REFS, "payload refs to scan (default: this conversation's)"
            ),
            **_SEEN,
        },
        ["query"],
    ),
    _tool(
        "lcm_recall",
        "Recall by meaning across ALL stored conversations and time (current one ranked a little higher). "
        "Use when lcm_grep in this conversation finds nothing or the topic came up elsewhere.",
        {
            "query": _STR,
            "limit": _desc(_LIMIT, "default 8, max 30"),
            "scope_bias": _desc(
                {"type": "number"}, "0-1 boost for this conversation, default 0.25"
            ),
            "cursor": _CURSOR,
            **_SEEN,
        },
        ["query"],
    ),
    _disabled_family_tool(
        "lcm_query_state",
        "Typed facts/preferences/commitments/status with exact cited sources, current or as of a time.",
        {"subject": _STR, "kind": _STR, "as_of": _STR, "limit": _LIMIT},
    ),
    _tool(
        "lcm_compute",
        "Deterministic date/count/sum/difference/order/latest over cited refs (store_id or store_id:start-end); "
        "relative dates resolved at each line's own time; fails closed with a reason.",
        {
            "operation": _enum(
                ["date", "date_diff", "count", "sum", "difference", "order", "latest"],
                "date_diff unit from question (days/weeks/months/years)",
            ),
            "refs": _REFS,
            "question": _STR,
        },
        ["operation", "refs"],
    ),
    _tool(
        "lcm_compile_evidence",
        "Check claims [{text, refs, quote?}] against their exact cited lines: each supported/unsupported "
        "and why, the supporting lines, sufficiency for the question.",
        {"question": _STR, "claims": {"type": "array", "items": {"type": "object"}}},
        ["question"],
    ),
    _tool(
        "lcm_evidence_pack",
        "The exact lines of refs (store_id or store_id:start-end) with times and resolved dates, bounded "
        "(budget_tokens, default 1500); missing refs; sufficiency when question given.",
        {"refs": _REFS, "question": _STR, "budget_tokens": _INT},
        ["refs"],
    ),
    _disabled_family_tool(
        "lcm_retrieve",
        "Bounded retrieval controller: up to 3 searches/expansions for one question; returns an evidence pack "
        "of exact cited lines, the calls made and what is missing.",
        {"question": _STR},
        ["question"],
    ),
    _tool(
        "lcm_recent",
        "Summaries of a UTC period: today, yesterday, 7d (any Nd), week, month, date:YYYY-MM-DD.",
        {
            "period": _desc(_STR, "default today"),
            "session_scope": _enum(["current", "all"], "default current"),
            "limit": _desc(_LIMIT, "default 10, max 30"),
            "cursor": _CURSOR,
        },
    ),
    _tool(
        "lcm_load_session",
        "One named session's raw transcript in order, paged (after_store_id = next_cursor).",
        {
            "session_id": _STR,
            "after_store_id": _INT,
            "limit": _desc(_LIMIT, "default 20, max 100"),
            "include_exact_ref": _EXACT_REF,
        },
        ["session_id"],
    ),
    _tool(
        "lcm_describe",
        "Map without content: the conversation's summary DAG (no args), one node's subtree (node_id), or a "
        "payload's metadata (externalized_ref).",
        {"node_id": _STR, "externalized_ref": _STR, "cursor": _CURSOR},
    ),
    _tool(
        "lcm_expand",
        "Exact original text. Exactly one of: node_id (summary -> its sources, paged by source_offset), "
        "store_id (one raw message; long text paged by content_offset), externalized_ref (payload or a "
        "large tool output's [lcm-output ref=...] stub: the whole text, paged by content_offset).",
        {
            "node_id": _STR,
            "store_id": _INT,
            "externalized_ref": _STR,
            "source_offset": _INT,
            "source_limit": _desc(_LIMIT, "default 10, max 50"),
            "content_offset": _INT,
            "part": _enum(["content", "tool_calls"], "what content_offset pages; default content"),
            "session_scope": _enum(["current", "all"], "all: allow ids of other conversations"),
            "include_exact_ref": _EXACT_REF,
        },
    ),
    _tool(
        "lcm_expand_query",
        "Answer a question from expanded history via the auxiliary model, or get the evidence blocks "
        "(mode=evidence, or when no model is reachable). Costlier than lcm_grep.",
        {
            "question": _STR,
            "node_ids": _REFS,
            "mode": _enum(["answer", "evidence"], "default answer"),
            "context_max_tokens": _INT,
        },
        ["question"],
    ),
    _tool(
        "lcm_status",
        "Memory health: context pressure, stored messages/summaries, summarizer, errors.",
    ),
    _tool(
        "lcm_inspect",
        "Metadata-only inventory of this conversation: sessions, lineage, frontier/fresh tail, payload refs, "
        "compaction no-op reasons, matched session patterns.",
    ),
    _tool(
        "lcm_doctor",
        "Database/FTS/lineage/config diagnostics with guidance (safe-ignore / inspect / backup-first cleanup).",
        {"deep": _desc(_BOOL, "also FTS integrity-check (slower)")},
    ),
]

_BY_NAME = {t["name"]: t for t in TOOLS}


def tool_schemas(disabled: frozenset[str] = frozenset()) -> list[dict[str, Any]]:
    return [t for t in TOOLS if t["name"] not in disabled]


def tool_names() -> frozenset[str]:
    return frozenset(_BY_NAME)


def tool_parameters(name: str) -> frozenset[str]:
    """The argument names a tool's schema declares (anything else is reported as ignored)."""
    return (
        frozenset(_BY_NAME[name]["parameters"]["properties"]) if name in _BY_NAME else frozenset()
    )

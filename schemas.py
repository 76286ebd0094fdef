"""Tool schemas shown to the model. Kept short: every token here is paid on
every turn of every session."""

from __future__ import annotations

from typing import Any

_INT = {"type": "integer"}
_STR = {"type": "string"}

TOOLS: list[dict[str, Any]] = [
    {
        "name": "lcm_grep",
        "description": "Keyword search of this conversation's full history (raw messages and summaries), "
                       "including turns compacted out of your context. Returns snippets with ids for lcm_expand.",
        "parameters": {"type": "object", "properties": {
            "query": {"type": "string", "description": "Words, \"exact phrase\", identifier, path, or prefix*"},
            "limit": {**_INT, "description": "Max hits (default 10, max 50)"},
        }, "required": ["query"]},
    },
    {
        "name": "lcm_expand",
        "description": "Exact original text behind an id: node_id (a summary: its sources, paged) or store_id "
                       "(one raw message; long content paged with content_offset).",
        "parameters": {"type": "object", "properties": {
            "node_id": _STR, "store_id": _INT, "source_offset": _INT, "source_limit": _INT,
            "content_offset": _INT,
        }},
    },
    {
        "name": "lcm_status",
        "description": "Health of lossless context memory: pressure, stored messages, summaries, errors.",
        "parameters": {"type": "object", "properties": {}},
    },
]


def tool_schemas(disabled: frozenset[str] = frozenset()) -> list[dict[str, Any]]:
    return [t for t in TOOLS if t["name"] not in disabled]


def tool_names() -> frozenset[str]:
    return frozenset(t["name"] for t in TOOLS)

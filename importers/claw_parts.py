"""lossless-claw message parts other than text, tool and reasoning, carried into an imported message.

lossless-claw's ``buildMessageParts`` turns every content block it does not know as text, a tool
call/result or thinking into a ``message_parts`` row of another type (its ``toPartType``): ``patch``,
``file`` (also ``image`` blocks), ``subtask``, ``compaction``, ``step_start``, ``step_finish``,
``snapshot``, ``retry``, and ``agent`` for any unknown block. Its ``messages.content`` keeps only
the text blocks, so these would vanish on import. Each one is kept on the message instead:

* a readable text part appended to the content (what ``lcm_expand`` shows and search finds): the
  part type, its text, its non-empty typed columns and its original block without the type;
* a ``file`` part whose block carries inline base64 image data also becomes an ``image_url`` part,
  as the JSONL importer does, so the payload guard moves the bytes to a payload file;
* the exact part row (every non-null column, the metadata JSON decoded) in the message's private
  ``_lossless_claw_parts`` extra field, which the host never sends to a provider.

Pure functions over the row dicts ``storage/claw.py`` returns: no SQL here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

# Parts the importer maps onto message columns (content, tool calls / link, reasoning_content).
CORE_PART_TYPES = frozenset({"text", "tool", "reasoning"})
# Where the exact rows go in a message's extra fields; "_" keeps it off the wire.
EXTRA_KEY = "_lossless_claw_parts"
# Columns that identify the row rather than describe the part.
_ROW_KEYS = (
    "part_id",
    "message_id",
    "session_id",
    "part_type",
    "ordinal",
    "metadata",
    "text_content",
)
# Readable text of a block never repeats bulky inline data (it is in the image part / extra field).
_BULKY_KEYS = frozenset({"data"})


def decoded_metadata(row: Mapping[str, Any]) -> Any:
    """The part's metadata JSON as a value (the raw string when it is not JSON, None when absent)."""
    text = row.get("metadata")
    if not isinstance(text, str):
        return text
    try:
        return json.loads(text)
    except ValueError:
        return text


def raw_block(row: Mapping[str, Any]) -> dict[str, Any]:
    """The content block lossless-claw stored the part from (its ``metadata.raw``), or {}."""
    meta = decoded_metadata(row)
    raw = meta.get("raw") if isinstance(meta, dict) else None
    return raw if isinstance(raw, dict) else {}


def exact_part(row: Mapping[str, Any]) -> dict[str, Any]:
    """The whole part row: every non-null column, the metadata decoded."""
    out = {k: v for k, v in row.items() if v is not None and k != "metadata"}
    if row.get("metadata") is not None:
        out["metadata"] = decoded_metadata(row)
    return out


def _image_part(block: Mapping[str, Any]) -> dict[str, Any] | None:
    data = block.get("data")
    if block.get("type") not in ("image", "file") or not isinstance(data, str) or not data:
        return None
    mime = str(block.get("mimeType") or block.get("mime") or "application/octet-stream")
    if not mime.startswith("image/"):
        return None
    return {"type": "image_url", "image_url": {"url": f"data:{mime};base64,{data}"}}


def readable(row: Mapping[str, Any]) -> str:
    """One text for the part: its type (and the block type it came from), its text, its typed
    columns and the rest of its block, compact JSON; inline data is named, not repeated."""
    block = raw_block(row)
    kind = str(row.get("part_type") or "agent")
    raw_type = block.get("type")
    head = (
        f"[lossless-claw {kind} part"
        + (f" ({raw_type})" if raw_type and raw_type != kind else "")
        + "]"
    )
    lines = [head]
    text = row.get("text_content")
    if isinstance(text, str) and text.strip():
        lines.append(text)
    columns = {k: v for k, v in row.items() if k not in _ROW_KEYS and v is not None and v != ""}
    if columns:
        lines.append(json.dumps(columns, ensure_ascii=False, sort_keys=True, default=str))
    rest = {
        k: (f"<{len(v)} chars inline>" if k in _BULKY_KEYS and isinstance(v, str) else v)
        for k, v in block.items()
        if k != "type" and not (k == "text" and v == text)
    }
    if rest:
        lines.append(json.dumps(rest, ensure_ascii=False, sort_keys=True, default=str))
    return "\n".join(lines)


def content_parts(row: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The OpenAI-style content parts a row becomes: its readable text, and its image when inline."""
    image = _image_part(raw_block(row))
    return [{"type": "text", "text": readable(row)}, *([image] if image is not None else [])]


def carry(message: dict[str, Any], rows: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """Append ``rows`` (parts of other types, in order) to ``message``'s content; returns the extra
    field to store with it ({EXTRA_KEY: exact rows}), None when there is nothing to carry."""
    if not rows:
        return None
    content = message.get("content")
    head = [{"type": "text", "text": content}] if isinstance(content, str) and content else []
    message["content"] = head + [p for row in rows for p in content_parts(row)]
    return {EXTRA_KEY: [exact_part(row) for row in rows]}

"""OpenClaw JSONL transcript helpers for the importer: the active branch, the parent session,
content blocks. Pure functions (no store, no report), split from claw_import.py to keep it small."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..base import private


def parent_session_id(value: Any, path: Path) -> tuple[str | None, str | None]:
    """The parent's session id. OpenClaw writes ``parentSession`` as the parent transcript's file
    path; its header's ``id`` is the session id the parent was imported under (the file stem when
    the file is gone or has no header). Returns (session id, a warning or None)."""
    if not isinstance(value, str) or not value.strip():
        return None, None
    if "/" not in value and not value.endswith(".jsonl"):
        return value, None  # already a session id
    parent = Path(value).expanduser()
    if not parent.is_absolute():
        parent = path.parent / parent
    try:
        raw = private.read_in(parent.parent, parent.name, single_link=False)
        first = raw.decode("utf-8", "replace").split("\n", 1)[0]
        head = json.loads(first)
        if (
            isinstance(head, dict)
            and head.get("type") == "session"
            and isinstance(head.get("id"), str)
            and head["id"]
        ):
            return str(head["id"]), None
    except (OSError, ValueError):
        return (
            parent.stem,
            f"parent transcript {value} unreadable; its file name is used as the session id",
        )
    return parent.stem, None


Entry = tuple[int, dict[str, Any]]


def active_branch(entries: list[Entry]) -> tuple[list[Entry], int, list[Entry]]:
    """(the path from the last entry to the root through ``parentId``, message entries dropped as
    abandoned, message entries without an id). File order only when *no* entry has an id (older
    flat transcripts) or the ids do not form a clean tree; a stray entry without an id in a tree
    file is set aside and reported, it does not switch the file to file order (which would import
    abandoned branches)."""
    with_ids = [(n, e) for n, e in entries if isinstance(e.get("id"), str) and e["id"]]
    if not with_ids:
        return entries, 0, []
    idless = [
        (n, e)
        for n, e in entries
        if not (isinstance(e.get("id"), str) and e["id"])
        and e.get("type", "message") == "message"
        and "message" in e
    ]
    entries = with_ids
    by_id = {e["id"]: (n, e) for n, e in with_ids}
    path, seen = [], set()
    current: tuple[int, dict[str, Any]] | None = with_ids[-1]
    while current is not None:
        ident = current[1]["id"]
        if ident in seen:
            return entries, 0, idless
        seen.add(ident)
        path.append(current)
        parent = current[1].get("parentId")
        if parent is None:
            break
        current = by_id.get(parent)
        if current is None:
            return entries, 0, idless
    path.reverse()
    messages = sum(1 for _, e in entries if e.get("type", "message") == "message")
    kept = sum(1 for _, e in path if e.get("type", "message") == "message")
    return path, messages - kept, idless


def text_blocks(content: Any) -> tuple[list[str], list[dict[str, Any]], bool]:
    """(texts, OpenAI-style parts, whether any non-text part exists) from pi-ai content."""
    if isinstance(content, str):
        return [content], [{"type": "text", "text": content}], False
    texts, parts, other = [], [], False
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
            parts.append({"type": "text", "text": block["text"]})
        elif kind == "image" and isinstance(block.get("data"), str):
            mime = str(block.get("mimeType") or "application/octet-stream")
            parts.append(
                {"type": "image_url", "image_url": {"url": f"data:{mime};base64,{block['data']}"}}
            )
            other = True
    return texts, parts, other

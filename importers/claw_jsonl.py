"""The OpenClaw JSONL source: session transcripts read into source conversations.

A transcript is a ``{"type": "session"}`` header line, then entries with ``id``/``parentId``;
``{"type": "message"}`` entries carry ``user`` / ``assistant`` / ``toolResult`` messages. Only the
active branch (the path from the last entry back to the root) is imported, as the model saw it.
Files are read through ``base.private`` (never through a link); every line that cannot be
imported is counted and warned about in the report, so the reconciliation balances.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..base import private
from .claw_report import ImportFailure, Report, SourceConversation, SourceMessage, source_time


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


def jsonl_scan(
    files: Iterable[str | Path], dirs: Iterable[str | Path]
) -> tuple[list[Path], list[str]]:
    """The session files to read, and the symlinks skipped in the directories.

    A file named on the command line is read where it points (the operator chose it); inside a
    directory only regular files count: a link there could lead anywhere (``/etc``, another
    user's home), so it is skipped and the report says so."""
    found: set[Path] = set()
    for f in files:
        named = Path(f).expanduser()
        if not named.exists():
            raise ImportFailure(f"source {named} does not exist")
        if not named.is_file():
            raise ImportFailure(f"source {named} is not a regular file")
        found.add(named.resolve())
    skipped: list[str] = []
    for directory in dirs:
        d = Path(directory).expanduser()
        if not d.exists():
            raise ImportFailure(f"source {d} is not a directory: it does not exist")
        if not d.is_dir():
            raise ImportFailure(f"{d} is not a directory")
        d = d.resolve()
        for p in d.glob("*.jsonl"):
            if p.is_symlink():
                skipped.append(str(p))
            elif p.is_file():
                found.add(p)
    return sorted(found), sorted(skipped)


def state_dir_sessions(state_dir: str | Path) -> list[Path]:
    """The session directories of an OpenClaw state directory (``<dir>/agents/<id>/sessions``,
    what lossless-claw's migration reads from ``--state-dir``)."""
    root = Path(state_dir).expanduser()
    if not root.is_dir():
        raise ImportFailure(f"state directory {root} does not exist or is not a directory")
    found = sorted(p for p in root.glob("agents/*/sessions") if p.is_dir() and not p.is_symlink())
    if not found:
        raise ImportFailure(f"{root} holds no agents/<id>/sessions directory")
    return found


def narrowed(
    files: list[Path], since: float | None, limit: int | None, report: Report
) -> list[Path]:
    """The files of one batch: modified at ``since`` or later, then the oldest ``limit`` of them
    (a later run with the same import id goes on where this one stopped); the report says how
    many were left for another batch."""

    def modified(path: Path) -> float:
        try:
            return path.stat().st_mtime
        except OSError:
            return 0.0

    kept = sorted(files, key=lambda p: (modified(p), str(p)))
    if since is not None:
        kept = [p for p in kept if modified(p) >= since]
    if limit is not None:
        kept = kept[: max(0, limit)]
    if len(kept) < len(files):
        report.warn(
            f"{len(files) - len(kept)} of {len(files)} session files left out by --since/--limit"
        )
    return sorted(kept)


def _agent_of(path: Path) -> str:
    """The agent id of a file under ``agents/<id>/sessions`` (an OpenClaw state directory)."""
    parent = path.parent
    if parent.name == "sessions" and parent.parent.parent.name == "agents":
        return parent.parent.name
    return ""


def read_jsonl(path: Path, report: Report, agent: str = "") -> SourceConversation | None:
    """One session file -> one conversation (active branch only); without ``agent``, the one
    its state directory names."""
    agent = agent or _agent_of(path)
    try:
        # Never through a link: a file swapped for one after the scan is not read.
        lines = (
            private.read_in(path.parent, path.name, single_link=False)
            .decode("utf-8", "replace")
            .splitlines()
        )
    except OSError as exc:
        report.invalid_rows += 1
        report.warn(f"{path}: unreadable ({exc})")
        return None
    header: dict[str, Any] = {}
    entries: list[tuple[int, dict[str, Any]]] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            report.scanned += 1
            report.invalid_rows += 1
            report.warn(f"{path.name}:{number}: not JSON; skipped")
            continue
        if not isinstance(entry, dict):
            report.scanned += 1
            report.invalid_rows += 1
            report.warn(f"{path.name}:{number}: not a JSON object; skipped")
            continue
        if entry.get("type") == "session" and not header:
            header = entry
            continue
        entries.append((number, entry))
    session = str(header.get("id") or path.stem)
    prefix = f"openclaw:{agent}:" if agent else "openclaw:"
    parent, problem = parent_session_id(header.get("parentSession"), path)
    if problem:
        report.warn(f"{path.name}: {problem}")
    conv = SourceConversation(
        key=f"{prefix}{session}",
        session_id=f"{prefix}{session}",
        parent_session_id=f"{prefix}{parent}" if parent else None,
    )
    branch, dropped, idless = active_branch(entries)
    if dropped:
        report.warn(
            f"{path.name}: {dropped} message entries are on abandoned branches and not imported"
        )
    for number, _entry in idless:
        report.scanned += 1
        report.invalid_rows += 1
        report.warn(
            f"{path.name}:{number}: message entry without an id in a file whose entries have ids "
            "(not on any branch); skipped"
        )
    compactions = 0
    for number, entry in branch:
        if entry.get("type") == "compaction":
            compactions += 1
            continue
        if entry.get("type", "message") != "message" or "message" not in entry:
            continue
        report.scanned += 1
        converted = _convert(entry, report, f"{path.name}:{number}")
        if converted is not None:
            ident = str(entry.get("id") or f"line{number}")
            conv.messages.append(SourceMessage(f"{session}:{ident}", converted[0], converted[1]))
            if converted[0].get("reasoning_content"):
                report.thinking_kept += 1
    if compactions:
        report.compactions_reported += compactions
        report.warn(
            f"{path.name}: {compactions} OpenClaw compaction entries (its own summaries) are not imported; "
            "the messages they summarized are, and hermes-lcm summarizes them itself"
        )
    return conv


def _convert(
    entry: dict[str, Any], report: Report, where: str
) -> tuple[dict[str, Any], float | None] | None:
    raw = entry.get("message")
    if not isinstance(raw, dict) or not isinstance(raw.get("role"), str):
        report.invalid_rows += 1
        report.warn(f"{where}: message entry without a role; skipped")
        return None
    role, content = raw["role"], raw.get("content")
    if content is not None and not isinstance(content, str | list):
        report.invalid_rows += 1
        report.warn(f"{where}: content is neither text nor a list; skipped")
        return None
    ts = source_time(raw.get("timestamp")) or source_time(entry.get("timestamp"))
    texts, parts, other = text_blocks(content)
    body: Any = parts if other else "\n".join(texts)
    if role == "user":
        return {"role": "user", "content": body}, ts
    if role == "assistant":
        message: dict[str, Any] = {"role": "assistant", "content": "\n".join(texts)}
        thinking = (
            [
                str(b.get("thinking") or "")
                for b in content or []
                if isinstance(b, dict) and b.get("type") == "thinking" and b.get("thinking")
            ]
            if isinstance(content, list)
            else []
        )
        if (
            thinking
        ):  # kept as the host's reasoning field (stored with the message, not shown as content)
            message["reasoning_content"] = "\n".join(thinking)
        calls = (
            [b for b in content or [] if isinstance(b, dict) and b.get("type") == "toolCall"]
            if isinstance(content, list)
            else []
        )
        if calls:
            message["tool_calls"] = [
                {
                    "id": str(c.get("id") or ""),
                    "type": "function",
                    "function": {
                        "name": str(c.get("name") or "unknown_tool"),
                        "arguments": json.dumps(c.get("arguments") or {}, ensure_ascii=False),
                    },
                }
                for c in calls
            ]
        return message, ts
    if role == "toolResult":
        if not raw.get("toolCallId"):
            report.invalid_rows += 1
            report.warn(f"{where}: toolResult without toolCallId; skipped")
            return None
        message = {"role": "tool", "tool_call_id": str(raw["toolCallId"]), "content": body}
        if raw.get("toolName"):
            message["name"] = str(raw["toolName"])
        return message, ts
    report.skipped_unsupported += 1
    report.warn(f"{where}: role {role!r} is not imported")
    return None

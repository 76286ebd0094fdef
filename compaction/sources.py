"""What a summary is made from: each stored message as the summarizer reads it, cut to a fair
share of the input so one huge tool result cannot crowd out the rest (compaction passes and a
session that stores nothing both build their sources here)."""

from __future__ import annotations

import json
from collections.abc import Sequence

from ..base.records import StoredMessage
from .summarize import SourceItem

# One source item's text is cut to this many characters before summarizing.
MAX_SOURCE_CHARS = 60_000
# All source items of one summary together: past this, each gets a fair share (short ones stay
# whole), so a leaf over 2,000 huge tool results costs what one over a few does.
MAX_SUMMARY_INPUT_CHARS = 400_000


def _calls_text(stored: str) -> str:
    """The calls as ``name(arguments)``; the stored JSON as it is when it holds anything else
    (malformed host tool_calls are stored verbatim)."""
    try:
        calls = json.loads(stored)
    except ValueError:
        return stored
    if not isinstance(calls, list):
        return stored
    shown = []
    for c in calls:
        fn = c.get("function") if isinstance(c, dict) else None
        if isinstance(fn, dict) and is_own_tool(fn.get("name")):
            shown.append(f"{fn.get('name')}(…)")  # a memory search: its words are the request's
        elif isinstance(fn, dict):
            shown.append(f"{fn.get('name')}({fn.get('arguments', '')})")
        else:
            shown.append(json.dumps(c, ensure_ascii=False, default=str))
    return "; ".join(shown)


def is_own_tool(name: object) -> bool:
    """An lcm_* tool: its calls and results are LCM's own traffic (copies of stored rows)."""
    return isinstance(name, str) and name.startswith("lcm_")


def message_source(m: StoredMessage) -> SourceItem:
    """A message as the summarizer reads it; an lcm_* result is named, not copied: its text is
    stored rows already, and a summary restating them would be a second hit for one source."""
    text = m.content
    if m.role == "tool" and is_own_tool(m.tool_name):
        text = f"[{m.tool_name} result: {len(m.content)} chars of stored history, not restated]"
    if m.tool_calls:
        text = f"{text}\n[tool calls] {_calls_text(m.tool_calls)}".strip()
    label = f"#{m.id} {m.role}" + (f" {m.tool_name}" if m.tool_name else "")
    return SourceItem(label, _middle_cut(text, MAX_SOURCE_CHARS))


def _middle_cut(text: str, chars: int) -> str:
    """``text`` cut to about ``chars`` characters: head and tail kept, the middle named."""
    if len(text) <= chars:
        return text
    half = chars // 2
    return (
        f"{text[:half]}\n[... {len(text) - 2 * half} chars omitted ...]\n{text[len(text) - half :]}"
    )


def fit_sources(sources: Sequence[SourceItem], limit: int) -> list[SourceItem]:
    """Sources whose texts total about ``limit`` characters: every text longer than a common
    share is cut to it, the share being the largest that fits (shorter texts stay whole)."""
    total = sum(len(s.text) for s in sources)
    if total <= limit:
        return list(sources)
    lengths = sorted(len(s.text) for s in sources)
    remaining, share = limit, lengths[-1]
    for i, length in enumerate(lengths):
        fair = remaining // (len(lengths) - i)
        if length > fair:
            share = fair
            break
        remaining -= length
    return [
        s if len(s.text) <= share else SourceItem(s.label, _middle_cut(s.text, share))
        for s in sources
    ]

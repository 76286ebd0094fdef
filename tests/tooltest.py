"""Helpers of the lcm_* tool tests: call a tool as the host does, build histories, walk pages."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from hermes_lcm.engine import LcmEngine

from .convo import conversation, host_run


def tool(
    engine: LcmEngine, name: str, messages: list[dict[str, Any]] | None = None, **args: Any
) -> dict[str, Any]:
    """One tool call through the engine's host entry point; the answer must be a JSON object."""
    raw = engine.handle_tool_call(name, args, messages=messages)
    assert isinstance(raw, str)
    assert len(raw) <= engine.config.tool_response_max_chars, (name, len(raw))
    answer = strict_json(raw)
    assert isinstance(answer, dict)
    return answer


def strict_json(text: str) -> Any:
    """JSON as a strict parser reads it: ``Infinity``, ``-Infinity`` and ``NaN`` are not JSON."""

    def refuse(constant: str) -> Any:
        raise AssertionError(f"not JSON: {constant} in an answer")

    return json.loads(text, parse_constant=refuse)


def ok(engine: LcmEngine, name: str, **args: Any) -> dict[str, Any]:
    answer = tool(engine, name, **args)
    assert "error" not in answer, answer
    return answer


def err(engine: LcmEngine, name: str, **args: Any) -> str:
    answer = tool(engine, name, **args)
    assert "error" in answer, answer
    return str(answer["error"])


def compacted(
    engine: LcmEngine, turns: int = 40, seed: int = 3, size: int = 60
) -> list[dict[str, Any]]:
    """Drive ``turns`` synthetic turns with compaction; returns every raw message in order."""
    history, outputs = host_run(engine, list(conversation(seed, turns, size)))
    assert outputs, "expected at least one compaction"
    return history


def walk(
    fetch: Callable[[Any], dict[str, Any]],
    items: str,
    cursor_key: str = "next_cursor",
    start: Any = None,
    max_pages: int = 500,
) -> list[dict[str, Any]]:
    """Follow cursors to the end, checking each page makes progress; returns all items."""
    seen: list[dict[str, Any]] = []
    cursor = start
    cursors = set()
    for _ in range(max_pages):
        page = fetch(cursor)
        assert "error" not in page, page
        seen += page[items]
        cursor = page.get(cursor_key)
        if cursor is None:
            return seen
        assert page[items], "a page with a cursor must carry items"
        assert cursor not in cursors, "a cursor repeated: no progress"
        cursors.add(cursor)
    raise AssertionError("pagination did not end")


def hit_key(hit: dict[str, Any]) -> tuple[str, Any]:
    return ("s", hit["node_id"]) if "node_id" in hit else ("m", hit["store_id"])

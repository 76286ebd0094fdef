"""The rules a provider holds a chat history to: one strict check, and the repairs that satisfy it.

Providers reject a request whose history breaks any of these rules (OpenAI-compatible chat
completions with HTTP 400, Anthropic through the host's adapter, Responses through Codex). The
host's own pre-call pass (``agent_runtime_helpers.sanitize_api_messages`` and
``sanitize_tool_call_arguments``) fixes only some of them, and by deleting: orphan results are
dropped, missing results stubbed, unparsable arguments replaced by ``{}``, unknown roles dropped.
So what hermes-lcm returns satisfies them already, and what cannot be sent as it is is shown as
text instead of being lost:

- every message is a dict whose role is ``user``, ``assistant`` or ``tool``;
- ``tool_calls``, when present, is a non-empty list of well-formed calls: a dict with a non-empty
  string ``id``, ``type`` ``"function"`` and ``function`` ``{"name": non-empty str, "arguments":
  str holding a JSON object}``; no call id occurs twice in the whole list;
- a tool message has a non-empty string ``tool_call_id`` and sits in the unbroken run of tool
  messages right after the assistant message whose calls hold that id; each call is answered
  exactly once;
- content is a string or a non-empty list of parts (dicts with a string ``type``; a text part's
  ``text`` is a string); a user or assistant message without tool calls has visible content; an
  assistant message with calls may have ``None`` content; a tool result is a string or parts.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

ROLES = ("user", "assistant", "tool")


# -- single pieces ------------------------------------------------------------------------------


def call_problem(call: Any) -> str | None:
    """Why a tool call is not well-formed, or None."""
    if not isinstance(call, Mapping):
        return "a tool call that is not an object"
    if not isinstance(call.get("id"), str) or not call["id"].strip():
        return "a tool call without an id"
    if call.get("type") != "function":
        return "a tool call whose type is not 'function'"
    fn = call.get("function")
    if not isinstance(fn, Mapping):
        return "a tool call without a function"
    if not isinstance(fn.get("name"), str) or not fn["name"].strip():
        return "a tool call without a function name"
    if not isinstance(fn.get("arguments"), str):
        return "a tool call whose arguments are not a string"
    if not _json_object(fn["arguments"]):
        return "a tool call whose arguments are not a JSON object"
    return None


def _json_object(text: str) -> bool:
    if not text.startswith("{"):
        return False
    try:
        return isinstance(json.loads(text), dict)
    except (ValueError, RecursionError):
        return False


def repaired_call(call: Any) -> Any:
    """The call with the repairs that lose nothing: a missing type is ``function``, absent or blank
    arguments are ``{}`` and arguments given as an object are that object in JSON. Anything else
    is returned as it is (and stays malformed)."""
    if not isinstance(call, Mapping) or not isinstance(call.get("function"), Mapping):
        return call
    args = call["function"].get("arguments")
    if "type" in call and isinstance(args, str) and args.strip():
        return call
    fixed = dict(call)
    if "type" not in fixed:
        fixed["type"] = "function"
    fn = dict(fixed["function"])
    args = fn.get("arguments")
    if args is None or (isinstance(args, str) and not args.strip()):
        fn["arguments"] = "{}"
    elif isinstance(args, dict):
        try:
            fn["arguments"] = json.dumps(args, ensure_ascii=False)
        except (TypeError, ValueError, RecursionError):
            return call
    fixed["function"] = fn
    return fixed


def parts_problem(parts: list[Any]) -> str | None:
    if not parts:
        return "an empty parts list"
    for part in parts:
        if not isinstance(part, Mapping) or not isinstance(part.get("type"), str):
            return "a content part that is not a typed object"
        if part["type"] in ("text", "input_text") and not isinstance(part.get("text"), str):
            return "a text part without text"
    return None


def content_problem(message: Mapping[str, Any]) -> str | None:
    """Why a message's content is not sendable, or None."""
    content = message.get("content")
    role = message.get("role")
    if isinstance(content, list):
        problem = parts_problem(content)
        if problem or role == "tool" or message.get("tool_calls"):
            return problem
        return None if any(_visible_part(p) for p in content) else "content without visible text"
    if role == "tool":
        return None if isinstance(content, str) else "a tool result whose content is not text"
    if role == "assistant" and message.get("tool_calls") and content is None:
        return None
    if not isinstance(content, str):
        return "content that is not text or parts"
    if (not content or content.isspace()) and not message.get("tool_calls"):
        return "empty content"
    return None


def _visible_part(part: Mapping[str, Any]) -> bool:
    return part.get("type") not in ("text", "input_text") or bool(str(part.get("text", "")).strip())


def as_text(value: Any) -> str:
    """Any stored value as text, for showing it where a provider wants a string."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError, RecursionError):
        return repr(value)


# -- the whole list -----------------------------------------------------------------------------


def problems(messages: Sequence[Any]) -> list[str]:
    """Every rule the list breaks, as ``"message N: what"``; empty when a provider accepts it."""
    found: list[str] = []
    used: set[str] = set()
    i = 0
    while i < len(messages):
        message = messages[i]
        if not isinstance(message, Mapping) or message.get("role") not in ROLES:
            found.append(f"message {i}: not a user, assistant or tool message")
            i += 1
            continue
        problem = content_problem(message)
        if problem:
            found.append(f"message {i}: {problem}")
        if message["role"] == "tool":
            found.append(f"message {i}: a tool result not right after its call")
            i += 1
            continue
        if "tool_call_id" in message:
            found.append(f"message {i}: a tool_call_id on a {message['role']} message")
        if "name" in message and not isinstance(message["name"], str):
            found.append(f"message {i}: a name that is not text")
        if message["role"] == "assistant" and "tool_calls" in message:
            i = _check_block(messages, i, used, found)
            continue
        if "tool_calls" in message:
            found.append(f"message {i}: tool calls on a {message['role']} message")
        i += 1
    return found


def _check_block(messages: Sequence[Any], i: int, used: set[str], found: list[str]) -> int:
    """Check the assistant message at ``i`` and its results; returns the index after them."""
    calls = messages[i].get("tool_calls")
    wanted: set[str] = set()
    if not isinstance(calls, list) or not calls:
        found.append(f"message {i}: tool_calls is not a non-empty list")
        calls = []
    for call in calls:
        problem = call_problem(call)
        if problem:
            found.append(f"message {i}: {problem}")
            continue
        if call["id"] in used:
            found.append(f"message {i}: tool call id {call['id']!r} used twice")
        used.add(call["id"])
        wanted.add(call["id"])
    j = i + 1
    answered: set[str] = set()
    while (
        j < len(messages) and isinstance(messages[j], Mapping) and messages[j].get("role") == "tool"
    ):
        result = messages[j]
        cid = result.get("tool_call_id")
        problem = content_problem(result)
        if problem:
            found.append(f"message {j}: {problem}")
        if not isinstance(cid, str) or cid not in wanted:
            found.append(f"message {j}: a tool result for {cid!r}, not a call of message {i}")
        elif cid in answered:
            found.append(f"message {j}: a second result for {cid!r}")
        else:
            answered.add(cid)
        if "name" in result and not isinstance(result["name"], str):
            found.append(f"message {j}: a tool name that is not text")
        j += 1
    for cid in sorted(wanted - answered):
        found.append(f"message {i}: tool call {cid!r} has no result")
    return j

"""Replayable groups: every stored message as a provider accepts it.

The store keeps what the host sent, and the host sent what its provider took at the time; replayed
later, beside other messages, much of it would be refused (a tool result whose call is out of view,
a call without its result, a duplicate call id, an image whose data went to a payload file). Here
the messages are split into groups that are each a valid provider sequence (the rules are in
wire.py), and whatever would be refused is shown as text naming its stored row. The prompt
builder (assemble.py) then only decides which groups fit.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..base.payloads import PLACEHOLDER_PREFIX
from ..base.records import StoredMessage, without_shadows
from ..base.tokens import MESSAGE_OVERHEAD_TOKENS, count_message, count_tokens
from ..base.wire import as_text, call_problem, content_problem, parts_problem, repaired_call

REPLAY_ROLES = ("user", "assistant", "tool")
NO_RESULT = "a tool call without a result"
# Notes the prompt leaves in a message, naming its stored row; ingest's alignment reads them back
# (align._REPLAY_REF), so a message the host returns as we showed it is known as that row.
# The note assemble.cut_message leaves in a message it shortened.
CUT_MARKER = "[lcm: cut to fit the prompt; full text: lcm_expand store_id="
# The part put in place of an image whose data went to a payload file.
IMAGE_MARKER = "[lcm: image not replayed; original: lcm_expand store_id="
# The note on a message shown as text because a provider would reject it as it is.
TEXT_MARKER = "[lcm: shown as text; original: lcm_expand store_id="


@dataclass(frozen=True)
class Item:
    """One raw message on its way to the prompt."""

    role: str
    tokens: int
    message: dict[str, Any]
    store_id: int | None = None
    # Position in the host's list for messages that have no stored row (the no-store fallback).
    ref: int = 0

    @classmethod
    def stored(cls, m: StoredMessage) -> Item:
        return cls(m.role, m.tokens, replayable(m.to_host(), m.id), m.id)

    @classmethod
    def host(cls, message: dict[str, Any], ref: int = 0) -> Item:
        return cls(str(message.get("role")), count_message(message), dict(message), ref=ref)

    @property
    def key(self) -> object:
        """Which message this is, whatever copy of it the assembler made."""
        if self.store_id is not None:
            return self.store_id
        return -self.ref if self.ref else id(self.message)

    @functools.cached_property
    def call_ids(self) -> tuple[str, ...]:
        """Computed once per item (an item is immutable): a message may carry 100k calls."""
        calls = self.message.get("tool_calls") or []
        return tuple(str(c.get("id")) for c in calls if isinstance(c, dict) and c.get("id"))

    @functools.cached_property
    def call_id_set(self) -> frozenset[str]:
        """The call ids as a set, built once: matching each of 100k results against a
        100k-call message must not rebuild and scan the id list per result."""
        return frozenset(self.call_ids)


def replayable(message: dict[str, Any], store_id: int) -> dict[str, Any]:
    """The message as a provider accepts it: an image part whose data the payload guard moved
    to a file (its URL is now a placeholder) becomes a text part naming the stored row."""
    content = message.get("content")
    if not isinstance(content, list) or PLACEHOLDER_PREFIX not in json.dumps(content, default=str):
        return message
    parts = [_replay_part(part, store_id) for part in content]
    return {**without_shadows(message), "content": parts}


def _replay_part(part: Any, store_id: int) -> Any:
    if not isinstance(part, dict) or part.get("type") in ("text", "input_text"):
        return part
    if PLACEHOLDER_PREFIX not in json.dumps(part, default=str):
        return part
    return {"type": "text", "text": f"{IMAGE_MARKER}{store_id}]"}


def group(items: Sequence[Item]) -> list[list[Item]]:
    """Split into replayable groups, each a valid provider sequence on its own and all of them
    together (the rules are in wire.py): an assistant call with its results is one group.

    Whatever the store holds, nothing that fits is left out; what a provider would reject as it
    is is shown as text naming its stored row: a tool result with no call right before it (or
    a second result for one call) becomes a user message; a malformed call, a duplicate call id
    or a call without a result becomes text in its assistant message; a message in an unknown
    role, or with content that is not text or parts, becomes text in a valid role.
    """
    groups: list[list[Item]] = []
    used: set[str] = set()
    i = 0
    while i < len(items):
        item = items[i]
        if item.role == "assistant" and item.message.get("tool_calls"):
            end = i + 1
            while end < len(items) and items[end].role == "tool":
                end += 1
            groups.extend(_block_once(item, items[i + 1 : end], used))
            i = end
            continue
        groups.append([plain(item)])
        i += 1
    return groups


def plain(item: Item) -> Item:
    """A message outside a tool block, as a provider accepts it."""
    message = item.message
    if item.role in ("user", "assistant") and _plain_text(message):
        return item
    if item.role == "tool":
        cid = message.get("tool_call_id")
        return _text_item(
            item, f"A tool result whose call is not in view (tool_call_id {as_text(cid)!r}):"
        )
    if item.role not in ("user", "assistant"):
        return _text_item(item, f"A message in role {as_text(item.role)!r}:")
    if message.get("tool_calls"):  # calls outside a tool block (group sends those to _block)
        return _text_item(item, "", role=item.role)
    stray: list[str] = [k for k in ("tool_calls", "tool_call_id") if k in message]
    if "name" in message and not isinstance(message["name"], str):
        stray.append("name")
    if stray:  # empty tool_calls and a stray tool_call_id say nothing; strict providers reject them
        message = {k: v for k, v in message.items() if k not in stray}
    if content_problem(message) is None:
        return item if message is item.message else _rebuilt(item, message)
    return _text_item(item, "", role=item.role)


def _plain_text(message: dict[str, Any]) -> bool:
    """The common case, decided without the full check: visible text and no tool fields."""
    content = message.get("content")
    return (
        type(content) is str
        and bool(content)
        and not content.isspace()
        and "tool_calls" not in message
        and "tool_call_id" not in message
        and isinstance(message.get("name", ""), str)
    )


def _block_once(call: Item, results: Sequence[Item], used: set[str]) -> list[list[Item]]:
    """:func:`_block`, remembered on the call's item: the same stored rows are grouped on every
    assembly, and checking every call (its arguments parsed) each time is most of a turn's cost.

    The remembered answer holds while the results are the same items and none of the call ids
    it was computed with has been used by an earlier block since (the answer depends on that).
    """
    memo = call.__dict__.get("_lcm_block")
    if (
        memo is not None
        and len(memo[0]) == len(results)
        and all(a is b for a, b in zip(memo[0], results, strict=True))
        and not memo[1] & used
    ):
        used.update(memo[2])
        return [list(g) for g in memo[3]]
    ids: set[str] = set()
    before = set(used)
    out = _block(call, results, used, ids)
    if not ids & before:  # computed with no id taken before: valid wherever none is
        call.__dict__["_lcm_block"] = (
            tuple(results),
            frozenset(ids),
            frozenset(used - before),
            [list(g) for g in out],
        )
    return out


def _block(
    call: Item, results: Sequence[Item], used: set[str], ids: set[str] | None = None
) -> list[list[Item]]:
    """The assistant message with its well-formed, answered calls and their results; every
    other call as text in its content, every other result as a text message after the block.
    ``ids`` collects the well-formed call ids looked up in ``used``."""
    raw = call.message.get("tool_calls")
    good: dict[str, Any] = {}
    shown: list[tuple[Any, str]] = []
    answerable = {cid for r in results if isinstance(cid := r.message.get("tool_call_id"), str)}
    for c in raw if isinstance(raw, list) else [raw]:
        if not (isinstance(c, Mapping) and isinstance(c.get("id"), str) and c["id"] in answerable):
            shown.append((c, NO_RESULT))  # text whatever else is wrong with it; not worth checking
            continue
        fixed = repaired_call(c)
        problem = call_problem(fixed)
        if problem is None and ids is not None:
            ids.add(fixed["id"])
        if problem is None and (fixed["id"] in used or fixed["id"] in good):
            problem = f"a tool call id used before ({fixed['id']!r})"
        if problem is None:
            good[fixed["id"]] = fixed
        else:
            shown.append((c, problem))
    answered: set[str] = set()
    pairs: list[Item] = []
    extra: list[Item] = []
    for r in results:
        cid = r.message.get("tool_call_id")
        if isinstance(cid, str) and cid in good and cid not in answered:
            answered.add(cid)
            pairs.append(_result(r))
        else:
            extra.append(r)
    shown += [(c, NO_RESULT) for cid, c in good.items() if cid not in answered]
    kept = [c for cid, c in good.items() if cid in answered]
    used.update(answered)
    head = _assistant(call, kept, shown)
    return [[head, *pairs], *([plain(r)] for r in extra)]


def _assistant(call: Item, kept: list[Any], shown: list[tuple[Any, str]]) -> Item:
    """The call's message with only ``kept`` as tool calls and the ``shown`` ones as text."""
    original = call.message.get("tool_calls")
    stray = "tool_call_id" in call.message or not isinstance(call.message.get("name", ""), str)
    if (
        not shown
        and not stray
        and isinstance(original, list)
        and len(kept) == len(original)
        and all(a is b for a, b in zip(kept, original, strict=True))
        and content_problem(call.message) is None
    ):
        return call
    message = {
        k: v
        for k, v in call.message.items()
        if k != "tool_call_id" and not (k == "name" and not isinstance(v, str))
    }
    if kept:
        message["tool_calls"] = kept
    else:
        message.pop("tool_calls", None)
    if shown:
        notes = _notes(shown)
        message["content"] = _with_text(
            message.get("content"), marker(call) + "\n" + "\n".join(notes)
        )
    elif content_problem(message) is not None:
        message["content"] = _with_text(message.get("content"), marker(call))
    return _rebuilt(call, message)


def _notes(shown: list[tuple[Any, str]]) -> list[str]:
    """One line per malformed call; the calls without a result in view on one line together
    (a message cut by a window's edge may have 100k of them: one JSON list is written 5x faster)."""
    notes = [f"{problem}: {as_text(c)}" for c, problem in shown if problem != NO_RESULT]
    unanswered = [c for c, problem in shown if problem == NO_RESULT]
    if len(unanswered) == 1:
        notes.append(f"{NO_RESULT}: {as_text(unanswered[0])}")
    elif unanswered:
        notes.append(f"{len(unanswered)} tool calls without a result: {as_text(unanswered)}")
    return notes


def _result(result: Item) -> Item:
    """A paired tool result with text or parts for content and a text name."""
    message = result.message
    bad_name = "name" in message and not isinstance(message["name"], str)
    if content_problem(message) is None and not bad_name:
        return result
    message = {k: v for k, v in message.items() if not (bad_name and k == "name")}
    if content_problem(message) is not None:
        message["content"] = as_text(message.get("content"))
    return _rebuilt(result, message)


def marker(item: Item) -> str:
    """The note that opens a message shown as text, naming its stored row when it has one."""
    return f"{TEXT_MARKER}{item.store_id}]" if item.store_id else "[lcm: shown as text]"


def _with_text(content: Any, text: str) -> Any:
    """``content`` with ``text`` added after it; parts stay parts when they are valid."""
    if _parts_ok(content):
        return [*content, {"type": "text", "text": text}]
    before = as_text(content)
    return f"{before}\n{text}" if before.strip() else text


def _parts_ok(content: Any) -> bool:
    return isinstance(content, list) and parts_problem(content) is None


def _text_item(item: Item, label: str, role: str = "user") -> Item:
    """The message as text in ``role``, labelled, naming its stored row."""
    message = item.message
    content = message.get("content")
    head = f"{marker(item)} {label}".rstrip()
    extra = [f"tool_calls: {as_text(message['tool_calls'])}"] if message.get("tool_calls") else []
    kept = {
        k: v
        for k, v in message.items()
        if k not in ("role", "content", "tool_calls", "tool_call_id", "name")
    }
    if isinstance(content, str) and not extra:
        # a long orphan result costs what it did plus the label; no need to count it again
        text = f"{head}\n{content}" if content.strip() else head
        tokens = (
            item.tokens + count_tokens(head) + 1
            if item.tokens
            else count_tokens(text) + MESSAGE_OVERHEAD_TOKENS
        )
        return Item(role, tokens, {**kept, "role": role, "content": text}, item.store_id, item.ref)
    if isinstance(content, list) and _parts_ok(content) and role == "user":
        parts: Any = [{"type": "text", "text": "\n".join([head, *extra])}, *content]
    else:
        body = as_text(content)
        parts = "\n".join([head, *extra, *([body] if body.strip() else [])])
    return _rebuilt(item, {**kept, "role": role, "content": parts}, role=role)


def _rebuilt(item: Item, message: dict[str, Any], role: str | None = None) -> Item:
    """A rewritten copy of ``item``: the host fields that restate the old content go with it."""
    message = without_shadows(message)
    return Item(role or item.role, count_message(message), message, item.store_id, item.ref)

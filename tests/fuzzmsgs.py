"""Generators of malformed and very wide host histories, driven by one ``random.Random``.

Hypothesis tests pass ``st.randoms()`` (shrinkable, reproducible); the plain fuzz loop passes
seeded ``random.Random`` instances. Both feed the same shapes the issue names: orphan, duplicated,
reordered and early tool results, malformed ``tool_calls`` (not a list, entries without id,
function or name, arguments that are not a string or not JSON, duplicate ids across messages,
non-dict entries), tool messages without ``tool_call_id``, empty assistant messages, unknown
roles, odd content types.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from hermes_lcm.base.tokens import content_text

from .convo import text

Message = dict[str, Any]


def _call(cid: str, name: str = "read_file", args: Any = None) -> Message:
    return {
        "id": cid,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args or {"path": f"{cid}.py"})},
    }


def valid_history(rng: random.Random, turns: int, words: int = 20) -> list[Message]:
    """A well-formed history: user asks, tool loops, answers."""
    out: list[Message] = []
    for t in range(turns):
        out.append({"role": "user", "content": f"ask {t}: {text(rng, rng.randint(1, words))}"})
        for loop in range(rng.randint(0, 2)):
            ids = [f"call_{t}_{loop}_{k}" for k in range(rng.randint(1, 3))]
            out.append(
                {
                    "role": "assistant",
                    "content": rng.choice(["", None, "let me look"]),
                    "tool_calls": [_call(i) for i in ids],
                }
            )
            out += [
                {
                    "role": "tool",
                    "tool_call_id": i,
                    "name": "read_file",
                    "content": f"result {i}: {text(rng, rng.randint(0, words * 3))}",
                }
                for i in ids
            ]
        out.append(
            {"role": "assistant", "content": f"answer {t}: {text(rng, rng.randint(1, words))}"}
        )
    return out


# -- corruptions -----------------------------------------------------------------------------


def _indexes(history: list[Any], role: str) -> list[int]:
    return [i for i, m in enumerate(history) if isinstance(m, dict) and m.get("role") == role]


def _with_calls(history: list[Any]) -> list[int]:
    return [
        i
        for i in _indexes(history, "assistant")
        if isinstance(history[i].get("tool_calls"), list) and history[i]["tool_calls"]
    ]


def _drop(rng: random.Random, h: list[Any]) -> None:
    if h:
        del h[rng.randrange(len(h))]


def _duplicate_result(rng: random.Random, h: list[Any]) -> None:
    tools = _indexes(h, "tool")
    if tools:
        i = rng.choice(tools)
        h.insert(rng.choice([i + 1, rng.randrange(len(h) + 1)]), dict(h[i]))


def _move(rng: random.Random, h: list[Any]) -> None:
    if len(h) > 1:
        m = h.pop(rng.randrange(len(h)))
        h.insert(rng.randrange(len(h) + 1), m)


def _result_before_call(rng: random.Random, h: list[Any]) -> None:
    calls = _with_calls(h)
    if calls:
        i = rng.choice(calls)
        results = [
            j for j in range(i + 1, len(h)) if isinstance(h[j], dict) and h[j].get("role") == "tool"
        ][:1]
        if results:
            h.insert(i, h.pop(results[0]))


def _swap_adjacent(rng: random.Random, h: list[Any]) -> None:
    if len(h) > 1:
        i = rng.randrange(len(h) - 1)
        h[i], h[i + 1] = h[i + 1], h[i]


BAD_CALLS: list[Callable[[random.Random, Message, list[Any]], Any]] = [
    lambda rng, c, h: "not a call",
    lambda rng, c, h: None,
    lambda rng, c, h: 42,
    lambda rng, c, h: {k: v for k, v in c.items() if k != "id"},
    lambda rng, c, h: {**c, "id": rng.choice([7, "", "   ", None, ["x"]])},
    lambda rng, c, h: {k: v for k, v in c.items() if k != "function"},
    lambda rng, c, h: {**c, "function": rng.choice(["read_file", None, 3, []])},
    lambda rng, c, h: {**c, "function": {"arguments": "{}"}},
    lambda rng, c, h: {
        **c,
        "function": {"name": rng.choice(["", "  ", None, 5]), "arguments": "{}"},
    },
    lambda rng, c, h: {
        **c,
        "function": {
            **c["function"],
            "arguments": rng.choice(
                [{"path": "a"}, 12, None, ["a"], "", "not json", "{broken", "[1, 2]", "null"]
            ),
        },
    },
    lambda rng, c, h: {k: v for k, v in c.items() if k != "type"},
    lambda rng, c, h: {**c, "type": rng.choice(["custom", None, 1])},
    lambda rng, c, h: {**c, "id": _some_call_id(rng, h) or c["id"]},  # duplicate id across messages
]


def _some_call_id(rng: random.Random, h: list[Any]) -> str | None:
    ids = [
        c["id"]
        for i in _with_calls(h)
        for c in h[i]["tool_calls"]
        if isinstance(c, dict) and "id" in c
    ]
    return rng.choice(ids) if ids else None


def _bad_call(rng: random.Random, h: list[Any]) -> None:
    calls = _with_calls(h)
    if calls:
        m = h[rng.choice(calls)]
        k = rng.randrange(len(m["tool_calls"]))
        original = m["tool_calls"][k]
        if isinstance(original, dict) and isinstance(original.get("function"), dict):
            m["tool_calls"] = [*m["tool_calls"]]
            m["tool_calls"][k] = rng.choice(BAD_CALLS)(rng, original, h)


def _bad_calls_field(rng: random.Random, h: list[Any]) -> None:
    calls = _with_calls(h) or _indexes(h, "assistant")
    if calls:
        h[rng.choice(calls)]["tool_calls"] = rng.choice(
            [
                [],
                {"id": "x", "function": {"name": "f", "arguments": "{}"}},
                "calls",
                3,
                [[]],
                [None],
            ]
        )


def _bad_result(rng: random.Random, h: list[Any]) -> None:
    tools = _indexes(h, "tool")
    if tools:
        m = h[rng.choice(tools)]
        change = rng.randrange(4)
        if change == 0:
            m.pop("tool_call_id", None)
        elif change == 1:
            m["tool_call_id"] = rng.choice([5, "", "ghost", None])
        elif change == 2:
            m["content"] = rng.choice(
                [None, {"ok": True}, 3, [], [{"type": "text", "text": "part"}], ["raw"]]
            )
        else:
            m["name"] = rng.choice([1, None, ["x"]])


def _bad_content(rng: random.Random, h: list[Any]) -> None:
    plain = _indexes(h, "user") + [
        i for i in _indexes(h, "assistant") if not h[i].get("tool_calls")
    ]
    if plain:
        h[rng.choice(plain)]["content"] = rng.choice(
            [
                None,
                "",
                "   ",
                17,
                {"a": 1},
                [],
                [None],
                [{"type": "text"}],
                [{"text": "no type"}],
                [{"type": "text", "text": ""}],
                [{"type": "text", "text": "fine part"}],
                [{"type": "image_url", "image_url": {"url": "https://example.invalid/a.png"}}],
            ]
        )


def _odd_message(rng: random.Random, h: list[Any]) -> None:
    odd = rng.choice(
        [
            {"role": "function", "name": "legacy", "content": "legacy result"},
            {"role": "developer", "content": "dev note"},
            {"role": "bogus", "content": "bogus role"},
            {"role": "", "content": "empty role"},
            {"role": "system", "content": "system prompt"},
            {"role": "assistant", "content": None},
            {"role": "assistant"},
            {"role": "user", "content": "user with calls", "tool_calls": [_call("u1")]},
            {"role": "user", "content": "user with tool_call_id", "tool_call_id": "c"},
            {"role": "tool", "content": "no id at all"},
            None,
            "a string",
            12,
            ["list"],
            {"content": "no role"},
            {"role": 3, "content": "int role"},
        ]
    )
    h.insert(rng.randrange(len(h) + 1), odd)


def _big(rng: random.Random, h: list[Any], repeats: int) -> None:
    tools = _indexes(h, "tool") + _indexes(h, "user")
    if tools:
        m = h[rng.choice(tools)]
        m["content"] = f"BIG {rng.random()} " + "lorem ipsum dolor sit amet " * rng.randint(
            repeats // 10, repeats
        )


CORRUPTIONS = [
    _drop,
    _duplicate_result,
    _move,
    _result_before_call,
    _swap_adjacent,
    _bad_call,
    _bad_call,
    _bad_calls_field,
    _bad_result,
    _bad_result,
    _bad_content,
    _odd_message,
    _odd_message,
]


def malformed_history(rng: random.Random, big: int = 3000) -> list[Any]:
    """A valid history with 1-8 corruptions applied; some contents up to ``big`` x 27 characters."""
    h: list[Any] = valid_history(rng, rng.randint(1, 6))
    for _ in range(rng.randint(1, 8)):
        if rng.randrange(len(CORRUPTIONS) + 1) == 0:
            _big(rng, h, big)
        else:
            rng.choice(CORRUPTIONS)(rng, h)
    return h


def wide_history(rng: random.Random, blocks: Sequence[tuple[int, int]] | None = None) -> list[Any]:
    """Some ordinary turns, then a user request answered by wide tool turns: one per
    ``(calls, result characters)`` in ``blocks`` (drawn from ``rng`` when not given)."""
    if blocks is None:
        blocks = [
            (
                rng.choice([rng.randint(1, 60), rng.randint(1, 3000)]),
                rng.choice([rng.randint(0, 40), rng.randint(0, 2000)]),
            )
            for _ in range(rng.randint(1, 2))
        ]
    h: list[Any] = valid_history(rng, rng.randint(0, 3))
    h.append({"role": "user", "content": f"REQUEST {rng.random()}: read every file and report"})
    for block, (n, size) in enumerate(blocks):
        ids = [f"w{block}_{k}" for k in range(n)]
        h.append(
            {
                "role": "assistant",
                "content": rng.choice([None, "", "reading them all"]),
                "tool_calls": [
                    _call(i, args={"path": f"src/{i}.py", "pad": "p" * rng.randint(0, 40)})
                    for i in ids
                ],
            }
        )
        h += [
            {
                "role": "tool",
                "tool_call_id": i,
                "name": "read_file",
                "content": f"{i}: " + ("data " * (size // 5 + 1))[:size],
            }
            for i in ids
        ]
    return h


# -- oracles -------------------------------------------------------------------------------------


def is_storable(m: Any) -> bool:
    if not isinstance(m, Mapping) or not isinstance(m.get("role"), str) or m["role"] == "system":
        return False
    content = m.get("content")
    return not (isinstance(content, str) and content.startswith("[lcm:context"))


def newest_request_text(history: Sequence[Any]) -> str | None:
    """The text of the newest storable user message, as the prompt must show it (or its head)."""
    for m in reversed(history):
        if is_storable(m) and m["role"] == "user":
            return content_text(_canonical(m.get("content")))
    return None


def _canonical(value: Any) -> Any:
    """The value as the store gives it back (JSON with sorted keys)."""
    return json.loads(json.dumps(value, sort_keys=True, default=str))


def shows(out: Sequence[Mapping[str, Any]], wanted: str) -> bool:
    """Does some message show ``wanted``, whole or (when it was cut) its head?"""
    needle = wanted.strip()[:12]
    return any(needle in content_text(_canonical(m.get("content"))) for m in out)

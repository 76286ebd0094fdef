"""Replay a recorded agent conversation through an :class:`LcmEngine` the way Hermes drives it.

The demo, its tests and the benchmarks share this driver so that what they
measure is the host's real call sequence, not a shortcut: a deep copy of a
template engine, ``update_model``, ``on_session_start``; per model call a
pre-request ``should_compress`` with the request's size (messages plus the
system prompt and tool schemas the host adds), ``compress`` replacing the live
list when it fires (then the host's compression-boundary ``on_session_start``
and ``last_prompt_tokens = -1``), ``update_from_response`` with the usage;
tool results appended from the recording; the ``post_llm_call`` and
``on_session_end`` hooks at the end of each turn; ``on_session_end`` at exit.

Fixture format: ``{"title", "turns": [{"user": str, "messages": [assistant and
tool messages]}], "planted": [{"turn", "detail", "question"}]}``.
"""

from __future__ import annotations

import copy
import json
import statistics
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..base.tokens import count_message
from ..engine import LcmEngine
from ..host import hooks

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "coding_session.json"
MAX_COMPRESS_PASSES = 3  # the host tries at most three compress passes before one request
MAX_EXPAND_CALLS = 200


def load_fixture(path: str | Path | None = None) -> dict[str, Any]:
    with open(path or FIXTURE, encoding="utf-8") as fh:
        data: dict[str, Any] = json.load(fh)
    return data


def flatten(fixture: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every message of the recording in order: each turn's user message, then its steps."""
    out: list[dict[str, Any]] = []
    for turn in fixture["turns"]:
        out.append(_user(turn))
        out.extend(turn["messages"])
    return out


def _user(turn: Mapping[str, Any]) -> dict[str, Any]:
    """A turn's user message; a recorded ``timestamp`` goes with it (the store keeps the original time)."""
    user: dict[str, Any] = {"role": "user", "content": turn["user"]}
    if turn.get("timestamp") is not None:
        user["timestamp"] = turn["timestamp"]
    return user


def make_engine(
    home: str | Path,
    *,
    context_length: int = 64000,
    threshold: float = 0.2,
    model: str = "demo-model",
    env: Mapping[str, str] | None = None,
) -> LcmEngine:
    """A live engine copy as the host makes one: template, deepcopy, update_model. Offline summarizer."""
    settings = {
        "HERMES_HOME": str(home),
        "LCM_SUMMARY_PROVIDER": "extractive",
        "LCM_CONTEXT_THRESHOLD": str(threshold),
        **(env or {}),
    }
    engine = copy.deepcopy(LcmEngine(env=settings))
    engine.update_model(model, context_length)
    return engine


@dataclass(frozen=True)
class TurnStats:
    turn: int
    raw_tokens: int  # the turn's last request without the engine: the whole history so far plus host overhead
    prompt_tokens: int  # the turn's last request as actually sent (after any compaction)
    peak_prompt_tokens: int  # the largest request sent during the turn
    model_calls: int
    compactions: int  # so far in the session
    engine_ms: float  # hooks, should_compress, update_from_response (not compress)
    compress_ms: float


@dataclass
class ReplayResult:
    session_id: str
    turns: list[TurnStats] = field(default_factory=list)
    messages: list[dict[str, Any]] = field(default_factory=list)  # the host's live list at exit
    compressed_prompts: list[tuple[int, int]] = field(
        default_factory=list
    )  # (turn, tokens) after each compress
    seconds: float = 0.0

    @property
    def compactions(self) -> int:
        return len(self.compressed_prompts)

    def median_engine_ms(self) -> float:
        return statistics.median(t.engine_ms for t in self.turns) if self.turns else 0.0


def _size(messages: Sequence[Mapping[str, Any]]) -> int:
    return sum(count_message(m) for m in messages)


def _steps(messages: Sequence[Mapping[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    """One model response per step: an assistant message and the tool results that answer it."""
    step: list[dict[str, Any]] = []
    for message in messages:
        if message.get("role") == "assistant" and step:
            yield step
            step = []
        step.append(dict(message))
    if step:
        yield step


class _Clock:
    def __init__(self) -> None:
        self.engine = self.compress = 0.0

    def run(self, fn: Callable[..., Any], *args: Any, compress: bool = False, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            spent = (time.perf_counter() - start) * 1000
            if compress:
                self.compress += spent
            else:
                self.engine += spent


def replay(
    engine: LcmEngine,
    fixture: Mapping[str, Any],
    *,
    session_id: str = "demo-session",
    overhead_tokens: int = 3000,
    on_turn: Callable[[TurnStats], None] | None = None,
) -> ReplayResult:
    """Drive ``engine`` through every turn of ``fixture``; returns per-turn numbers and the final list."""
    started = time.perf_counter()
    result = ReplayResult(session_id)
    engine.on_session_start(
        session_id,
        hermes_home=engine.hermes_home,
        platform="cli",
        model=engine.model,
        context_length=engine.context_length,
    )
    messages: list[dict[str, Any]] = []
    raw = overhead_tokens
    for number, turn in enumerate(fixture["turns"], start=1):
        clock = _Clock()
        user = _user(turn)
        messages.append(user)
        raw += count_message(user)
        peak, calls, raw_request, prompt = 0, 0, raw, 0
        for step in _steps(turn["messages"]):
            raw_request = raw
            messages, prompt = _before_request(
                engine, messages, overhead_tokens, clock, result, number, session_id
            )
            reply = step[0]
            completion = count_message(reply)
            clock.run(
                engine.update_from_response,
                {
                    "prompt_tokens": prompt,
                    "completion_tokens": completion,
                    "total_tokens": prompt + completion,
                },
            )
            messages.extend(step)
            raw += sum(count_message(m) for m in step)
            peak, calls = max(peak, prompt), calls + 1
        final = messages[-1].get("content") or ""
        clock.run(
            hooks.post_llm_call,
            session_id=session_id,
            task_id=session_id,
            turn_id=f"t{number}",
            user_message=turn["user"],
            assistant_response=final,
            conversation_history=list(messages),
            model=engine.model,
            platform="cli",
        )
        clock.run(
            hooks.on_session_end,
            session_id=session_id,
            task_id=session_id,
            turn_id=f"t{number}",
            completed=True,
            interrupted=False,
            model=engine.model,
            platform="cli",
        )
        stats = TurnStats(
            number,
            raw_request,
            prompt,
            peak,
            calls,
            result.compactions,
            clock.engine,
            clock.compress,
        )
        result.turns.append(stats)
        if on_turn is not None:
            on_turn(stats)
    engine.on_session_end(session_id, messages)
    result.messages = messages
    result.seconds = time.perf_counter() - started
    return result


def _before_request(
    engine: LcmEngine,
    messages: list[dict[str, Any]],
    overhead: int,
    clock: _Clock,
    result: ReplayResult,
    turn: int,
    session_id: str,
) -> tuple[list[dict[str, Any]], int]:
    """The host's pre-request pressure check: compress (up to three passes) while over threshold."""
    prompt = _size(messages) + overhead
    for _ in range(MAX_COMPRESS_PASSES):
        if not clock.run(engine.should_compress, prompt):
            break
        messages = clock.run(engine.compress, messages, current_tokens=prompt, compress=True)
        clock.run(
            engine.on_session_start,
            session_id,
            boundary_reason="compression",
            old_session_id=session_id,
            platform="cli",
            conversation_id=None,
        )
        engine.last_prompt_tokens = -1
        before, prompt = prompt, _size(messages) + overhead
        result.compressed_prompts.append((turn, prompt))
        if prompt >= before:
            break
    return messages, prompt


# -- recovering an exact old detail through the agent's own tools --------------------------------


@dataclass(frozen=True)
class Recovery:
    question: str
    detail: str
    turn: int
    hits: int
    rank: int | None  # 1-based rank of the lcm_grep hit that led to the detail
    via: str  # e.g. "store_id=12" or "S40 > S7 > store_id=12"
    store_id: int | None
    line: str | None  # the recovered line containing the detail
    expected_line: str
    message_exact: bool  # the whole recovered message equals the fixture's, byte for byte
    calls: list[str] = field(default_factory=list)

    @property
    def exact(self) -> bool:
        return (
            self.line is not None
            and self.line.encode() == self.expected_line.encode()
            and self.message_exact
        )


def _tool(engine: LcmEngine, name: str, args: dict[str, Any], calls: list[str]) -> dict[str, Any]:
    calls.append(f"{name}({json.dumps(args, ensure_ascii=False)})")
    answer = json.loads(engine.handle_tool_call(name, args))
    return answer if isinstance(answer, dict) else {}


def _expand_message(engine: LcmEngine, store_id: int, calls: list[str]) -> str | None:
    """The full stored content of one raw message, following ``next_content_offset`` pages."""
    parts: list[str] = []
    offset: int | None = 0
    while offset is not None and len(calls) < MAX_EXPAND_CALLS:
        args: dict[str, Any] = {"store_id": store_id}
        if offset:
            args["content_offset"] = offset
        page = _tool(engine, "lcm_expand", args, calls)
        whole = page.get("message")
        if (
            isinstance(whole, dict) and not parts
        ):  # the message fit one answer: its exact provider form
            content = whole.get("content")
            return content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
        if not isinstance(page.get("content"), str):
            return None
        parts.append(page["content"])
        offset = page.get("next_content_offset")
    return "".join(parts)


def _raw_sources(
    engine: LcmEngine, hit: Mapping[str, Any], calls: list[str]
) -> Iterator[tuple[int, str]]:
    """(store_id, path) of the raw messages behind a hit: itself, or a summary's lineage walked down."""
    if hit.get("store_id") is not None:
        yield int(hit["store_id"]), f"store_id={hit['store_id']}"
        return
    stack = [(str(hit["node_id"]), str(hit["node_id"]))] if hit.get("node_id") else []
    while stack and len(calls) < MAX_EXPAND_CALLS:
        node_id, path = stack.pop()
        offset: int | None = 0
        children: list[tuple[str, str]] = []
        while offset is not None and len(calls) < MAX_EXPAND_CALLS:
            page = _tool(
                engine,
                "lcm_expand",
                {"node_id": node_id, "source_offset": offset, "source_limit": 50},
                calls,
            )
            for source in page.get("sources") or []:
                if source.get("store_id") is not None:
                    yield int(source["store_id"]), f"{path} > store_id={source['store_id']}"
                elif source.get("node_id"):
                    children.append((str(source["node_id"]), f"{path} > {source['node_id']}"))
            offset = page.get("next_source_offset")
        stack.extend(reversed(children))


def _line_with(text: str, detail: str) -> str | None:
    start = text.find(detail)
    if start < 0:
        return None
    end = text.find("\n", start)
    return text[text.rfind("\n", 0, start) + 1 : end if end >= 0 else len(text)]


def expected_message(fixture: Mapping[str, Any], planted: Mapping[str, Any]) -> str:
    """The content of the fixture message of the planted turn that holds the detail."""
    turn = fixture["turns"][int(planted["turn"]) - 1]
    for text in [turn["user"], *(m.get("content") or "" for m in turn["messages"])]:
        if planted["detail"] in text:
            return str(text)
    raise ValueError(f"planted detail not in turn {planted['turn']}: {planted['detail']!r}")


def recover(
    engine: LcmEngine, fixture: Mapping[str, Any], planted: Mapping[str, Any], limit: int = 10
) -> Recovery:
    """Ask lcm_grep the planted question, expand hits (raw first, then summaries) until the detail appears."""
    calls: list[str] = []
    detail, question = str(planted["detail"]), str(planted["question"])
    expected = expected_message(fixture, planted)
    expected_line = _line_with(expected, detail) or ""
    hits = _tool(engine, "lcm_grep", {"query": question, "limit": limit}, calls).get("hits") or []
    seen: set[int] = set()
    for rank, hit in enumerate(hits, start=1):
        for store_id, via in _raw_sources(engine, hit, calls):
            if store_id in seen:
                continue
            seen.add(store_id)
            content = _expand_message(engine, store_id, calls)
            line = _line_with(content or "", detail)
            if content is not None and line is not None:
                return Recovery(
                    question,
                    detail,
                    int(planted["turn"]),
                    len(hits),
                    rank,
                    via,
                    store_id,
                    line,
                    expected_line,
                    content == expected,
                    calls,
                )
    return Recovery(
        question,
        detail,
        int(planted["turn"]),
        len(hits),
        None,
        "",
        None,
        None,
        expected_line,
        False,
        calls,
    )

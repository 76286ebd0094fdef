"""A host that is killed at any step of a turn and resumes with the turns it had acknowledged.

The transcript is short and repetitive on purpose: replies like "ok" and "done", tool calls that
reuse the id ``call_0`` with the same arguments, tool results that say "ok". Identity by content
alone is ambiguous there, which is what alignment must cope with after a crash, when the store
already holds part of a turn the host never acknowledged.

The host plays a turn in steps, each a point where the process may die:

* ``user``: the user message is in the host's list and a preflight ingest stored it;
* ``tool``: a tool round (call + result) is in the list and a mid-turn ingest stored it;
* ``compact``: a compress ran on the list so far (ingest, then compaction);
* ``reply``: the final reply is in the list and ``post_llm_call`` stored it (the host has not
  persisted the turn yet);
* ``persist``: the host persisted the turn: it is acknowledged.

A kill drops the engine after a step (what SIGKILL leaves on disk, since every write is one
transaction) and opens a fresh one on the same file. The resumed host has the acknowledged turns
and plays the interrupted turn again, with the same messages (a deterministic model). The store
must then hold the transcript exactly once: same messages, same order, nothing twice, nothing lost.
"""

from __future__ import annotations

import copy
import difflib
import json
import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hermes_lcm.base.tokens import count_messages
from hermes_lcm.engine import LcmEngine
from hermes_lcm.store import close_all

STEPS = ("user", "tool", "compaction", "compaction2", "compact", "reply", "persist")
USER_SHORT = ("ok", "continue", "go on", "yes")
REPLIES = ("ok", "done", "Done.")
RESULTS = ("ok", "done", "no output")
CALL_IDS = ("call_0", "call_1")
# A person's request is unique at least this often (in turns): a history that repeats itself
# exactly over the whole compared window cannot be aligned by content (see align.new_start).
UNIQUE_EVERY = 6
ENV = {
    "LCM_SUMMARY_PROVIDER": "extractive",
    "LCM_ABSOLUTE_THRESHOLD_TOKENS": "2500",
    "LCM_LEAF_CHUNK_TOKENS": "400",
    "LCM_FRESH_TAIL_COUNT": "6",
    "LCM_CONDENSE_MIN_NODES": "2",
}
CONTEXT_LENGTH = 64_000
Message = dict[str, Any]


def tool_round(call_id: str, result: str, command: str) -> list[Message]:
    call = {
        "id": call_id,
        "type": "function",
        "function": {"name": "shell", "arguments": f'{{"cmd": "{command}"}}'},
    }
    return [
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call_id, "name": "shell", "content": result},
    ]


@dataclass(frozen=True)
class Turn:
    """One turn: the user message, its tool rounds (call + result each), the final reply."""

    user: Message
    rounds: tuple[tuple[Message, Message], ...]
    reply: Message

    def messages(self) -> list[Message]:
        out = [self.user]
        for call, result in self.rounds:
            out += [call, result]
        return [*out, self.reply]


def make_turn(rng: random.Random, t: int) -> Turn:
    unique = t % UNIQUE_EVERY == 0 or rng.random() < 0.2
    text = f"please look at src/mod{t}.py and fix it" if unique else rng.choice(USER_SHORT)
    rounds = []
    for _ in range(rng.choice((0, 1, 1, 2))):
        call, result = tool_round(
            rng.choice(CALL_IDS), rng.choice(RESULTS), rng.choice(("ls", "make test"))
        )
        rounds.append((call, result))
    return Turn(
        {"role": "user", "content": text},
        tuple(rounds),
        {"role": "assistant", "content": rng.choice(REPLIES)},
    )


def transcript(seed: int, turns: int) -> list[Turn]:
    rng = random.Random(seed)
    return [make_turn(rng, t) for t in range(turns)]


def random_kills(seed: int, turns: int, kills: int) -> dict[int, str]:
    """``kills`` turns (from turn 1) at which the process dies, each at a random step."""
    rng = random.Random(seed * 7919 + 1)
    chosen = rng.sample(range(1, turns), min(kills, turns - 1))
    return {t: rng.choice(STEPS) for t in sorted(chosen)}


def flat(turns: list[Turn]) -> list[Message]:
    return [m for turn in turns for m in turn.messages()]


class Killed(BaseException):
    """The process dies here: not an ``Exception``, so the engine's guards do not catch it."""


class Host:
    """The host process: an engine and its list. ``shape`` "api" keeps the whole history (a
    gateway re-sends it); "cli" continues from what compress hands back, as the CLI does."""

    def __init__(
        self, home: Path, session: str, shape: str = "api", env: dict[str, str] | None = None
    ) -> None:
        self.home, self.session, self.shape = home, session, shape
        self.engine = copy.deepcopy(LcmEngine(env={"HERMES_HOME": str(home), **ENV, **(env or {})}))
        self.engine.update_model("crash-model", CONTEXT_LENGTH)
        self.engine.on_session_start(session, hermes_home=str(home), platform="cli")
        self.errors: list[str] = []

    def ingest(self, messages: list[Message]) -> None:
        self.engine.ingest_host(list(messages))

    def compress(self, messages: list[Message], die_at_summary: int = 0) -> list[Message]:
        """Compress; with ``die_at_summary`` n > 0 the process dies in the n-th summarizer call
        (its pass uncommitted, earlier passes committed), or after compress if it made fewer."""
        core = self.engine.ensure_core()
        if die_at_summary and core is not None:
            real, calls = core.compactor.summarize, [0]

            def dying(*args: Any, **kwargs: Any) -> Any:
                calls[0] += 1
                if calls[0] >= die_at_summary:
                    raise Killed
                return real(*args, **kwargs)

            core.compactor.summarize = dying
        out = self.engine.compress(
            list(messages), current_tokens=count_messages(messages[-200:]) + 500
        )
        if die_at_summary:
            raise Killed
        return out if self.shape == "cli" and out else messages

    def steps(
        self, held: list[Message], turn: Turn, die_at_summary: int = 0
    ) -> Iterator[tuple[str, list[Message]]]:
        """Play ``turn`` after the list the host holds, yielding (step, the host's list) after each step."""
        host = [*held, turn.user]
        self.ingest(host)
        yield "user", host
        for call, result in turn.rounds:
            host = [*host, call, result]
            self.ingest(host)
            yield "tool", host
        host = self.compress(host, die_at_summary)
        yield "compact", host
        host = [*host, turn.reply]
        self.ingest(host)
        yield "reply", host
        yield "persist", host

    def close(self) -> None:
        status = self.engine.get_status()
        self.errors += [str(e) for e in status.get("errors", []) + status.get("engine_errors", [])]
        close_all()


def play(
    home: Path, turns: list[Turn], kills: dict[int, str], session: str = "crash", shape: str = "api"
) -> list[str]:
    """Play every turn; at turn ``t`` the process dies once at step ``kills[t]`` (after it; for
    "compaction", inside the compaction's first summarizer call, "compaction2" its second) and a
    fresh one resumes with the list the host persisted. Returns the engine errors seen."""
    held: list[Message] = []  # what the host persisted: its list after the last acknowledged turn
    errors: list[str] = []
    host = Host(home, session, shape)
    t, killed = 0, set()
    while t < len(turns):
        kill = kills.get(t) if t not in killed else None
        persisted, died = None, False
        try:
            for step, now in host.steps(
                held, turns[t], {"compaction": 1, "compaction2": 2}.get(kill or "", 0)
            ):
                persisted = now if step == "persist" else None
                if step == kill:
                    died = True
                    break
        except Killed:
            died = True
        if died:
            killed.add(t)
        if persisted is not None:
            held, t = persisted, t + 1
        if died:
            host.close()
            errors += host.errors
            host = Host(home, session, shape)
    host.close()
    return errors + host.errors


def stored_rows(db: Path | str) -> list[tuple[Any, ...]]:
    """Every stored message in order, read past our store (a file or a PostgreSQL URL)."""
    from ..backends import (
        raw_sql,
    )  # here: the worker runs this module as a script, outside the package

    return raw_sql(
        str(db),
        "SELECT role, content, coalesce(tool_call_id, ''), coalesce(tool_calls, '') "
        "FROM messages ORDER BY seq",
    )


def row(message: Message) -> tuple[Any, ...]:
    calls = message.get("tool_calls")
    return (
        message["role"],
        message.get("content") or "",
        message.get("tool_call_id") or "",
        json.dumps(calls, ensure_ascii=False, sort_keys=True, default=str) if calls else "",
    )


def differences(db: Path, turns: list[Turn]) -> tuple[int, int, str]:
    """(rows stored that the transcript does not have there, transcript messages not stored,
    where the first difference is); (0, 0, "") when the store holds the transcript exactly."""
    stored = stored_rows(db)
    expected = [row(m) for m in flat(turns)]
    if stored == expected:
        return 0, 0, ""
    matcher = difflib.SequenceMatcher(None, stored, expected, autojunk=False)
    common = sum(block.size for block in matcher.get_matching_blocks())
    first = next(
        (i for i, (a, b) in enumerate(zip(stored, expected, strict=False)) if a != b),
        min(len(stored), len(expected)),
    )
    return (
        len(stored) - common,
        len(expected) - common,
        f"first difference at row {first}: stored {stored[first : first + 3]}, expected {expected[first : first + 3]}",
    )


def stored_prefix(db: Path | str, turns: list[Turn], acked: int) -> str:
    """After a kill: the store holds the transcript up to at least the acknowledged turn
    ``acked`` and at most the next one, each message once ("" when so, else what is wrong)."""
    stored = stored_rows(db)
    expected = [row(m) for m in flat(turns)]
    low = len(flat(turns[: acked + 1]))
    high = len(flat(turns[: acked + 2]))
    if stored != expected[: len(stored)]:
        first = next(i for i, (a, b) in enumerate(zip(stored, expected, strict=False)) if a != b)
        return f"row {first} differs: stored {stored[first : first + 3]}, expected {expected[first : first + 3]}"
    if not low <= len(stored) <= high:
        return f"{len(stored)} rows stored, the acknowledged turns need {low}, the next turn ends at {high}"
    return ""

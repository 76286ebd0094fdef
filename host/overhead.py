"""How many tokens the host adds around the messages we return.

The provider sees the system prompt, the tool schemas and memory context on top
of our list, and counts tokens with its own tokenizer. Both are learned here:
measured directly from the request the host is about to send, and corrected by
the real ``prompt_tokens`` the provider reports for it. The budget for our list
is the threshold minus this overhead.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ..base.tokens import count_messages, count_tokens
from ..prompt.budget import default_reserve

# Above this many messages a request is not re-estimated (cost on every API call).
MAX_ESTIMATED_MESSAGES = 400
# Message counts remembered between API calls.
COUNT_CACHE_SIZE = 4096
# Until anything is observed, assume the host adds this share of the threshold.
DEFAULT_SHARE = 0.15
# Tokens one turn needs under the threshold besides the host's overhead and the reserve.
TURN_ROOM = 4000


def _estimate(messages: Sequence[Any]) -> int:
    return count_messages([m for m in messages if isinstance(m, Mapping)])


class OverheadMeter:
    def __init__(self) -> None:
        self.direct: int | None = None
        self.learned: int | None = None
        self._key: tuple[int, int] | None = None
        self._pending: int | None = None
        self._counts: dict[int, tuple[Mapping[str, Any], int]] = {}
        self.watch = ThresholdWatch()

    def _count(self, messages: Sequence[Any]) -> int:
        """Token count of the host's messages; each message object is counted once, since
        the host re-sends the same objects on every API call of a session."""
        total = 0
        for message in messages:
            if not isinstance(message, Mapping):
                continue
            hit = self._counts.get(id(message))
            if hit is None or hit[0] is not message:
                if len(self._counts) >= COUNT_CACHE_SIZE:
                    self._counts.clear()
                hit = self._counts[id(message)] = (message, count_messages([message]))
            total += hit[1]
        return total

    def observe_request(self, request_messages: Sequence[Any], tools: Sequence[Any] | None) -> None:
        """Measure the system prompt and tool schemas (re-counted only when they change),
        and remember our estimate of the messages so the reported usage can correct it."""
        system = [
            m for m in request_messages if isinstance(m, Mapping) and m.get("role") == "system"
        ]
        key = (sum(len(str(m.get("content"))) for m in system), len(tools or []))
        if key != self._key:
            tools_json = json.dumps(list(tools or []), ensure_ascii=False, default=str)
            self.direct = _estimate(system) + count_tokens(tools_json) + 16
            self._key = key
        others = [
            m for m in request_messages if isinstance(m, Mapping) and m.get("role") != "system"
        ]
        self._pending = self._count(others) if len(others) <= MAX_ESTIMATED_MESSAGES else None

    def observe_usage(self, prompt_tokens: int) -> None:
        """Real prompt tokens minus our estimate of the messages: what the host added,
        including any disagreement between our tokenizer and the provider's."""
        if self._pending is not None and prompt_tokens > 0:
            self.learned = max(0, prompt_tokens - self._pending)
            self._pending = None

    def overhead(self, threshold: int, messages: Sequence[Any], current_tokens: int | None) -> int:
        """Learned from real usage, else measured, else inferred from the host's count, else a share."""
        if self.learned is not None:
            guess = max(self.learned, self.direct or 0)
        elif self.direct is not None:
            guess = self.direct
        elif current_tokens and current_tokens > 0 and len(messages) <= MAX_ESTIMATED_MESSAGES:
            # Bounded like observe_request: counting a huge list here would cost a compress seconds.
            return min(
                max(0, threshold // 2), max(0, current_tokens - self._count(messages))
            )  # a guess: capped
        else:
            return int(threshold * DEFAULT_SHARE)
        return max(
            0, guess
        )  # what the host really adds (plan_budget keeps half the threshold for the list)

    def measured(self) -> int | None:
        """The host's overhead as measured (None before its first request)."""
        known = [v for v in (self.learned, self.direct) if v is not None]
        return max(known) if known else None

    def snapshot(self) -> dict[str, int | None]:
        return {"direct": self.direct, "learned": self.learned, "used": self.measured()}


def smallest_threshold(overhead: int) -> int:
    """The smallest threshold that leaves a turn's room (``TURN_ROOM``) above ``overhead`` and the
    default reserve (which grows with the threshold, hence the few rounds), in whole thousands."""
    tokens = overhead + TURN_ROOM
    for _ in range(4):
        tokens = overhead + TURN_ROOM + default_reserve(tokens)
    return -(-tokens // 1000) * 1000


def threshold_problem(
    threshold: int, overhead: int | None, reserve: int, context_length: int
) -> str | None:
    """Why a threshold cannot work with this host's overhead, and what to set, or None when it can.

    Below the overhead plus a turn every request is over the threshold: each turn pays for a
    compaction and the prompt never comes down (the host's own tokens are not ours to summarize)."""
    if overhead is None or threshold >= overhead + reserve + TURN_ROOM:
        return None
    smallest = smallest_threshold(overhead)
    share = (
        f"LCM_CONTEXT_THRESHOLD={-(-smallest * 100 // context_length) / 100:.2f} or "
        if 0 < smallest < context_length
        else ""
    )
    return (
        f"the threshold ({threshold:,} tokens) leaves {max(0, threshold - overhead - reserve):,} for the "
        f"conversation after the host's own {overhead:,} (its system prompt and tool schemas) and the "
        f"{reserve:,} kept free for the next turn: every turn compacts and the prompt stays over the threshold; "
        f"set {share}LCM_ABSOLUTE_THRESHOLD_TOKENS={smallest} at least (of a {context_length:,}-token window)"
    )


class ThresholdWatch:
    """The threshold's problem as last measured; says each change once (the log and the events)."""

    def __init__(self) -> None:
        self.problem: str | None = None
        self.fine = ""  # what the last check found when there is no problem
        self._checked = False
        self._inputs: tuple[int, int, int, int] | None = None

    def observe(
        self, threshold: int, overhead: int | None, reserve: int, context_length: int
    ) -> bool:
        """Re-check; True when the verdict changed (or was reached for the first time)."""
        if overhead is None or (threshold, overhead, reserve, context_length) == self._inputs:
            return False
        self._inputs = (threshold, overhead, reserve, context_length)
        problem = threshold_problem(threshold, overhead, reserve, context_length)
        self.fine = (
            f"ok: the threshold ({threshold:,} tokens) leaves {threshold - overhead - reserve:,} for the "
            f"conversation after the host's own {overhead:,} and the reserve of {reserve:,}"
        )
        changed = not self._checked or (problem is None) != (self.problem is None)
        self.problem, self._checked = problem, True
        return changed

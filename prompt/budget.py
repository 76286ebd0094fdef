"""The prompt budget, in one place: how much of the threshold the prompt may use and how that
room is split between summaries and the fresh tail.

The threshold itself comes from :func:`config.compute_threshold` (the window times the ratio, or
the absolute setting). Under it three things are taken out before the conversation gets its
share: the host's own tokens (system prompt, tool schemas), measured by ``host.overhead``; the
reserve kept free for the next turn (its reply, a recall block, an evidence brief); and what is
left is the prompt's total, of which compaction aims at a share (the goal) split between the
summaries and the tail. Status, doctor, the fallback and every compaction read the same numbers
from here, so what one reports is what another enforces.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..config import LcmConfig

# The reserve when none is set (or the one set eats the threshold): a share of the threshold,
# kept between a floor (a reply must fit) and a cap (a large window needs no more for one turn).
RESERVE_PARTS = 10  # a tenth of the threshold
RESERVE_FLOOR = 256
RESERVE_CAP = 4096


@dataclass(frozen=True)
class Budget:
    """Token limits for one assembly; ``goal`` is where compaction aims."""

    total: int
    goal: int
    summaries: int
    tail_count: int
    tail_tokens: int
    overhead: int = 0  # the host's tokens outside the list (system prompt, tool schemas): the timeline's "system"
    limit: int = 0  # what the whole prompt may reach: the threshold less the reserve (the timeline's budget line)


def default_reserve(threshold_tokens: int) -> int:
    """The reserve of a threshold when the setting gives none that fits."""
    return min(RESERVE_CAP, max(RESERVE_FLOOR, threshold_tokens // RESERVE_PARTS))


def reserve_for(config: LcmConfig, threshold_tokens: int) -> int:
    """Tokens kept free below the threshold for the next turn.

    The configured ``reserve_tokens`` when it leaves at least half of the threshold for the
    prompt; otherwise (unset, or absurd for this window) :func:`default_reserve`. With proactive
    recall or the evidence brief on, their blocks' budgets on top, since they ride in the next
    turn's message (at most half of the threshold in all).
    """
    half = threshold_tokens // 2
    configured = config.reserve_tokens
    reserve = configured if 0 < configured <= half else default_reserve(threshold_tokens)
    if config.proactive_recall_enabled:
        reserve = min(half, reserve + config.proactive_recall_budget_tokens)
    if config.preanswer_evidence_enabled:
        reserve = min(half, reserve + config.preanswer_evidence_budget_tokens)
    # A threshold of 1 token (a window of 1) would halve to 0: keep one token free.
    return max(1, reserve)


def reserve_problem(config: LcmConfig, threshold_tokens: int) -> str | None:
    """Why the configured reserve is not the one in force for this threshold, or None.

    Only against a threshold (hence the window) can a reserve be too large, so this is asked
    wherever the threshold is set and reported with the window's other problems."""
    used = reserve_for(config, threshold_tokens)
    if not config.reserve_tokens or used == config.reserve_tokens:
        return None
    return (
        f"reserve_tokens={config.reserve_tokens} leaves less than half of the threshold "
        f"{threshold_tokens}; using {used}"
    )


def plan_budget(
    threshold: int,
    overhead: int,
    reserve: int,
    *,
    tail_count: int,
    tail_max_tokens: int,
    target_ratio: float,
    summary_ratio: float,
) -> Budget:
    """Split the room under ``threshold`` into the prompt total, the compaction goal and its parts.

    Config is validated before it gets here; this still never yields a negative or NaN field
    whatever comes in (negative overhead, a ratio outside 0..1 or NaN), so nothing the host or
    a setting does can turn into a ValueError mid-turn: 48 <= goal <= total, 0 <= every part.

    An overhead above half the threshold leaves the conversation half of it all the same (the
    prompt then stays over the threshold, which status and doctor report with the value to set):
    summarizing everything to nothing would not bring the host's own tokens down.
    """
    overhead = max(0, int(overhead))
    reserve = max(0, int(reserve))
    threshold = int(threshold)
    total = max(64, threshold - min(overhead, max(0, threshold) // 2) - reserve)
    goal = min(total, max(48, int(total * _share(target_ratio, 0.6))))
    summaries = int(goal * _share(summary_ratio, 0.4))
    tail_tokens = goal - summaries
    if tail_max_tokens > 0:
        tail_tokens = min(tail_tokens, int(tail_max_tokens))
    return Budget(
        total=total,
        goal=goal,
        summaries=summaries,
        tail_count=max(1, int(tail_count)),
        tail_tokens=tail_tokens,
        overhead=overhead,
        limit=max(0, threshold - reserve),
    )


def budget_for(config: LcmConfig, threshold_tokens: int, overhead_tokens: int) -> Budget:
    """The prompt budget under ``config``: threshold minus the host's overhead minus the reserve.

    ``threshold_tokens`` comes from :func:`config.compute_threshold` (or the host's own lowering
    of it); ``overhead_tokens`` from the host's measured overhead.
    """
    return plan_budget(
        threshold_tokens,
        overhead_tokens,
        reserve_for(config, threshold_tokens),
        tail_count=config.fresh_tail_count,
        tail_max_tokens=config.fresh_tail_max_tokens,
        target_ratio=config.compaction_target_ratio,
        summary_ratio=config.summary_budget_ratio,
    )


def _share(ratio: float, fallback: float) -> float:
    """``ratio`` clamped to 0..1; ``fallback`` (the documented default) when it is not a number."""
    return min(1.0, max(0.0, ratio)) if math.isfinite(ratio) else fallback

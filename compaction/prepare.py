"""Compaction off the turn: summaries prepared between turns, published at the threshold.

A summary call takes seconds (real summary models 3-30 s). Made inside ``compress`` it is time the
user waits at the start of a turn. So once a conversation's prompt passes the preparation point
(``LCM_PREPARE_AT_RATIO`` of the threshold), the reply's ingest asks the :class:`PrepareJob` for a
run, and the job does on its own thread what the next compaction would do now: the same passes,
planned the same way (passes.py), but on an overlay of the conversation instead of the store. Each
summary it makes is kept as a *prepared* summary (storage/prepared.py), under a key that names
exactly what it was made from: the sources' labels and text (hence the stored rows and their
order), the depth, the focus and the settings that shape a summary. It never enters a prompt and
no tool finds it.

When the host calls ``compress`` at the threshold, each pass computes the key of what it is about
to summarize and, where a prepared summary has it, writes that summary as the node in the same
transaction that publishes it and deletes the prepared row: no LLM call. A leaf pass also takes a
prepared leaf that covers only the first rows of its chunk (the chunk grew since: the turn added
rows the preparation could not see). Once prepared summaries were published and the prompt is
at most halfway from the goal to the budget (a few turns from the next threshold), the pass that
would need a call waits for the next preparation instead. What was not
prepared in time is compacted inline, as always, within ``LCM_COMPACTION_MAX_SECONDS``.

A prepared summary whose sources changed (a rewrite, ``lcm redact``, a retention prune) or that was
made under other settings has another key than anything a pass asks for: it is never published and
is dropped, with the leaves the frontier has passed and everything older than a day.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

from ..base.records import PreparedSummary
from ..config import LcmConfig
from ..prompt.budget import Budget
from ..store import Store
from .summarize import SourceItem, SummaryOutcome

# Prepared summaries older than this are dropped: whatever they were made for has passed.
MAX_AGE_S = 86_400.0
# A prepared summary made for a target this much above the pass's own is still used (assembly
# trims what is over); a smaller target always fits.
TARGET_SLACK = 1.25


def settings_tag(config: LcmConfig, summarizer_name: str) -> str:
    """What, besides its sources, shapes a summary's text: a prepared summary made under other
    settings is not used (another route, model, redaction or chunking makes another summary)."""
    shaping = {
        "summarizer": summarizer_name,
        "provider": config.summary_provider,
        "model": config.summary_model,
        "base_url": config.summary_base_url,
        "fallbacks": list(config.fallback_models),
        "leaf_chunk_tokens": config.leaf_chunk_tokens,
        "redaction": [config.sensitive_patterns_enabled, config.sensitive_patterns],
        "instructions": config.custom_instructions,
        "effort": config.summary_reasoning_effort,
    }
    return hashlib.blake2b(
        json.dumps(shaping, sort_keys=True, default=str).encode(), digest_size=12
    ).hexdigest()


def summary_key(tag: str, sources: Sequence[SourceItem], depth: int, focus: str | None) -> str:
    """The key of one summary: exactly what it is made from."""
    digest = hashlib.blake2b(digest_size=20)
    digest.update(json.dumps([tag, depth, focus or ""]).encode())
    for source in sources:
        for part in (source.label, source.text):
            data = part.encode("utf-8", "surrogatepass")
            digest.update(len(data).to_bytes(8, "big"))
            digest.update(data)
    return digest.hexdigest()


def fits(prepared: PreparedSummary, target: int) -> bool:
    """Whether a summary made for its own target serves a pass that asks for ``target``."""
    return prepared.target_tokens <= target * TARGET_SLACK


@dataclass(frozen=True)
class Ahead:
    """What the conversation will add before the compaction a preparation is for.

    A preparation plans as that compaction will: with the fresh tail as it will be then (these
    ``messages`` and ``tokens`` newer, so the oldest rows of today's tail will be outside it) and
    aiming ``goal_tokens`` below the goal (the prompt will have grown by them). What it makes is
    then what that compaction takes, not the smaller pieces today's tail leaves room for."""

    tokens: int = 0  # what the fresh tail gains before the compaction
    messages: int = 0
    turns: int = 0  # replies until the threshold
    goal_tokens: int = 0  # what the prompt gains before the compaction
    turn_tokens: int = 0  # the last turn's growth: how far off a guess of the tail's edge can be

    @property
    def early(self) -> bool:
        """Whether the compaction is more turns away than a growth guess should span: a run then
        makes only the whole leaf chunks outside today's fresh tail, which that compaction takes
        whatever the turns before it add (what it condenses depends on where it stops)."""
        return self.turns > EARLY_TURNS

    @property
    def last(self) -> bool:
        """Whether this is the last preparation before the compaction (the next reply reaches the
        threshold): it also makes the chunk the fresh tail will cut then, up to that edge."""
        return self.turns <= 1

    @property
    def cut_chunk_tokens(self) -> int | None:
        """The smallest chunk cut by the fresh tail this run makes (None: it makes none). Where
        the tail will cut is a guess off by up to a turn, so a cut chunk smaller than a turn may
        be a sliver the guess made: the compaction would publish it and stop short of where it
        would have cut, and each sliver is one more call for the same rows. It is left for the
        compaction, which takes it in a chunk of its own size, or waits for a later run."""
        return self.turn_tokens if self.last else None

    def budget(self, budget: Budget) -> Budget:
        return replace(
            budget,
            goal=max(0, budget.goal - self.goal_tokens),
            tail_count=max(0, budget.tail_count - self.messages),
            tail_tokens=max(0, budget.tail_tokens - self.tokens),
        )


NOW = Ahead()  # nothing more to come: plan as a compaction would now
# Further than this many replies from the threshold, a preparation makes whole leaf chunks only.
EARLY_TURNS = 2


def ahead_of(prompt: int, threshold: int, growth: tuple[int, int], user_tokens: int = 0) -> Ahead:
    """What comes before the compaction, from a reply's prompt, the last turn's growth (tokens,
    messages) and its user message's tokens. The host compacts at the start of the turn whose
    prompt reaches the threshold, with that turn's user message in its list but not its reply:
    so the turns before it whole, then one message the size of the last user message (a tail
    guessed too long leaves a leaf the compaction still takes as the first rows of its own; one
    guessed too short, a leaf it cannot take, made again inside the turn)."""
    growth_tokens, growth_messages = growth
    if growth_tokens <= 0:  # no turn's size known yet: how far the threshold is is unknown too
        return Ahead(turns=EARLY_TURNS + 1, goal_tokens=threshold)
    turns = max(1, -(-max(0, threshold - prompt) // growth_tokens))
    if turns > EARLY_TURNS:  # today's tail, and every whole chunk outside it (goal 0)
        return Ahead(turns=turns, goal_tokens=threshold)
    before = turns - 1  # whole turns before the compacting one
    return Ahead(
        tokens=before * growth_tokens + user_tokens,
        messages=before * max(2, growth_messages) + 1,
        turns=turns,
        goal_tokens=before * growth_tokens + max(user_tokens, growth_tokens // 2),
        turn_tokens=growth_tokens,
    )


@dataclass
class PublishedCounts:
    """What preparing kept and compactions published from it, in this process (status shows it)."""

    prepared: int = 0  # summaries made ahead of their compaction
    published: int = 0  # of them, written as nodes by a compaction, without a call


class PreparedSummaries:
    """The compactor's access to prepared summaries: found by key, kept, counted."""

    def __init__(self, store: Store, tag: str) -> None:
        self.store, self.tag = store, tag
        self.counts = PublishedCounts()
        self._tables = False

    def key(self, sources: Sequence[SourceItem], depth: int, focus: str | None) -> str:
        return summary_key(self.tag, sources, depth, focus)

    def find(self, conversation_id: int, key: str, target: int) -> PreparedSummary | None:
        found = self.store.prepared_summary(conversation_id, key)
        return found if found is not None and fits(found, target) else None

    def keep(
        self,
        conversation_id: int,
        key: str,
        *,
        depth: int,
        span: tuple[int, int],
        target: int,
        outcome: SummaryOutcome,
        tokens: int,
    ) -> None:
        if not self._tables:
            self.store.ensure_prepared_tables()
            self._tables = True
        kept = self.store.keep_prepared(
            PreparedSummary(
                conversation_id=conversation_id,
                key=key,
                depth=depth,
                first_seq=span[0],
                last_seq=span[1],
                target_tokens=target,
                content=outcome.text,
                tokens=tokens,
                level=outcome.level,
                route=outcome.route,
                created_at=time.time(),
            )
        )
        self.counts.prepared += kept

    def outcome(self, found: PreparedSummary) -> SummaryOutcome:
        return SummaryOutcome(found.content, found.level, found.route)

    def tidy(self, conversation_id: int, frontier_seq: int) -> None:
        """After a publication: drop the leaves the frontier passed, and whatever is old."""
        self.store.drop_stale_prepared(conversation_id, frontier_seq)
        self.store.drop_prepared_for(None, older_than=time.time() - MAX_AGE_S)

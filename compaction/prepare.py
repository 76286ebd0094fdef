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
rows the preparation could not see). Once prepared summaries were published and the prompt fits
its budget, the pass that would need a call waits for the next preparation instead. What was not
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
from dataclasses import dataclass
from typing import Any

from ..base.records import PreparedSummary
from ..config import LcmConfig
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


@dataclass
class Preparations:
    """What preparing and publishing did in this process (status shows it)."""

    runs: int = 0
    prepared: int = 0  # summaries made ahead of their compaction
    published: int = 0  # of them, written as nodes by a compaction, without a call
    last_run_at: float | None = None
    last_error: str = ""
    last_stop: str = ""

    def view(self) -> dict[str, Any]:
        return {
            "runs": self.runs,
            "prepared": self.prepared,
            "published": self.published,
            "last_run_at": self.last_run_at,
            "last_stop": self.last_stop,
            "last_error": self.last_error or None,
        }


class PreparedSummaries:
    """The compactor's access to prepared summaries: found by key, kept, counted."""

    def __init__(self, store: Store, tag: str) -> None:
        self.store, self.tag = store, tag
        self.counts = Preparations()
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

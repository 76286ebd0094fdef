"""The core's process-lifetime counters, kept where every layer that stores or compacts can count.

Status and doctor read them; they live in memory only, since the store cannot record its own
failure (a refused write is counted here, beside the messages it left unstored).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

CACHE_FIELDS = ("replies", "input_tokens", "cache_read_tokens", "cache_write_tokens")
CACHE_PARTS = ("all", "after_compaction")

CacheCounts = dict[str, dict[str, int]]


def no_cache_counts() -> CacheCounts:
    return {part: dict.fromkeys(CACHE_FIELDS, 0) for part in CACHE_PARTS}


def add_cache_counts(into: CacheCounts, more: Mapping[str, Mapping[str, int]]) -> CacheCounts:
    """``into`` with ``more`` added bucket by bucket (negative or missing counts add nothing)."""
    for part in CACHE_PARTS:
        bucket, extra = into[part], more.get(part) or {}
        for name in CACHE_FIELDS:
            bucket[name] += max(0, int(extra.get(name) or 0))
    return into


class CacheTally:
    """Replies' prompt-cache counts not written yet, per conversation. A reply only adds to
    memory (the host calls after every model reply, inside the turn, so no write happens
    there); the next ingest writes what gathered in one go, and status adds what is still
    here to what is stored. A process killed before then loses at most one turn's counts."""

    def __init__(self) -> None:
        self._pending: dict[int, CacheCounts] = {}
        self._lock = threading.Lock()

    def add(
        self, conversation_id: int, prompt: int, read: int, write: int, compacted: bool
    ) -> None:
        one = {
            "replies": 1,
            "input_tokens": prompt,
            "cache_read_tokens": read,
            "cache_write_tokens": write,
        }
        reply = {"all": one, "after_compaction": one if compacted else {}}
        with self._lock:
            add_cache_counts(self._pending.setdefault(conversation_id, no_cache_counts()), reply)

    def take(self) -> dict[int, CacheCounts]:
        """Everything gathered, which leaves here (``give_back`` it when the write fails)."""
        with self._lock:
            taken, self._pending = self._pending, {}
        return taken

    def give_back(self, taken: Mapping[int, CacheCounts]) -> None:
        with self._lock:
            for conversation_id, counts in taken.items():
                add_cache_counts(
                    self._pending.setdefault(conversation_id, no_cache_counts()), counts
                )

    def pending(self, conversation_id: int) -> CacheCounts:
        with self._lock:
            return add_cache_counts(no_cache_counts(), self._pending.get(conversation_id) or {})


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


@dataclass
class Stats:
    """Process-lifetime counters for status (mutable: they count as the process runs)."""

    ingest_calls: int = 0
    stored: int = 0
    compactions: int = 0
    last_compaction: dict[str, Any] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    # Writes the store refused (disk full, I/O error, read-only, locked), counted here because
    # the store cannot record its own failure; and how many host messages that left unstored.
    write_failures: int = 0
    last_write_failure: str = ""
    unstored_messages: int = 0
    # Host messages the last ingest left for the next call because its time bound ran out (not
    # an error: each call stores what it can in order, and nothing leaves the list unstored).
    ingest_backlog: int = 0

    def error(self, text: str) -> None:
        self.errors.append(f"{_now()} {text}")
        del self.errors[:-20]

    def write_failed(self, operation: str, exc: Exception) -> str:
        self.write_failures += 1
        self.last_write_failure = f"{_now()} {operation}: {exc}"
        self.error(f"store write failed during {operation}: {exc}")
        return self.last_write_failure


def cache_view(totals: dict[str, dict[str, int]]) -> dict[str, Any]:
    """Prompt-cache totals (``Store.cache_usage``) as status shows them: the share of input
    tokens the provider read from its cache, over all replies and over those right after a
    compaction (where a prompt rebuilt from summaries may lose the cached prefix)."""

    def share(bucket: dict[str, int]) -> float | None:
        tokens = bucket["input_tokens"]
        return round(bucket["cache_read_tokens"] / tokens, 3) if tokens else None

    all_, after = totals["all"], totals["after_compaction"]
    if not all_["replies"]:
        return {"replies": 0, "note": "no reply with the provider's cache counts yet"}
    return {
        "replies": all_["replies"],
        "cached_share": share(all_),
        "cached_share_after_compaction": share(after),
        "replies_after_compaction": after["replies"],
        "input_tokens": all_["input_tokens"],
        "cache_read_tokens": all_["cache_read_tokens"],
        "cache_write_tokens": all_["cache_write_tokens"],
    }

"""The core's process-lifetime counters, kept where every layer that stores or compacts can count.

Status and doctor read them; they live in memory only, since the store cannot record its own
failure (a refused write is counted here, beside the messages it left unstored).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any


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

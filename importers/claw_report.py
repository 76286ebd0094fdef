"""The records of one OpenClaw import: what was read from the source, and the reconciliation report.

Both readers (``claw_sqlite``, ``claw_jsonl``) fill these and the writer (``claw_write``) consumes
them, so they sit below all three; no logic beyond the report's own bookkeeping and the one way
both sources' times are read.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from ..base.times import TimeError, parse_time


def source_time(value: Any) -> float | None:
    """Epoch seconds from ms/s numbers or ISO / SQLite datetime text (``times.parse_time``); None
    when absent or unreadable (the caller warns)."""
    if value is None:
        return None
    try:
        return parse_time(value)
    except (TimeError, OverflowError):
        return None


class ImportFailure(RuntimeError):
    """The import cannot run (bad source, foreign target); shown to the operator."""


@dataclass
class SourceMessage:
    provenance: str
    message: dict[str, Any]
    timestamp: float | None
    # lossless-claw parts by type: carried into the message / not (see Report.parts_kept)
    parts_kept: Counter[str] = field(default_factory=Counter)
    parts_dropped: Counter[str] = field(default_factory=Counter)
    extra: dict[str, Any] | None = (
        None  # private extra fields (claw_parts.EXTRA_KEY), merged after normalizing
    )


@dataclass
class SourceSummary:
    source_id: str
    kind: str
    depth: int
    content: str
    tokens: int
    earliest_at: float | None
    latest_at: float | None
    message_ids: list[str] = field(default_factory=list)
    child_ids: list[str] = field(default_factory=list)


@dataclass
class SourceConversation:
    key: str
    session_id: str
    parent_session_id: str | None
    messages: list[SourceMessage] = field(default_factory=list)
    summaries: list[SourceSummary] = field(default_factory=list)


@dataclass
class Report:
    source_kind: str
    source: list[str]
    target: str
    import_id: str
    dry_run: bool
    backup_path: str | None = None
    conversations: int = 0
    scanned: int = 0
    eligible: int = 0
    would_import: int = 0
    imported: int = 0
    skipped_existing: int = 0
    skipped_empty: int = 0
    skipped_unsupported: int = 0
    invalid_rows: int = 0
    skipped_symlinks: list[str] = field(default_factory=list)
    # OpenClaw's own compaction summaries (JSONL) are not messages: counted and warned, never silently dropped.
    compactions_reported: int = 0
    thinking_kept: int = 0
    # lossless-claw message_parts by part_type: kept on an imported (or already imported) message,
    # or reported here because they are not (their message skipped, an empty thinking block, ...).
    parts_kept: dict[str, int] = field(default_factory=dict)
    parts_reported: dict[str, int] = field(default_factory=dict)
    summaries: dict[str, int] = field(
        default_factory=lambda: dict.fromkeys(
            ("scanned", "eligible", "would_import", "imported", "skipped_existing", "invalid"), 0
        )
    )
    warnings: list[str] = field(default_factory=list)

    def warn(self, text: str) -> None:
        if len(self.warnings) < 200:
            self.warnings.append(text)
        elif len(self.warnings) == 200:
            self.warnings.append("(further warnings omitted)")

    def tally(self, bucket: dict[str, int], counts: Counter[str]) -> None:
        for kind, n in counts.items():
            bucket[kind] = bucket.get(kind, 0) + n

    def as_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}

"""The records of one LCM-X import: a conversation as read, the reconciliation report, the failure.

The reader (``lcmx_source``), the writer (``lcmx_write``), the whole-database steps
(``lcmx_build``) and the swap (``lcmx_swap``) all fill or raise these, so they sit below all
four; no logic beyond the report's own bookkeeping (which counts lineage links, hence ``links``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

KIND = "lcm-x"
MARK = "lcm-x:import:"  # meta key prefix: one row per imported conversation


class ImportFailure(RuntimeError):
    """The import cannot run as asked (bad target, unreadable source); nothing was written."""


@dataclass
class Conversation:
    """One LCM-X conversation, its rows in store order."""

    key: str
    owner: str
    sessions: list[str] = field(default_factory=list)
    platforms: dict[str, str] = field(default_factory=dict)
    messages: list[dict[str, Any]] = field(default_factory=list)
    nodes: list[dict[str, Any]] = field(default_factory=list)
    lifecycle: dict[str, Any] | None = None


@dataclass
class Report:
    source: str
    target: str
    version: int
    dry_run: bool
    conversations: dict[str, int] = field(
        default_factory=lambda: {"source": 0, "imported": 0, "skipped_existing": 0}
    )
    messages: dict[str, int] = field(
        default_factory=lambda: {"source": 0, "imported": 0, "skipped_existing": 0}
    )
    summaries: dict[str, int] = field(
        default_factory=lambda: {"source": 0, "imported": 0, "skipped_existing": 0, "invalid": 0}
    )
    edges: dict[str, int] = field(
        default_factory=lambda: {"source": 0, "imported": 0, "dropped": 0, "relinked_by_time": 0}
    )
    warnings: list[str] = field(default_factory=list)

    def warn(self, text: str) -> None:
        if len(self.warnings) < 200:
            self.warnings.append(text)

    def whole(self, conv: Conversation, part: str) -> None:
        """``conv`` counted as one piece: its rows under ``part`` ("imported" in a plan,
        "skipped_existing" for one marked done), its lineage links as they are (or would be) written."""
        self.conversations[part] += 1
        self.messages[part] += len(conv.messages)
        self.summaries[part] += len(conv.nodes)
        present, dangling = links(conv.nodes)
        self.edges["imported"] += present
        self.edges["dropped"] += dangling

    def as_dict(self) -> dict[str, Any]:
        out = dict(self.__dict__)
        done = "imported"
        out["balanced"] = all(
            part["source"]
            == part[done]
            + part.get("skipped_existing", 0)
            + part.get("invalid", 0)
            + part.get("dropped", 0)
            for part in (self.conversations, self.messages, self.summaries, self.edges)
        )
        return out


def links(nodes: list[dict[str, Any]]) -> tuple[int, int]:
    """A conversation's lineage links: (to rows or nodes it has, to nodes LCM-X deleted)."""
    ids = {int(n["node_id"]) for n in nodes}
    pairs = [(n["source_type"], s) for n in nodes for s in set(n["source_ids"])]
    dangling = sum(1 for kind, s in pairs if kind == "nodes" and s not in ids)
    return len(pairs) - dangling, dangling

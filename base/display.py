"""How stored values are shown to agents and operators, one way everywhere: times as UTC ISO
seconds, and text cut to a size with a flag saying it was cut."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

ELLIPSIS = "…"


def iso(ts: float | None) -> str | None:
    """``2024-05-01T13:45:10Z`` (seconds precision, UTC); None stays None."""
    if ts is None:
        return None
    return datetime.fromtimestamp(float(ts), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def score(value: float) -> float:
    """A relevance score as shown: three decimals, and never ``-0.0`` (a tiny negative rounds to it)."""
    return round(value, 3) + 0.0


def cut(text: str, limit: int, mark: str = "") -> tuple[str, bool]:
    """The first ``limit`` characters of ``text`` and whether anything was cut; ``mark`` is added
    where it was (the tools show "…", the CLI a bare cut and a ``truncated`` field). A limit of 0
    or less means no limit."""
    if limit <= 0 or len(text) <= limit:
        return text, False
    return text[:limit] + mark, True


def file_sizes(db_path: str) -> dict[str, int | None]:
    """Bytes of the database and its -wal and -shm files (None: absent). Here, not in maintenance/,
    so `lcm status` shows them without importing the maintenance verbs."""
    sizes: dict[str, int | None] = {}
    for suffix in ("", "-wal", "-shm"):
        path = Path(db_path + suffix)
        sizes["db" + suffix.replace("-", "_")] = path.stat().st_size if path.exists() else None
    return sizes

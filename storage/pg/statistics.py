"""The planner's statistics of the tables that grow with every turn, kept fresh from here.

PostgreSQL plans a full-text search by how many rows it expects each condition to keep. A table
that grew since its last ANALYZE is planned with the statistics of the smaller table: a search
scoped to the conversation's id range (all of it) was read row by row through the primary key
instead of through the full-text index, 20 ms for a rare term at 30,000 messages instead of 6.5,
and the pinned request sorted the whole conversation. Autovacuum analyzes on its own schedule
(a minute's nap at least, and not at all where an operator turned it off), while a first search
follows an import at once. So every :data:`CHECK_EVERY_COMMITS` commits, and once when a
writable store opens, a background thread asks the server how much each table changed since it
was last analyzed and analyzes those past :data:`STALE_FRACTION` (ANALYZE samples a bounded
number of rows and blocks neither readers nor writers).
"""

from __future__ import annotations

from typing import Any

from ...base.jobs import BackgroundJob

CHECK_EVERY_COMMITS = 50
# Analyze a table once this share of its rows (and at least STALE_ROWS) changed since it last was.
STALE_FRACTION = 0.1
STALE_ROWS = 500
TABLES = ("messages", "summaries")

_CHANGED = (
    "SELECT relname, n_live_tup, n_mod_since_analyze FROM pg_stat_user_tables "
    "WHERE relid IN ('messages'::regclass, 'summaries'::regclass)"
)


def stale(live: int, changed: int) -> bool:
    """Whether a table of ``live`` rows with ``changed`` rows since its last ANALYZE needs one."""
    return changed >= max(STALE_ROWS, STALE_FRACTION * live)


class Statistics(BackgroundJob):
    """Analyzes the growing tables when they changed enough, on a thread of its own."""

    name = "hermes-lcm-analyze"

    def __init__(self, pool: Any) -> None:
        super().__init__()
        self.pool = pool
        self.analyzed: list[str] = []  # the tables analyzed, in order (status and tests read it)

    def step(self) -> None:
        with self.pool.connection() as conn:
            for name, live, changed in conn.execute(_CHANGED).fetchall():
                if str(name) in TABLES and stale(int(live or 0), int(changed or 0)):
                    conn.execute(f"ANALYZE {name}")
                    self.analyzed.append(str(name))

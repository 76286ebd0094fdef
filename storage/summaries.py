"""The summary DAG's tables: nodes (``summaries``), their ``edges`` to sources, the active
context (``context_items`` and the conversation's frontier), the summary FTS index, and
the lineage checks. The DAG's rules live in dag.py; this is its SQL.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from ..base.records import NewNode, StoredMessage, SummaryNode
from .connection import SqliteConnection
from .rows import (
    KIND_VALUE,
    NODE_COLUMNS,
    NODE_COLUMNS_S,
    conversation_scope,
    id_list,
    row_to_message,
    row_to_node,
)


def _walk(root: str) -> str:
    """SQL: ``walk(kind, id)``, the node ``root`` (an SQL expression) and everything under it,
    following edges down any depth. ``kind`` is the file's: 0/1 (schema 4) or 'message'/'summary'."""
    return (
        "WITH RECURSIVE walk(kind, id) AS (SELECT 1, CAST("
        + root
        + " AS BIGINT) UNION SELECT e.child_kind, "
        "e.child_id FROM edges e JOIN walk w ON w.kind IN (1, 'summary') AND e.parent_id=w.id)"
    )


class SummaryQueries(SqliteConnection):
    """Summary nodes, edges and the active context."""

    def add_summary(self, node: NewNode) -> int:
        """Insert a node and its edges (to its messages, else to its child nodes) atomically."""
        with self.write() as db:
            cur = db.execute(
                f"INSERT INTO summaries({NODE_COLUMNS}) VALUES (NULL, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    node.conversation_id,
                    node.session_id,
                    node.depth,
                    node.content,
                    node.tokens,
                    node.first_seq,
                    node.last_seq,
                    node.earliest_at,
                    node.latest_at,
                    node.source_tokens,
                    node.level,
                    node.route,
                    time.time(),
                ),
            )
            node_id = int(cur.lastrowid or 0)
            kind, ids = (
                ("message", node.message_ids) if node.message_ids else ("summary", node.child_ids)
            )
            db.executemany(
                "INSERT INTO edges(parent_id, child_kind, child_id, ord) VALUES (?, ?, ?, ?)",
                [(node_id, KIND_VALUE[kind], child, order) for order, child in enumerate(ids)],
            )
            return node_id

    def publish_context(
        self, conversation_id: int, summary_ids: Sequence[int], frontier_seq: int
    ) -> None:
        """Replace the active context of a conversation in one transaction."""
        with self.write() as db:
            db.execute("DELETE FROM context_items WHERE conversation_id=?", (conversation_id,))
            db.executemany(
                "INSERT INTO context_items(conversation_id, ord, summary_id) VALUES (?, ?, ?)",
                [(conversation_id, order, sid) for order, sid in enumerate(summary_ids)],
            )
            db.execute(
                "UPDATE conversations SET frontier_seq=max(frontier_seq, ?) WHERE id=?",
                (frontier_seq, conversation_id),
            )

    def _nodes(self, sql: str, args: Sequence[Any]) -> list[SummaryNode]:
        """The nodes a query selecting :data:`NODE_COLUMNS` returns, in its order."""
        with self.read() as db:
            return [row_to_node(r) for r in db.execute(sql, args).fetchall()]

    def context_nodes(self, conversation_id: int) -> list[SummaryNode]:
        return self._nodes(
            f"SELECT {NODE_COLUMNS_S} FROM context_items c JOIN summaries s ON s.id=c.summary_id "
            "WHERE c.conversation_id=? ORDER BY c.ord",
            (conversation_id,),
        )

    def summary(self, node_id: int) -> SummaryNode | None:
        with self.read() as db:
            row = db.execute(
                f"SELECT {NODE_COLUMNS} FROM summaries WHERE id=?", (node_id,)
            ).fetchone()
        return row_to_node(row) if row else None

    def summaries(
        self, conversation_id: int, limit: int = 1000, after_id: int = 0
    ) -> list[SummaryNode]:
        return self.summaries_page(conversation_id, None, after_id, limit)

    def child_summaries(self, node_id: int) -> list[SummaryNode]:
        return self._nodes(
            f"SELECT {NODE_COLUMNS_S} FROM edges e JOIN summaries s ON s.id=e.child_id "
            "WHERE e.parent_id=? AND e.child_kind IN (1, 'summary') ORDER BY e.ord",
            (node_id,),
        )

    def summary_sources(
        self, node_id: int, offset: int = 0, limit: int = -1
    ) -> list[StoredMessage]:
        """The raw messages a depth-0 node was made from, in order."""
        cols = self.message_columns_m
        with self.read() as db:
            rows = db.execute(
                f"SELECT {cols} FROM edges e JOIN messages m ON m.id=e.child_id "
                "WHERE e.parent_id=? AND e.child_kind IN (0, 'message') ORDER BY e.ord LIMIT ? OFFSET ?",
                (node_id, limit, offset),
            ).fetchall()
        return [row_to_message(r) for r in rows]

    def edge_count(self, node_id: int) -> int:
        with self.read() as db:
            return int(
                db.execute("SELECT count(*) FROM edges WHERE parent_id=?", (node_id,)).fetchone()[0]
            )

    def descendant_message_ids(self, node_id: int) -> list[int]:
        """Every raw message under a node, following edges down any depth."""
        with self.read() as db:
            rows = db.execute(
                f"{_walk('?')} SELECT id FROM walk WHERE kind IN (0, 'message') ORDER BY id",
                (node_id,),
            ).fetchall()
        return [int(r[0]) for r in rows]

    def descendant_span(self, node_id: int) -> tuple[int, int | None, int | None]:
        """How many raw messages lie under a node, and their smallest and largest store id."""
        with self.read() as db:
            row = db.execute(
                f"{_walk('?')} SELECT count(*), min(id), max(id) FROM walk WHERE kind IN (0, 'message')",
                (node_id,),
            ).fetchone()
        return int(row[0]), row[1], row[2]

    def parent_ids(self, kind: str, child_id: int) -> list[int]:
        with self.read() as db:
            rows = db.execute(
                "SELECT parent_id FROM edges WHERE child_kind=? AND child_id=? ORDER BY parent_id",
                (KIND_VALUE[kind], child_id),
            ).fetchall()
        return [int(r[0]) for r in rows]

    def ancestors(self, node_id: int) -> list[SummaryNode]:
        """Every node above this one (its parents, their parents, ...), nearest depth first."""
        return self._nodes(
            "WITH RECURSIVE up(id) AS (SELECT parent_id FROM edges WHERE child_kind IN (1, 'summary') AND child_id=? "
            "UNION SELECT e.parent_id FROM edges e JOIN up ON e.child_kind IN (1, 'summary') AND e.child_id=up.id) "
            f"SELECT {NODE_COLUMNS_S} FROM up JOIN summaries s ON s.id=up.id ORDER BY s.depth, s.id",
            (node_id,),
        )

    def root_summaries(self, conversation_id: int, after_id: int, limit: int) -> list[SummaryNode]:
        """Nodes no other node points at (the tops of the DAG), in id order."""
        return self._nodes(
            f"SELECT {NODE_COLUMNS} FROM summaries s WHERE conversation_id=? AND id>? AND NOT EXISTS "
            "(SELECT 1 FROM edges e WHERE e.child_kind IN (1, 'summary') AND e.child_id=s.id) ORDER BY id LIMIT ?",
            (conversation_id, after_id, limit),
        )

    def in_context(self, node_id: int) -> bool:
        with self.read() as db:
            return (
                db.execute("SELECT 1 FROM context_items WHERE summary_id=?", (node_id,)).fetchone()
                is not None
            )

    def depth_counts(self, conversation_id: int | None) -> dict[int, int]:
        """Nodes per depth in a conversation, or in the whole store."""
        where, args = (
            ("WHERE conversation_id=?", (conversation_id,))
            if conversation_id is not None
            else ("", ())
        )
        with self.read() as db:
            rows = db.execute(
                f"SELECT depth, count(*) FROM summaries {where} GROUP BY depth", args
            ).fetchall()
        return {int(d): int(n) for d, n in rows}

    def summary_id_before_newest(self, newest: int) -> int:
        """The id just below the ``newest`` newest summaries (0 when there are no more than
        that): a scan of the newest ones starts after it."""
        with self.read() as db:
            row = db.execute(
                "SELECT id FROM summaries ORDER BY id DESC LIMIT 1 OFFSET ?", (max(0, newest),)
            ).fetchone()
        return int(row[0]) if row else 0

    def summaries_page(
        self,
        conversation_id: int | None,
        depth: int | None,
        after_id: int,
        limit: int,
        since: float | None = None,
    ) -> list[SummaryNode]:
        """Nodes by id after ``after_id``: a conversation's (every one's for None); of one
        ``depth``, made at ``since`` or later (``lcm summaries --recency``) when given."""
        scope, args = "", list[Any]()
        if conversation_id is not None:
            scope, args = scope + " AND conversation_id=?", [*args, conversation_id]
        if depth is not None:
            scope, args = scope + " AND depth=?", [*args, depth]
        if since is not None:
            scope, args = scope + " AND created_at>=?", [*args, since]
        return self._nodes(
            f"SELECT {NODE_COLUMNS} FROM summaries WHERE id>?{scope} ORDER BY id LIMIT ?",
            (after_id, *args, limit),
        )

    def node_ids_by_route(self, conversation_id: int, prefix: str) -> dict[str, int]:
        """route -> node id for nodes whose route starts with ``prefix`` (import provenance)."""
        with self.read() as db:
            rows = db.execute(
                "SELECT route, id FROM summaries WHERE conversation_id=? AND substr(route, 1, ?)=?",
                (conversation_id, len(prefix), prefix),
            ).fetchall()
        return {str(r[0]): int(r[1]) for r in rows}

    _HAS_SOURCE = (
        f"EXISTS ({_walk('s.id')} SELECT 1 FROM walk JOIN messages m "
        "ON walk.kind IN (0, 'message') AND m.id=walk.id WHERE coalesce(nullif(trim(m.source), ''), 'unknown')=?)"
    )

    def summary_id_bounds(
        self, conversation_id: int | None, conversation_ids: Sequence[int] | None = None
    ) -> tuple[int, int]:
        """First and last node id of a conversation, of several, or of the whole store."""
        scope, args = conversation_scope("conversation_id", conversation_id, conversation_ids)
        with self.read() as db:
            low, high = db.execute(
                f"SELECT min(id), max(id) FROM summaries WHERE 1 {scope}", args
            ).fetchone()
        return (int(low), int(high)) if low is not None else (0, -1)

    def _summary_scope(
        self,
        conversation_id: int | None,
        session_id: str | None,
        source: str | None,
        exclude_ids: Sequence[int],
        conversation_ids: Sequence[int] | None,
    ) -> tuple[str, list[Any]]:
        """The ``AND ...`` filters of a summary search on ``s`` and their arguments (both backends)."""
        where, args = conversation_scope("s.conversation_id", conversation_id, conversation_ids)
        for value, clause in ((session_id, "s.session_id=?"), (source, self._HAS_SOURCE)):
            if value is not None:
                where += " AND " + clause
                args.append(value)
        if exclude_ids:
            where += " AND s.id NOT IN (SELECT value FROM json_each(?))"
            args.append(id_list(exclude_ids))
        return where, args

    def summary_hits(
        self,
        match: str,
        *,
        order: str,
        limit: int,
        bounds: tuple[int, int] | None,
        conversation_id: int | None = None,
        session_id: str | None = None,
        source: str | None = None,
        exclude_ids: Sequence[int] = (),
        conversation_ids: Sequence[int] | None = None,
    ) -> list[tuple[SummaryNode, float]]:
        """Summaries matching ``match`` in scope, "rank" (bm25) or "recent" order. A ``source``
        keeps nodes with at least one descendant raw message from that source (lineage)."""
        cols = NODE_COLUMNS_S
        low, high = bounds if bounds is not None else (-(2**62), 2**62)
        where, args = self._summary_scope(
            conversation_id, session_id, source, exclude_ids, conversation_ids
        )
        rank = order == "rank"
        score, sort = (
            ("bm25(summaries_fts)", "score") if rank else ("0.0", "summaries_fts.rowid DESC")
        )
        join = "JOIN summaries s ON s.id=summaries_fts.rowid" if where else ""
        with self.read() as db:  # rank ids first; read the text of the winners only
            rows = db.execute(
                f"SELECT {cols}, t.score FROM (SELECT summaries_fts.rowid AS id, {score} AS score FROM summaries_fts "
                f"{join} WHERE summaries_fts MATCH ? AND summaries_fts.rowid BETWEEN ? AND ? {where} "
                f"ORDER BY {sort} LIMIT ?) AS t JOIN summaries s ON s.id=t.id "
                f"ORDER BY {'t.score, s.id DESC' if rank else 's.id DESC'}",
                (match, low, high, *args, limit),
            ).fetchall()
        return [(row_to_node(r[:-1]), float(r[-1])) for r in rows]

    def summaries_in_period(
        self,
        conversation_id: int | None,
        since: float,
        until: float,
        *,
        depth: int | None,
        after: tuple[float, int] | None,
        limit: int,
        conversation_ids: Sequence[int] | None = None,
    ) -> list[SummaryNode]:
        """Nodes whose time span overlaps [since, until), oldest first, keyset-paged by (earliest_at, id)."""
        where, args = conversation_scope("conversation_id", conversation_id, conversation_ids)
        if depth is not None:
            where += " AND depth=?"
            args.append(depth)
        if after is not None:
            where += " AND (earliest_at, id) > (?, ?)"
            args.extend(after)
        return self._nodes(
            f"SELECT {NODE_COLUMNS} FROM summaries WHERE earliest_at<? AND latest_at>=? {where} "
            "ORDER BY earliest_at, id LIMIT ?",
            (until, since, *args, limit),
        )

    _LINEAGE_CHECKS: tuple[tuple[str, str], ...] = (
        (
            "nodes_without_edges",
            "SELECT s.id FROM summaries s WHERE NOT EXISTS (SELECT 1 FROM edges e WHERE e.parent_id=s.id)",
        ),
        (
            "edge_kind_mismatch",
            "SELECT DISTINCT e.parent_id FROM edges e JOIN summaries s ON s.id=e.parent_id "
            "WHERE (s.depth=0) != (e.child_kind IN (0, 'message'))",
        ),
        (
            "edges_to_missing_messages",
            "SELECT e.parent_id FROM edges e WHERE e.child_kind IN (0, 'message') "
            "AND NOT EXISTS (SELECT 1 FROM messages m WHERE m.id=e.child_id)",
        ),
        (
            "edges_to_missing_nodes",
            "SELECT e.parent_id FROM edges e WHERE e.child_kind IN (1, 'summary') "
            "AND NOT EXISTS (SELECT 1 FROM summaries c WHERE c.id=e.child_id)",
        ),
        (
            "edges_across_conversations",
            "SELECT e.parent_id FROM edges e JOIN summaries p ON p.id=e.parent_id "
            "LEFT JOIN messages m ON e.child_kind IN (0, 'message') AND m.id=e.child_id "
            "LEFT JOIN summaries c ON e.child_kind IN (1, 'summary') AND c.id=e.child_id "
            "WHERE coalesce(m.conversation_id, c.conversation_id) != p.conversation_id",
        ),
        (
            "context_items_to_foreign_or_missing_nodes",
            "SELECT i.summary_id FROM context_items i LEFT JOIN summaries s ON s.id=i.summary_id "
            "WHERE s.id IS NULL OR s.conversation_id != i.conversation_id",
        ),
        (
            "conversations_with_bad_frontier",
            "SELECT c.id FROM conversations c WHERE c.frontier_seq > c.last_seq OR c.last_seq != "
            "coalesce((SELECT max(seq) FROM messages m WHERE m.conversation_id=c.id), 0)",
        ),
    )

    def lineage_problems(self, sample: int = 10) -> dict[str, dict[str, Any]]:
        """Every broken DAG invariant: count and a few offending ids (empty dict when sound)."""
        problems: dict[str, dict[str, Any]] = {}
        with self.read() as db:
            for name, query in self._LINEAGE_CHECKS:
                ids = [int(r[0]) for r in db.execute(f"{query} LIMIT 100000").fetchall()]
                if ids:
                    problems[name] = {"count": len(ids), "ids": ids[:sample]}
        return problems

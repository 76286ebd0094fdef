"""The summary DAG: nodes, their edges to sources, and the active context.

A node is never deleted. Every node has at least one edge, and following
edges from any node always ends at raw messages: a depth-0 node points at
messages, a deeper node at child nodes. The active context of a conversation
is an ordered list of node ids (``context_items``) plus a frontier: raw
messages with ``seq`` above the frontier are in context verbatim. Both change
together in one transaction per compaction (:meth:`Dag.publish`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .records import StoredMessage, SummaryNode
from .store import Store, qualified, row_to_message

_NODE_COLUMNS = (
    "id, conversation_id, session_id, depth, content, tokens, first_seq, last_seq, earliest_at, latest_at, "
    "source_tokens, level, route, created_at"
)
_NODE_COLUMNS_S = qualified(_NODE_COLUMNS, "s")


@dataclass(frozen=True)
class NewNode:
    """A node about to be written: its text and what it was made from."""

    conversation_id: int
    session_id: str
    depth: int
    content: str
    tokens: int
    first_seq: int
    last_seq: int
    earliest_at: float
    latest_at: float
    source_tokens: int
    level: str
    route: str
    message_ids: tuple[int, ...] = ()
    child_ids: tuple[int, ...] = ()


class Dag:
    def __init__(self, store: Store) -> None:
        self.store = store

    # -- writing ------------------------------------------------------------

    def add_node(self, node: NewNode) -> int:
        """Insert a node and its edges atomically; exactly one edge kind is allowed."""
        if bool(node.message_ids) == bool(node.child_ids):
            raise ValueError("a node links either messages or child nodes, and at least one")
        with self.store.write() as db:
            cur = db.execute(
                f"INSERT INTO summaries({_NODE_COLUMNS}) VALUES (NULL, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (node.conversation_id, node.session_id, node.depth, node.content, node.tokens, node.first_seq,
                 node.last_seq, node.earliest_at, node.latest_at, node.source_tokens, node.level, node.route,
                 time.time()),
            )
            node_id = int(cur.lastrowid or 0)
            kind, ids = ("message", node.message_ids) if node.message_ids else ("summary", node.child_ids)
            db.executemany(
                "INSERT INTO edges(parent_id, child_kind, child_id, ord) VALUES (?, ?, ?, ?)",
                [(node_id, kind, child, order) for order, child in enumerate(ids)],
            )
            return node_id

    def publish(self, conversation_id: int, summary_ids: Sequence[int], frontier_seq: int) -> None:
        """Replace the active context of a conversation in one transaction."""
        with self.store.write() as db:
            db.execute("DELETE FROM context_items WHERE conversation_id=?", (conversation_id,))
            db.executemany(
                "INSERT INTO context_items(conversation_id, ord, summary_id) VALUES (?, ?, ?)",
                [(conversation_id, order, sid) for order, sid in enumerate(summary_ids)],
            )
            db.execute("UPDATE conversations SET frontier_seq=max(frontier_seq, ?) WHERE id=?",
                       (frontier_seq, conversation_id))

    # -- reading ------------------------------------------------------------

    def context(self, conversation_id: int) -> list[SummaryNode]:
        cols = _NODE_COLUMNS_S
        with self.store.read() as db:
            rows = db.execute(
                f"SELECT {cols} FROM context_items c JOIN summaries s ON s.id=c.summary_id "
                "WHERE c.conversation_id=? ORDER BY c.ord",
                (conversation_id,),
            ).fetchall()
        return [SummaryNode(*r) for r in rows]

    def node(self, node_id: int) -> SummaryNode | None:
        with self.store.read() as db:
            row = db.execute(f"SELECT {_NODE_COLUMNS} FROM summaries WHERE id=?", (node_id,)).fetchone()
        return SummaryNode(*row) if row else None

    def nodes(self, conversation_id: int, limit: int = 1000, after_id: int = 0) -> list[SummaryNode]:
        with self.store.read() as db:
            rows = db.execute(
                f"SELECT {_NODE_COLUMNS} FROM summaries WHERE conversation_id=? AND id>? ORDER BY id LIMIT ?",
                (conversation_id, after_id, limit),
            ).fetchall()
        return [SummaryNode(*r) for r in rows]

    def children(self, node_id: int) -> list[SummaryNode]:
        cols = _NODE_COLUMNS_S
        with self.store.read() as db:
            rows = db.execute(
                f"SELECT {cols} FROM edges e JOIN summaries s ON s.id=e.child_id "
                "WHERE e.parent_id=? AND e.child_kind='summary' ORDER BY e.ord",
                (node_id,),
            ).fetchall()
        return [SummaryNode(*r) for r in rows]

    def sources(self, node_id: int, offset: int = 0, limit: int = -1) -> list[StoredMessage]:
        """The raw messages a depth-0 node was made from, in order."""
        cols = self.store.message_columns_m
        with self.store.read() as db:
            rows = db.execute(
                f"SELECT {cols} FROM edges e JOIN messages m ON m.id=e.child_id "
                "WHERE e.parent_id=? AND e.child_kind='message' ORDER BY e.ord LIMIT ? OFFSET ?",
                (node_id, limit, offset),
            ).fetchall()
        return [row_to_message(r) for r in rows]

    def edge_count(self, node_id: int) -> int:
        with self.store.read() as db:
            return int(db.execute("SELECT count(*) FROM edges WHERE parent_id=?", (node_id,)).fetchone()[0])

    def descendant_message_ids(self, node_id: int) -> list[int]:
        """Every raw message under a node, following edges down any depth."""
        with self.store.read() as db:
            rows = db.execute(
                "WITH RECURSIVE walk(kind, id) AS (SELECT 'summary', ? "
                "UNION SELECT e.child_kind, e.child_id FROM edges e JOIN walk w ON w.kind='summary' "
                "AND e.parent_id=w.id) SELECT id FROM walk WHERE kind='message' ORDER BY id",
                (node_id,),
            ).fetchall()
        return [int(r[0]) for r in rows]

    def parents(self, kind: str, child_id: int) -> list[int]:
        with self.store.read() as db:
            rows = db.execute("SELECT parent_id FROM edges WHERE child_kind=? AND child_id=? ORDER BY parent_id",
                              (kind, child_id)).fetchall()
        return [int(r[0]) for r in rows]

    def depth_counts(self, conversation_id: int) -> dict[int, int]:
        with self.store.read() as db:
            rows = db.execute("SELECT depth, count(*) FROM summaries WHERE conversation_id=? GROUP BY depth",
                              (conversation_id,)).fetchall()
        return {int(d): int(n) for d, n in rows}

    def search(self, match: str, conversation_id: int | None, limit: int) -> list[tuple[SummaryNode, float]]:
        cols = _NODE_COLUMNS_S
        scope = "AND s.conversation_id=?" if conversation_id is not None else ""
        args: tuple[object, ...] = (match, conversation_id, limit) if conversation_id is not None else (match, limit)
        with self.store.read() as db:
            rows = db.execute(
                f"SELECT {cols}, bm25(summaries_fts) AS score FROM summaries_fts "
                f"JOIN summaries s ON s.id=summaries_fts.rowid WHERE summaries_fts MATCH ? {scope} "
                "ORDER BY score LIMIT ?",
                args,
            ).fetchall()
        return [(SummaryNode(*r[:-1]), float(r[-1])) for r in rows]

    # -- operator surface (cli.py, maintenance.py, lcmimport.py) -----------------

    def nodes_page(self, conversation_id: int, depth: int | None, after_id: int, limit: int) -> list[SummaryNode]:
        scope, args = ("AND depth=?", (conversation_id, depth, after_id, limit)) if depth is not None \
            else ("", (conversation_id, after_id, limit))
        with self.store.read() as db:
            rows = db.execute(
                f"SELECT {_NODE_COLUMNS} FROM summaries WHERE conversation_id=? {scope} AND id>? ORDER BY id LIMIT ?",
                args,
            ).fetchall()
        return [SummaryNode(*r) for r in rows]

    def ancestors(self, node_id: int) -> list[SummaryNode]:
        """Every node above this one (its parents, their parents, ...), nearest depth first."""
        cols = _NODE_COLUMNS_S
        with self.store.read() as db:
            rows = db.execute(
                "WITH RECURSIVE up(id) AS (SELECT parent_id FROM edges WHERE child_kind='summary' AND child_id=? "
                "UNION SELECT e.parent_id FROM edges e JOIN up ON e.child_kind='summary' AND e.child_id=up.id) "
                f"SELECT {cols} FROM up JOIN summaries s ON s.id=up.id ORDER BY s.depth, s.id",
                (node_id,),
            ).fetchall()
        return [SummaryNode(*r) for r in rows]

    def in_context(self, node_id: int) -> bool:
        with self.store.read() as db:
            return db.execute("SELECT 1 FROM context_items WHERE summary_id=?", (node_id,)).fetchone() is not None

    _LINEAGE_CHECKS: tuple[tuple[str, str], ...] = (
        ("nodes_without_edges",
         "SELECT s.id FROM summaries s WHERE NOT EXISTS (SELECT 1 FROM edges e WHERE e.parent_id=s.id)"),
        ("edge_kind_mismatch",
         "SELECT DISTINCT e.parent_id FROM edges e JOIN summaries s ON s.id=e.parent_id "
         "WHERE (s.depth=0) != (e.child_kind='message')"),
        ("edges_to_missing_messages",
         "SELECT e.parent_id FROM edges e WHERE e.child_kind='message' "
         "AND NOT EXISTS (SELECT 1 FROM messages m WHERE m.id=e.child_id)"),
        ("edges_to_missing_nodes",
         "SELECT e.parent_id FROM edges e WHERE e.child_kind='summary' "
         "AND NOT EXISTS (SELECT 1 FROM summaries c WHERE c.id=e.child_id)"),
        ("edges_across_conversations",
         "SELECT e.parent_id FROM edges e JOIN summaries p ON p.id=e.parent_id "
         "LEFT JOIN messages m ON e.child_kind='message' AND m.id=e.child_id "
         "LEFT JOIN summaries c ON e.child_kind='summary' AND c.id=e.child_id "
         "WHERE coalesce(m.conversation_id, c.conversation_id) != p.conversation_id"),
        ("context_items_to_foreign_or_missing_nodes",
         "SELECT i.summary_id FROM context_items i LEFT JOIN summaries s ON s.id=i.summary_id "
         "WHERE s.id IS NULL OR s.conversation_id != i.conversation_id"),
        ("conversations_with_bad_frontier",
         "SELECT c.id FROM conversations c WHERE c.frontier_seq > c.last_seq OR c.last_seq != "
         "coalesce((SELECT max(seq) FROM messages m WHERE m.conversation_id=c.id), 0)"),
    )

    def lineage_problems(self, sample: int = 10) -> dict[str, dict[str, Any]]:
        """Every broken DAG invariant: count and a few offending ids (empty dict when sound)."""
        problems: dict[str, dict[str, Any]] = {}
        with self.store.read() as db:
            for name, query in self._LINEAGE_CHECKS:
                ids = [int(r[0]) for r in db.execute(f"{query} LIMIT 100000").fetchall()]
                if ids:
                    problems[name] = {"count": len(ids), "ids": ids[:sample]}
        return problems

    def node_ids_by_route(self, conversation_id: int, prefix: str) -> dict[str, int]:
        """route -> node id for nodes whose route starts with ``prefix`` (import provenance)."""
        with self.store.read() as db:
            rows = db.execute("SELECT route, id FROM summaries WHERE conversation_id=? AND substr(route, 1, ?)=?",
                              (conversation_id, len(prefix), prefix)).fetchall()
        return {str(r[0]): int(r[1]) for r in rows}

    # -- retrieval for the lcm_* tools (retrieval.py, describe.py) ------------------------------

    _HAS_SOURCE = (
        "EXISTS (WITH RECURSIVE walk(kind, id) AS (SELECT 'summary', s.id UNION SELECT e.child_kind, e.child_id "
        "FROM edges e JOIN walk w ON w.kind='summary' AND e.parent_id=w.id) SELECT 1 FROM walk JOIN messages m "
        "ON walk.kind='message' AND m.id=walk.id WHERE coalesce(nullif(trim(m.source), ''), 'unknown')=?)"
    )

    def summary_id_bounds(self, conversation_id: int | None) -> tuple[int, int]:
        """First and last node id of a conversation, or of the whole store."""
        where, args = ("WHERE conversation_id=?", (conversation_id,)) if conversation_id is not None else ("", ())
        with self.store.read() as db:
            low, high = db.execute(f"SELECT min(id), max(id) FROM summaries {where}", args).fetchone()
        return (int(low), int(high)) if low is not None else (0, -1)

    def summary_hits(self, match: str, *, order: str, limit: int, bounds: tuple[int, int] | None,
                     conversation_id: int | None = None, session_id: str | None = None, source: str | None = None,
                     exclude_ids: Sequence[int] = ()) -> list[tuple[SummaryNode, float]]:
        """Summaries matching ``match`` in scope, "rank" (bm25) or "recent" order. A ``source``
        keeps nodes with at least one descendant raw message from that source (lineage)."""
        cols = _NODE_COLUMNS_S
        low, high = bounds if bounds is not None else (-(2**62), 2**62)
        where, args = "", list[Any]()
        for value, clause in ((conversation_id, "s.conversation_id=?"), (session_id, "s.session_id=?"),
                              (source, self._HAS_SOURCE)):
            if value is not None:
                where += " AND " + clause
                args.append(value)
        if exclude_ids:
            where += " AND s.id NOT IN (SELECT value FROM json_each(?))"
            args.append("[" + ",".join(str(int(i)) for i in exclude_ids) + "]")
        rank = order == "rank"
        score, sort = ("bm25(summaries_fts)", "score") if rank else ("0.0", "summaries_fts.rowid DESC")
        join = "JOIN summaries s ON s.id=summaries_fts.rowid" if where else ""
        with self.store.read() as db:  # rank ids first; read the text of the winners only
            rows = db.execute(
                f"SELECT {cols}, t.score FROM (SELECT summaries_fts.rowid AS id, {score} AS score FROM summaries_fts "
                f"{join} WHERE summaries_fts MATCH ? AND summaries_fts.rowid BETWEEN ? AND ? {where} "
                f"ORDER BY {sort} LIMIT ?) AS t JOIN summaries s ON s.id=t.id "
                f"ORDER BY {'t.score, s.id DESC' if rank else 's.id DESC'}",
                (match, low, high, *args, limit),
            ).fetchall()
        return [(SummaryNode(*r[:-1]), float(r[-1])) for r in rows]

    def summaries_in_period(self, conversation_id: int | None, since: float, until: float, *, depth: int | None,
                            after: tuple[float, int] | None, limit: int) -> list[SummaryNode]:
        """Nodes whose time span overlaps [since, until), oldest first, keyset-paged by (earliest_at, id)."""
        where, args = "", list[Any]()
        for value, clause in ((conversation_id, " AND conversation_id=?"), (depth, " AND depth=?")):
            if value is not None:
                where += clause
                args.append(value)
        if after is not None:
            where += " AND (earliest_at, id) > (?, ?)"
            args.extend(after)
        with self.store.read() as db:
            rows = db.execute(
                f"SELECT {_NODE_COLUMNS} FROM summaries WHERE earliest_at<? AND latest_at>=? {where} "
                "ORDER BY earliest_at, id LIMIT ?",
                (until, since, *args, limit),
            ).fetchall()
        return [SummaryNode(*r) for r in rows]

    def roots(self, conversation_id: int, after_id: int, limit: int) -> list[SummaryNode]:
        """Nodes no other node points at (the tops of the DAG), in id order."""
        with self.store.read() as db:
            rows = db.execute(
                f"SELECT {_NODE_COLUMNS} FROM summaries s WHERE conversation_id=? AND id>? AND NOT EXISTS "
                "(SELECT 1 FROM edges e WHERE e.child_kind='summary' AND e.child_id=s.id) ORDER BY id LIMIT ?",
                (conversation_id, after_id, limit),
            ).fetchall()
        return [SummaryNode(*r) for r in rows]

    def descendant_span(self, node_id: int) -> tuple[int, int | None, int | None]:
        """How many raw messages lie under a node, and their smallest and largest store id."""
        with self.store.read() as db:
            row = db.execute(
                "WITH RECURSIVE walk(kind, id) AS (SELECT 'summary', ? "
                "UNION SELECT e.child_kind, e.child_id FROM edges e JOIN walk w ON w.kind='summary' "
                "AND e.parent_id=w.id) SELECT count(*), min(id), max(id) FROM walk WHERE kind='message'",
                (node_id,),
            ).fetchone()
        return int(row[0]), row[1], row[2]

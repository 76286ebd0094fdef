"""Writing one LCM-X conversation into our store: sessions, messages, summary nodes, context.

All of a conversation in one transaction, then marked in ``meta`` (``MARK``): a re-run skips it.
A message's fingerprint is computed as the engine's own ingest computes it, so the host's next
turn aligns with the migrated tail; a node's lineage (LCM-X's JSON ``source_ids`` over store ids
or node ids) becomes edges, written children first.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ..base.records import NewNode, StoredMessage
from ..base.tokens import count_tokens
from ..dag import Dag
from ..ingest.steps import Normalizer
from ..storage import lcmx as x
from ..store import Store
from .lcmx_report import KIND, MARK, Conversation, Report
from .lcmx_source import host_message, host_time


@dataclass
class Writer:
    store: Store
    normalizer: Normalizer
    report: Report
    source: str
    # Conversation keys another target holds: a dry run builds into a scratch file, and warns
    # of each one as the apply into that target will.
    taken: frozenset[str] = frozenset()

    def conversation(self, conv: Conversation) -> None:
        """All of ``conv`` in one transaction, or nothing; a conversation marked done is skipped."""
        r = self.report
        with self.store.write() as db:
            if x.get_meta(db, MARK + conv.key) is not None:
                r.whole(conv, "skipped_existing")
                return
            key = conv.key
            if key in self.taken or self.store.conversation_by_key(key) is not None:
                key = f"import:{KIND}:{conv.key}"
                r.warn(
                    f"conversation {conv.key!r} already exists in the target: imported as {key!r}"
                )
            cid = self.store.ensure_conversation(key, conv.owner)
            self._sessions(cid, conv)
            ids = self._messages(db, cid, conv)
            nodes = self._nodes(cid, conv, ids)
            self._context(cid, conv, ids, nodes)
            pinned = [ids[m["store_id"]].id for m in conv.messages if m.get("pinned")]
            x.put_meta(
                db,
                MARK + conv.key,
                {
                    "conversation_id": cid,
                    "source": self.source,
                    "version": r.version,
                    "messages": len(ids),
                    "summaries": len(nodes),
                    "pinned": pinned,
                    "lifecycle": conv.lifecycle,
                },
            )
            r.conversations["imported"] += 1

    def _sessions(self, cid: int, conv: Conversation) -> None:
        life = conv.lifecycle or {}
        parent = (
            {str(life["current_session_id"]): str(life["last_finalized_session_id"])}
            if life.get("current_session_id") and life.get("last_finalized_session_id")
            else {}
        )
        for sid in conv.sessions:
            self.store.upsert_session(
                sid,
                cid,
                platform=conv.platforms.get(sid, ""),
                parent_session_id=parent.get(sid),
                reason="new" if sid in parent else f"import {KIND}",
            )

    def _messages(self, db: object, cid: int, conv: Conversation) -> dict[int, StoredMessage]:
        """Rows appended in store order, one batch per run of a session; store_id -> our row."""
        runs: list[tuple[str, str, list[dict[str, Any]]]] = []
        for m in conv.messages:
            sid, src = str(m["session_id"]), str(m.get("source") or KIND)
            if not runs or runs[-1][0] != sid or runs[-1][1] != src:
                runs.append((sid, src, []))
            runs[-1][2].append(m)
        out: dict[int, StoredMessage] = {}
        for sid, src, rows in runs:
            records = [
                replace(self.normalizer.normalize(host_message(m)), host_ts=host_time(m))
                for m in rows
            ]
            new = x.append_rows(db, cid, sid, src, records)
            stored = {s.id: s for s in self.store.messages_by_ids(new)}
            out.update({int(m["store_id"]): stored[i] for m, i in zip(rows, new, strict=True)})
        self.report.messages["imported"] += len(out)
        return out

    def _nodes(self, cid: int, conv: Conversation, ids: dict[int, StoredMessage]) -> dict[int, Any]:
        """Nodes written children first; LCM-X node id -> our node."""
        dag, r = Dag(self.store), self.report
        done: dict[int, Any] = {}
        pending = {int(n["node_id"]): n for n in conv.nodes}
        while pending:
            progressed = False
            for nid, n in list(pending.items()):
                sources = list(dict.fromkeys(n["source_ids"]))
                if n["source_type"] == "nodes" and any(s in pending for s in sources):
                    continue
                del pending[nid]
                progressed = True
                made = self._node(cid, n, sources, ids, done)
                if made is None and n["source_type"] == "nodes":
                    made = self._orphan(cid, n, conv, ids)
                if made is None:
                    r.summaries["invalid"] += 1
                    r.edges["dropped"] += len(sources)
                    r.warn(
                        f"lcm-x node {nid}: none of its sources {sources[:5]} were imported; skipped"
                    )
                    continue
                done[nid] = dag.node(dag.add_node(made))
                r.summaries["imported"] += 1
                if n["source_type"] == "nodes" and made.message_ids:
                    r.edges["dropped"] += len(sources)
                    r.edges["relinked_by_time"] += len(made.message_ids)
                    continue
                linked = len(made.message_ids or made.child_ids)
                r.edges["imported"] += linked
                r.edges["dropped"] += len(sources) - linked
            if not progressed:
                for nid in pending:
                    r.summaries["invalid"] += 1
                    r.edges["dropped"] += len(set(pending[nid]["source_ids"]))
                    r.warn(f"lcm-x node {nid}: lineage cycle; skipped")
                break
        return done

    def _node(
        self,
        cid: int,
        n: dict[str, Any],
        sources: list[int],
        ids: dict[int, StoredMessage],
        done: dict[int, Any],
    ) -> NewNode | None:
        text = self.normalizer.scrub(str(n["summary"] or ""))
        base: dict[str, Any] = {
            "conversation_id": cid,
            "session_id": str(n["session_id"]),
            "content": text,
            "tokens": int(n.get("token_count") or 0) or count_tokens(text),
            "level": "imported",
            "route": f"{KIND}:{n['node_id']}",
        }
        # what LCM-X recorded wins; what it left out follows from the sources
        given: dict[str, Any] = {
            "earliest_at": _time(n.get("earliest_at")),
            "latest_at": _time(n.get("latest_at")),
            "source_tokens": int(n.get("source_token_count") or 0) or None,
        }
        if n["source_type"] != "nodes":
            msgs = [ids[s] for s in sources if s in ids]
            if not msgs:
                return None
            if int(n["depth"] or 0) != 0:
                self.report.warn(
                    f"lcm-x node {n['node_id']}: depth {n['depth']} over messages stored as 0"
                )
            return NewNode.over_messages(msgs, **given, **base)
        kids = [done[s] for s in sources if s in done]
        if not kids:
            return None
        return NewNode.over_nodes(
            kids, depth=max(int(n["depth"] or 0), max(k.depth for k in kids) + 1), **given, **base
        )

    def _orphan(
        self, cid: int, n: dict[str, Any], conv: Conversation, ids: dict[int, StoredMessage]
    ) -> NewNode | None:
        """A condensed node whose child nodes are gone: LCM-X's ``/new`` deletes a session's nodes
        below ``new_session_retain_depth`` (2 by default) and keeps the higher ones, their
        ``source_ids`` then naming deleted nodes. Dropping such a node would lose the only summary
        left of that session, so it is kept, linked to the raw rows it covers: its session's rows
        whose LCM-X ``timestamp`` lies in its time range (LCM-X takes a node's range from those).
        Edges to raw rows make it a depth-0 node here; its LCM-X depth is in the warning."""
        lo, hi = n.get("earliest_at"), n.get("latest_at")
        if not isinstance(lo, int | float) or not isinstance(hi, int | float):
            return None
        rows = [
            m
            for m in conv.messages
            if m["session_id"] == n["session_id"]
            and m["store_id"] in ids
            and isinstance(m.get("timestamp"), int | float)
            and lo <= m["timestamp"] <= hi
        ]
        if not rows:
            return None
        self.report.warn(
            f"lcm-x node {n['node_id']} (depth {n['depth']}): its child nodes were deleted by "
            f"LCM-X; linked to the {len(rows)} rows of its session by its time range"
        )
        return self._node(
            cid,
            {**n, "source_type": "messages", "depth": 0},
            [int(m["store_id"]) for m in rows],
            ids,
            {},
        )

    def _context(
        self, cid: int, conv: Conversation, ids: dict[int, StoredMessage], nodes: dict[int, Any]
    ) -> None:
        """What LCM-X's prompt showed: its top nodes, and the raw rows after the frontier (the newest
        of LCM-X's lifecycle frontiers and the last summarized row)."""
        if not nodes:
            return
        children = {s for n in conv.nodes if n["source_type"] == "nodes" for s in n["source_ids"]}
        roots = sorted(
            (n for nid, n in nodes.items() if nid not in children),
            key=lambda n: (n.first_seq, n.id),
        )
        life = conv.lifecycle or {}
        marks = [
            int(life.get(k) or 0)
            for k in ("current_frontier_store_id", "last_finalized_frontier_store_id")
        ]
        frontier = max(
            [ids[s].seq for s in ids if s <= max(marks)] + [max(n.last_seq for n in roots)]
        )
        self.store.publish_context(cid, [n.id for n in roots], frontier)


def _time(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) else None

"""Planning and writing an OpenClaw import: source conversations (from either reader) into our
store, with the summary DAG.

Every message's fingerprint is a hash of its source identity, so a re-run with the same
``import_id`` finds what is already there (``skipped_existing``) and writes only what is new;
summary nodes keep their source id in ``route`` for the same reason. The plan (what a dry run
reports) and the write share one pass, so what an apply writes is what the dry run said.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from ..base.progress import Tick, quiet_tick
from ..base.records import MessageIn, NewNode, StoredMessage
from ..base.tokens import count_tokens
from ..dag import Dag
from ..ingest.normalize import dump
from ..ingest.steps import Normalizer
from ..store import Store
from .claw_report import Report, SourceConversation, SourceMessage, SourceSummary


def fingerprint(import_kind: str, provenance: str) -> str:
    return (
        "import:"
        + hashlib.blake2b(f"{import_kind}\x00{provenance}".encode(), digest_size=16).hexdigest()
    )


def _is_empty(message: dict[str, Any]) -> bool:
    content = message.get("content")
    has_text = bool(content.strip()) if isinstance(content, str) else bool(content)
    return not has_text and not message.get("tool_calls")


@dataclass
class Importer:
    report: Report
    kind: str
    apply: bool
    store: Store | None = None
    normalizer: Normalizer | None = None
    progress: Tick = quiet_tick  # (messages read, messages in the source) after each conversation

    def run(self, conversations: Iterable[SourceConversation]) -> None:
        """All conversations in one write transaction: a failure part-way leaves the target as it was."""
        if self.apply and self.store is not None:
            with self.store.write():
                self._each(conversations)
        else:
            self._each(conversations)

    def _each(self, conversations: Iterable[SourceConversation]) -> None:
        convs = list(conversations)
        done, total = 0, sum(len(c.messages) for c in convs)
        for conv in convs:
            self.report.conversations += 1
            self.one(conv)
            done += len(conv.messages)
            self.progress(done, total)

    def _key(self, conv: SourceConversation) -> str:
        return f"import:{self.report.import_id}:{conv.key}"

    def _existing(
        self, conv: SourceConversation
    ) -> tuple[int | None, dict[str, int], dict[str, int]]:
        if self.store is None:
            return None, {}, {}
        state = self.store.conversation_by_key(self._key(conv))
        if state is None:
            return None, {}, {}
        routes = Dag(self.store).node_ids_by_route(state.id, f"{self.kind}:")
        return state.id, self.store.fingerprint_ids(state.id), routes

    def one(self, conv: SourceConversation) -> None:
        r = self.report
        conversation_id, known, routes = self._existing(conv)
        fresh: list[tuple[str, SourceMessage]] = []
        seen: set[str] = set()
        for m in conv.messages:
            fp = fingerprint(self.kind, m.provenance)
            if fp in seen:
                r.invalid_rows += 1
                r.warn(f"{conv.key}: duplicate source id {m.provenance}; later copy skipped")
                r.tally(r.parts_reported, m.parts_kept + m.parts_dropped)
                continue
            seen.add(fp)
            if _is_empty(m.message):
                r.skipped_empty += 1
                r.tally(r.parts_reported, m.parts_kept + m.parts_dropped)
                continue
            r.eligible += 1
            r.tally(r.parts_kept, m.parts_kept)
            r.tally(r.parts_reported, m.parts_dropped)
            if fp in known:
                r.skipped_existing += 1
            else:
                fresh.append((fp, m))
        r.would_import += len(fresh)
        new_summaries = self._plan_summaries(conv, known, {fp for fp, _ in fresh}, routes)
        if not self.apply or (not fresh and not new_summaries):
            return
        assert self.store is not None
        with self.store.write():
            cid = conversation_id or self.store.ensure_conversation(self._key(conv))
            self.store.upsert_session(
                conv.session_id,
                cid,
                platform="openclaw",
                parent_session_id=conv.parent_session_id,
                reason=f"import {r.import_id}",
            )
            ids, _skipped = self.store.append_imported(
                cid,
                conv.session_id,
                f"import:{r.import_id}",
                [self._record(fp, m) for fp, m in fresh],
            )
            r.imported += len(ids)
            if new_summaries:
                self._write_summaries(cid, conv, new_summaries, routes)

    def _record(self, fp: str, m: SourceMessage) -> MessageIn:
        assert self.normalizer is not None
        record = self.normalizer.normalize(m.message, fingerprint=fp)
        if (
            m.extra
        ):  # private fields (normalize keeps only public ones): the exact lossless-claw parts
            fields = {
                **(json.loads(record.extra) if record.extra else {}),
                **self.normalizer.scrub(m.extra),
            }
            return replace(record, host_ts=m.timestamp, extra=dump(fields))
        return replace(record, host_ts=m.timestamp)

    # -- summaries ---------------------------------------------------------------------------------

    def _plan_summaries(
        self,
        conv: SourceConversation,
        known: dict[str, int],
        fresh: set[str],
        routes: dict[str, int],
    ) -> list[SourceSummary]:
        """Summaries whose lineage resolves to imported messages, children first."""
        r = self.report
        available = set(known) | fresh
        resolvable: dict[str, SourceSummary] = {}
        pending = {s.source_id: s for s in conv.summaries}
        progressed = True
        while pending and progressed:
            progressed = False
            for sid, s in list(pending.items()):
                if s.kind == "leaf":
                    ok = any(fingerprint(self.kind, mid) in available for mid in s.message_ids)
                else:
                    if any(c in pending for c in s.child_ids):
                        continue
                    ok = any(c in resolvable for c in s.child_ids)
                del pending[sid]
                progressed = True
                if ok:
                    resolvable[sid] = s
                else:
                    r.summaries["invalid"] += 1
                    r.warn(f"{self.kind} summary {sid}: no imported source to link to; skipped")
        for sid in pending:
            r.summaries["invalid"] += 1
            r.warn(f"{self.kind} summary {sid}: lineage cycle or missing child; skipped")
        new = []
        for s in resolvable.values():
            r.summaries["eligible"] += 1
            if f"{self.kind}:{s.source_id}" in routes:
                r.summaries["skipped_existing"] += 1
            else:
                new.append(s)
        r.summaries["would_import"] += len(new)
        return new

    def _write_summaries(
        self,
        conversation_id: int,
        conv: SourceConversation,
        todo: list[SourceSummary],
        routes: dict[str, int],
    ) -> None:
        """``todo`` written children first. Reads only what it links: the rows of its leaves, and the
        nodes of earlier runs its condensed summaries name (``routes``: those nodes by route)."""
        assert self.store is not None
        dag = Dag(self.store)
        by_fp = self.store.fingerprint_ids(conversation_id)
        linked = {
            by_fp[fp]
            for s in todo
            for fp in (fingerprint(self.kind, m) for m in s.message_ids)
            if fp in by_fp
        }
        rows = {m.id: m for m in self.store.messages_by_ids(sorted(linked))}
        earlier = {c for s in todo for c in s.child_ids} - {s.source_id for s in todo}
        nodes = {
            c: dag.node(routes[f"{self.kind}:{c}"]) for c in earlier if f"{self.kind}:{c}" in routes
        }
        for s in todo:
            new = self._node(conversation_id, conv, s, by_fp, rows, nodes)
            if new is None:
                continue
            nodes[s.source_id] = dag.node(dag.add_node(new))
            self.report.summaries["imported"] += 1

    def _node(
        self,
        conversation_id: int,
        conv: SourceConversation,
        s: SourceSummary,
        by_fp: dict[str, int],
        rows: dict[int, StoredMessage],
        nodes: dict[str, Any],
    ) -> NewNode | None:
        tokens = s.tokens if s.tokens > 0 else count_tokens(s.content)
        content = self.normalizer.scrub(s.content) if self.normalizer is not None else s.content
        base: dict[str, Any] = {
            "conversation_id": conversation_id,
            "session_id": conv.session_id,
            "content": content,
            "tokens": tokens,
            "level": "imported",
            "route": f"{self.kind}:{s.source_id}",
        }
        if s.kind == "leaf":
            msgs = [
                rows[by_fp[fp]]
                for fp in (fingerprint(self.kind, m) for m in s.message_ids)
                if fp in by_fp
            ]
            if not msgs:
                return None
            return NewNode.over_messages(
                msgs, earliest_at=s.earliest_at or None, latest_at=s.latest_at or None, **base
            )
        children = [nodes[c] for c in s.child_ids if nodes.get(c) is not None]
        if not children:
            return None
        node = NewNode.over_nodes(
            children, earliest_at=s.earliest_at or None, latest_at=s.latest_at or None, **base
        )
        if node.depth != s.depth:
            self.report.warn(
                f"{self.kind} summary {s.source_id}: depth {s.depth} recomputed as {node.depth}"
            )
        return node

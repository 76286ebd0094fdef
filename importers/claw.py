"""Import OpenClaw history into a hermes-lcm database (used by scripts/import_lossless_claw.py).

Two source families:

* a lossless-claw SQLite database: raw messages, and with ``include_summaries``
  its summary DAG with lineage (leaf summaries link messages, condensed ones
  link the summaries they were made from);
* OpenClaw JSONL session transcripts: a ``{"type": "session"}`` header line, then
  entries with ``id``/``parentId``; ``{"type": "message"}`` entries carry
  ``user`` / ``assistant`` / ``toolResult`` messages. Only the active branch
  (the path from the last entry back to the root) is imported, as the model saw it.

Dry-run is the default: nothing is written, the report says what would be.
``apply`` checks and reads the whole source first, backs the target up (when it
exists), then writes the whole import in one transaction. Every imported row carries its provenance:
the session id and ``source`` column name the import, and each message's
fingerprint is a hash of its source identity, so re-running with the same
``import_id`` skips what is already there (``skipped_existing``) and imports
only what is new. Summary nodes keep their source id in ``route``.

No SQL here: the lossless-claw schema is read through ``store.ClawDatabase``
(storage/claw.py), and our own database through store.py / dag.py.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..base import private
from ..base.progress import Tick, quiet_tick
from ..base.records import MessageIn, NewNode, StoredMessage
from ..base.times import TimeError, parse_time
from ..base.tokens import count_tokens
from ..dag import Dag
from ..ingest.normalize import dump
from ..ingest.steps import Normalizer, import_normalizer
from ..maintenance import doctor as mt
from ..storage.claw import ReadableCopy, SourceUnreadable, check_source
from ..store import (
    LCL_TABLES,
    ClawDatabase,
    Store,
    StoreError,
    detect_source,
    open_readonly,
    open_store,
)
from .claw_jsonl import active_branch, parent_session_id, text_blocks
from .claw_parts import CORE_PART_TYPES, carry
from .claw_report import ImportFailure, Report, SourceConversation, SourceMessage, SourceSummary

IMPORT_ROLES = {"user", "assistant", "tool"}
LCL_ROLES = {"system", "user", "assistant", "tool"}  # lossless-claw's messages.role CHECK


# -- provenance ----------------------------------------------------------------------------------


def default_import_id(kind: str, sources: Sequence[str | Path]) -> str:
    digest = hashlib.blake2b(
        "\n".join(sorted(str(Path(s).resolve()) for s in sources)).encode(), digest_size=6
    ).hexdigest()
    return f"{kind}-{digest}"


def _fingerprint(import_kind: str, provenance: str) -> str:
    return (
        "import:"
        + hashlib.blake2b(f"{import_kind}\x00{provenance}".encode(), digest_size=16).hexdigest()
    )


def _parse_time(value: Any) -> float | None:
    """Epoch seconds from ms/s numbers or ISO / SQLite datetime text (``times.parse_time``); None
    when absent or unreadable (the caller warns)."""
    if value is None:
        return None
    try:
        return parse_time(value)
    except (TimeError, OverflowError):
        return None


# -- lossless-claw SQLite source -----------------------------------------------------------------


class LosslessClawReader:
    """Maps a lossless-claw ``lcm.db`` (read-only, through ``store.ClawDatabase``) onto source
    conversations, counting and warning about every row it cannot import."""

    def __init__(self, path: Path, report: Report) -> None:
        self.path, self.report = path, report
        try:
            check_source(path)
        except SourceUnreadable as exc:
            raise ImportFailure(str(exc)) from exc
        if detect_source(path) != "lossless-claw":
            raise ImportFailure(
                f"{path} is not a lossless-claw database (needs tables {sorted(LCL_TABLES)})"
            )
        self.db = ClawDatabase(path)

    def read_all(self, include_summaries: bool) -> list[SourceConversation]:
        """Every row this import will use, read before the target is touched: a source that fails
        part-way (a damaged page the quick check missed) refuses the whole import, one line."""
        try:
            return list(self.conversations(include_summaries))
        except StoreError as exc:
            raise ImportFailure(
                f"source {self.path} could not be read whole ({exc}); nothing imported"
            ) from exc

    def conversations(self, include_summaries: bool) -> Iterator[SourceConversation]:
        rows = self.db.conversations()
        has_parts = self.db.has_message_parts()
        for row in rows:
            cid, session = row["conversation_id"], str(row["session_id"] or "")
            label = row["session_key"] or session or str(cid)
            conv = SourceConversation(
                key=f"lossless-claw:{cid}:{label}",
                session_id=f"lossless-claw:{cid}:{session or 'unknown'}",
                parent_session_id=None,
            )
            conv.messages = list(self._messages(cid, has_parts))
            if include_summaries:
                conv.summaries = self._summaries(cid)
            yield conv

    def _messages(self, conversation_id: int, has_parts: bool) -> Iterator[SourceMessage]:
        for row in self.db.messages(conversation_id):
            self.report.scanned += 1
            mid = row["message_id"]
            role, content = row["role"], row["content"]
            types = Counter(self.db.part_types(mid)) if has_parts else Counter()
            if role not in LCL_ROLES or not isinstance(content, str) or role not in IMPORT_ROLES:
                self.report.tally(self.report.parts_reported, types)
            if role not in LCL_ROLES or not isinstance(content, str):
                self.report.invalid_rows += 1
                self.report.warn(
                    f"lossless-claw message {mid}: invalid role {role!r} or non-text content; skipped"
                )
                continue
            if role not in IMPORT_ROLES:
                self.report.skipped_unsupported += 1
                self.report.warn(f"lossless-claw message {mid}: role {role!r} is not imported")
                continue
            message: dict[str, Any] = {"role": role, "content": content}
            dropped: Counter[str] = Counter()
            extra = None
            if has_parts:
                dropped["tool"] = self._tool_fields(mid, role, message, types["tool"])
                thinking = self.db.reasoning_texts(mid) if role == "assistant" else []
                if thinking:  # kept as the host's reasoning field, as for JSONL thinking blocks
                    message["reasoning_content"] = "\n".join(thinking)
                    self.report.thinking_kept += 1
                dropped["reasoning"] = types["reasoning"] - len(thinking)
                # patch, file, subtask, step_*, snapshot, retry, agent: appended to the content
                extra = carry(message, self.db.other_parts(mid, CORE_PART_TYPES))
                for kind, n in (+dropped).items():
                    self.report.warn(
                        f"lossless-claw message {mid}: {n} {kind} part(s) without usable "
                        "content (no text, call id or input) not imported"
                    )
            ts = _parse_time(row["created_at"])
            if ts is None:
                self.report.warn(
                    f"lossless-claw message {mid}: unreadable created_at {row['created_at']!r}"
                )
            yield SourceMessage(f"message:{mid}", message, ts, types - dropped, +dropped, extra)

    def _tool_fields(
        self, message_id: int, role: str, message: dict[str, Any], tool_parts: int
    ) -> int:
        """Sets the tool link / calls; returns how many of the message's ``tool`` parts it could not use."""
        parts = self.db.tool_parts(message_id)
        if role == "tool":
            first = next((p for p in parts if p["tool_call_id"]), None)
            if first is not None:
                message["tool_call_id"] = str(first["tool_call_id"])
                if first["tool_name"]:
                    message["name"] = str(first["tool_name"])
            return 0
        calls = []
        for p in parts:
            if (
                role != "assistant"
                or p["part_type"] != "tool"
                or not p["tool_call_id"]
                or p["tool_input"] is None
            ):
                continue
            arguments = (
                p["tool_input"] if isinstance(p["tool_input"], str) else json.dumps(p["tool_input"])
            )
            try:
                json.loads(arguments)
            except ValueError:
                self.report.warn(
                    f"lossless-claw message {message_id}: tool call {p['tool_call_id']} has "
                    "non-JSON input; kept as text"
                )
                arguments = json.dumps({"raw": arguments})
            calls.append(
                {
                    "id": str(p["tool_call_id"]),
                    "type": "function",
                    "function": {
                        "name": str(p["tool_name"] or "unknown_tool"),
                        "arguments": arguments,
                    },
                }
            )
        if calls:
            message["tool_calls"] = calls
        return tool_parts - len(calls)

    def _summaries(self, conversation_id: int) -> list[SourceSummary]:
        rows = self.db.summaries(conversation_id)
        out = []
        for row in rows:
            self.report.summaries["scanned"] += 1
            sid = str(row["summary_id"])
            if not isinstance(row["content"], str) or row["kind"] not in ("leaf", "condensed"):
                self.report.summaries["invalid"] += 1
                self.report.warn(f"lossless-claw summary {sid}: bad kind/content; skipped")
                continue
            node = SourceSummary(
                sid,
                row["kind"],
                int(row["depth"] or 0),
                row["content"],
                int(row["token_count"] or 0),
                _parse_time(row["earliest_at"]),
                _parse_time(row["latest_at"]),
            )
            node.message_ids = [f"message:{m}" for m in self.db.summary_message_ids(sid)]
            # lossless-claw names the summaries a condensed node was made from its "parents".
            node.child_ids = [str(p) for p in self.db.summary_parent_ids(sid)]
            out.append(node)
        return out

    def close(self) -> None:
        self.db.close()


# -- OpenClaw JSONL source -------------------------------------------------------------------------


def jsonl_scan(
    files: Iterable[str | Path], dirs: Iterable[str | Path]
) -> tuple[list[Path], list[str]]:
    """The session files to read, and the symlinks skipped in the directories.

    A file named on the command line is read where it points (the operator chose it); inside a
    directory only regular files count: a link there could lead anywhere (``/etc``, another
    user's home), so it is skipped and the report says so."""
    found: set[Path] = set()
    for f in files:
        named = Path(f).expanduser()
        if not named.exists():
            raise ImportFailure(f"source {named} does not exist")
        if not named.is_file():
            raise ImportFailure(f"source {named} is not a regular file")
        found.add(named.resolve())
    skipped: list[str] = []
    for directory in dirs:
        d = Path(directory).expanduser()
        if not d.exists():
            raise ImportFailure(f"source {d} is not a directory: it does not exist")
        if not d.is_dir():
            raise ImportFailure(f"{d} is not a directory")
        d = d.resolve()
        for p in d.glob("*.jsonl"):
            if p.is_symlink():
                skipped.append(str(p))
            elif p.is_file():
                found.add(p)
    return sorted(found), sorted(skipped)


def read_jsonl(path: Path, report: Report, agent: str = "") -> SourceConversation | None:
    """One session file -> one conversation (active branch only)."""
    try:
        # Never through a link: a file swapped for one after the scan is not read.
        lines = (
            private.read_in(path.parent, path.name, single_link=False)
            .decode("utf-8", "replace")
            .splitlines()
        )
    except OSError as exc:
        report.invalid_rows += 1
        report.warn(f"{path}: unreadable ({exc})")
        return None
    header: dict[str, Any] = {}
    entries: list[tuple[int, dict[str, Any]]] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            report.scanned += 1
            report.invalid_rows += 1
            report.warn(f"{path.name}:{number}: not JSON; skipped")
            continue
        if not isinstance(entry, dict):
            report.scanned += 1
            report.invalid_rows += 1
            report.warn(f"{path.name}:{number}: not a JSON object; skipped")
            continue
        if entry.get("type") == "session" and not header:
            header = entry
            continue
        entries.append((number, entry))
    session = str(header.get("id") or path.stem)
    prefix = f"openclaw:{agent}:" if agent else "openclaw:"
    parent, problem = parent_session_id(header.get("parentSession"), path)
    if problem:
        report.warn(f"{path.name}: {problem}")
    conv = SourceConversation(
        key=f"{prefix}{session}",
        session_id=f"{prefix}{session}",
        parent_session_id=f"{prefix}{parent}" if parent else None,
    )
    branch, dropped, idless = active_branch(entries)
    if dropped:
        report.warn(
            f"{path.name}: {dropped} message entries are on abandoned branches and not imported"
        )
    for number, _entry in idless:
        report.scanned += 1
        report.invalid_rows += 1
        report.warn(
            f"{path.name}:{number}: message entry without an id in a file whose entries have ids "
            "(not on any branch); skipped"
        )
    compactions = 0
    for number, entry in branch:
        if entry.get("type") == "compaction":
            compactions += 1
            continue
        if entry.get("type", "message") != "message" or "message" not in entry:
            continue
        report.scanned += 1
        converted = _convert(entry, report, f"{path.name}:{number}")
        if converted is not None:
            ident = str(entry.get("id") or f"line{number}")
            conv.messages.append(SourceMessage(f"{session}:{ident}", converted[0], converted[1]))
            if converted[0].get("reasoning_content"):
                report.thinking_kept += 1
    if compactions:
        report.compactions_reported += compactions
        report.warn(
            f"{path.name}: {compactions} OpenClaw compaction entries (its own summaries) are not imported; "
            "the messages they summarized are, and hermes-lcm summarizes them itself"
        )
    return conv


def _convert(
    entry: dict[str, Any], report: Report, where: str
) -> tuple[dict[str, Any], float | None] | None:
    raw = entry.get("message")
    if not isinstance(raw, dict) or not isinstance(raw.get("role"), str):
        report.invalid_rows += 1
        report.warn(f"{where}: message entry without a role; skipped")
        return None
    role, content = raw["role"], raw.get("content")
    if content is not None and not isinstance(content, str | list):
        report.invalid_rows += 1
        report.warn(f"{where}: content is neither text nor a list; skipped")
        return None
    ts = _parse_time(raw.get("timestamp")) or _parse_time(entry.get("timestamp"))
    texts, parts, other = text_blocks(content)
    body: Any = parts if other else "\n".join(texts)
    if role == "user":
        return {"role": "user", "content": body}, ts
    if role == "assistant":
        message: dict[str, Any] = {"role": "assistant", "content": "\n".join(texts)}
        thinking = (
            [
                str(b.get("thinking") or "")
                for b in content or []
                if isinstance(b, dict) and b.get("type") == "thinking" and b.get("thinking")
            ]
            if isinstance(content, list)
            else []
        )
        if (
            thinking
        ):  # kept as the host's reasoning field (stored with the message, not shown as content)
            message["reasoning_content"] = "\n".join(thinking)
        calls = (
            [b for b in content or [] if isinstance(b, dict) and b.get("type") == "toolCall"]
            if isinstance(content, list)
            else []
        )
        if calls:
            message["tool_calls"] = [
                {
                    "id": str(c.get("id") or ""),
                    "type": "function",
                    "function": {
                        "name": str(c.get("name") or "unknown_tool"),
                        "arguments": json.dumps(c.get("arguments") or {}, ensure_ascii=False),
                    },
                }
                for c in calls
            ]
        return message, ts
    if role == "toolResult":
        if not raw.get("toolCallId"):
            report.invalid_rows += 1
            report.warn(f"{where}: toolResult without toolCallId; skipped")
            return None
        message = {"role": "tool", "tool_call_id": str(raw["toolCallId"]), "content": body}
        if raw.get("toolName"):
            message["name"] = str(raw["toolName"])
        return message, ts
    report.skipped_unsupported += 1
    report.warn(f"{where}: role {role!r} is not imported")
    return None


# -- planning and writing --------------------------------------------------------------------------


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
            fp = _fingerprint(self.kind, m.provenance)
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
                    ok = any(_fingerprint(self.kind, mid) in available for mid in s.message_ids)
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
            for fp in (_fingerprint(self.kind, m) for m in s.message_ids)
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
                for fp in (_fingerprint(self.kind, m) for m in s.message_ids)
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


# -- entry point ------------------------------------------------------------------------------------


def run_import(
    *,
    target_db: str | Path,
    source_db: str | Path | None = None,
    jsonl: Sequence[str | Path] = (),
    jsonl_dirs: Sequence[str | Path] = (),
    import_id: str | None = None,
    include_summaries: bool = False,
    apply: bool = False,
    agent: str = "",
    backup_dir: str = "",
    redact_patterns: str | None = None,
    progress: Tick = quiet_tick,
) -> dict[str, Any]:
    """Plan (dry-run) or apply one import; returns the reconciliation report. ``progress``: the
    apply's messages done of the total, after each conversation (all commit in one transaction).

    An apply first plans like a dry run; when nothing is new it stops there, so a
    re-run neither writes nor takes another backup.
    """
    if (source_db is None) == (not jsonl and not jsonl_dirs):
        raise ImportFailure("give either a source database or JSONL files/directories (not both)")
    kind = "lossless-claw" if source_db is not None else "openclaw-jsonl"
    files, links = jsonl_scan(jsonl, jsonl_dirs) if source_db is None else ([], [])
    sources = [str(Path(source_db).resolve())] if source_db is not None else [str(f) for f in files]
    target = Path(target_db).expanduser().resolve()
    job = _Job(
        kind,
        Path(source_db).expanduser() if source_db is not None else None,
        files,
        target,
        import_id or default_import_id(kind, sources),
        include_summaries,
        agent,
        backup_dir,
        sources,
        links,
        redact_patterns,
    )
    if apply and target.exists():
        plan = job.run(apply=False)
        if plan["would_import"] == 0 and plan["summaries"]["would_import"] == 0:
            return {
                **plan,
                "dry_run": False,
                "note": "nothing new to import: target untouched, no backup taken",
            }
    return job.run(apply, progress)


@dataclass(frozen=True)
class _Job:
    kind: str
    source_db: Path | None
    files: list[Path]
    target: Path
    import_id: str
    include_summaries: bool
    agent: str
    backup_dir: str
    sources: list[str]
    links: list[str] = field(default_factory=list)
    # Redaction is on (LCM_SENSITIVE_PATTERNS): applied to every message, field and summary written.
    redact_patterns: str | None = None

    def run(self, apply: bool, progress: Tick = quiet_tick) -> dict[str, Any]:
        report = Report(
            self.kind, self.sources, str(self.target), self.import_id, dry_run=not apply
        )
        report.skipped_symlinks = list(self.links)
        for link in self.links:
            report.warn(
                f"{link}: a symlink, skipped (only regular files in a JSONL directory are read)"
            )
        if self.source_db is None and self.include_summaries:
            report.warn("JSONL sessions carry no summary DAG: --include-summaries ignored")
        started = time.monotonic()
        # The whole source is checked and read before the target is created or touched.
        conversations = self._read_source(report)
        importer = Importer(report, self.kind, apply, progress=progress)
        importer.store, release = _target_store(self.target, report, apply, self.backup_dir)
        try:
            if importer.store is not None:
                importer.normalizer = import_normalizer(
                    self.target.parent / "lcm-payloads", importer.store, self.redact_patterns
                )
            importer.run(conversations)
        finally:
            if importer.store is not None and importer.store.readonly:
                importer.store.close()
            release()
        out = report.as_dict()
        # every scanned row lands in exactly one bucket
        out["balanced"] = report.scanned == (
            report.eligible
            + report.skipped_empty
            + report.skipped_unsupported
            + report.invalid_rows
        )
        out["seconds"] = round(time.monotonic() - started, 3)
        return out

    def _read_source(self, report: Report) -> list[SourceConversation]:
        if self.source_db is None:
            return [
                c for c in (read_jsonl(f, report, self.agent) for f in self.files) if c is not None
            ]
        reader = LosslessClawReader(self.source_db, report)
        try:
            return reader.read_all(self.include_summaries)
        finally:
            reader.close()


def _nothing() -> None:
    """No private copy to remove."""


def _target_store(
    target: Path, report: Report, apply: bool, backup_dir: str
) -> tuple[Store | None, Any]:
    """Read-only view for a dry run; for apply, a verified backup first, then the writer."""
    if not target.exists():
        if not apply:
            return None, _nothing
        return open_store(target), _nothing
    if detect_source(target) != "hermes-lcm":
        raise ImportFailure(
            f"target {target} is not a hermes-lcm database; refusing to write to it"
        )
    if apply:
        if not os.access(target.parent, os.W_OK):
            raise ImportFailure(
                f"target directory {target.parent} is not writable; nothing imported"
            )
        try:
            report.backup_path = mt.backup_before_import(target, backup_dir)
        except StoreError as exc:
            raise ImportFailure(str(exc)) from exc
        return open_store(target), _nothing
    # a dry run against a target in a read-only directory reads a private copy (SQLite cannot open
    # a WAL database read-only where it cannot create the -shm)
    copy = ReadableCopy(target, always_copy=True)
    try:
        return open_readonly(copy.path), copy.cleanup
    except StoreError as exc:
        copy.cleanup()
        raise ImportFailure(str(exc)) from exc

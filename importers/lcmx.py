"""LCM-X databases into hermes-lcm: the mapping, the import, and the in-place upgrade at start.

LCM-X (also published as a Hermes plugin named ``hermes-lcm``) keeps its store at our default
path, ``$HERMES_HOME/lcm.db``. Without this module our engine refused that file and ran without
a store. Here each LCM-X row becomes ours:

- a message keeps role (system included), content, tool_calls, tool_call_id, tool_name, session,
  source (the session's platform) and its host time; its fingerprint is computed as the engine's
  own ingest computes it, so the host's next turn aligns with the migrated tail;
- a conversation is LCM-X's ``conversation_id`` (a gateway chat) or, where it has none, its
  session (``session:<id>``, our own key for such a session);
- a summary node keeps depth, text and time range; its lineage (LCM-X's JSON ``source_ids`` over
  store ids or node ids) becomes edges;
- the lifecycle (frontier, the session a ``/new`` finalized) becomes our frontier, context and
  the sessions' parent links; pinned flags and LCM-X's lifecycle row are kept in ``meta``.

A conversation is written in one transaction and marked in ``meta``: a re-run skips it.
:func:`upgrade_in_place` builds the new database beside the old one and swaps it in atomically;
see its docstring for the crash argument.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..base.progress import Tick, quiet_tick
from ..base.records import NewNode, StoredMessage
from ..base.times import host_time as parse_host_time
from ..base.tokens import count_tokens
from ..dag import Dag
from ..ingest.steps import Normalizer, import_normalizer
from ..maintenance import doctor as mt
from ..storage import lcmx as x
from ..store import ForeignDatabase, Store, StoreError, detect_source, open_store

try:
    import fcntl
except (
    ImportError
):  # pragma: no cover - Windows: no lock, one engine at a time is the operator's job
    fcntl = None  # type: ignore[assignment]

KIND = "lcm-x"
MARK = "lcm-x:import:"  # meta key prefix: one row per imported conversation


class ImportFailure(RuntimeError):
    """The import cannot run as asked (bad target, unreadable source); nothing was written."""


def is_lcmx(path: str | Path) -> bool:
    return x.lcmx_version(path) is not None


def command_for(path: str | Path) -> str:
    """The command an operator runs to upgrade ``path`` by hand."""
    return f"lcm import lcm-x --source-db {path} --apply"


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


# -- reading: LCM-X rows grouped by conversation ----------------------------------------------------


def conversation_key(lcmx_conversation: Any, session_id: str) -> str:
    """Our key for an LCM-X conversation: its gateway key, or ``session:<id>`` for a session the
    host gave no conversation (LCM-X then writes the session's own id as its conversation id;
    our engine keys such a session ``session:<id>``, so a resumed CLI session finds its history)."""
    conv = str(lcmx_conversation or "")
    return f"session:{session_id}" if not conv or conv == session_id else conv


def read_source(db: x.LcmxDatabase, report: Report) -> list[Conversation]:
    """Every LCM-X conversation with its messages, nodes and lifecycle row, oldest first."""
    convs: dict[str, Conversation] = {}
    by_session: dict[str, str] = {}
    lifecycle: dict[str, dict[str, Any]] = {}
    for row in db.lifecycle():
        sids = [
            str(s)
            for s in (row.get("last_finalized_session_id"), row.get("current_session_id"))
            if s
        ]
        conv_id = str(row["conversation_id"])
        key = (
            conversation_key(conv_id, conv_id) if conv_id in sids else conversation_key(conv_id, "")
        )
        lifecycle.setdefault(key, row)
        for sid in sids:
            by_session.setdefault(sid, key)
    for m in db.messages():
        sid = str(m["session_id"])
        key = by_session.get(sid) or conversation_key(m.get("conversation_id"), sid)
        by_session.setdefault(sid, key)
        conv = convs.get(key)
        if conv is None:
            owner = "local" if key.startswith("session:") else f"chat:{key}"
            conv = convs[key] = Conversation(key, owner, lifecycle=lifecycle.get(key))
        if sid not in conv.platforms:
            conv.sessions.append(sid)
            conv.platforms[sid] = str(m.get("source") or "")
        conv.messages.append(m)
    for node in db.nodes():
        owner_key = by_session.get(str(node["session_id"]))
        report.summaries["source"] += 1
        report.edges["source"] += len(set(node["source_ids"]))
        if owner_key is None:
            report.summaries["invalid"] += 1
            report.edges["dropped"] += len(set(node["source_ids"]))
            report.warn(
                f"lcm-x node {node['node_id']}: session {node['session_id']} has no messages; skipped"
            )
            continue
        convs[owner_key].nodes.append(node)
    report.conversations["source"] = len(convs)
    report.messages["source"] = sum(len(c.messages) for c in convs.values())
    return list(convs.values())


def links(nodes: list[dict[str, Any]]) -> tuple[int, int]:
    """A conversation's lineage links: (to rows or nodes it has, to nodes LCM-X deleted)."""
    ids = {int(n["node_id"]) for n in nodes}
    pairs = [(n["source_type"], s) for n in nodes for s in set(n["source_ids"])]
    dangling = sum(1 for kind, s in pairs if kind == "nodes" and s not in ids)
    return len(pairs) - dangling, dangling


def host_message(m: dict[str, Any]) -> dict[str, Any]:
    """An LCM-X row as the host message it stored (LCM-X's own ``to_openai_msg``, plus the time)."""
    msg: dict[str, Any] = {"role": m["role"], "content": m["content"]}
    if m.get("tool_calls"):
        try:
            msg["tool_calls"] = json.loads(m["tool_calls"])
        except ValueError:
            msg["tool_calls"] = m["tool_calls"]
    if m.get("tool_call_id"):
        msg["tool_call_id"] = m["tool_call_id"]
    if m.get("tool_name") and m["role"] == "tool":
        msg["name"] = m["tool_name"]  # a tool result's name is a column of ours, not an extra field
    elif m.get("tool_name"):
        msg["tool_name"] = m["tool_name"]
    return msg


def host_time(m: dict[str, Any]) -> float | None:
    """When the host sent it (LCM-X's ``observed_at``), else when LCM-X stored it."""
    return parse_host_time(m.get("observed_at")) or parse_host_time(m.get("timestamp"))


# -- writing one conversation -----------------------------------------------------------------------


@dataclass
class Writer:
    store: Store
    normalizer: Normalizer
    report: Report
    source: str

    def conversation(self, conv: Conversation) -> None:
        """All of ``conv`` in one transaction, or nothing; a conversation marked done is skipped."""
        r = self.report
        with self.store.write() as db:
            if x.get_meta(db, MARK + conv.key) is not None:
                r.whole(conv, "skipped_existing")
                return
            key = conv.key
            if self.store.conversation_by_key(key) is not None:
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


# -- the import: dry run, apply, verify ---------------------------------------------------------------


def run_import(
    source_db: str | Path,
    target_db: str | Path | None = None,
    *,
    apply: bool = False,
    backup_dir: str = "",
    redact_patterns: str | None = None,
    progress: Tick = quiet_tick,
) -> dict[str, Any]:
    """Plan (dry run, the default) or apply the import of ``source_db`` into ``target_db``;
    ``progress(messages_done, messages_total)`` after each conversation (each commits whole).

    Without a target, the source is upgraded in place (:func:`upgrade_in_place`). A re-run finds
    every conversation marked as done and writes nothing.
    """
    source = Path(source_db).expanduser().resolve()
    target = Path(target_db).expanduser().resolve() if target_db else source
    try:
        db = x.LcmxDatabase(source)
    except StoreError as exc:
        raise ImportFailure(str(exc)) from exc
    db.close()
    if target == source:
        if not apply:
            out = plan(source, target)
            out["note"] = (
                f"dry run: `{command_for(source)}` upgrades it in place (the original kept beside it)"
            )
            return out
        return upgrade_in_place(source, redact_patterns, progress)
    if not apply:
        return plan(source, target)
    if target.exists() and detect_source(target) != "hermes-lcm":
        raise ImportFailure(
            f"target {target} is not a hermes-lcm database; refusing to write to it"
        )
    backup = mt.backup_before_import(target, backup_dir) if target.exists() else None
    out = build(source, target, redact_patterns=redact_patterns, progress=progress)
    out["backup_path"] = backup
    return out


def plan(source: Path, target: Path) -> dict[str, Any]:
    """The dry run: what an apply would write, read from the source alone (and the target's marks)."""
    db = x.LcmxDatabase(source)
    try:
        report = Report(str(source), str(target), db.version, dry_run=True)
        convs = read_source(db, report)
    finally:
        db.close()
    done: set[str] = set()
    if target != source and target.exists() and detect_source(target) == "hermes-lcm":
        marks = x.read_marks(target, MARK)
        done = {c.key for c in convs if c.key in marks}
    for c in convs:
        report.whole(c, "skipped_existing" if c.key in done else "imported")
    out = report.as_dict()
    out["would_import"] = {
        k: report.__dict__[k]["imported"] for k in ("conversations", "messages", "summaries")
    }
    return out


def build(
    source: Path,
    target: Path,
    label: Path | None = None,
    private: bool = False,
    redact_patterns: str | None = None,
    progress: Tick = quiet_tick,
) -> dict[str, Any]:
    """Apply: every conversation of ``source`` into ``target`` (created when missing), then verify.
    ``redact_patterns``: redaction is on (LCM_SENSITIVE_PATTERNS), applied to all that is written.
    ``label``: the file named as the source in the report and marks (the original, not a snapshot);
    ``private``: the target is a file being built, written over a connection of its own, closed after."""
    started = time.monotonic()
    db = x.LcmxDatabase(source)
    try:
        report = Report(str(label or source), str(target), db.version, dry_run=False)
        convs = read_source(db, report)
        counts = db.counts()
    finally:
        db.close()
    store: Store = x.private_store(target) if private else open_store(target)
    try:
        writer = Writer(
            store,
            import_normalizer(target.parent / "lcm-payloads", store, redact_patterns),
            report,
            report.source,
        )
        done, total = 0, sum(len(c.messages) for c in convs)
        for conv in convs:
            writer.conversation(conv)
            done += len(conv.messages)
            progress(done, total)
        out = report.as_dict()
        out["verify"] = verify(store, convs, counts)
    finally:
        if private:
            store.close()
    out["seconds"] = round(time.monotonic() - started, 3)
    return out


def verify(store: Store, convs: list[Conversation], counts: dict[str, int]) -> dict[str, Any]:
    """Every LCM-X message is in the target, in order, with its tool links; lineage is whole."""
    problems: list[str] = []
    for conv in convs:
        with store.write() as con:
            mark = x.get_meta(con, MARK + conv.key)
        if mark is None:
            problems.append(f"{conv.key}: not imported")
            continue
        cid = int(mark["conversation_id"])
        rows = store.messages_after(cid, 0)
        if len(rows) < len(conv.messages):
            problems.append(f"{conv.key}: {len(rows)} messages, LCM-X has {len(conv.messages)}")
            continue
        for src, ours in zip(conv.messages, rows, strict=False):
            if (src["role"], src.get("tool_call_id") or None, bool(src.get("tool_calls"))) != (
                ours.role,
                ours.tool_call_id,
                bool(ours.tool_calls),
            ):
                problems.append(
                    f"{conv.key}: LCM-X store_id {src['store_id']} does not match row {ours.id}"
                )
                break
    lineage = {k: v for k, v in Dag(store).lineage_problems().items() if v.get("count")}
    out = {
        "ok": not problems and not lineage,
        "problems": problems[:20],
        "lineage_problems": lineage,
        "source_counts": counts,
    }
    return out


# -- the in-place upgrade -----------------------------------------------------------------------------

STEPS = ("snapshot", "build", "verify", "backup", "swap")
_hook: Callable[[str], None] = lambda step: None  # noqa: E731 - tests raise from a step to prove crash safety


def _step(name: str) -> None:
    _hook(name)


def backup_path(path: Path) -> Path:
    return path.with_name(path.name + ".lcm-x-backup")


def upgrade_in_place(
    path: str | Path, redact_patterns: str | None = None, progress: Tick = quiet_tick
) -> dict[str, Any]:
    """Replace the LCM-X database at ``path`` by a hermes-lcm one built from it.

    Crash safety, step by step: the new database is built at ``<db>.migrating`` from a snapshot
    (``<db>.lcm-x-snapshot``) and verified there, so until the swap ``<db>`` is the untouched
    LCM-X file. The original is then kept by a hard link (its bytes, never written; its WAL linked
    beside it), the old WAL and shm leave (they must not meet the new file) and ``os.replace``
    swaps the new file in; the directory is fsynced. A crash after the link re-runs from the
    backup (the same inode, complete with its WAL), so it yields the same result.
    """
    path = Path(path).expanduser().resolve()
    version = x.check_version(path)
    backup, building, snap = (
        backup_path(path),
        _sibling(path, ".migrating"),
        _sibling(path, ".lcm-x-snapshot"),
    )
    if backup.exists() and not _same(backup, path):
        backup = _sibling(path, f".lcm-x-backup.{int(time.time())}")
    source = backup if backup.exists() else path
    for stale in (building, snap):
        _remove_db(stale)
    try:  # until the swap <db> is the LCM-X file: an interrupt (Ctrl-C) leaves nothing beside it
        _step("snapshot")
        x.snapshot(source, snap)
        _step("build")
        out = build(
            snap,
            building,
            label=path,
            private=True,
            redact_patterns=redact_patterns,
            progress=progress,
        )
        _step("verify")
        problems = _reconciled(out)
        if problems:  # the except below removes the new file and the snapshot
            raise ImportFailure(
                f"the upgrade of {path} did not verify ({'; '.join(problems)}); "
                "the LCM-X file is untouched"
            )
        x.seal(building)
        _fsync(building)
        _step("backup")
        if not backup.exists():
            _keep(path, backup)
        _step("swap")
    except BaseException:
        _remove_db(building)
        _remove_db(snap)
        raise
    for side in ("-wal", "-shm", "-journal"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(str(path) + side)
    os.replace(building, path)
    _fsync(path.parent)
    _remove_db(snap)
    out.update(
        source=str(path), target=str(path), backup=str(backup), lcmx_version=version, upgraded=True
    )
    return out


def _reconciled(out: dict[str, Any]) -> list[str]:
    problems = list(out["verify"]["problems"])
    if out["verify"]["lineage_problems"]:
        problems.append(f"lineage: {sorted(out['verify']['lineage_problems'])}")
    if not out["balanced"]:
        problems.append("counts do not reconcile")
    if out["messages"]["imported"] != out["verify"]["source_counts"]["messages"]:
        problems.append(
            f"{out['messages']['imported']} of {out['verify']['source_counts']['messages']} messages"
        )
    return problems


def _sibling(path: Path, suffix: str) -> Path:
    return path.with_name(path.name + suffix)


def _same(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _keep(path: Path, backup: Path) -> None:
    """``backup`` becomes the original file (a hard link: the same bytes, never opened for writing);
    a filesystem without links gets a byte copy."""
    for side in ("", "-wal"):
        src, dst = Path(str(path) + side), Path(str(backup) + side)
        if not src.exists():
            continue
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)
        _fsync(dst)
    _fsync(path.parent)


def _remove_db(path: Path) -> None:
    for side in ("", "-wal", "-shm", "-journal"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(str(path) + side)


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    except OSError:
        pass  # some filesystems refuse a directory fsync; the replace stays atomic
    finally:
        os.close(fd)


# -- at engine start ----------------------------------------------------------------------------------


def prepare(
    path: Path | str, migrate_on_start: bool, redact_patterns: str | None = None
) -> dict[str, Any] | None:
    """Before the engine opens ``path``: upgrade an LCM-X database found there (or, when
    ``LCM_MIGRATE_ON_START=0``, refuse it naming the command). None: nothing to do (a
    ``postgresql://`` URL is never an LCM-X file; ``lcm migrate-to-postgres`` moves one there).

    Engines starting together (a gateway and a CLI, agent copies on threads) take turns on a lock
    file; the ones that wait find the upgrade done and open the new file."""
    if isinstance(path, str) or str(path) == ":memory:" or x.lcmx_version(path) is None:
        return None
    if not migrate_on_start:
        raise ForeignDatabase(
            f"{path} is an LCM-X database and LCM_MIGRATE_ON_START=0: upgrade it with "
            f"`{command_for(path)}` (dry run without --apply; the original is kept as "
            f"{backup_path(path).name}), or set LCM_MIGRATE_ON_START=1"
        )
    with _exclusive(_sibling(Path(path), ".lcm-x-lock")):
        if x.lcmx_version(path) is None:
            return None
        return upgrade_in_place(path, redact_patterns)


@contextlib.contextmanager
def _exclusive(lock: Path) -> Iterator[None]:
    """An exclusive ``flock`` on ``lock`` (held per open file, so threads exclude each other too)."""
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock

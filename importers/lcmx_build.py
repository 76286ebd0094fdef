"""The whole-database steps of an LCM-X import: the plan (dry run), the build, the verify.

Shared by an import into another file (``lcmx.run_import``) and the in-place upgrade
(``lcmx_swap``), which builds beside the original and swaps only what verified.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

from ..base.progress import Tick, quiet_tick
from ..dag import Dag
from ..ingest.steps import import_normalizer
from ..storage import lcmx as x
from ..store import Store, detect_source, open_store
from .lcmx_report import MARK, Conversation, Report
from .lcmx_source import read_source
from .lcmx_write import Writer


def plan(source: Path, target: Path, redact_patterns: str | None = None) -> dict[str, Any]:
    """The dry run: the apply itself, into a scratch file that is then thrown away, so its report
    is the apply's (warnings, relinked lineage, invalid nodes and all). Conversations the target
    marks as done are skipped, and keys it already holds are warned of, as the apply would."""
    done: set[str] = set()
    taken: frozenset[str] = frozenset()
    if target != source and target.exists() and detect_source(target) == "hermes-lcm":
        done = x.read_marks(target, MARK)
        taken = frozenset(x.read_conversation_keys(target))
    with tempfile.TemporaryDirectory(prefix="lcm-import-plan-") as scratch:
        out = build(
            source,
            Path(scratch) / "plan.db",
            label=source,
            private=True,
            redact_patterns=redact_patterns,
            skip=done,
            taken=taken,
        )
    out.update(target=str(target), dry_run=True)
    out["would_import"] = {
        k: out[k]["imported"] for k in ("conversations", "messages", "summaries")
    }
    return out


def build(
    source: Path,
    target: Path,
    label: Path | None = None,
    private: bool = False,
    redact_patterns: str | None = None,
    progress: Tick = quiet_tick,
    skip: set[str] | frozenset[str] = frozenset(),
    taken: frozenset[str] = frozenset(),
) -> dict[str, Any]:
    """Apply: every conversation of ``source`` into ``target`` (created when missing), then verify.
    ``redact_patterns``: redaction is on (LCM_SENSITIVE_PATTERNS), applied to all that is written.
    ``label``: the file named as the source in the report and marks (the original, not a snapshot);
    ``private``: the target is a file being built, written over a connection of its own, closed after.
    ``skip``: conversation keys counted as already imported, not written; ``taken``: keys another
    target holds (the dry run's, see :func:`plan`)."""
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
            taken,
        )
        done, total = 0, sum(len(c.messages) for c in convs)
        for conv in convs:
            if conv.key in skip:
                report.whole(conv, "skipped_existing")
            else:
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

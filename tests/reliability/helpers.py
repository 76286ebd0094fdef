"""Shared checks for the reliability tests: run the worker, read a database independently."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from hermes_lcm.store import is_url

from ..backends import raw_sql

WORKER = Path(__file__).resolve().parent / "worker.py"
MARK = re.compile(r"mk:([\w-]+):(\d+):(\d)")


def worker_cmd(mode: str, home: Path, session: str, **options: Any) -> list[str]:
    cmd = [sys.executable, str(WORKER), mode, "--home", str(home), "--session", session]
    for key, value in options.items():
        flag = "--" + key.replace("_", "-")
        cmd += [flag, json.dumps(value) if isinstance(value, dict) else str(value)]
    return cmd


def child_env() -> dict[str, str]:
    """The parent's environment minus anything that could point the engine elsewhere."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LCM_", "HERMES_"))}
    env["PYTHONUNBUFFERED"] = "1"
    return env


def start(
    mode: str, home: Path, session: str, stderr: Any = subprocess.PIPE, **options: Any
) -> subprocess.Popen[str]:
    return subprocess.Popen(
        worker_cmd(mode, home, session, **options),
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
        env=child_env(),
    )


def result_of(stdout: str) -> dict[str, Any]:
    for line in reversed(stdout.splitlines()):
        if line.startswith("RESULT "):
            return dict(json.loads(line[len("RESULT ") :]))
    raise AssertionError(f"worker printed no RESULT line; stdout tail: {stdout[-2000:]}")


def integrity(db: Path | str) -> str:
    """SQLite's own check of the file; a PostgreSQL server checks its pages itself (nothing to ask)."""
    if is_url(db):
        return "ok" if raw_sql(str(db), "SELECT 1") == [(1,)] else "unreachable"
    con = sqlite3.connect(str(db), timeout=30)
    try:
        return str(con.execute("PRAGMA integrity_check").fetchone()[0])
    finally:
        con.close()


def marker_counts(db: Path | str) -> Counter[tuple[str, int, int]]:
    """How many stored rows carry each marker (read with a plain connection, not our store)."""
    rows = raw_sql(str(db), "SELECT content FROM messages")
    counts: Counter[tuple[str, int, int]] = Counter()
    for (content,) in rows:
        for session, turn, k in MARK.findall(content or ""):
            counts[(session, int(turn), int(k))] += 1
    return counts


def expected_markers(session: str, turns: range) -> set[tuple[str, int, int]]:
    from .worker import turn_messages

    out = set()
    for turn in turns:
        for message in turn_messages(session, turn):
            found = MARK.search(str(message.get("content")))
            assert found
            out.add((session, turn, int(found.group(3))))
    return out


def dag_problems(db: Path | str) -> list[str]:
    """Structural invariants of the summary DAG and the conversations table (a file or a URL)."""

    def one(sql: str, args: tuple[Any, ...] = ()) -> tuple[Any, ...]:
        return raw_sql(str(db), sql, args)[0]

    problems: list[str] = []
    orphans = one(
        "SELECT count(*) FROM summaries s WHERE NOT EXISTS "
        "(SELECT 1 FROM edges e WHERE e.parent_id=s.id)"
    )[0]
    if orphans:
        problems.append(f"{orphans} summaries without edges")
    dangling = one(
        "SELECT count(*) FROM context_items c WHERE NOT EXISTS "
        "(SELECT 1 FROM summaries s WHERE s.id=c.summary_id)"
    )[0]
    if dangling:
        problems.append(f"{dangling} context items point at missing summaries")
    for cid, frontier, last in raw_sql(
        str(db), "SELECT id, frontier_seq, last_seq FROM conversations"
    ):
        count, top = one(
            "SELECT count(*), coalesce(max(seq), 0) FROM messages WHERE conversation_id=?", (cid,)
        )
        if frontier > last:
            problems.append(f"conversation {cid}: frontier {frontier} > last_seq {last}")
        if not count == top == last:
            problems.append(
                f"conversation {cid}: {count} rows, max seq {top}, last_seq {last} (gaps?)"
            )
    return problems


def lock_errors(texts: list[str]) -> list[str]:
    return [t for t in texts if re.search(r"locked|busy|SQLITE_BUSY", t, re.I)]


def msg(i: int) -> dict[str, Any]:
    return {
        "role": "user" if i % 2 == 0 else "assistant",
        "content": f"message {i}: " + "some words here " * 6,
    }


def grow(engine: Any, start: int, stop: int) -> None:
    """Messages [start, stop) through core.ingest in batches overlapping the stored tail, as a host's do."""
    core = engine.ensure_core()
    assert core is not None
    for lo in range(start, stop, 1000):
        core.ingest([msg(i) for i in range(max(0, lo - 8), min(stop, lo + 1000))])


def prepared_count(db: Path | str) -> int | None:
    """How many prepared summaries the database holds (None: it has no table for them yet)."""
    exists = (
        "SELECT to_regclass('prepared_summaries') IS NOT NULL"  # on the test's search_path
        if is_url(db)
        else "SELECT count(*) FROM sqlite_master WHERE name = 'prepared_summaries'"
    )
    if not raw_sql(str(db), exists)[0][0]:
        return None
    return int(raw_sql(str(db), "SELECT count(*) FROM prepared_summaries")[0][0])


def publication_problems(db: Path | str, *, one_writer: bool = True) -> list[str]:
    """What deferred compaction's publication must never leave: a row or a summary under two
    summaries (a node published twice, or two overlapping ones), a prepared summary half-written,
    or (``one_writer``: a single process, whose compaction waits for its own preparer) a prepared
    summary still kept after the node made from it was published."""
    problems: list[str] = []
    for kind, what in ((0, "messages"), (1, "summaries")):
        twice = raw_sql(
            str(db),
            "SELECT count(*) FROM (SELECT child_id FROM edges WHERE child_kind = ? "
            "GROUP BY child_id HAVING count(*) > 1) t",
            (kind,),
        )[0][0]
        if twice:
            problems.append(f"{twice} {what} under more than one summary")
    if prepared_count(db) is None:
        return problems
    broken = raw_sql(
        str(db),
        "SELECT count(*) FROM prepared_summaries WHERE content = '' OR tokens <= 0 "
        "OR first_seq > last_seq OR key = ''",
    )[0][0]
    if broken:
        problems.append(f"{broken} prepared summaries half-written")
    if one_writer:
        kept = raw_sql(
            str(db),
            "SELECT p.depth, p.first_seq, p.last_seq, p.target_tokens, s.id, s.first_seq, "
            "s.last_seq FROM prepared_summaries p JOIN summaries s "
            "ON s.conversation_id = p.conversation_id AND s.depth = p.depth "
            "AND s.content = p.content",
        )
        if kept:
            problems.append(
                f"{len(kept)} prepared summaries kept after their node was published "
                f"(depth, span, target; node, span): {kept}"
            )
    return problems

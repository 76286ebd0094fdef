"""A full disk must not lose messages.

The database lives on a small tmpfs the test mounts itself (the suite runs as root in CI
and here). A filler file leaves a little room; a long conversation with compactions then
fills the disk, keeps going while nothing can be written, and goes on after the filler is
deleted. Every message ever handed to the engine must end up stored exactly once, in
order, and no compress result may lack a message that was not stored at that moment.
Where mounting is not permitted the same run uses SQLite's own SQLITE_FULL through
``PRAGMA max_page_count`` (and a payload directory that cannot be created); the test
says which mode it ran in and never skips. On PostgreSQL (a server's disk is not ours to fill)
the same run has the server refuse every write for a stretch of turns (``refuse_writes``).
"""

from __future__ import annotations

import base64
import contextlib
import errno
import json
import os
import random
import re
import shutil
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hermes_lcm import store as store_module
from hermes_lcm.base.tokens import count_messages
from hermes_lcm.engine import LcmEngine
from hermes_lcm.host import hooks

from .. import backends
from ..conftest import database_env, new_engine
from ..convo import assert_valid_sequence, text, visible
from .helpers import publication_problems

MARK = re.compile(r"\bmk:(\d+)\b")
DISK_BYTES = 4 * 1024 * 1024
ROOM_BYTES = (
    190 * 1024
)  # what the filler leaves free once the conversation has started: sized so the
# run includes a compaction that appends unstored messages (schema 5 writes a payload grant with each
# externalized row; 180-200 KiB give that run, 160 and 220 do not)


class Disk:
    """Where the database lives and how its space runs out and comes back."""

    mode = "tmpfs"

    def __init__(self, root: Path) -> None:
        self.root = root
        self.filler = root / "filler.bin"

    def fill(self, engine: LcmEngine, leave: int) -> None:
        """Take all free space but ``leave`` bytes (0: every last block)."""
        with self.filler.open("ab") as out:
            while True:
                free = shutil.disk_usage(self.root).free - leave
                if free <= 0:
                    return
                try:
                    out.write(b"\0" * min(free, 1 << 20))
                    out.flush()
                except OSError as exc:
                    assert exc.errno == errno.ENOSPC, exc
                    return

    def free(self, engine: LcmEngine) -> None:
        self.filler.unlink()

    def turn(self, engine: LcmEngine, t: int) -> None:
        """Called before each turn: a disk fills by itself as the conversation writes."""


class RefusingServer(Disk):
    """PostgreSQL: from turn ``FULL_AT`` the server refuses every write (as a full tablespace or a
    read-only standby does) until :meth:`free`; the payloads, in a table, are refused with the rest."""

    mode = "server refuses writes"
    FULL_AT = 25

    def fill(self, engine: LcmEngine, leave: int) -> None:
        pass  # room until FULL_AT; once full it stays full

    def turn(self, engine: LcmEngine, t: int) -> None:
        if t == self.FULL_AT:
            backends.refuse_writes(engine.core.store)

    def free(self, engine: LcmEngine) -> None:
        backends.allow_writes(engine.core.store)


class InjectedDisk(Disk):
    """No mount permitted: SQLite's max_page_count gives the real SQLITE_FULL; a file where the
    payload directory should be makes payload writes fail."""

    mode = "injected SQLITE_FULL"

    def fill(self, engine: LcmEngine, leave: int) -> None:
        conn = engine.core.store.conn
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        conn.execute(f"PRAGMA max_page_count={pages + leave // 4096}")
        if leave == 0:
            payloads = self.root / "lcm-payloads"
            if payloads.exists():
                payloads.rename(self.root / "payloads-aside")
            payloads.write_bytes(b"")

    def free(self, engine: LcmEngine) -> None:
        engine.core.store.conn.execute("PRAGMA max_page_count=1073741823")
        payloads = self.root / "lcm-payloads"
        payloads.unlink()
        if (self.root / "payloads-aside").exists():
            (self.root / "payloads-aside").rename(payloads)


@contextlib.contextmanager
def refusing_server(base: Path) -> Iterator[Disk]:
    root = base / "home"
    root.mkdir()
    try:
        yield RefusingServer(root)
    finally:
        store_module.close_all()


@contextlib.contextmanager
def small_disk(base: Path) -> Iterator[Disk]:
    root = base / "disk"
    root.mkdir()
    mounted = (
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={DISK_BYTES}", "tmpfs", str(root)],
            capture_output=True,
            text=True,
        ).returncode
        == 0
        if os.geteuid() == 0
        else False
    )
    try:
        yield Disk(root) if mounted else InjectedDisk(root)
    finally:
        store_module.close_all()
        if mounted:
            subprocess.run(["umount", "-l", str(root)], check=True)


def _payload(rng: random.Random) -> str:
    return "data:image/png;base64," + base64.b64encode(rng.randbytes(3000)).decode()


def turns(seed: int) -> Iterator[list[dict[str, Any]]]:
    """Turns whose every message carries a unique marker; some with tool calls, some with payloads."""
    rng = random.Random(seed)
    n = 0

    def mark() -> str:
        nonlocal n
        n += 1
        return f"mk:{n}"

    for t in range(10**6):
        ask = f"{mark()} turn {t} ask: {text(rng, 50)}"
        if t % 7 == 3:
            ask += f" screenshot {_payload(rng)}"
        out: list[dict[str, Any]] = [{"role": "user", "content": ask}]
        for loop in range(rng.randint(0, 2)):
            ids = [f"call_{t}_{loop}_{k}" for k in range(rng.randint(1, 2))]
            out.append(
                {
                    "role": "assistant",
                    "content": f"{mark()} checking",
                    "tool_calls": [
                        {
                            "id": i,
                            "type": "function",
                            "function": {"name": "read_file", "arguments": json.dumps({"p": i})},
                        }
                        for i in ids
                    ],
                }
            )
            out.extend(
                {"role": "tool", "tool_call_id": i, "content": f"{mark()} result {text(rng, 90)}"}
                for i in ids
            )
        out.append({"role": "assistant", "content": f"{mark()} turn {t} answer: {text(rng, 50)}"})
        yield out


def markers(messages: list[dict[str, Any]]) -> list[int]:
    """Markers of the host-visible messages (our summary block quotes old ones: not counted)."""
    found = []
    for m in visible(messages):
        hit = MARK.match(str(m.get("content") or ""))
        if hit:
            found.append(int(hit.group(1)))
    return found


def stored_markers(db: Path | str) -> list[int]:
    """Markers of the stored rows in conversation order, read with a connection of our own."""
    if backends.is_url(db):
        rows = backends.raw_sql(
            str(db), "SELECT content FROM messages ORDER BY conversation_id, seq"
        )
        return [int(h.group(1)) for (c,) in rows if (h := MARK.match(c or ""))]
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = con.execute("SELECT content FROM messages ORDER BY conversation_id, seq").fetchall()
    finally:
        con.close()
    return [int(h.group(1)) for (c,) in rows if (h := MARK.match(c or ""))]


@pytest.mark.both_backends
@pytest.mark.parametrize("replies", ["ingest", "prepared"])
def test_a_full_disk_loses_no_message_and_the_backlog_is_stored_once_space_returns(
    tmp_path, backend, replies
):
    """``replies`` "prepared": each reply carries its usage, so deferred compaction prepares the
    next compaction between turns (its writes fail with the rest while the disk is full) and
    compress publishes what it prepared."""
    where = database_env(backend)
    with small_disk(tmp_path) if not where else refusing_server(tmp_path) as disk:
        print(f"full-disk test mode: {disk.mode}")
        engine = new_engine(disk.root, threshold=3000, **where)
        db: Path | str = where.get("LCM_DATABASE_URL") or Path(engine.core.store.path)
        sent: list[int] = []
        live: list[dict[str, Any]] = []
        phase, full_turns, compress_calls, kept_whole, appended, freed_at = "filling", 0, 0, 0, 0, 0
        disk.fill(engine, ROOM_BYTES)
        for t, turn in enumerate(turns(seed=3)):
            disk.turn(engine, t)
            live.extend(turn)
            sent.extend(markers(turn))
            tokens = count_messages(live) + 500
            if replies == "prepared":
                engine.update_from_response({"prompt_tokens": tokens})
            hooks.post_llm_call(
                session_id="s1", conversation_history=list(live)
            )  # ingest, as the host does
            preparer = engine.core.preparer
            if replies == "prepared" and preparer is not None:
                assert preparer.settle(30)
            if engine.should_compress(tokens):
                before = markers(live)
                out = engine.compress(list(live), current_tokens=tokens)
                compress_calls += 1
                stored_now = set(stored_markers(db))
                dropped = set(before) - set(markers(out))
                assert dropped <= stored_now, (
                    f"turn {t}: dropped before stored: {sorted(dropped - stored_now)}"
                )
                unstored = [m for m in before if m not in stored_now]
                assert not unstored or markers(out)[-len(unstored) :] == unstored, (
                    f"turn {t}: unstored reordered"
                )
                assert_valid_sequence(out)
                kept_whole += out == live
                appended += (
                    bool(unstored) and out != live
                )  # stored part compacted, unstored ones appended
                # the host reads these after compress: an unchanged list is reported, not a silent no-op
                assert engine._last_compress_aborted is (out == live and bool(unstored))
                if engine._last_compress_aborted:
                    assert "none was dropped" in engine._last_summary_error
                if out != live:
                    engine.on_session_start(
                        "s1", boundary_reason="compression", old_session_id="s1", platform="cli"
                    )
                live = list(out)
            failures = engine.get_status()["store_write_failures"]
            if phase == "filling" and failures:
                phase = "full"
                disk.fill(engine, 0)
            elif phase == "full":
                full_turns += 1
                if full_turns == 25:
                    phase = "freed"
                    disk.free(engine)
                    freed_at = len(sent)
            elif phase == "freed" and len(sent) > freed_at + 60:
                break
            assert t < 2000, f"the disk never filled (phase {phase})"
        engine.on_session_end("s1", list(live))
        status = engine.get_status()
        print(
            f"sent {len(sent)}, failures {status['store_write_failures']}, compress calls {compress_calls}, "
            f"kept whole {kept_whole}, unstored appended {appended}, "
            f"payload failures {status['payload_write_failures']}, "
            f"last failure {status['last_store_write_failure']}"
        )
        assert status["store_write_failures"] > 0 and status["last_store_write_failure"]
        assert status["unstored_messages"] == 0
        stored = stored_markers(db)
        assert stored == sent, (
            f"{len(set(sent) - set(stored))} of {len(sent)} messages lost; "
            f"{len(stored) - len(set(stored))} stored twice"
        )
        assert compress_calls >= 5 and kept_whole >= 1
        # A disk that fills lets a compaction reuse the pages it frees while new rows are refused,
        # so stored messages are compacted with the unstored ones appended; a server that refuses
        # every write publishes nothing while any wait, so there that can only happen by the
        # timing of the turn the writes come back (not asserted).
        assert appended >= 1 or isinstance(disk, RefusingServer)
        assert publication_problems(db) == []
        if replies == "prepared":
            view = engine.core.preparer.view()
            print(f"preparer: {view}")
            assert view["runs"] > 0 and view["published"] > 0, view
            # its failed writes are recorded where status shows them, none reached the host
            assert any(("disk full" in e or "read-only" in e) for e in view["job_errors"]), view


@pytest.mark.both_backends
def test_a_failed_payload_write_keeps_the_message_inline_and_recognises_it_later(
    tmp_path, backend_env
):
    engine = new_engine(tmp_path, threshold=10**9, **backend_env)
    backends.refuse_payloads(
        engine.core.store
    )  # every payload write fails (the directory, or the server's disk_full)
    rng = random.Random(5)
    first = [
        {"role": "user", "content": f"mk:1 look {_payload(rng)}"},
        {"role": "assistant", "content": "mk:2 seen"},
    ]
    engine.ingest_host(list(first))
    assert engine.get_status()["payload_write_failures"] >= 1
    backends.allow_payloads(engine.core.store)
    # A restarted engine sees the list afresh (alignment alone decides); the payload write now works.
    again = new_engine(tmp_path, threshold=10**9, **backend_env)
    again.ingest_host([*first, {"role": "user", "content": "mk:3 and now?"}])
    stored = again.core.store.messages_after(again.core.binding.conversation_id, 0)
    assert [m.content[:4] for m in stored] == ["mk:1", "mk:2", "mk:3"]
    assert "base64," in stored[0].content  # kept inline: its payload file could not be written
    assert again.get_status()["payload_write_failures"] == 0

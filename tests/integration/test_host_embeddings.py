"""Embeddings inside the real Hermes host: the job after each reply embeds what was stored
(an OpenAI-compatible embeddings stub on 127.0.0.1 beside the chat stub), and a provider that
hangs for seconds never holds a turn: a turn ends while an embedding request is still open."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from ..embedstub import Stub, openai_ok, serve
from .harness import make_home, require_host, run_host
from .stub_llm import StubLLM

pytestmark = pytest.mark.host

HANG_SECONDS = 6.0


def turns(n: int) -> list[str]:
    return [
        f"turn {i}: the parser ledger for shard {i} moved to the replica, note it" for i in range(n)
    ]


def embed_env(embed: Stub) -> dict[str, str]:
    return {
        "LCM_EMBEDDINGS_ENABLED": "true",
        "LCM_EMBEDDING_PROVIDER": "openai",
        "LCM_EMBEDDING_BASE_URL": embed.base_url + "/v1",
        "LCM_EMBEDDING_API_KEY": "sk-embed-stub-key-0000",
    }


def run(tmp: Path, embed: Stub, n: int) -> tuple[Any, Path]:
    with StubLLM(context_length=64_000) as chat:
        hh = make_home(tmp, chat, env=embed_env(embed))
        result = run_host(hh, turns(n), timeout=200)
    assert all(t["completed"] and not t["failed"] for t in result.report["turns"]), (
        result.describe()
    )
    return result, hh.home / "lcm.db"


def unembedded(db: Path) -> tuple[list[int], int]:
    """Ids of stored messages without a vector, and the id of the last turn's user message."""
    with sqlite3.connect(db) as conn:
        missing = [
            r[0]
            for r in conn.execute(
                "SELECT m.id FROM messages m WHERE trim(m.content) != '' AND NOT EXISTS "
                "(SELECT 1 FROM vectors v WHERE v.kind='m' AND v.item_id=m.id) ORDER BY m.id"
            )
        ]
        last_user = conn.execute("SELECT max(id) FROM messages WHERE role='user'").fetchone()[0]
    return missing, int(last_user)


def test_the_job_embeds_what_each_turn_stored(tmp_path: Path) -> None:
    require_host()
    embed, close = serve()
    try:
        _, db = run(tmp_path, embed, 5)
    finally:
        close()
    missing, last_user = unembedded(db)
    # Each reply requested the job; only what the last turn stored may still wait (the process ended).
    assert all(i >= last_user for i in missing), (missing, last_user)
    sent = [t for _, body, _ in embed.requests for t in body["input"]]
    assert any("turn 0:" in t for t in sent) and any("turn 3:" in t for t in sent)
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM vectors").fetchone()[0] >= 8


def test_a_hanging_provider_never_holds_a_turn(tmp_path: Path) -> None:
    require_host()
    embed, close = serve()
    embed.answer = lambda r, p: (*openai_ok(r, p)[:2], HANG_SECONDS)
    try:
        hanging, _ = run(tmp_path / "hang", embed, 4)
        answered = {r: a for r, a in embed.spans}
        windows = [
            (r, answered.get(r, float("inf"))) for r in embed.received
        ]  # inf: open when the host exited
    finally:
        close()
    assert windows, "the job never called the provider"
    ended = [t["ended_at"] for t in hanging.report["turns"]]
    # A turn ended while an embedding request was open: it did not wait for the provider.
    assert any(r < e < a for e in ended for r, a in windows), (ended, windows)
    answering, close = serve()
    try:
        fast, _ = run(tmp_path / "fast", answering, 4)
    finally:
        close()
    slow_turns = sum(t["seconds"] for t in hanging.report["turns"])
    fast_turns = sum(t["seconds"] for t in fast.report["turns"])
    print(
        f"turn seconds, 4 turns: provider hanging {HANG_SECONDS}s: {slow_turns:.2f}; answering: {fast_turns:.2f}"
    )

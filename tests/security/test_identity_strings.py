"""Any id the host can send is stored: a session id (or key, or platform) holding a lone surrogate,
which no UTF-8 encoder accepts, binds, stores its messages and stays apart from its neighbours."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from hermes_lcm import store as store_module

from ..conftest import new_engine


def test_a_session_id_with_a_lone_surrogate_stores_its_turns(tmp_path: Path) -> None:
    engine = new_engine(tmp_path, session="plain")
    ids = [
        "tg:\ud800chat",
        "tg:\udfffchat",
        "tg:\\ud800chat",
    ]  # two lone surrogates and the text of one
    for i, sid in enumerate(ids):
        engine.on_session_start(sid, platform="tele\udcffgram", conversation_id=f"key-\ud83d{i}")
        stored = engine.ingest_host(
            [
                {"role": "user", "content": f"hello from {i}"},
                {"role": "assistant", "content": f"hi {i}"},
            ]
        )
        assert stored == 2, (sid, engine.get_status().get("engine_errors"))
    assert engine.get_status()["engine_errors"] == []
    con = sqlite3.connect(tmp_path / "lcm.db")
    try:
        sessions = [
            r[0]
            for r in con.execute(
                "SELECT DISTINCT k.name FROM messages m JOIN session_keys k "
                "ON k.id = m.session_key ORDER BY m.id"
            )
        ]
        conversations = con.execute(
            "SELECT count(DISTINCT conversation_id) FROM messages"
        ).fetchone()[0]
    finally:
        con.close()
    assert len(sessions) == 3 and len(set(sessions)) == 3 and conversations == 3, sessions
    assert (
        sessions[2] == "tg:\\ud800chat" and sessions[0] != sessions[2]
    )  # escaped ids never collide
    store_module.close_all()

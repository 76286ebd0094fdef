"""storage/vectors.py on real SQLite files and on PostgreSQL (storage/pg/families.py): the tables
appear only when enabled, round trips, models kept apart, no vector outlives (or disagrees with)
its row, and ``unembedded`` is an index walk that leaves LCM's own tool traffic out."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from hermes_lcm import store as store_module
from hermes_lcm.base.records import MessageIn, NewNode
from hermes_lcm.base.vectors import decode, encode
from hermes_lcm.storage.vectors import KINDS, unembedded_sql
from hermes_lcm.store import Store, StoreFault, open_readonly, open_store

from .backends import table_names

pytestmark = pytest.mark.both_backends


@pytest.fixture
def where(tmp_path: Path, backend: str) -> str:
    """The database's path or URL (a fresh schema of the test server)."""
    if backend == "postgres":
        from .pgserver import fresh_url

        return fresh_url()
    return str(tmp_path / "lcm.db")


@pytest.fixture
def db(where: str):
    store = open_store(where)
    yield store
    store_module.close_all()


def message(
    content: str,
    *,
    role: str = "user",
    tool_calls: list | None = None,
    tool_name: str | None = None,
    n: int = 0,
) -> MessageIn:
    calls = json.dumps(tool_calls) if tool_calls else None
    return MessageIn(
        role,
        content,
        None,
        calls,
        "c1" if tool_name else None,
        tool_name,
        None,
        3,
        f"fp{n}-{content}",
    )


def add(store: Store, conversation: int, records: list[MessageIn]) -> list[int]:
    return store.append(conversation, "s1", "cli", lambda _prints: records)


def call(name: str, arguments: str) -> dict:
    return {"id": "c1", "type": "function", "function": {"name": name, "arguments": arguments}}


def vec_rows(
    ids: list[int], dim: int, dtype: str, seed: int = 0
) -> tuple[np.ndarray, list[tuple[int, bytes, float]]]:
    matrix = np.random.default_rng(seed).normal(size=(len(ids), dim)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix, [(i, *encode(row, dtype)) for i, row in zip(ids, matrix, strict=True)]


def test_no_vector_tables_until_enabled(where: str, db: Store, backend: str) -> None:
    """The schema migration never creates them: a database without embeddings carries nothing."""
    names = table_names(where)
    assert not {n for n in names if "vector" in n}
    assert not db.has_vector_tables() and db.vector_stats() == {}
    assert db.load_vectors(1, "m") == ([], [], [])
    with pytest.raises(StoreFault, match="ensure_vector_tables"):
        db.vector_model("local:x", 8, "int8")
    db.ensure_vector_tables()
    db.ensure_vector_tables()  # idempotent
    names = table_names(where)
    assert {"vector_models", "vectors", "vectors_message_ad", "vectors_summary_au"} <= names
    if backend == "sqlite":
        assert db.missing_triggers() == []  # doctor's trigger check is unaffected


@pytest.mark.parametrize("dtype", ["float32", "int8"])
def test_round_trip_on_a_real_file_and_across_reopen(where: str, db: Store, dtype: str) -> None:
    conv = db.ensure_conversation("k")
    ids = add(db, conv, [message(f"hello {i}", n=i) for i in range(5)])
    db.ensure_vector_tables()
    model = db.vector_model("openai:text-embedding-3-small", 16, dtype)
    assert db.vector_model("openai:text-embedding-3-small", 16, dtype) == model
    matrix, rows = vec_rows(ids, 16, dtype)
    assert db.put_vectors(model, "m", rows) == 5
    store_module.close_all()
    again = open_readonly(where)
    got_ids, blobs, scales = again.load_vectors(model, "m")
    again.close()
    assert got_ids == ids
    back = decode(blobs, scales, 16, dtype)
    np.testing.assert_allclose(back, matrix, atol=0 if dtype == "float32" else 0.01)


def test_model_change_keeps_the_old_models_vectors_apart(db: Store) -> None:
    conv = db.ensure_conversation("k")
    ids = add(db, conv, [message(f"m{i}", n=i) for i in range(4)])
    db.ensure_vector_tables()
    old = db.vector_model("local:all-minilm-l6-v2-int8", 8, "float32")
    new = db.vector_model("openai:text-embedding-3-small", 8, "float32")
    narrower = db.vector_model("openai:text-embedding-3-small", 4, "float32")
    int8 = db.vector_model("openai:text-embedding-3-small", 8, "int8")
    assert len({old, new, narrower, int8}) == 4
    db.put_vectors(old, "m", vec_rows(ids, 8, "float32")[1])
    assert db.load_vectors(new, "m") == ([], [], [])
    assert [i for i, _ in db.unembedded(new, "m", 0, 10)] == ids
    assert db.unembedded(old, "m", 0, 10) == []
    db.put_vectors(new, "m", vec_rows(ids[:2], 8, "float32", seed=1)[1])
    assert db.load_vectors(old, "m")[0] == ids and db.load_vectors(new, "m")[0] == ids[:2]
    stats = {(m["name"], m["dim"], m["dtype"]): m for m in db.vector_stats()["models"]}
    assert stats[("local:all-minilm-l6-v2-int8", 8, "float32")]["messages"] == 4
    assert stats[("openai:text-embedding-3-small", 8, "float32")]["blob_bytes"] == 2 * 32


def test_upsert_replaces_and_kinds_are_apart(db: Store) -> None:
    conv = db.ensure_conversation("k")
    ids = add(db, conv, [message("a", n=1)])
    node = db.add_summary(
        NewNode(
            conv,
            "s1",
            0,
            "a summary",
            3,
            1,
            1,
            0.0,
            0.0,
            3,
            "normal",
            "test",
            message_ids=tuple(ids),
        )
    )
    db.ensure_vector_tables()
    model = db.vector_model("m", 4, "float32")
    db.put_vectors(model, "m", [(ids[0], *encode(np.array([1, 0, 0, 0.0]), "float32"))])
    db.put_vectors(model, "m", [(ids[0], *encode(np.array([0, 1, 0, 0.0]), "float32"))])
    db.put_vectors(model, "s", [(node, *encode(np.array([0, 0, 1, 0.0]), "float32"))])
    _, blobs, scales = db.load_vectors(model, "m")
    assert decode(blobs, scales, 4, "float32").tolist() == [[0, 1, 0, 0]]
    assert db.load_vectors(model, "s")[0] == [node]
    assert (
        db.put_vectors(model, "m", [(ids[0] + 999, *encode(np.ones(4), "float32"))]) == 0
    )  # no such row
    with pytest.raises(StoreFault):
        db.put_vectors(model, "x", [(ids[0], b"", 1.0)])


def test_load_by_conversation(db: Store) -> None:
    one, two = db.ensure_conversation("a"), db.ensure_conversation("b")
    a = add(db, one, [message(f"a{i}", n=i) for i in range(3)])
    b = add(db, two, [message(f"b{i}", n=i) for i in range(2)])
    db.ensure_vector_tables()
    model = db.vector_model("m", 4, "int8")
    db.put_vectors(model, "m", vec_rows(a + b, 4, "int8")[1])
    assert db.load_vectors(model, "m", [two])[0] == b
    assert db.load_vectors(model, "m", [one, two])[0] == a + b
    assert db.load_vectors(model, "m", [])[0] == []


def test_deleted_and_rewritten_rows_lose_their_vectors(db: Store, backend: str) -> None:
    """doctor's clean (delete_conversations) and lcm redact (rewrite_message/rewrite_text) go
    through triggers: no vector lingers for a row that is gone, none disagrees with its text."""
    keep, drop = db.ensure_conversation("keep"), db.ensure_conversation("drop")
    kept = add(db, keep, [message(f"k{i}", n=i) for i in range(3)])
    gone = add(db, drop, [message(f"d{i}", n=i) for i in range(3)])
    node = db.add_summary(
        NewNode(
            drop,
            "s1",
            0,
            "dropped summary",
            3,
            1,
            3,
            0.0,
            0.0,
            3,
            "normal",
            "t",
            message_ids=tuple(gone),
        )
    )
    kept_node = db.add_summary(
        NewNode(
            keep,
            "s1",
            0,
            "kept summary",
            3,
            1,
            3,
            0.0,
            0.0,
            3,
            "normal",
            "t",
            message_ids=tuple(kept),
        )
    )
    db.ensure_vector_tables()
    models = [db.vector_model("a", 4, "float32"), db.vector_model("b", 4, "int8")]
    for model in models:
        db.put_vectors(model, "m", vec_rows(kept + gone, 4, "float32")[1])
        db.put_vectors(model, "s", vec_rows([node, kept_node], 4, "float32")[1])
    db.delete_conversations([drop])
    for model in models:
        assert db.load_vectors(model, "m")[0] == kept
        assert db.load_vectors(model, "s")[0] == [kept_node]
    with db.write() as w:
        db.rewrite_message(
            kept[1],
            {
                "content": "k1 [lcm-redacted:password_assignment]",
                "parts": None,
                "tool_calls": None,
                "extra": None,
                "tokens": 3,
                "fingerprint": "new",
            },
        )
        if backend == "sqlite":
            db.rewrite_text("summaries", kept_node, "rewritten")
        else:  # rewrite_text's FTS5 upkeep is SQLite's; the trigger under test fires on any update
            w.execute("UPDATE summaries SET content=? WHERE id=?", ("rewritten", kept_node))
    for model in models:
        assert db.load_vectors(model, "m")[0] == [kept[0], kept[2]]
        assert db.load_vectors(model, "s")[0] == []
        assert db.unembedded(model, "m", 0, 10) == [
            (kept[1], "k1 [lcm-redacted:password_assignment]")
        ]
        assert db.unembedded(model, "s", 0, 10) == [(kept_node, "rewritten")]


def test_unembedded_text_skips_own_tools_and_pages(db: Store) -> None:
    conv = db.ensure_conversation("k")
    ids = add(
        db,
        conv,
        [
            message("find the deploy notes", n=1),
            message(
                "", role="assistant", tool_calls=[call("lcm_grep", '{"query": "deploy"}')], n=2
            ),
            message("[lcm results]", role="tool", tool_name="lcm_grep", n=3),
            message(
                "checking",
                role="assistant",
                tool_calls=[call("terminal", '{"command": "ls /srv"}')],
                n=4,
            ),
            message("app.yml", role="tool", tool_name="terminal", n=5),
            message("   ", n=6),
            message("second page", n=7),
        ],
    )
    db.ensure_vector_tables()
    model = db.vector_model("m", 4, "float32")
    first = db.unembedded(model, "m", 0, 3)
    assert first == [
        (ids[0], "find the deploy notes"),
        (ids[3], 'checking\nterminal {"command": "ls /srv"}'),
        (ids[4], "app.yml"),
    ]
    assert db.unembedded(model, "m", first[-1][0], 3) == [(ids[6], "second page")]
    db.put_vectors(model, "m", vec_rows([ids[0], ids[4]], 4, "float32")[1])
    assert [i for i, _ in db.unembedded(model, "m", 0, 10)] == [ids[3], ids[6]]


def test_unembedded_is_an_index_walk(db: Store, backend: str) -> None:
    """At 1M rows each batch must seek, not scan: messages by primary key from the cursor, the
    vectors by their unique index."""
    if backend == "postgres":
        pytest.skip("SQLite's query plan; PostgreSQL's planner picks by its statistics")
    db.ensure_vector_tables()
    for kind in KINDS:
        plan = " | ".join(
            r[3] for r in db.conn.execute("EXPLAIN QUERY PLAN " + unembedded_sql(kind), (0, 1, 10))
        )
        assert "SEARCH m USING INTEGER PRIMARY KEY (rowid>?)" in plan, plan
        assert "SEARCH v USING COVERING INDEX sqlite_autoindex_vectors_1" in plan, plan
        assert "SCAN m" not in plan and "SCAN v" not in plan, plan

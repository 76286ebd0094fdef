"""The optional families on PostgreSQL (storage/pg/families.py), against the real test server:
nearest neighbours in SQL with pgvector are the exact cosine order the in-memory index would give,
a second tenant reaches the extension installed by the first, a server where pgvector cannot be
created keeps the blob path and says why, and the assertion quote trigger refuses a forged
citation without aborting the rows around it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import quote
from uuid import uuid4

import numpy as np
import pytest

from hermes_lcm import store as store_module
from hermes_lcm.base.records import MessageIn
from hermes_lcm.base.vectors import VectorIndex, decode, encode
from hermes_lcm.embed.semantic import StoredIndex
from hermes_lcm.store import Store, StoreFault, open_store

psycopg = pytest.importorskip("psycopg")
from .pgserver import fresh_url, server  # noqa: E402


@pytest.fixture(autouse=True)
def _close() -> Iterator[None]:
    yield
    store_module.close_all()


def with_messages(store: Store, count: int, conversation: str = "k") -> list[int]:
    conv = store.ensure_conversation(conversation)
    records = [
        MessageIn("user", f"row {i}", None, None, None, None, None, 3, f"fp{i}")
        for i in range(count)
    ]
    return store.append(conv, "s1", "cli", lambda _prints: records)


def stored(
    store: Store, ids: list[int], dim: int, dtype: str, seed: int = 0
) -> tuple[int, np.ndarray]:
    matrix = np.random.default_rng(seed).normal(size=(len(ids), dim)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    store.ensure_vector_tables()
    model = store.vector_model("test:model", dim, dtype)
    assert store.put_vectors(
        model, "m", [(i, *encode(row, dtype)) for i, row in zip(ids, matrix, strict=True)]
    ) == len(ids)
    _, blobs, scales = store.load_vectors(model, "m")
    return model, decode(blobs, scales, dim, dtype)


@pytest.mark.parametrize("dtype", ["float32", "int8"])
def test_sql_nearest_neighbours_are_the_exact_cosine_order(dtype: str) -> None:
    store = open_store(fresh_url())
    ids = with_messages(store, 400)
    model, rows = stored(store, ids, 24, dtype)
    assert store.vector_knn_native()
    query = np.random.default_rng(7).normal(size=24).astype(np.float32)
    query /= np.linalg.norm(query)
    got = store.nearest_vectors(model, "m", query, 10)
    cosines = rows @ query / np.linalg.norm(rows, axis=1)
    want = [ids[i] for i in np.argsort(-cosines)[:10]]
    assert [i for i, _ in got] == want
    np.testing.assert_allclose([c for _, c in got], np.sort(cosines)[::-1][:10], atol=1e-5)
    memory = VectorIndex(np.asarray(ids), rows, dtype).search(query, 10, multiplier=100)
    assert [i for i, _ in memory] == want  # the same answer the SQLite path's index gives
    subset = ids[::37]
    inside = store.nearest_vectors(model, "m", query, 5, allowed=subset)
    assert {i for i, _ in inside} <= set(subset) and len(inside) == 5
    assert store.nearest_vectors(model, "m", np.zeros(24, np.float32), 5) == []
    assert store.nearest_vectors(model, "s", query, 5) == []  # the other kind holds nothing
    stats = store.vector_stats()
    assert stats["knn"].startswith("pgvector") and stats["table_bytes"] > 0


def test_stored_index_is_what_the_arm_searches() -> None:
    store = open_store(fresh_url())
    ids = with_messages(store, 50)
    model, _ = stored(store, ids, 8, "float32")
    index = StoredIndex(store, model, "m", 8, 50)
    query = np.ones(8, np.float32) / np.sqrt(8)
    assert len(index) == 50 and len(index.search(query, 7)) == 7
    assert index.search(query, 7, allowed=np.asarray([], dtype=np.int64)) == []
    assert [i for i, _ in index.search(query, 3, allowed=np.asarray(ids[:2]))] in (
        ids[:2],
        ids[1::-1],
    )


def test_a_second_tenant_reaches_the_extension_the_first_installed() -> None:
    first, second = open_store(fresh_url()), open_store(fresh_url())
    for store in (first, second):
        ids = with_messages(store, 20)
        model, _ = stored(store, ids, 8, "float32")
        assert store.vector_knn_native()
        assert len(store.nearest_vectors(model, "m", np.ones(8, np.float32), 3)) == 3


def _unprivileged_url() -> str:
    """A database owned by a role that may not create the (untrusted) vector extension."""
    srv = server()
    name = "nv_" + uuid4().hex[:12]
    with psycopg.connect(srv.url(), autocommit=True) as pg:
        pg.execute(f"CREATE ROLE {name} LOGIN")
        pg.execute(f"CREATE DATABASE {name} OWNER {name}")
    return (
        f"postgresql://{name}@127.0.0.1:{srv.port}/{name}?options={quote('-csearch_path=public')}"
    )


def test_without_pgvector_the_blob_path_serves_and_status_says_why() -> None:
    store: Any = open_store(_unprivileged_url())
    ids = with_messages(store, 30)
    model, rows = stored(store, ids, 8, "int8")
    assert not store.vector_knn_native()
    assert "pgvector unavailable" in store.vector_stats()["knn"]
    assert "permission denied" in store.vector_stats()["knn"]
    assert (
        store.load_vectors(model, "m")[0] == ids
    )  # the in-memory index loads the blobs as on SQLite
    assert store.nearest_vectors(model, "m", rows[0], 3) == []
    store.ensure_vector_tables()  # a second try refuses again, still without failing
    assert not store.vector_knn_native()


def test_a_forged_quote_is_refused_and_the_rest_of_the_batch_is_kept() -> None:
    store = open_store(fresh_url())
    ids = with_messages(store, 2)
    conv = store.ensure_conversation("k")
    store.ensure_assertion_tables()
    good = {
        "conversation_id": conv,
        "store_id": ids[0],
        "subject": "row",
        "kind": "state",
        "value": "0",
        "valid_from": 1.0,
        "span_start": 0,
        "span_end": 3,
        "quote": "row",
    }
    forged = {**good, "store_id": ids[1], "quote": "wow"}
    other = {**good, "store_id": ids[1], "span_start": 4, "span_end": 5, "quote": "1", "value": "1"}
    assert store.put_assertions([good, forged, other], cursor=ids[1]) == 2
    assert store.assertion_cursor() == ids[1]
    assert (
        store.clear_assertions("llm") == 0
        and len(store.assertions_for([conv], "", "state", 2.0, 10)) == 2
    )
    assert sorted(r["quote"] for r in store.assertions_for(None, "row", "", None, 10)) == [
        "1",
        "row",
    ]
    with pytest.raises(StoreFault, match="quote is not its source text"), store.write() as db:
        db.execute(
            "INSERT INTO assertions(conversation_id, store_id, subject, kind, value, valid_from, span_start, "
            "span_end, quote, extractor, created_at) VALUES (?, ?, 'x', 'state', 'v', 1, 0, 3, 'wow', "
            "'rules', 1)",
            (conv, ids[1]),
        )
    store.delete_conversations([conv])
    assert store.assertions_for(None, "", "", None, 10) == []


def test_a_server_gone_mid_search_gives_no_vector_hits_not_an_error() -> None:
    store = open_store(fresh_url())
    ids = with_messages(store, 10)
    model, _ = stored(store, ids, 8, "float32")
    index = StoredIndex(store, model, "m", 8, 10)
    query = np.ones(8, np.float32)
    assert len(index.search(query, 3)) == 3
    store.close()  # the pool is gone: every call fails from now on
    assert index.search(query, 3) == [] and index.failures == 1 and index.last_error

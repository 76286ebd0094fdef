"""pgvector's approximate index on PostgreSQL (storage/pg/families.py), against the real test server:
a model's first vectors give it an HNSW index of its own dimension, the nearest-neighbour query is
one the planner answers from that index, its top-10 stays within 0.95 of the exact one, a scope
filter never lets another owner's rows in and never comes back short while the scope holds enough
rows, and two writers creating the same index at once both succeed."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from hermes_lcm import store as store_module
from hermes_lcm.base.records import MessageIn
from hermes_lcm.base.vectors import encode
from hermes_lcm.store import Store, open_store

from .backends import raw_sql

psycopg = pytest.importorskip("psycopg")
from hermes_lcm.storage.pg.families import hnsw_candidates_sql  # noqa: E402

from .pgserver import fresh_url  # noqa: E402

DIM = 64


@pytest.fixture(autouse=True)
def _close() -> Iterator[None]:
    yield
    store_module.close_all()


def messages(store: Store, count: int, conversation: str) -> list[int]:
    conv = store.ensure_conversation(conversation)
    records = [
        MessageIn(
            "user", f"{conversation} {i}", None, None, None, None, None, 3, f"{conversation}{i}"
        )
        for i in range(count)
    ]
    return store.append(conv, "s1", "cli", lambda _prints: records)


def unit(rows: int, dim: int, seed: int) -> np.ndarray:
    matrix = np.random.default_rng(seed).normal(size=(rows, dim)).astype(np.float32)
    return matrix / np.linalg.norm(matrix, axis=1, keepdims=True)


def put(store: Store, name: str, ids: list[int], matrix: np.ndarray) -> int:
    store.ensure_vector_tables()
    model = store.vector_model(name, matrix.shape[1], "float32")
    for start in range(0, len(ids), 1000):
        chunk = zip(ids[start : start + 1000], matrix[start : start + 1000], strict=True)
        store.put_vectors(model, "m", [(i, *encode(row, "float32")) for i, row in chunk])
    return model


def indexes(url: str) -> dict[str, str]:
    return {
        str(r[0]): str(r[1])
        for r in raw_sql(
            url,
            "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = current_schema() "
            "AND tablename = 'vectors' AND position('hnsw' in indexdef) > 0",
        )
    }


def exact(
    ids: list[int], matrix: np.ndarray, query: np.ndarray, k: int, keep: set[int] | None = None
) -> list[int]:
    order = np.argsort(-(matrix @ query), kind="stable")
    return [ids[i] for i in order if keep is None or ids[i] in keep][:k]


def unindexed(
    rows: int, seed: int, stored: int | None = None
) -> tuple[str, Any, list[int], np.ndarray, int]:
    """A fresh schema with ``rows`` messages, vectors for the first ``stored`` of them, and no HNSW
    index (dropped: as left by a refusal, an operator or a database from before the index)."""
    url = fresh_url()
    store: Any = open_store(url)
    ids = messages(store, rows, "c")
    matrix = unit(rows, DIM, seed)
    model = put(store, "test:model", ids[:stored], matrix[:stored])
    for name in indexes(url):
        raw_sql(url, f"DROP INDEX {name}")
    return url, store, ids, matrix, model


@pytest.fixture(scope="module")
def fleet() -> Iterator[dict[str, Any]]:
    """3,000 vectors of one owner's conversation and 60 of a second owner's, analyzed (the planner
    and the store's size estimate see the table as it is)."""
    url = fresh_url()
    store = open_store(url)
    ids = messages(store, 3000, "big") + messages(store, 60, "small")
    matrix = unit(len(ids), DIM, 1)
    model = put(store, "test:model", ids, matrix)
    raw_sql(url, "ANALYZE vectors")
    yield {
        "url": url,
        "ids": ids,
        "matrix": matrix,
        "model": model,
        "big": ids[:3000],
        "small": ids[3000:],
    }
    store.close()


def test_first_vectors_of_a_model_create_its_hnsw_index(fleet: dict[str, Any]) -> None:
    found = indexes(fleet["url"])
    assert len(found) == 1, found
    (definition,) = found.values()
    assert "vector(64)" in definition and "vector_cosine_ops" in definition
    assert f"model_id = {fleet['model']}" in definition and "'m'" in definition


def test_the_knn_query_is_answered_from_the_index(fleet: dict[str, Any]) -> None:
    schema = str(
        raw_sql(
            fleet["url"],
            "SELECT extnamespace::regnamespace::text FROM pg_extension WHERE extname = 'vector'",
        )[0][0]
    )
    sql = hnsw_candidates_sql(schema, fleet["model"], "m", DIM).replace("?", "%s")
    query = "[" + ",".join(["0.125"] * DIM) + "]"
    plan = "\n".join(str(r[0]) for r in raw_sql(fleet["url"], "EXPLAIN " + sql, (query, query, 40)))
    name = next(iter(indexes(fleet["url"])))
    assert f"Index Scan using {name}" in plan, plan


def test_recall_at_10_against_the_exact_answer(fleet: dict[str, Any]) -> None:
    store: Any = open_store(fleet["url"])
    queries = unit(40, DIM, 2)
    hits = 0
    for q in queries:
        got = [i for i, _ in store.nearest_vectors(fleet["model"], "m", q, 10)]
        assert len(got) == 10
        hits += len(set(got) & set(exact(fleet["ids"], fleet["matrix"], q, 10)))
    assert hits / (10 * len(queries)) >= 0.95
    assert store.vector_stats()["knn_queries"]["hnsw"] == len(
        queries
    )  # the index answered, not the fallback


def test_a_small_scope_never_leaks_and_is_never_short(fleet: dict[str, Any]) -> None:
    store: Any = open_store(fleet["url"])
    small, big = set(fleet["small"]), set(fleet["big"])
    few = fleet["small"][:4]
    for q in unit(10, DIM, 3):
        got = [i for i, _ in store.nearest_vectors(fleet["model"], "m", q, 10, fleet["small"])]
        assert len(got) == 10 and set(got) <= small
        assert got == exact(fleet["ids"], fleet["matrix"], q, 10, small)
        only = [i for i, _ in store.nearest_vectors(fleet["model"], "m", q, 10, few)]
        assert sorted(only) == sorted(few)  # fewer in scope than k: all of them, nothing else
        wide = [i for i, _ in store.nearest_vectors(fleet["model"], "m", q, 10, fleet["big"])]
        assert len(wide) == 10 and set(wide) <= big


def test_a_scope_the_index_cannot_fill_falls_back_to_exact(fleet: dict[str, Any]) -> None:
    """Rows in scope that the index's candidates miss (a scope of far-away rows): the answer is the
    exact one, complete, and counted as a fallback."""
    store: Any = open_store(fleet["url"])
    q = unit(1, DIM, 4)[0]
    far = exact(fleet["ids"], fleet["matrix"], -q, 300, set(fleet["big"]))  # the rows least like q
    got = [i for i, _ in store.nearest_vectors(fleet["model"], "m", q, 10, far)]
    assert got == exact(fleet["ids"], fleet["matrix"], q, 10, set(far))
    assert store.vector_stats()["knn_queries"]["fallback"] == 1


def test_two_models_of_different_dimensions_get_an_index_each() -> None:
    url = fresh_url()
    store = open_store(url)
    ids = messages(store, 50, "c")
    first, second = (
        put(store, "a:small", ids, unit(50, 16, 5)),
        put(store, "b:large", ids, unit(50, 48, 6)),
    )
    found = indexes(url)
    assert len(found) == 2
    assert any("vector(16)" in d and f"model_id = {first}" in d for d in found.values())
    assert any("vector(48)" in d and f"model_id = {second}" in d for d in found.values())
    assert len(store.nearest_vectors(second, "m", unit(1, 48, 7)[0], 5)) == 5


def test_without_its_index_a_model_is_searched_exactly() -> None:
    url, store, ids, matrix, model = unindexed(1500, 8)
    raw_sql(url, "ANALYZE vectors")
    q = unit(1, DIM, 9)[0]
    assert [i for i, _ in store.nearest_vectors(model, "m", q, 10)] == exact(ids, matrix, q, 10)
    assert store.vector_stats()["knn_queries"] == {"hnsw": 0, "exact": 1, "fallback": 0}


def test_two_writers_creating_the_same_index_at_once_both_succeed() -> None:
    url = fresh_url()
    first, second = open_store(url), open_store(url)  # two hosts: two pools, one database
    ids = messages(first, 200, "c")
    first.ensure_vector_tables()
    model = first.vector_model("test:model", DIM, "float32")
    matrix = unit(200, DIM, 10)
    barrier, errors = threading.Barrier(2), []

    def write(store: Store, part: slice) -> None:
        try:
            barrier.wait()
            store.put_vectors(
                model,
                "m",
                [(i, *encode(r, "float32")) for i, r in zip(ids[part], matrix[part], strict=True)],
            )
        except Exception as exc:
            errors.append(exc)

    threads = [
        threading.Thread(target=write, args=(s, p))
        for s, p in ((first, slice(0, 100)), (second, slice(100, 200)))
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(indexes(url)) == 1
    assert raw_sql(url, "SELECT count(*) FROM vectors WHERE emb IS NOT NULL")[0][0] == 200


def test_a_model_with_vectors_is_never_indexed_inside_a_write() -> None:
    """Building over existing rows takes minutes under the fleet's write lock: a write to a model
    whose index is gone leaves it missing (and says so) instead of building it there."""
    url, store, ids, matrix, model = unindexed(1200, 11, stored=1100)
    store.put_vectors(
        model,
        "m",
        [(i, *encode(r, "float32")) for i, r in zip(ids[1100:], matrix[1100:], strict=True)],
    )
    assert indexes(url) == {}
    assert store.vector_stats()["indexes_missing"] == [f"vectors_hnsw_m{model}"]


def test_build_vector_indexes_builds_the_missing_one_while_another_host_holds_the_write_lock() -> (
    None
):
    url, store, ids, matrix, model = unindexed(1500, 12)
    with psycopg.connect(url, autocommit=True) as holder:  # another host, inside a write
        holder.execute("BEGIN")
        holder.execute("SELECT pg_advisory_xact_lock(%s, %s)", (0x6C636D00, 1))
        holder.execute("SET statement_timeout = '60s'")
        built = store.build_vector_indexes()
        holder.execute("COMMIT")
    assert built == [f"vectors_hnsw_m{model}"]
    assert raw_sql(
        url,
        "SELECT x.indisvalid FROM pg_index x WHERE x.indexrelid = "
        f"to_regclass('vectors_hnsw_m{model}')",
    ) == [(True,)]
    assert store.vector_stats()["indexes_missing"] == []
    assert store.build_vector_indexes() == []  # nothing left to build
    raw_sql(url, "ANALYZE vectors")
    q = unit(1, DIM, 13)[0]
    found = [i for i, _ in store.nearest_vectors(model, "m", q, 10)]
    assert len(set(found) & set(exact(ids, matrix, q, 10))) >= 9
    assert store.vector_stats()["knn_queries"]["hnsw"] == 1


def test_an_invalid_index_left_by_an_interrupted_build_is_rebuilt_and_never_searched() -> None:
    url = fresh_url()
    store: Any = open_store(url)
    ids = messages(store, 1500, "c")
    matrix = unit(1500, DIM, 14)
    model = put(store, "test:model", ids, matrix)
    name = f"vectors_hnsw_m{model}"
    raw_sql(url, f"UPDATE pg_index SET indisvalid = false WHERE indexrelid = to_regclass('{name}')")
    raw_sql(url, "ANALYZE vectors")
    q = unit(1, DIM, 15)[0]
    assert [i for i, _ in store.nearest_vectors(model, "m", q, 10)] == exact(ids, matrix, q, 10)
    assert store.vector_stats()["knn_queries"]["exact"] == 1
    assert store.vector_stats()["indexes_missing"] == [name]
    assert store.build_vector_indexes() == [name]
    assert raw_sql(
        url, f"SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass('{name}')"
    ) == [(True,)]

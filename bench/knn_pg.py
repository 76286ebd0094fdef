"""Vector search on PostgreSQL (pgvector, ``<=>`` in SQL) next to the SQLite path's in-memory index,
at 100k vectors of dim 384, in one process.

One command: ``.venv/bin/python bench/knn_pg.py [--size 100000] [--queries 50] [--seed 13]`` (needs the
``postgres`` extra and the dev ``pgserver`` wheel: it starts the tests' throwaway server).

The vectors are knn.py's seeded sentence-like ones. Both sides hold the same rows, written through the
store (``put_vectors``: the blob, and on PostgreSQL pgvector's copy); the messages they belong to are
inserted by SQL (the bench measures search, not ingest); the model's HNSW index is built over the first
95% (``build_vector_indexes``), so the rest's ``put_vectors`` includes keeping it. Per query,
interleaved: PostgreSQL's ``nearest_vectors`` as the vector arm runs it (the HNSW index), the same with
the index path switched off (``families.EXACT_BELOW`` raised: pgvector's exact scan, the fallback), the
same scoped to half the rows (the index over-fetches and filters), and, as the baseline,
``vectors.VectorIndex.search`` built from the same store's blobs (what the SQLite path searches).
Medians and p95 over the queries, recall@10 against the exact top-10 (scoped: of the scope), the ratios
of the medians; the store and its table bytes (``pg_total_relation_size``, index included).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / ".pyroot"))
sys.path.insert(0, str(ROOT))

from knn import exact_top, sentences  # noqa: E402

BATCH = 5000


def _ms(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return round(statistics.median(ordered), 2), round(ordered[int(0.95 * (len(ordered) - 1))], 2)


def run(size: int, queries: int, seed: int, dtype: str) -> dict[str, Any]:
    import psycopg

    from hermes_lcm.base.vectors import VectorIndex, decode, encode
    from hermes_lcm.storage.pg import families
    from hermes_lcm.store import open_store
    from tests.pgserver import fresh_url

    data = sentences(size + queries, seed)
    matrix, asked = data[:size], data[size:]
    truth = exact_top(matrix, asked, 10)
    url = fresh_url()
    store: Any = open_store(url)
    conv = store.ensure_conversation("bench")
    with psycopg.connect(url, autocommit=True) as pg:
        pg.execute(
            "INSERT INTO messages(id, conversation_id, seq, role, content, created_at, tokens, fingerprint) "
            "SELECT g, %s, g, 'user', 'm' || g, 0, 1, 'f' || g FROM generate_series(1, %s) g",
            (conv, size),
        )
    store.ensure_vector_tables()
    model = store.vector_model("bench:sentences", matrix.shape[1], dtype)
    # The first 95% without the index (as a database whose vectors predate it), then the build
    # ``lcm embed --apply`` runs for such a model (``build_vector_indexes``: CONCURRENTLY, outside
    # the write lock); then the rest, kept in the index row by row (what every later embedding
    # batch pays). One table build per run.
    bulk = size - size // 20
    cap, families.HNSW_MAX_DIM = families.HNSW_MAX_DIM, 0
    started = time.perf_counter()
    for start in range(0, bulk, BATCH):
        rows = [
            (start + i + 1, *encode(row, dtype))
            for i, row in enumerate(matrix[start : min(start + BATCH, bulk)])
        ]
        store.put_vectors(model, "m", rows)
    load_s = time.perf_counter() - started
    families.HNSW_MAX_DIM = cap
    store._hnsw()[0].clear()
    started = time.perf_counter()
    assert store.build_vector_indexes() == [families.hnsw_name(model, "m")]
    build_s = time.perf_counter() - started
    store.put_vectors(model, "m", [(bulk + 1, *encode(matrix[bulk], dtype))])
    started = time.perf_counter()
    for start in range(bulk + 1, size, 64):  # the backfill's batch (embedding_backfill_batch_size)
        store.put_vectors(
            model,
            "m",
            [
                (start + i + 1, *encode(row, dtype))
                for i, row in enumerate(matrix[start : min(start + 64, size)])
            ],
        )
    indexed_ms = (time.perf_counter() - started) * 1000 / max(size - bulk - 1, 1)
    with psycopg.connect(url, autocommit=True) as pg:
        pg.execute("VACUUM ANALYZE vectors")
    ids, blobs, scales = store.load_vectors(model, "m")
    index = VectorIndex(
        np.asarray(ids, dtype=np.int64), decode(blobs, scales, matrix.shape[1], dtype), dtype
    )
    half = list(range(1, size // 2 + 1))
    half_truth = exact_top(matrix[: size // 2], asked, 10)
    ms: dict[str, list[float]] = {"hnsw": [], "exact": [], "scoped": [], "memory": []}
    recall: dict[str, list[float]] = {key: [] for key in ms}
    below = families.EXACT_BELOW
    for q, want, want_half in zip(asked, truth, half_truth, strict=True):
        for key in ms:
            t = time.perf_counter()
            if key == "memory":
                got = index.search(q, 10)
            else:
                families.EXACT_BELOW = float("inf") if key == "exact" else below
                got = store.nearest_vectors(model, "m", q, 10, half if key == "scoped" else None)
            ms[key].append((time.perf_counter() - t) * 1000)
            recall[key].append(
                len({i - 1 for i, _ in got} & (want_half if key == "scoped" else want)) / 10
            )
    families.EXACT_BELOW = below
    stats = store.vector_stats()
    store.close()
    out: dict[str, Any] = {"size": size, "dtype": dtype}
    for key in ms:
        out[f"{key}_median_ms"], out[f"{key}_p95_ms"] = _ms(ms[key])
        out[f"{key}_recall_at_10"] = round(float(np.mean(recall[key])), 3)
    mem = out["memory_median_ms"]
    out.update(
        {
            "hnsw_vs_exact": round(out["exact_median_ms"] / out["hnsw_median_ms"], 1),
            "hnsw_vs_memory": round(out["hnsw_median_ms"] / mem, 2) if mem else None,
            "ef_search": families.EF_SEARCH,
            "put_vectors_ms_per_vector": round(load_s * 1000 / bulk, 2),
            "put_vectors_indexed_ms_per_vector": round(indexed_ms, 2),
            "index_build_s": round(build_s, 1),
            "knn": stats["knn"],
            "knn_queries": stats["knn_queries"],
            "table_bytes_per_vector": round(stats["table_bytes"] / size),
        }
    )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--dtypes", default="float32")
    args = parser.parse_args()
    runs = [run(args.size, args.queries, args.seed, dtype) for dtype in args.dtypes.split(",")]
    from common import print_table, save_result

    rows = [
        {
            "target": f"PostgreSQL top-10 at {r['size']:,} x 384 {r['dtype']} (pgvector HNSW)",
            "ours": f"median {r['hnsw_median_ms']} ms, recall@10 {r['hnsw_recall_at_10']}",
            "reference": f"exact scan {r['exact_median_ms']} ms ({r['hnsw_vs_exact']}x slower); in-memory index "
            f"(SQLite path) {r['memory_median_ms']} ms",
        }
        for r in runs
    ]
    print_table(rows)
    save_result("knn_pg", rows, {"runs": runs, "queries": args.queries, "seed": args.seed})


if __name__ == "__main__":
    main()

"""Vector search on PostgreSQL (pgvector, ``<=>`` in SQL) next to the SQLite path's in-memory index,
at 100k vectors of dim 384, in one process.

One command: ``.venv/bin/python bench/knn_pg.py [--size 100000] [--queries 50] [--seed 13]`` (needs the
``postgres`` extra and the dev ``pgserver`` wheel: it starts the tests' throwaway server).

The vectors are knn.py's seeded sentence-like ones. Both sides hold the same rows, written through
the store (``put_vectors``: the blob, and on PostgreSQL pgvector's copy); the messages they belong
to are inserted by SQL (the bench measures search, not ingest). Per query: PostgreSQL's
``nearest_vectors`` (the SQL the vector arm runs there: exact, no approximate index) and, as the
baseline, ``vectors.VectorIndex.search`` built from the same store's blobs (what the SQLite path
searches). Medians and p95 over the queries, recall@10 against the exact top-10, the ratio of the
medians; the store and its table bytes (``pg_total_relation_size``).
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

    from hermes_lcm.store import open_store
    from hermes_lcm.vectors import VectorIndex, decode, encode
    from tests.pgserver import fresh_url

    data = sentences(size + queries, seed)
    matrix, asked = data[:size], data[size:]
    truth = exact_top(matrix, asked, 10)
    url = fresh_url()
    store: Any = open_store(url)
    conv = store.ensure_conversation("bench")
    with psycopg.connect(url, autocommit=True) as pg:
        pg.execute("INSERT INTO messages(id, conversation_id, seq, role, content, created_at, tokens, fingerprint) "
                   "SELECT g, %s, g, 'user', 'm' || g, 0, 1, 'f' || g FROM generate_series(1, %s) g", (conv, size))
    store.ensure_vector_tables()
    model = store.vector_model("bench:sentences", matrix.shape[1], dtype)
    started = time.perf_counter()
    for start in range(0, size, BATCH):
        rows = [(start + i + 1, *encode(row, dtype)) for i, row in enumerate(matrix[start:start + BATCH])]
        store.put_vectors(model, "m", rows)
    load_s = time.perf_counter() - started
    with psycopg.connect(url, autocommit=True) as pg:
        pg.execute("VACUUM ANALYZE vectors")
    ids, blobs, scales = store.load_vectors(model, "m")
    index = VectorIndex(np.asarray(ids, dtype=np.int64), decode(blobs, scales, matrix.shape[1], dtype), dtype)
    pg_ms, mem_ms, pg_recall, mem_recall = [], [], [], []
    for q, want in zip(asked, truth, strict=True):
        t = time.perf_counter()
        got = store.nearest_vectors(model, "m", q, 10)
        pg_ms.append((time.perf_counter() - t) * 1000)
        t = time.perf_counter()
        mine = index.search(q, 10)
        mem_ms.append((time.perf_counter() - t) * 1000)
        pg_recall.append(len({i - 1 for i, _ in got} & want) / 10)
        mem_recall.append(len({i - 1 for i, _ in mine} & want) / 10)
    stats = store.vector_stats()
    store.close()
    pg_med, pg_p95 = _ms(pg_ms)
    mem_med, mem_p95 = _ms(mem_ms)
    return {"size": size, "dtype": dtype, "pg_median_ms": pg_med, "pg_p95_ms": pg_p95,
            "memory_median_ms": mem_med, "memory_p95_ms": mem_p95,
            "ratio": round(pg_med / mem_med, 1) if mem_med else None,
            "pg_recall_at_10": round(float(np.mean(pg_recall)), 3),
            "memory_recall_at_10": round(float(np.mean(mem_recall)), 3),
            "put_vectors_s": round(load_s, 1), "knn": stats["knn"],
            "table_bytes_per_vector": round(stats["table_bytes"] / size)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--dtypes", default="float32,int8")
    args = parser.parse_args()
    runs = [run(args.size, args.queries, args.seed, dtype) for dtype in args.dtypes.split(",")]
    from common import print_table, save_result

    rows = [{"target": f"PostgreSQL top-10 at {r['size']:,} x 384 {r['dtype']} (pgvector, exact)",
             "ours": f"median {r['pg_median_ms']} ms, recall@10 {r['pg_recall_at_10']}",
             "reference": f"in-memory index (SQLite path) {r['memory_median_ms']} ms, recall@10 "
                          f"{r['memory_recall_at_10']}; ratio {r['ratio']}x"} for r in runs]
    print_table(rows)
    save_result("knn_pg", rows, {"runs": runs, "queries": args.queries, "seed": args.seed})


if __name__ == "__main__":
    main()

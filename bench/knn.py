"""Vector search at 10k / 100k / 1M vectors of dim 384 (MiniLM's), float32 and int8.

One command: ``.venv/bin/python bench/knn.py [--sizes 10000,100000,1000000] [--queries 200] [--seed 13]``.

The vectors are synthetic and seeded, shaped like sentence embeddings: a direction every vector
shares (they are anisotropic), topics in a low-dimensional latent space with a spread inside each,
and a little isotropic noise, so a random pair sits near cosine 0.1 and a sentence's nearest
neighbours near 0.6-0.8. The queries are held-out vectors from the same topics.

Each size's data is made in a process of its own (``--prepare``): the vectors, the queries and
their exact top-10 (blocked float32 matmul), saved to a temporary folder. Each (size, dtype) is
then measured in a fresh child that imports only numpy and vectors.py and loads the matrix as the
search arm has it after decoding, so its RSS is python+numpy plus the index: it builds
``vectors.VectorIndex``, drops the matrix and returns the freed heap to the system
(``malloc_trim``; the figure before it is kept too), then reads VmRSS and VmHWM (/proc/self/status;
the peak is the build's, with the matrix still loaded), times ``search(q, 10)`` at the default
multiplier and reads VmRSS again: the target row takes the larger, the index in use. Recall@10
is against that exact search. Generating in the measured process, as this
benchmark once did, added ~12 MB that were not the index's (numpy.random and the libcrypto it
loads, the generator's and the exact search's heap leftovers). Sizes not given keep their saved
rows. Database bytes per vector: 10,000 messages with vectors through
``storage/vectors.py`` (float32, int8, and Matryoshka 256 x int8), the vectors table and its index
measured with dbstat. Targets: at 100k, median at most 15 ms, recall@10 at least 0.96,
RSS at most 200 MB.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import gc
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(
    0, str(ROOT / ".pyroot")
)  # this checkout's hermes_lcm (a worktree has .pyroot/hermes_lcm)

DIM = 384
TOPICS = 2000
LATENT = 64
TARGET_MS, TARGET_RECALL, TARGET_RSS_MB = 15.0, 0.96, 200.0


def sentences(n: int, seed: int, chunk: int = 8192) -> np.ndarray:
    """``n`` unit vectors of dim 384 shaped like sentence embeddings (see the module docstring)."""
    rng = np.random.default_rng(seed)
    common = rng.normal(size=DIM).astype(np.float32)
    common *= 3.5 / np.linalg.norm(common)
    basis = (rng.normal(size=(LATENT, DIM)) / np.sqrt(DIM)).astype(np.float32)
    centers = rng.normal(size=(TOPICS, LATENT)).astype(np.float32)
    out = np.empty((n, DIM), dtype=np.float32)
    for start in range(0, n, chunk):
        m = min(chunk, n - start)
        latent = centers[rng.integers(0, TOPICS, m)] + rng.normal(
            scale=0.75, size=(m, LATENT)
        ).astype(np.float32)
        rows = (
            common
            + latent @ basis
            + rng.normal(scale=0.6 / np.sqrt(DIM), size=(m, DIM)).astype(np.float32)
        )
        out[start : start + m] = rows / np.linalg.norm(rows, axis=1, keepdims=True)
    return out


def exact_top(
    matrix: np.ndarray, queries: np.ndarray, k: int, block: int = 100_000
) -> list[set[int]]:
    """The exact top-k row numbers of each query, by blocks so 1M rows never make a 1M x Q matrix."""
    best_s = np.full((len(queries), k), -np.inf, dtype=np.float32)
    best_i = np.zeros((len(queries), k), dtype=np.int64)
    for start in range(0, len(matrix), block):
        scores = queries @ matrix[start : start + block].T
        top = np.argpartition(-scores, k - 1, axis=1)[:, :k]
        cand_s = np.concatenate([best_s, np.take_along_axis(scores, top, axis=1)], axis=1)
        cand_i = np.concatenate([best_i, top + start], axis=1)
        keep = np.argpartition(-cand_s, k - 1, axis=1)[:, :k]
        best_s, best_i = (
            np.take_along_axis(cand_s, keep, axis=1),
            np.take_along_axis(cand_i, keep, axis=1),
        )
    return [set(row.tolist()) for row in best_i]


def status_mb(field: str) -> float:
    """A /proc/self/status size in MB (10^6 bytes; the kernel reports KiB)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024 / 1e6
    return float("nan")


def trim() -> None:
    """Give the heap's free pages back (glibc ``malloc_trim``): the generator's and the exact
    search's temporaries are the benchmark's, not the index's. A no-op elsewhere."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def prepare(size: int, queries: int, seed: int, folder: Path) -> None:
    """The data of one size, in a process of its own: the vectors, held-out queries, their exact
    top-10 and the cosine figures, saved to ``folder``. The generator (numpy.random, which loads
    libcrypto) and the exact search's blocks are the benchmark's, not the index's, so they never
    enter the measured process."""
    data = sentences(size + queries, seed)
    matrix, asked = data[:size], data[size:]
    truth = exact_top(matrix, asked, 10)
    near_scores = [np.sort(matrix[sorted(t)] @ q) for q, t in zip(asked, truth, strict=True)]
    pair = asked[:50] @ asked[:50].T
    np.save(folder / "matrix.npy", matrix)
    np.save(folder / "queries.npy", asked)
    np.save(folder / "truth.npy", np.array([sorted(t) for t in truth], dtype=np.int64))
    (folder / "cosines.json").write_text(
        json.dumps(
            {
                "random_pair_cosine": round(float(pair[np.triu_indices(50, 1)].mean()), 3),
                "nearest_cosine": round(float(np.median([s[-1] for s in near_scores])), 3),
                "tenth_cosine": round(float(np.median([s[0] for s in near_scores])), 3),
            }
        )
    )


def child(size: int, dtype: str, folder: Path) -> dict[str, Any]:
    """One (size, dtype) measured in this process (see the module docstring)."""
    from hermes_lcm.base.vectors import VectorIndex

    base_mb = status_mb("VmRSS")
    asked = np.load(folder / "queries.npy")
    truth = [set(row.tolist()) for row in np.load(folder / "truth.npy")]
    matrix = np.load(folder / "matrix.npy")  # as semantic.py has it: one decoded float32 matrix
    built = time.perf_counter()
    index = VectorIndex(np.arange(size, dtype=np.int64), matrix, dtype)
    build_s = time.perf_counter() - built
    del matrix
    gc.collect()
    untrimmed_mb = status_mb("VmRSS")
    trim()
    rss_mb = status_mb("VmRSS")
    times, hits = [], 0
    for query, exact in zip(asked, truth, strict=True):
        start = time.perf_counter()
        got = index.search(query, 10)
        times.append((time.perf_counter() - start) * 1000)
        hits += len(exact & {i for i, _ in got})
    return {
        "size": size,
        "dtype": dtype,
        "median_ms": round(float(np.median(times)), 2),
        "p95_ms": round(float(np.percentile(times, 95)), 2),
        "recall_at_10": round(hits / (10 * len(asked)), 4),
        "index_mb": round(index.nbytes / 1e6, 1),
        "rss_mb": round(rss_mb, 1),
        "rss_untrimmed_mb": round(untrimmed_mb, 1),
        "peak_rss_mb": round(status_mb("VmHWM"), 1),
        "rss_after_searches_mb": round(status_mb("VmRSS"), 1),
        "python_numpy_mb": round(base_mb, 1),
        "build_s": round(build_s, 2),
        **json.loads((folder / "cosines.json").read_text()),
    }


def db_bytes(count: int, seed: int) -> dict[str, Any]:
    """Bytes per vector in the database for each storage form, from dbstat (table + its index)."""
    from hermes_lcm import store as store_module
    from hermes_lcm.base.records import MessageIn
    from hermes_lcm.base.vectors import encode, prepared

    data = sentences(count, seed)
    out: dict[str, Any] = {}
    for label, dtype, dim in (
        ("float32", "float32", 0),
        ("int8", "int8", 0),
        ("int8_dim256", "int8", 256),
    ):
        with tempfile.TemporaryDirectory(prefix="lcm-bench-knn-") as home:
            path = Path(home) / "lcm.db"
            store = store_module.open_store(path)
            conv = store.ensure_conversation("bench")
            records = [
                MessageIn("user", f"sentence {i}", None, None, None, None, None, 3, f"fp{i}")
                for i in range(count)
            ]
            ids = store.append(conv, "s", "bench", lambda _p, r=records: r)  # type: ignore[misc]
            store_module.close_all()  # the last close checkpoints the WAL into the file
            plain = path.stat().st_size
            store = store_module.open_store(path)
            store.ensure_vector_tables()
            rows = prepared(data, dtype, dim)
            model = store.vector_model(f"bench:{label}", rows.shape[1], dtype)
            store.put_vectors(
                model, "m", [(i, *encode(row, dtype)) for i, row in zip(ids, rows, strict=True)]
            )
            stats = store.vector_stats()
            store_module.close_all()
            grown = path.stat().st_size
        out[label] = {
            "dim": int(rows.shape[1]),
            "blob_bytes_per_vector": stats["models"][0]["blob_bytes"] / count,
            "table_bytes_per_vector": round(stats["table_bytes"] / count, 1),
            "file_growth_per_vector": round((grown - plain) / count, 1),
        }
    return out


def _earlier_runs(sizes: set[int]) -> list[dict[str, Any]]:
    """The saved runs of the sizes not measured this time (a 1M run needs ~5 GB and minutes), so
    a partial re-run keeps them; each row keeps the commit it was measured at."""
    path = ROOT / "bench" / "results" / "knn.json"
    if not path.exists():
        return []
    saved = json.loads(path.read_text(encoding="utf-8"))
    commit = saved.get("commit")
    runs = saved.get("details", {}).get("runs", [])
    return [
        {**run, "commit": run.get("commit", commit)} for run in runs if run["size"] not in sizes
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--child", nargs=3, metavar=("SIZE", "DTYPE", "FOLDER"))
    parser.add_argument("--prepare", nargs=2, metavar=("SIZE", "FOLDER"))
    args = parser.parse_args()
    if args.prepare:
        prepare(int(args.prepare[0]), args.queries, args.seed, Path(args.prepare[1]))
        return
    if args.child:
        print(json.dumps(child(int(args.child[0]), args.child[1], Path(args.child[2]))))
        return
    runs = []
    for size in [int(s) for s in args.sizes.split(",")]:
        with tempfile.TemporaryDirectory(prefix="lcm-bench-knn-") as folder:
            subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--prepare",
                    str(size),
                    folder,
                    "--queries",
                    str(args.queries),
                    "--seed",
                    str(args.seed),
                ],
                check=True,
            )
            for dtype in ("float32", "int8"):
                done = subprocess.run(
                    [sys.executable, __file__, "--child", str(size), dtype, folder],
                    check=True,
                    capture_output=True,
                    text=True,
                )
                runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
                print(runs[-1], flush=True)
    earlier = _earlier_runs({run["size"] for run in runs})
    runs = sorted(earlier + runs, key=lambda run: (run["size"], run["dtype"] != "float32"))
    storage = db_bytes(10_000, args.seed)
    print(storage)
    from common import print_table, save_result

    rows = []
    for run in runs:
        if run["size"] != 100_000:
            continue
        tag = f"100k x {DIM} {run['dtype']}"
        rss = max(
            run["rss_mb"], run.get("rss_after_searches_mb", 0.0)
        )  # in use: the searches' pages count
        queries = args.queries
        rows += [
            {
                "target": f"vector top-10 median latency, {tag}",
                "ours": f"{run['median_ms']} ms",
                "reference": f"<= {TARGET_MS:g} ms",
                "verdict": "met" if run["median_ms"] <= TARGET_MS else "missed",
            },
            {
                "target": f"vector recall@10 vs exact, {tag}",
                "ours": f"{run['recall_at_10']}",
                "reference": f">= {TARGET_RECALL}",
                "verdict": "met" if run["recall_at_10"] >= TARGET_RECALL else "missed",
            },
            {
                "target": f"process RSS with the index, after {queries} searches, {tag}",
                "ours": f"{rss} MB",
                "reference": f"<= {TARGET_RSS_MB:g} MB",
                "verdict": "met" if rss <= TARGET_RSS_MB else "missed",
            },
        ]
    rows.append(
        {
            "target": "database bytes per vector, dim 384 (float32 / int8)",
            "ours": " / ".join(
                str(storage[t]["table_bytes_per_vector"]) for t in ("float32", "int8")
            ),
            "reference": "blob 1536 / 384",
        }
    )
    print_table(rows)
    save_result(
        "knn",
        rows,
        {"runs": runs, "storage": storage, "queries": args.queries, "seed": args.seed, "dim": DIM},
    )


if __name__ == "__main__":
    main()

"""Throughput of the offline embedding provider (embed/local.py: int8 all-MiniLM-L6-v2 on onnxruntime).

One command: ``python bench/embed_throughput.py`` (needs ``hermes-lcm[local]``).

Typical messages (40 words each, seeded from the synthetic history's vocabulary) are embedded in
batches of 32 on 2 onnxruntime threads, as a backfill would; the median of several timed passes
after a warm-up is reported as texts per second (and the best pass: the machine may be shared,
and other load only ever slows a pass down), with the latency of one short query beside it (what
``LCM_EMBEDDING_QUERY_TIMEOUT_S`` has to cover).
"""

from __future__ import annotations

import os
import random
import statistics
import time

from common import _COMMON, _PROSE, print_table, save_result

from hermes_lcm.embed.local import LocalProvider

THREADS = 2
BATCH = 32
WORDS = 40
TEXTS = 512
PASSES = 5
QUERIES = 50


def messages(n: int, seed: int = 13) -> list[str]:
    rng = random.Random(seed)
    pool = _PROSE + _COMMON
    return [" ".join(rng.choice(pool) for _ in range(WORDS)).capitalize() + "." for _ in range(n)]


def main() -> None:
    provider = LocalProvider(batch_size=BATCH, threads=THREADS)
    started = time.perf_counter()
    provider.load()
    load_s = time.perf_counter() - started
    texts = messages(TEXTS)
    provider.embed(texts[:BATCH])  # warm-up
    rates = []
    for _ in range(PASSES):
        started = time.perf_counter()
        out = provider.embed(texts)
        rates.append(len(texts) / (time.perf_counter() - started))
    assert out.shape == (TEXTS, provider.dim)
    query_ms = []
    for query in messages(QUERIES, seed=7):
        short = " ".join(query.split()[:8])
        started = time.perf_counter()
        provider.embed([short])
        query_ms.append((time.perf_counter() - started) * 1000)
    rate = statistics.median(rates)
    p50 = statistics.median(query_ms)
    p95 = sorted(query_ms)[int(0.95 * (len(query_ms) - 1))]
    rows = [{"target": f"local embedding throughput ({THREADS} threads, batch {BATCH}, {WORDS}-word messages)",
             "ours": f"{rate:,.0f} texts/s (best pass {max(rates):,.0f}); "
                     f"one 8-word query {p50:.1f} ms median, {p95:.1f} ms p95",
             "reference": "a backfill of 100k messages takes 100,000 / rate seconds"}]
    print_table(rows)
    save_result("embed_throughput", rows, {
        "model": provider.name, "dim": provider.dim, "threads": THREADS, "batch": BATCH, "words_per_text": WORDS,
        "texts": TEXTS, "passes": PASSES, "texts_per_s_median": round(rate, 1),
        "texts_per_s_best": round(max(rates), 1),
        "texts_per_s_all": [round(r, 1) for r in rates], "load_s": round(load_s, 3),
        "query_ms_median": round(p50, 2), "query_ms_p95": round(p95, 2),
        "backfill_100k_messages_s": round(100_000 / rate, 1),
        "load_average_1m_after": round(os.getloadavg()[0], 2)})


if __name__ == "__main__":
    main()

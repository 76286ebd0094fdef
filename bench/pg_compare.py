"""PostgreSQL next to SQLite in one process: per-turn overhead, lcm_grep latency, import rate.

One command: ``.venv/bin/python bench/pg_compare.py [--sizes 100000,1000000] [--turns 100] [--url URL]``.

The same deterministic history (bench/search.py's, with its planted identifier) is built through
the engine's own ingest on both backends, compacted every 1,000 messages with the offline
summarizer, then measured with the calls interleaved (one SQLite sample, one PostgreSQL sample,
in turn), so load from elsewhere on the machine falls on both alike; every figure is a median
and the ratio is PostgreSQL over SQLite. Without ``--url`` a throwaway PostgreSQL 16 is started
on 127.0.0.1 (tests/pgserver.py: the ``pgserver`` wheel of the test extra), fsync off like any
scratch server; with ``--url`` and ``--home`` the built databases are kept and reused.

* import rate: messages/s of the build (ingest in 1,000-message batches plus the compactions),
  and of a 20,000-message import without compaction;
* per-turn overhead: bench/steady_state.py's host turn (ingest_host, should_compress, one
  assembly) at the largest size, CLI and API shapes;
* lcm_grep: bench/search.py's query kinds (rare, very common, prose, identifier, rare identifier).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from common import (
    RESULTS,
    bulk_ingest,
    core_of,
    make_engine,
    print_table,
    save_result,
    temp_dir,
)
from steady_state import PROMPT_OVERHEAD, WARMUP_TURNS, HostTurns

from search import SearchHistory, interleaved, queries

BACKENDS = ("sqlite", "postgres")
IMPORT_MESSAGES = 20_000


def start_server() -> str:
    """A throwaway server (tests/pgserver.py) and a URL to a new schema of it."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    import psycopg
    from pgserver import Server  # the tests' helper: binaries from the pgserver wheel

    srv = Server()
    with psycopg.connect(srv.url(), autocommit=True) as conn:
        conn.execute("SET client_min_messages = warning")
    return srv.url()


def schema_url(base: str, name: str) -> str:
    """``base`` with its own schema ``name`` (created if missing)."""
    from urllib.parse import quote

    import psycopg

    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA IF NOT EXISTS {name}")
    sep = "&" if "?" in base else "?"
    return f"{base}{sep}options={quote(f'-csearch_path={name}')}"


def server_version(url: str) -> str:
    """The server's version, recorded with the figures (a throwaway server is the pgserver wheel's)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        return f"PostgreSQL {conn.execute('SHOW server_version').fetchone()[0]}"


def engine_for(backend: str, label: str, base_url: str, home: str | None) -> tuple[Any, Path]:
    where = Path(home) / f"{backend}-{label}" if home else temp_dir(f"pgcmp-{backend}-{label}")
    where.mkdir(parents=True, exist_ok=True)
    env = {}
    if backend == "postgres":
        name = f"bench_{label}" if home else f"bench_{label}_{uuid.uuid4().hex[:8]}"
        env["LCM_DATABASE_URL"] = schema_url(base_url, name)
    return make_engine(where, session=f"pgcmp-{label}", extra_env=env), where


def build(size: int, history: SearchHistory, base_url: str, home: str | None) -> dict[str, Any]:
    """Both engines over ``size`` messages, with each backend's build rate."""
    out: dict[str, Any] = {}
    for backend in BACKENDS:
        engine, where = engine_for(backend, str(size), base_url, home)
        core = core_of(engine)
        budget = core.budget(engine.threshold_tokens, PROMPT_OVERHEAD)
        marker = where / "built"
        reused = marker.exists()
        if reused:
            seconds = float(marker.read_text())
        else:
            seconds = bulk_ingest(
                core, history, 0, size, batch=1000, compact_every=1000, budget=budget
            )
            core.compact(budget)
            marker.write_text(str(seconds))
        print(
            f"  {backend:8} {size:,} built in {seconds:.1f} s ({size / seconds:,.0f} msg/s incl. compaction)",
            flush=True,
        )
        out[backend] = {
            "engine": engine,
            "budget": budget,
            "build_seconds": round(seconds, 1),
            "build_rate": round(size / seconds),
            "build_reused": reused,
        }
    return out


def import_rate(history: SearchHistory, base_url: str) -> dict[str, Any]:
    """Messages/s of a plain import (1,000-message batches, no compaction) on each backend."""
    rates = {}
    for backend in BACKENDS:
        engine, _ = engine_for(backend, "import", base_url, None)
        seconds = bulk_ingest(core_of(engine), history, 0, IMPORT_MESSAGES, batch=1000)
        rates[backend] = round(IMPORT_MESSAGES / seconds)
    rates["ratio"] = round(rates["postgres"] / rates["sqlite"], 2)
    print(f"  import {IMPORT_MESSAGES:,}: {rates}", flush=True)
    return rates


def per_turn(
    built: dict[str, Any], history: SearchHistory, size: int, turns: int
) -> dict[str, Any]:
    """Host turns on both engines, interleaved turn by turn; median ms of ingest+should_compress+assemble."""
    out: dict[str, Any] = {}
    for shape in ("cli", "api"):
        start = size if shape == "cli" else size + 4 * (WARMUP_TURNS + turns)
        players = {
            b: HostTurns(built[b]["engine"], built[b]["budget"], history, start, shape)
            for b in BACKENDS
        }
        for turn in range(WARMUP_TURNS + turns):
            for player in players.values():
                player.turn(turn, timed=turn >= WARMUP_TURNS)
        res = {b: p.result() for b, p in players.items()}
        out[shape] = {
            b: {k: res[b][k]["median_ms"] for k in ("total", "ingest", "assemble")}
            for b in BACKENDS
        }
        out[shape]["ratio"] = round(
            out[shape]["postgres"]["total"] / out[shape]["sqlite"]["total"], 2
        )
        print(f"  per turn {shape}: {out[shape]}", flush=True)
    return out


def grep(built: dict[str, Any], history: SearchHistory) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kind, texts in queries(history).items():
        meds: dict[str, list[float]] = {b: [] for b in BACKENDS}
        hits: dict[str, list[int]] = {b: [] for b in BACKENDS}
        for text in texts:
            for b in BACKENDS:
                answer = json.loads(
                    built[b]["engine"].handle_tool_call("lcm_grep", {"query": text})
                )
                if "error" in answer:
                    raise SystemExit(f"{b}: lcm_grep {text!r} failed: {answer['error']}")
                hits[b].append(len(answer.get("hits", [])))
            sq, pg = interleaved(
                *(
                    lambda e=built[b]["engine"], t=text: e.handle_tool_call(
                        "lcm_grep", {"query": t}
                    )
                    for b in BACKENDS
                )
            )
            meds["sqlite"].append(sq)
            meds["postgres"].append(pg)
            print(
                f"    {kind:17} {text[:40]!r:44} sqlite {sq:8.2f} ms  postgres {pg:8.2f} ms  "
                f"ratio {pg / sq:5.1f}x",
                flush=True,
            )
        out[kind] = {b: round(sorted(meds[b])[len(meds[b]) // 2], 2) for b in BACKENDS}
        out[kind]["worst_postgres"] = round(max(meds["postgres"]), 2)
        out[kind]["ratio"] = round(
            sorted(p / max(s, 1e-6) for s, p in zip(meds["sqlite"], meds["postgres"], strict=True))[
                len(texts) // 2
            ],
            1,
        )
        out[kind]["hits"] = {b: min(hits[b]) for b in BACKENDS}
    return out


def _from(entry: dict[str, Any]) -> str:
    """A size's label when its figures come from an earlier run (``--merge``)."""
    old = entry.get("from")
    return f" (run of {old['commit']}, {old['date']})" if old else ""


def table(details: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    imp = details["import"]
    rows.append(
        {
            "target": f"{details['server']} import rate next to SQLite (20k messages, no compaction)",
            "ours": f"PostgreSQL {imp['postgres']:,} msg/s, SQLite {imp['sqlite']:,} msg/s ({imp['ratio']}x)",
            "reference": "-",
            "verdict": "-",
        }
    )
    for size, entry in details["sizes"].items():
        if "per_turn" in entry:
            pt = entry["per_turn"]
            rows.append(
                {
                    "target": f"PostgreSQL per-turn overhead at {int(size):,} msgs (median)"
                    + _from(entry),
                    "ours": "; ".join(
                        f"{shape} {pt[shape]['postgres']['total']} ms vs SQLite "
                        f"{pt[shape]['sqlite']['total']} ms ({pt[shape]['ratio']}x)"
                        for shape in ("cli", "api")
                    ),
                    "reference": "-",
                    "verdict": "-",
                }
            )
        rows.append(
            {
                "target": f"PostgreSQL lcm_grep at {int(size):,} msgs (median per kind)"
                + _from(entry),
                "ours": "; ".join(
                    f"{kind} {q['postgres']} ms vs {q['sqlite']} ms ({q['ratio']}x)"
                    for kind, q in entry["grep"].items()
                ),
                "reference": "-",
                "verdict": "-",
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100000,1000000")
    parser.add_argument("--turns", type=int, default=100)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--url", help="a PostgreSQL server to use (default: a throwaway one)")
    parser.add_argument(
        "--home", help="keep the built databases here (and schemas bench_<size>) and reuse them"
    )
    parser.add_argument(
        "--merge",
        action="store_true",
        help="keep the saved figures of sizes this run does not measure (each labelled with the "
        "commit and date of its own run): a quick --sizes 100000 then replaces only that size",
    )
    args = parser.parse_args()
    base_url = args.url or start_server()
    history = SearchHistory(args.seed)
    sizes = [int(s) for s in args.sizes.split(",")]
    details: dict[str, Any] = {
        "seed": args.seed,
        "turns": args.turns,
        "sizes": {},
        "server": server_version(base_url),
    }
    details["import"] = import_rate(history, base_url)
    for size in sizes:
        print(f"building {size:,} messages on both ...", flush=True)
        t0 = time.perf_counter()
        built = build(size, history, base_url, args.home)
        entry: dict[str, Any] = {
            b: {k: built[b][k] for k in ("build_seconds", "build_rate", "build_reused")}
            for b in BACKENDS
        }
        entry["grep"] = grep(built, history)
        if size == min(
            sizes
        ):  # per-turn overhead where the API shape's full history is still cheap to send
            entry["per_turn"] = per_turn(built, history, size, args.turns)
        details["sizes"][str(size)] = entry
        print(f"  {size:,} done in {time.perf_counter() - t0:.0f} s", flush=True)
    if args.merge:
        kept_sizes(details)
    rows = table(details)
    print_table(rows)
    save_result("pg_compare", rows, details)


def kept_sizes(details: dict[str, Any]) -> None:
    """The saved run's sizes this run did not measure, added to ``details`` with their run's
    commit and date (``from``), so that the report says which figures are older."""
    saved_path = RESULTS / "pg_compare.json"
    if not saved_path.exists():
        return
    saved = json.loads(saved_path.read_text(encoding="utf-8"))
    for size, entry in saved["details"]["sizes"].items():
        if size not in details["sizes"]:
            entry.setdefault("from", {"commit": saved["commit"], "date": saved["date"]})
            details["sizes"][size] = entry
    details["sizes"] = dict(sorted(details["sizes"].items(), key=lambda item: int(item[0])))


if __name__ == "__main__":
    main()

"""Round trips to PostgreSQL per host turn and per lcm_grep: statements and transactions, counted.

One command: ``.venv/bin/python bench/pg_roundtrips.py [--size 3000] [--turns 20] [--show]``.

Every store call on PostgreSQL is a network round trip, so the count of statements a turn sends
is what its latency is made of on a remote server (bench/pg_compare.py times it on a local one).
This wraps psycopg's cursor ``execute``/``executemany`` in this process only (the library is not
changed) over a throwaway server (tests/pgserver.py), plays bench/steady_state.py's host turns
(CLI and API shapes) and bench/search.py's lcm_grep queries, and prints the statements per
phase (ingest_host, should_compress, assemble, lcm_grep), how many were BEGIN (one write
transaction each, plus its advisory lock), and with ``--show`` the SQL of one turn.
"""

from __future__ import annotations

import argparse
import collections
import json
import traceback
from typing import Any

import psycopg
from common import bulk_ingest, core_of
from pg_compare import engine_for, start_server
from steady_state import PROMPT_OVERHEAD, HostTurns, context_tokens

from search import SearchHistory, queries

_log: list[str] = []


def _caller() -> str:
    """The package functions that sent a statement (for --show)."""
    frames = [
        f
        for f in traceback.extract_stack()[:-2]
        if "/hermes_lcm/" in f.filename or "wt16" in f.filename
    ]
    return " < ".join(f"{f.name}" for f in reversed(frames[-6:]))


def _install() -> None:
    """Count every statement psycopg sends (Connection.execute goes through Cursor.execute)."""
    execute, executemany = psycopg.Cursor.execute, psycopg.Cursor.executemany

    def counted(self: Any, query: Any, params: Any = None, **kw: Any) -> Any:
        _log.append(f"{query}  <- {_caller()}")
        return execute(self, query, params, **kw)

    def counted_many(self: Any, query: Any, params_seq: Any, **kw: Any) -> Any:
        _log.append("MANY " + str(query))
        return executemany(self, query, params_seq, **kw)

    psycopg.Cursor.execute = counted  # type: ignore[method-assign]
    psycopg.Cursor.executemany = counted_many  # type: ignore[method-assign]


def counting(fn: Any) -> tuple[int, int, list[str]]:
    """(statements, write transactions, the SQL) of one call of ``fn``."""
    start = len(_log)
    fn()
    sql = _log[start:]
    return len(sql), sum(1 for s in sql if s.startswith("BEGIN")), sql


def turn_counts(
    engine: Any, budget: Any, history: SearchHistory, start: int, shape: str, turns: int, show: bool
) -> dict[str, Any]:
    player = HostTurns(engine, budget, history, start, shape)
    core = player.core
    per: dict[str, list[tuple[int, int]]] = collections.defaultdict(list)
    for turn in range(turns):
        lo = start + 4 * turn
        player.host.extend(history.messages(lo, lo + 4))
        n, b, sql_i = counting(lambda: engine.ingest_host(player.host))
        per["ingest"].append((n, b))
        reported = (
            context_tokens(core) + PROMPT_OVERHEAD
        )  # outside the count, as outside the timing
        over: list[bool] = []
        n, b, sql_s = counting(lambda r=reported, o=over: o.append(engine.should_compress(r)))
        per["should_compress"].append((n, b))
        n, b, sql_a = counting(lambda: core.assemble(budget))
        per["assemble"].append((n, b))
        if show and turn == turns - 1:
            for name, sql in (("ingest", sql_i), ("should_compress", sql_s), ("assemble", sql_a)):
                print(f"--- {shape} {name}: {len(sql)} statements")
                for s in sql:
                    print("   ", " ".join(s.split())[:90], "...", s.split("<- ")[-1])
        if over[0]:
            core.compact(budget)
            if shape == "cli":
                player.host = core.assemble(budget)
    out = {}
    for name, values in per.items():
        ns = sorted(v[0] for v in values)
        bs = sorted(v[1] for v in values)
        out[name] = {"median": ns[len(ns) // 2], "max": ns[-1], "begin_median": bs[len(bs) // 2]}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=3000)
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--url")
    parser.add_argument("--show", action="store_true")
    args = parser.parse_args()
    base = args.url or start_server()
    history = SearchHistory(args.seed)
    engine, _ = engine_for("postgres", f"rt{args.size}", base, None)
    core = core_of(engine)
    budget = core.budget(engine.threshold_tokens, PROMPT_OVERHEAD)
    bulk_ingest(core, history, 0, args.size, batch=1000, compact_every=1000, budget=budget)
    core.compact(budget)
    _install()
    for shape in ("cli", "api"):
        start = args.size if shape == "cli" else args.size + 4 * args.turns
        print(
            shape,
            json.dumps(turn_counts(engine, budget, history, start, shape, args.turns, args.show)),
        )
    for kind, texts in queries(history).items():
        n, b, sql = counting(lambda t=texts[0]: engine.handle_tool_call("lcm_grep", {"query": t}))
        print(f"lcm_grep {kind}: {n} statements, {b} BEGIN")
        if args.show:
            for s in sql:
                print("   ", " ".join(s.split())[:90], "...", s.split("<- ")[-1])


if __name__ == "__main__":
    main()

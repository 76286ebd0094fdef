"""What PostgreSQL's plan cache mode would buy a turn, and what it would cost a search.

One command: ``.venv/bin/python bench/pg_plan_modes.py [--size 4000] [--rounds 15]``.

The store runs every statement with ``plan_cache_mode=force_custom_plan``, so each execution is
planned with its values. That planning is a fixed share of a turn (the assembly's one statement
is planned on every turn), and the question is whether a generic plan for the statements that
allow one would be worth the risk for the ones that do not. This bench builds the same
deterministic history as bench/search.py on a throwaway PostgreSQL (tests/pgserver.py, or
``--url``), then, for each mode in turn (interleaved rounds, medians):

* the assembly's reads (``Store.prompt_reads`` as a turn asks for them: the raw window, the
  context summaries the process already holds sent as ids);
* lcm_grep of a rare term and of a very common one, through the engine's own tool call.

The mode is set through ``Store.read()`` between samples, so everything else (data, statistics,
psycopg's prepared statements) is the same for all three; that the setting reaches the
connection a search runs on is not checked yet (the assembly's figures move with it).
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Callable

from common import bulk_ingest, core_of
from pg_compare import engine_for, server_version, start_server

from search import COMMON, SearchHistory, interleaved

MODES = ("force_custom_plan", "auto", "force_generic_plan")
WINDOW = 40  # raw rows of the assembly's window (the engine's fresh tail at its defaults)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=4000, help="stored messages")
    parser.add_argument("--rounds", type=int, default=15, help="interleaved rounds per mode")
    parser.add_argument("--url", help="a PostgreSQL server to use instead of a throwaway one")
    args = parser.parse_args()
    base = args.url or start_server()
    engine, _ = engine_for("postgres", "planmodes", base, None)
    core = core_of(engine)
    history = SearchHistory(11)
    bulk_ingest(
        core,
        history,
        0,
        args.size,
        batch=1000,
        compact_every=1000,
        budget=core.budget(engine.threshold_tokens, 3000),
    )
    store = core.store
    conversation = max(int(c["id"]) for c in store.conversations_page(0, 100))
    held = store.prompt_reads(conversation, WINDOW, None, 0).node_ids

    def assembly() -> None:
        store.prompt_reads(conversation, WINDOW, None, 0, held_nodes=held)

    def grep(text: str) -> Callable[[], None]:
        def call() -> None:
            answer = json.loads(engine.handle_tool_call("lcm_grep", {"query": text}))
            if "error" in answer:
                raise SystemExit(f"lcm_grep {text!r}: {answer['error']}")

        return call

    work = {
        "assembly's reads": assembly,
        "lcm_grep rare term": grep(history.rare_terms[0]),
        f"lcm_grep {COMMON[0]!r}": grep(COMMON[0]),
    }
    samples: dict[tuple[str, str], list[float]] = {(m, w): [] for m in MODES for w in work}
    for _ in range(args.rounds):
        for mode in MODES:
            with store.read() as db:
                db.execute(f"SET plan_cache_mode = {mode}")
            for name, fn in work.items():
                # past psycopg's prepare threshold and the server's first five custom plans
                for _ in range(6):
                    fn()
                samples[(mode, name)].append(interleaved(fn)[0])
    with store.read() as db:
        db.execute("SET plan_cache_mode = force_custom_plan")
    print(f"{server_version(base)}, {args.size:,} messages, medians of {args.rounds} rounds (ms)")
    print(f"{'':24}" + "".join(f"{m:>20}" for m in MODES))
    for name in work:
        cells = [statistics.median(samples[(m, name)]) for m in MODES]
        print(f"{name:24}" + "".join(f"{c:20.3f}" for c in cells))


if __name__ == "__main__":
    main()

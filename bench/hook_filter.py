"""What telling the host's own agents apart costs a turn: the post_llm_call hook as the host calls
it, against the engine's ingest of the same list without the check, interleaved in one process.

One command: ``.venv/bin/python bench/hook_filter.py [--sizes 1000,100000] [--turns 500]``.

Each conversation is grown as bench/steady_state.py grows it. Then the host's turns alternate
between two paths, each path taking every other turn (and going first every other pair), so
machine drift hits both alike:

* ``direct``: the live-engine lookup and ``engine.ingest_host(list)``, which is what the hook did
  before it checked who is calling;
* ``hook``: ``hooks.post_llm_call(session_id=, platform=, user_message=, conversation_history=)``,
  which first checks the thread, the host's write origin, the platform and the request's text
  (hostagents.is_fork_hook) and then does the same.

The check alone is also timed on its own, over many calls. The target: the hook within 1.05x of
the direct path at every size (the engine's per-turn overhead must not grow).
"""

from __future__ import annotations

import argparse
import gc
import time
from typing import Any

from common import History, core_of, print_table, save_result, summarize_ms, time_calls
from steady_state import WARMUP_TURNS, build

from hermes_lcm.base import registry
from hermes_lcm.base.hostagents import is_fork_hook
from hermes_lcm.host import hooks

TARGET_RATIO = 1.05


def measure(size: int, history: History, turns: int) -> dict[str, Any]:
    engine, _budget, seconds = build(size, history)
    core = core_of(engine)
    host: list[dict[str, Any]] = history.messages(0, size)
    samples: dict[str, list[float]] = {"direct": [], "hook": []}
    gc.collect()
    for turn in range(WARMUP_TURNS + 2 * turns):
        lo = size + 4 * turn
        host.extend(history.messages(lo, lo + 4))
        request = host[-4].get("content")
        path = ("direct", "hook")[
            (turn + turn // 2) % 2
        ]  # alternate, and swap which goes first per pair
        kwargs = {
            "session_id": engine.session_id,
            "platform": "cli",
            "user_message": request,
            "conversation_history": list(host),
        }
        t0 = time.perf_counter()
        if path == "hook":
            hooks.post_llm_call(**kwargs)
        else:
            live = registry.live_engine(kwargs["session_id"])
            assert live is engine
            live.ingest_host(kwargs["conversation_history"])
        elapsed = time.perf_counter() - t0
        if turn >= WARMUP_TURNS:
            samples[path].append(elapsed)
    stored = core.store.message_count(core.binding.conversation_id)
    assert stored == len(host), (stored, len(host))  # both paths stored every message, once
    direct, hook = summarize_ms(samples["direct"]), summarize_ms(samples["hook"])
    check = time_calls(
        lambda: is_fork_hook({"session_id": "s", "platform": "cli", "user_message": request}),
        repeat=20000,
    )
    return {
        "build_seconds": round(seconds, 1),
        "direct": direct.as_dict(),
        "hook": hook.as_dict(),
        "ratio": round(hook.median_ms / direct.median_ms, 3),
        "check_us": round(check.median_ms * 1000, 2),
        "turns_each": turns,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,100000")
    parser.add_argument("--turns", type=int, default=500)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    history = History(args.seed)
    results = {
        size: measure(size, history, args.turns) for size in (int(s) for s in args.sizes.split(","))
    }
    for size, entry in results.items():
        print(
            f"{size:>7} msgs: direct {entry['direct']['median_ms']} ms, hook {entry['hook']['median_ms']} ms, "
            f"ratio {entry['ratio']}x, the check alone {entry['check_us']} us"
        )
    worst = max(entry["ratio"] for entry in results.values())
    rows = [
        {
            "target": f"post_llm_call with the host-agent check / without it, median <= {TARGET_RATIO}x",
            "ours": ", ".join(f"{size // 1000}k {e['ratio']}x" for size, e in results.items())
            + f"; the check alone {max(e['check_us'] for e in results.values())} us",
            "reference": "LCM-X: -",
            "verdict": "met" if worst <= TARGET_RATIO else f"missed ({worst}x)",
        }
    ]
    print_table(rows)
    save_result("hook_filter", rows, {"sizes": {str(k): v for k, v in results.items()}})


if __name__ == "__main__":
    main()

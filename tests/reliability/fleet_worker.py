"""One agent of the PostgreSQL fleet test (test_pg_fleet.py), run as a subprocess.

It plays turns of ``worker.turn_messages(--transcript)`` through the real engine for ``--seconds``
as a Hermes host does: the CLI shape keeps the last compressed prompt plus new turns, the API
(gateway) shape re-sends the whole history each turn; a follower (``--follow``) replays another
host's transcript turn by turn as that host writes it, so the same messages arrive from two
machines. After each turn's ingest it prints ``ACK <turn>``. Every prompt ``compress`` returns is
checked here, where its budget is known: within the budget, and a valid tool-call sequence.
It ends with one ``RESULT {json}`` line.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from convo import assert_valid_sequence
from worker import Guarded, history, make_engine, outcome, say, turn_messages

from hermes_lcm.base.tokens import count_messages


def _leader_turn(progress: Path) -> tuple[int, bool]:
    """The newest turn the followed host has written, and whether it has stopped."""
    try:
        text = progress.read_text().split()
        return int(text[0]), len(text) > 1
    except (OSError, ValueError, IndexError):
        return -1, False


def _bound(engine: Any, messages: list[dict[str, Any]], tokens: int) -> int:
    core = engine.ensure_core()
    return int(core.budget(engine.threshold_tokens, engine.overhead(messages, tokens)).total)


def _kept_whole(engine: Any, out: list[dict[str, Any]], host: list[dict[str, Any]]) -> bool:
    """The engine's documented answer when it cannot store the new messages and cannot read the
    store to place them (core.LcmCore.keep_unstored): the host's list unchanged, with
    ``_last_compress_aborted`` and a reason, so the host keeps its list and warns. Nothing else
    may exceed the budget."""
    return (
        bool(getattr(engine, "_last_compress_aborted", False))
        and bool(getattr(engine, "_last_summary_error", None))
        and out == host
    )


def play(args: argparse.Namespace, env: dict[str, str]) -> dict[str, Any]:
    engine = make_engine(args.home, args.session, env, args.conversation)
    guard = Guarded()
    transcript = args.transcript or args.session
    host = history(transcript, args.start)  # a restarted host re-sends what it has
    deadline = time.monotonic() + args.seconds
    violations: list[str] = []
    turn, compactions, last_error_turn, kept = args.start, 0, -1, 0
    errors_seen, skipped = 0, 0
    while True:
        if args.follow:
            while (leader := _leader_turn(Path(args.follow)))[0] < turn and not leader[1]:
                time.sleep(0.005)
            if leader[0] < turn:
                break
        elif time.monotonic() >= deadline:
            break
        new = turn_messages(transcript, turn)
        host = host + new if args.shape == "cli" else history(transcript, turn + 1)
        if args.progress:
            Path(args.progress).write_text(str(turn))
        guard.call(engine.ingest_host, host)
        say(f"ACK {turn}")
        tokens = count_messages(host) + 500
        if guard.call(engine.should_compress, tokens) or turn % args.compact_every == 0:
            out = guard.call(engine.compress, list(host), current_tokens=tokens)
            compactions += 1
            skipped += "another writer" in str(
                engine.get_status().get("last_compaction", {}).get("stop_reason")
            )
            if not out:
                violations.append(f"turn {turn}: empty prompt")
            elif _kept_whole(engine, out, host):
                # The store could not be reached to tell which messages it holds: the host's list
                # comes back as it was, flagged, and the host keeps it and warns (nothing dropped).
                kept += 1
            else:
                bound = _bound(engine, host, tokens)
                if count_messages(out) > bound:
                    violations.append(
                        f"turn {turn}: prompt {count_messages(out)} tokens > budget {bound}"
                    )
                try:
                    assert_valid_sequence(out)
                except AssertionError as exc:
                    violations.append(f"turn {turn}: invalid prompt: {exc}")
                if args.shape == "cli":
                    host = list(out)
        status = engine.get_status()
        errors = len(status.get("errors", [])) + int(status.get("store_write_failures") or 0)
        if errors > errors_seen:
            errors_seen, last_error_turn = errors, turn
        turn += 1
    if args.progress:
        Path(args.progress).write_text(f"{turn - 1} end")
    return {
        **outcome(guard, engine),
        "turns": turn,
        "compactions": compactions,
        "skipped": skipped,
        "violations": violations[:20],
        "kept_whole": kept,
        "last_error_turn": last_error_turn,
        "write_failures": engine.get_status().get("store_write_failures"),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--home", required=True)
    parser.add_argument("--session", required=True)
    parser.add_argument("--conversation", default=None)
    parser.add_argument("--transcript", default=None)
    parser.add_argument("--progress", default=None)
    parser.add_argument("--follow", default=None)
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--shape", choices=["cli", "api"], default="api")
    parser.add_argument("--compact-every", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--env", default="{}")
    args = parser.parse_args()
    say("RESULT " + json.dumps(play(args, json.loads(args.env))))


if __name__ == "__main__":
    main()

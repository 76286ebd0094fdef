"""A host stand-in run as a subprocess by the reliability tests.

Modes:

* ``writer``: plays turns ``--start``..``--stop`` of a deterministic transcript through the
  engine exactly as the host does (post_llm_call ingest with the host's list, should_compress,
  compress). After each ingest call returns it prints ``ACK <turn>`` (flushed), so a parent
  that SIGKILLs it knows which messages were acknowledged. Before a compaction it prints
  ``COMPACT <turn>``, after it ``COMPACTED <turn> <tokens>``. With ``--prepare 1`` each turn is
  the reply's ``post_llm_call`` (``after_reply``, deferred compaction's preparation point) and the
  worker waits for the preparer like a user reading the reply, between ``PREPARE <turn>`` and
  ``PREPARED <turn>``.
* ``short``: plays turns of ``crashplay.transcript(--seed)`` (short repeated replies, tool calls
  reusing ``call_0``) step by step as ``crashplay.Host`` does, printing ``STEP <turn> <step>`` after
  each step; at the end of a turn it persists its list to ``host-list.json`` in ``--home`` (the
  host's own persistence) and prints ``ACK <turn>``. A run resumes from that file (``--start`` is
  ignored) and first prints ``RESUME <turns persisted>``.
* ``reader``: runs lcm_* tools against the conversation of ``--session`` until ``--seconds`` pass.

Both end with one ``RESULT {json}`` line: engine errors, exceptions that escaped an engine
call (there must be none), and counters.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from hermes_lcm.base.tokens import count_messages
from hermes_lcm.engine import LcmEngine

CONTEXT_LENGTH = 64_000


def turn_messages(session: str, turn: int) -> list[dict[str, Any]]:
    """Turn ``turn`` of ``session``: every message carries a unique marker ``mk:<session>:<turn>:<k>``."""

    def mark(k: int) -> str:
        return f"mk:{session}:{turn}:{k}"

    filler = " ".join(f"word{(turn * 7 + i) % 97}" for i in range(40))
    out: list[dict[str, Any]] = [
        {"role": "user", "content": f"{mark(0)} please look at src/mod{turn}.py {filler}"}
    ]
    if turn % 2 == 0:
        call = f"call_{session}_{turn}"
        out.append(
            {
                "role": "assistant",
                "content": f"{mark(1)} reading",
                "tool_calls": [
                    {
                        "id": call,
                        "type": "function",
                        "function": {
                            "name": "read_file",
                            "arguments": json.dumps({"path": f"m{turn}"}),
                        },
                    }
                ],
            }
        )
        out.append(
            {
                "role": "tool",
                "tool_call_id": call,
                "name": "read_file",
                "content": f"{mark(2)} " + "file body line\n" * 30,
            }
        )
    out.append({"role": "assistant", "content": f"{mark(3)} done with turn {turn}. {filler}"})
    return out


def history(session: str, stop: int) -> list[dict[str, Any]]:
    return [m for t in range(stop) for m in turn_messages(session, t)]


def make_engine(
    home: str, session: str, env: dict[str, str], conversation: str | None = None
) -> LcmEngine:
    engine = copy.deepcopy(
        LcmEngine(env={"HERMES_HOME": home, "LCM_SUMMARY_PROVIDER": "extractive", **env})
    )
    engine.update_model("reliability-model", CONTEXT_LENGTH)
    engine.on_session_start(session, hermes_home=home, platform="cli", conversation_id=conversation)
    return engine


class Guarded:
    """Calls into the engine; anything that escapes is what the host would have seen."""

    def __init__(self) -> None:
        self.escaped: list[str] = []

    def call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except Exception as exc:  # recording what escaped is the point
            self.escaped.append(f"{getattr(fn, '__name__', fn)}: {exc.__class__.__name__}: {exc}")
            return None


def wait_for(progress: Path, turn: int, timeout_s: float = 120.0) -> None:
    """Block until the host we follow has ``turn`` in its transcript (a replayer cannot run ahead of it)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if int(progress.read_text() or -1) >= turn:
                return
        except (OSError, ValueError):
            pass
        time.sleep(0.002)
    raise TimeoutError(f"{progress} never reached turn {turn}")


def outcome(guard: Guarded, engine: LcmEngine) -> dict[str, Any]:
    status = engine.get_status()
    return {
        "escaped": guard.escaped,
        "errors": status.get("errors", []),
        "engine_errors": status.get("engine_errors", []),
        "stored": status.get("messages_stored_this_process"),
    }


def say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def writer(args: argparse.Namespace, env: dict[str, str]) -> dict[str, Any]:
    engine = make_engine(args.home, args.session, env, args.conversation)
    guard = Guarded()
    transcript = args.transcript or args.session
    host = history(transcript, args.start)  # a restarted host re-sends what it has
    compactions = 0
    for turn in range(args.start, args.stop):
        if args.follow:
            wait_for(Path(args.follow), turn)
        host.extend(turn_messages(transcript, turn))
        if args.progress:  # the turn exists in the host's transcript: a replayer may now send it
            Path(args.progress).write_text(str(turn))
            if (
                turn % 3 == 0
            ):  # the host is busy elsewhere before its own ingest: let the replayer win
                time.sleep(0.02)
        tokens = count_messages(host) + 500
        if args.prepare:  # the host's post_llm_call after a reply of this size, then the user reads
            guard.call(engine.update_from_response, {"prompt_tokens": tokens})
            guard.call(engine.after_reply, host)
            say(f"ACK {turn}")
            preparer = engine.core.preparer if engine.core is not None else None
            if preparer is not None and (preparer.busy_with or preparer.job.pending()):
                say(f"PREPARE {turn}")
                preparer.settle(30)
                say(f"PREPARED {turn}")
        else:
            guard.call(engine.ingest_host, host)
            say(f"ACK {turn}")
        if guard.call(engine.should_compress, tokens) or (
            args.compact_every and turn % args.compact_every == 0
        ):
            say(f"COMPACT {turn}")
            out = guard.call(engine.compress, list(host), current_tokens=tokens)
            compactions += 1
            say(f"COMPACTED {turn} {count_messages(out or [])}")
            if args.shape == "cli" and out:
                host = list(out)
    preparer = engine.core.preparer if engine.core is not None else None
    prepared = preparer.view() if preparer is not None else {}
    return {
        **outcome(guard, engine),
        "compactions": compactions,
        "prepared": prepared.get("prepared", 0),
        "published": prepared.get("published", 0),
    }


def short_writer(args: argparse.Namespace, env: dict[str, str]) -> dict[str, Any]:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from crashplay import Host, transcript  # run as a script: the test package is not importable

    turns = transcript(args.seed, args.stop)
    saved = Path(args.home) / "host-list.json"
    # The host resumes from what it persisted (a kill can land between its write and the ACK line).
    state = json.loads(saved.read_text()) if saved.exists() else {"turns": 0, "messages": []}
    held = state["messages"]
    say(f"RESUME {state['turns']}")
    host = Host(Path(args.home), args.session, args.shape, env)
    for turn in range(state["turns"], args.stop):
        for step, now in host.steps(held, turns[turn]):
            if step != "persist":
                say(f"STEP {turn} {step}")
                continue
            partial = saved.with_suffix(".partial")
            partial.write_text(json.dumps({"turns": turn + 1, "messages": now}))
            os.replace(partial, saved)
            held = now
            say(f"ACK {turn}")
    return {**outcome(Guarded(), host.engine), "compactions": host.engine.compression_count}


def reader(args: argparse.Namespace, env: dict[str, str]) -> dict[str, Any]:
    engine = make_engine(args.home, args.session, env, args.conversation)
    guard = Guarded()
    calls, tool_errors = 0, []
    deadline = time.monotonic() + args.seconds
    queries = ["src/mod3.py", "file body line", "what did we do in turn 12?", 'word5 OR "x', "done"]
    while time.monotonic() < deadline:
        for query in queries:
            answer = guard.call(engine.handle_tool_call, "lcm_grep", {"query": query})
            calls += 1
            data: dict[str, Any] = (
                json.loads(answer) if isinstance(answer, str) else {"error": "no answer"}
            )
            if "error" in data:
                tool_errors.append(str(data["error"])[:200])
            for hit in data.get("hits", [])[:2]:
                key = {k: hit[k] for k in ("store_id", "node_id") if k in hit}
                if len(key) == 1:
                    expanded = json.loads(
                        guard.call(engine.handle_tool_call, "lcm_expand", key) or "{}"
                    )
                    calls += 1
                    if "error" in expanded:
                        tool_errors.append(str(expanded["error"])[:200])
        guard.call(engine.handle_tool_call, "lcm_status", {})
        calls += 1
    return {
        **outcome(guard, engine),
        "calls": calls,
        "tool_errors": tool_errors[:20],
        "tool_error_count": len(tool_errors),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["writer", "short", "reader"])
    parser.add_argument("--home", required=True)
    parser.add_argument("--session", required=True)
    parser.add_argument(
        "--conversation", default=None, help="host conversation id (shared by sessions)"
    )
    parser.add_argument(
        "--transcript", default=None, help="whose turns to play (default: the session's)"
    )
    parser.add_argument(
        "--progress", default=None, help="file to write the newest turn of the transcript to"
    )
    parser.add_argument(
        "--follow", default=None, help="replay only turns this progress file has reached"
    )
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--stop", type=int, default=100)
    parser.add_argument("--shape", choices=["cli", "api"], default="api")
    parser.add_argument("--compact-every", type=int, default=0)
    parser.add_argument(
        "--prepare", type=int, default=0, help="1: replies through after_reply, preparer settled"
    )
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--seed", type=int, default=0, help="short: which transcript")
    parser.add_argument("--env", default="{}", help="extra LCM_* settings as JSON")
    args = parser.parse_args()
    env = json.loads(args.env)
    modes = {"writer": writer, "short": short_writer, "reader": reader}
    result = modes[args.mode](args, env)
    say("RESULT " + json.dumps(result))


if __name__ == "__main__":
    main()

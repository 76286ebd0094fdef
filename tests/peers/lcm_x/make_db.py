"""Build tests/peers/lcm_x/lcmx.db by driving LCM-X's own engine as Hermes does (fixture generator).

LCM-X is not a dependency of hermes-lcm; run this only to regenerate the fixture, in a test-only
environment that has LCM-X's source on the path and the Hermes host package it imports
(``agent.context_engine``):

    git -C <lcm-x mirror> archive HEAD | tar -x -C /tmp/lcmx
    python3 -m venv /tmp/lcmx-venv && /tmp/lcmx-venv/bin/pip install hermes-agent==0.19.0
    mkdir -p /tmp/lcmx-pkg && ln -sfn /tmp/lcmx /tmp/lcmx-pkg/hermes_lcm   # LCM-X imports itself as hermes_lcm
    PYTHONPATH=/tmp/lcmx-pkg /tmp/lcmx-venv/bin/python tests/peers/lcm_x/make_db.py tests/peers/lcm_x/lcmx.db

(`pip install /tmp/lcmx` fails on LCM-X's flat layout, so it is put on the path instead.)

What runs is LCM-X's ``LCMEngine`` through the host hooks Hermes calls (run_agent.py, agent_init.py,
conversation_compression.py): ``on_session_start``, per turn ``should_compress_preflight`` /
``should_compress`` then ``compress`` with the transcript, ``update_from_response`` after each model
reply, a model-issued ``lcm_grep`` tool call through ``handle_tool_call``, and ``/new`` as Hermes
does it (``on_session_end``, ``on_session_reset``, ``on_session_start`` with ``old_session_id``).
The context length is small so LCM-X compacts many times: leaf nodes over messages, condensed
nodes over nodes, and at ``/new`` its own retain policy (``new_session_retain_depth``, default 2)
deletes the first session's low nodes and keeps the high one. Only the LLM is replaced:
``summarize_with_escalation`` (the one call LCM-X makes to a model when it summarizes) becomes a
fixed, deterministic function of its input, so nothing reaches the network. The one step not
driven through a hook is a pin (LCM-X has no hook or tool for it; its ``MessageStore.pin`` is
called). Two runs differ only in times (LCM-X's wall clock) and the digests in the
summaries that include them.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

import hermes_lcm.engine as lcmx_engine  # LCM-X's package, not ours
from hermes_lcm.base.tokens import count_messages_tokens
from hermes_lcm.config import LCMConfig
from hermes_lcm.engine import LCMEngine

CONTEXT_LENGTH = 1000  # tokens: LCM-X's threshold is 35% of it, so three turns fill it
SYSTEM = "You are a careful operations assistant."
TOPICS = [
    "nginx",
    "postgres",
    "redis",
    "kafka",
    "mysql",
    "cron",
    "sshd",
    "docker",
    "haproxy",
    "etcd",
    "consul",
    "vault",
    "minio",
    "rabbitmq",
    "celery",
    "gunicorn",
    "zookeeper",
    "memcached",
    "traefik",
    "envoy",
    "jenkins",
    "grafana",
    "loki",
    "prometheus",
]


def fixed_summary(**kwargs: Any) -> tuple[str, int]:
    """Stands in for the model: a short summary that names what it read, same input same output.
    Returns LCM-X's shape, ``(text, escalation level)``, text ending in its expand hint line."""
    text = str(kwargs.get("text") or "")
    topics = [t for t in TOPICS if t in text]
    digest = hashlib.sha256(text.encode()).hexdigest()[:8]
    head = f"Depth {kwargs.get('depth', 0)} summary {digest}: checked {', '.join(topics) or 'nothing'} logs"
    return (
        f"{head}; each showed 3 warnings and no errors.\nExpand for details about: {', '.join(topics[:3])}",
        1,
    )


class Clock:
    """The host's message time (a gateway message's date): the wall clock when it is sent, as
    LCM-X's own ``timestamp`` and node ranges are; a CLI host sends none (``stamp=False``)."""

    def __init__(self, stamp: bool = True) -> None:
        self.on = stamp

    def stamp(self, msg: dict[str, Any]) -> dict[str, Any]:
        return {**msg, "timestamp": time.time()} if self.on else dict(msg)


def turn(clock: Clock, n: int, topic: str) -> list[dict[str, Any]]:
    """One user request answered with a tool call, its result and a reply.

    The tool result carries ``name`` and ``tool_name`` as Hermes' tool dispatch writes it
    (agent/tool_dispatch_helpers.py). With ``name`` alone, LCM-X stores no tool_name, its replay
    identity of the row no longer matches the transcript's, the tool rows drop out of the covered
    ids and ``compress`` fails with ``publication_invariant_conflict`` (coverage not contiguous)."""
    call = f"call_{n}"
    args = json.dumps({"path": f"/var/log/{topic}.log"})
    detail = " ".join(f"{topic}[{n}.{i}] ok" for i in range(12))
    return [
        clock.stamp(m)
        for m in (
            {"role": "user", "content": f"Please check the {topic} logs (turn {n})."},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": call,
                        "type": "function",
                        "function": {"name": "read_file", "arguments": args},
                    }
                ],
            },
            {
                "role": "tool",
                "tool_call_id": call,
                "name": "read_file",
                "tool_name": "read_file",
                "content": f"{topic}: 3 warnings, 0 errors at line {n * 10}. {detail}",
            },
            {
                "role": "assistant",
                "content": f"The {topic} log shows 3 warnings and no errors (turn {n}).",
            },
        )
    ]


class Host:
    """The part of Hermes' agent loop that talks to a context engine."""

    def __init__(self, engine: LCMEngine) -> None:
        self.engine = engine
        self.messages: list[dict[str, Any]] = []
        self.compactions: list[str] = []

    def send(self, new: list[dict[str, Any]]) -> None:
        """Append a turn, then do what the loop does around the model call."""
        self.messages += new
        tokens = count_messages_tokens(self.messages)
        if self.engine.should_compress_preflight(self.messages) or self.engine.should_compress(
            tokens
        ):
            self.messages = self.engine.compress(self.messages, current_tokens=tokens)
            status = self.engine._last_compression_status
            if status == "error":  # "sanitized" (a cleanup in a cooldown) and "noop" are fine
                raise SystemExit(
                    f"LCM-X compress: {status} ({self.engine._last_compression_noop_reason})"
                )
            self.compactions.append(status)
        self.engine.update_from_response(
            {
                "prompt_tokens": count_messages_tokens(self.messages),
                "completion_tokens": 24,
                "total_tokens": 0,
            }
        )

    def new_session(self, old: str, new: str, **start: Any) -> None:
        """``/new``: what run_agent's session transition calls on the engine."""
        self.engine.on_session_end(old, self.messages)
        self.engine.on_session_reset()
        self.engine.on_session_start(new, old_session_id=old, **start)
        self.messages = []


def main(out: Path) -> None:
    for side in ("", "-wal", "-shm"):
        Path(f"{out}{side}").unlink(missing_ok=True)
    lcmx_engine.summarize_with_escalation = fixed_summary  # the one model call, made offline
    config = LCMConfig(
        database_path=str(out), fresh_tail_count=4, leaf_chunk_tokens=120, condensation_fanin=2
    )
    engine = LCMEngine(config=config, hermes_home=str(out.parent))
    host, clock = Host(engine), Clock()
    gateway = {
        "platform": "telegram",
        "conversation_id": "telegram:chat-42",
        "context_length": CONTEXT_LENGTH,
    }

    # conversation A, a gateway chat: session 1, many turns, compacted again and again
    engine.on_session_start("sess-a1", **gateway)
    host.send([clock.stamp({"role": "system", "content": SYSTEM}), *turn(clock, 1, TOPICS[0])])
    for n in range(2, 19):
        host.send(turn(clock, n, TOPICS[n - 1]))
    first_user = engine._store.get_session_messages("sess-a1")[1]
    engine._store.pin(int(first_user["store_id"]))
    # /new, then session 2 of the same chat: the model searches the history with lcm_grep
    host.new_session("sess-a1", "sess-a2", **gateway)
    host.send([clock.stamp({"role": "system", "content": SYSTEM}), *turn(clock, 19, TOPICS[18])])
    grep_call = {
        "id": "call_grep",
        "type": "function",
        "function": {"name": "lcm_grep", "arguments": json.dumps({"query": "nginx"})},
    }
    asked = [
        clock.stamp({"role": "user", "content": "What did the nginx log say last time?"}),
        clock.stamp({"role": "assistant", "content": "", "tool_calls": [grep_call]}),
    ]
    result = engine.handle_tool_call("lcm_grep", {"query": "nginx"}, messages=host.messages + asked)
    answer = [
        clock.stamp(
            {
                "role": "tool",
                "tool_call_id": "call_grep",
                "name": "lcm_grep",
                "tool_name": "lcm_grep",
                "content": result[:400],
            }
        ),
        clock.stamp({"role": "assistant", "content": "Last time nginx had 3 warnings, no errors."}),
    ]
    host.send(asked + answer)
    for n in range(20, 25):
        host.send(turn(clock, n, TOPICS[n - 1]))
    engine.shutdown()  # the gateway stops with the chat still open: sess-a2 stays current

    # conversation B, a CLI run (another process on the same file; LCM-X keys it by its session
    # id); its messages carry no time, and the CLI ends the session when it exits
    engine = LCMEngine(config=config, hermes_home=str(out.parent))
    cli, clock = Host(engine), Clock(stamp=False)
    engine.on_session_start("cli-20251001", platform="cli", context_length=CONTEXT_LENGTH)
    cli.send(
        [
            clock.stamp({"role": "user", "content": "What is 2 + 2?"}),
            clock.stamp({"role": "assistant", "content": "4."}),
        ]
    )
    for n in range(25, 31):
        cli.send(turn(clock, n, TOPICS[n - 25]))
    engine.on_session_end("cli-20251001", cli.messages)
    engine.shutdown()

    con = sqlite3.connect(out)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.execute("PRAGMA journal_mode=DELETE")  # one self-contained file: no -wal beside the fixture
    con.execute("VACUUM")
    depths = con.execute("SELECT depth, count(*) FROM summary_nodes GROUP BY depth").fetchall()
    count = con.execute("SELECT count(*) FROM messages").fetchone()[0]
    con.close()
    print(
        f"wrote {out} ({out.stat().st_size} bytes): {count} messages, nodes by depth {dict(depths)}, "
        f"compress ran {len(host.compactions) + len(cli.compactions)} times"
    )


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "lcmx.db"))

"""Build tests/peers/lcm_x/lcmx.db with LCM-X's own storage code (test fixture generator).

LCM-X is not a dependency of hermes-lcm; run this only to regenerate the fixture:

    git -C <lcm-x mirror> archive HEAD | tar -x -C /tmp/lcmx
    python3 -m venv /tmp/lcmx-venv
    mkdir -p /tmp/lcmx-pkg && ln -sfn /tmp/lcmx /tmp/lcmx-pkg/hermes_lcm   # LCM-X imports itself as hermes_lcm
    PYTHONPATH=/tmp/lcmx-pkg /tmp/lcmx-venv/bin/python tests/peers/lcm_x/make_db.py tests/peers/lcm_x/lcmx.db

(`pip install /tmp/lcmx` fails on LCM-X's flat layout, so it is put on the path instead; its
storage modules need only the standard library.) The conversation is scripted and the summaries
are fixed text: what LCM-X's compaction would write (leaf nodes over store ids, a condensed node
over node ids), written through its own ``SummaryDAG.add_node``, so no summarizer or network runs.
"""

from __future__ import annotations

import sys
from pathlib import Path

from hermes_lcm.dag import SummaryDAG, SummaryNode  # LCM-X's package, not ours
from hermes_lcm.lifecycle_state import LifecycleStateStore
from hermes_lcm.store import MessageStore

T0 = 1_760_000_000.0


def turn(n: int, topic: str) -> list[dict]:
    """One user request answered with a tool call and its result."""
    call = f"call_{n}"
    return [
        {"role": "user", "content": f"Please check the {topic} logs (turn {n})."},
        {"role": "assistant", "content": "",
         "tool_calls": [{"id": call, "type": "function",
                         "function": {"name": "read_file", "arguments": f'{{"path": "/var/log/{topic}.log"}}'}}]},
        {"role": "tool", "tool_call_id": call, "tool_name": "read_file",
         "content": f"{topic}: 3 warnings, 0 errors at line {n * 10}"},
        {"role": "assistant", "content": f"The {topic} log shows 3 warnings and no errors (turn {n})."},
    ]


def main(out: Path) -> None:
    if out.exists():
        out.unlink()
    store, dag, life = MessageStore(out), SummaryDAG(out), LifecycleStateStore(out)
    clock = [T0]

    def add(session: str, conversation: str, source: str, msgs: list[dict]) -> list[int]:
        ids = []
        for m in msgs:
            clock[0] += 7.0
            ids.append(store.append(session, {**m, "timestamp": clock[0]}, token_estimate=len(m["content"]) // 4 + 4,
                                    source=source, conversation_id=conversation))
        return ids

    def leaf(session: str, ids: list[int], text: str) -> int:
        times = [store.get(i)["observed_at"] for i in ids]
        return dag.add_node(SummaryNode(session_id=session, depth=0, summary=text, token_count=len(text) // 4,
                                        source_token_count=40 * len(ids), source_ids=ids, source_type="messages",
                                        created_at=clock[0], earliest_at=min(times), latest_at=max(times),
                                        expand_hint="Expand for details about: logs"))

    # conversation A: a gateway chat over two sessions (the second after /new)
    conv_a, s1, s2 = "telegram:chat-42", "sess-a1", "sess-a2"
    life.bind_session(s1, conversation_id=conv_a)
    first = add(s1, conv_a, "telegram", [{"role": "system", "content": "You are a careful operations assistant."}])
    t1 = add(s1, conv_a, "telegram", turn(1, "nginx"))
    t2 = add(s1, conv_a, "telegram", turn(2, "postgres"))
    t3 = add(s1, conv_a, "telegram", turn(3, "redis"))
    store.pin(t1[0])
    n1 = leaf(s1, first + t1, "Turn 1: nginx log read with read_file: 3 warnings, no errors.")
    n2 = leaf(s1, t2, "Turn 2: postgres log read with read_file: 3 warnings, no errors.")
    n3 = leaf(s1, t3, "Turn 3: redis log read: 3 warnings, no errors.")
    nodes = [dag.get_node(n) for n in (n1, n2)]
    dag.add_node(SummaryNode(session_id=s1, depth=1, summary="Turns 1-2: nginx and postgres logs checked; all clean.",
                             token_count=14, source_token_count=sum(n.token_count for n in nodes),
                             source_ids=[n1, n2], source_type="nodes", created_at=clock[0],
                             earliest_at=nodes[0].earliest_at, latest_at=nodes[1].latest_at))
    del n3
    life.advance_frontier(conv_a, s1, t3[-1])
    life.finalize_session(conv_a, s1, frontier_store_id=t3[-1])
    life.record_reset(conv_a)
    life.bind_session(s2, conversation_id=conv_a)
    add(s2, conv_a, "telegram", turn(4, "kafka"))

    # conversation B: a CLI session with no conversation id (LCM-X keys it by session)
    s3 = "cli-20251001"
    add(s3, "", "cli", [{"role": "user", "content": "What is 2 + 2?"}, {"role": "assistant", "content": "4."}])
    b = add(s3, "", "cli", turn(5, "cron"))
    leaf(s3, b, "Turn 5: cron log read: 3 warnings, no errors.")
    store.commit()
    for closable in (store, dag, life):
        closable.close()
    print(f"wrote {out} ({out.stat().st_size} bytes)")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "lcmx.db"))

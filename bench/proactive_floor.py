"""Proactive recall's relevance floor on LoCoMo: related messages get a block, unrelated ones none.

One command: ``.venv/bin/python bench/proactive_floor.py [--data ../shared/data/locomo] [--files conv-30]``.

The seven LoCoMo conversations are stored as bench/locomo_recall.py stores them (one database,
one session each, the local owner). A new session with LCM_PROACTIVE_RECALL_ENABLED then sends,
one message at a time, (a) every LoCoMo question (category 5 excluded): does a block come, and
does it hold an evidence turn; (b) the unrelated messages below (coding, operations, errands,
small talk; none is about the conversations' people or events): does a block come at all. Then
the demo fixture (fixtures/coding_session.json, one coding session) alone: its planted facts'
questions from a new session (does the block carry the fact's last words), and small talk. The
block is what the host would append to the user's message (``turncontext.recall_block``), at the
default budget of 500 tokens.
"""

from __future__ import annotations

import argparse
import copy
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

UNRELATED = [
    "Can you write a Python function that parses ISO 8601 timestamps with time zones?",
    "Why does my Docker build fail with 'no space left on device'?",
    "Explain the difference between a mutex and a semaphore.",
    "How do I rebase my feature branch onto main without losing commits?",
    "What does HTTP status 429 mean and how should a client back off?",
    "Refactor this loop into a list comprehension please.",
    "The nginx reverse proxy returns 502 after the upstream restarts. Ideas?",
    "Write a SQL query that returns the top five customers by revenue last quarter.",
    "How do I configure pytest to run only the tests marked slow?",
    "What is the time complexity of heapq.nsmallest?",
    "Set up a cron job that rotates the logs every night at 2am.",
    "Convert this JSON schema to a TypeScript interface.",
    "My kubernetes pod is stuck in CrashLoopBackOff; how do I debug it?",
    "What's a good regex for validating IPv4 addresses?",
    "Summarize the tradeoffs of Postgres logical replication versus streaming replication.",
    "How do I pin a transitive dependency with pip-tools?",
    "Generate a bash script that backs up /etc to an S3 bucket.",
    "Why is my React component re-rendering on every keystroke?",
    "Explain how TLS certificate pinning works on Android.",
    "What's the fastest way to count lines in a 40 GB file?",
    "ok",
    "thanks!",
    "Sounds good, go ahead.",
    "Can you try again?",
    "What time is it in Tokyo right now?",
    "Translate 'where is the train station' into German.",
    "How many tablespoons are in a quarter cup?",
    "What's the capital of Australia?",
    "Draft an email asking the landlord to fix the radiator.",
    "Give me three name ideas for a budgeting app.",
    "Compare the Rust borrow checker with C++ smart pointers.",
    "How do I undo the last git commit but keep the changes?",
    "Our CI pipeline times out on the integration stage after 30 minutes.",
    "Write a haiku about database migrations.",
    "What are the tax implications of selling stock options?",
    "Plan a three-day itinerary for Lisbon on a budget.",
    "How should I structure a monorepo with Go and TypeScript services?",
    "Debug this segfault in my C extension module.",
    "Is it safe to store JWTs in localStorage?",
    "What's the best way to benchmark Python code?",
]


# Small talk: unrelated to the coding fixture (LoCoMo's people do camp, paint and run, so these
# are asked of the demo fixture only).
CHAT = [
    "How was your weekend? Did you do anything fun with the kids?",
    "I just adopted a puppy and she chews everything.",
    "My sister is getting married in June; any toast ideas?",
    "Recommend a novel for a long flight.",
    "I started painting landscapes again, mostly sunsets.",
    "What should I cook for a dinner party of six?",
    "Any tips for running my first half marathon?",
    "I feel nervous about my job interview tomorrow.",
    "We're planning a camping trip to the lake next month.",
    "Which houseplants survive in low light?",
]


def _demo(home: Path) -> tuple[Any, list[tuple[str, str]]]:
    """The demo fixture stored as one session (its turns as the host sends them); its planted
    facts' questions, each with the detail the block should carry."""
    import json

    fixture = json.loads((ROOT / "fixtures" / "coding_session.json").read_text(encoding="utf-8"))
    engine = _engine(home, "demo-session")
    messages: list[dict[str, Any]] = []
    for turn in fixture["turns"]:
        messages.append({"role": "user", "content": turn["user"]})
        messages.extend(turn["messages"])
    engine.ingest_host(messages)
    return engine, [(p["question"], p["detail"]) for p in fixture["planted"]]


def _engine(home: Path, session: str, **env: str) -> Any:
    from hermes_lcm.engine import LcmEngine

    base = {"HERMES_HOME": str(home), "LCM_SUMMARY_PROVIDER": "extractive", **env}
    engine = copy.deepcopy(LcmEngine(env=base))
    engine.update_model("bench-model", 1_000_000)
    engine.on_session_start(session, hermes_home=str(home), platform="locomo")
    return engine


def main(argv: list[str] | None = None, save: bool = True) -> dict[str, Any]:
    from bench.locomo_recall import add_data_arguments, ingest, load_selected
    from hermes_lcm.base.tokens import count_tokens
    from hermes_lcm.host import turncontext

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_data_arguments(parser)
    args = parser.parse_args(argv)
    conversations = load_selected(args.data, args.files)
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        maps = [(c, ingest(home, c)[1]) for c in conversations]
        asker = _engine(home, "proactive-asker", LCM_PROACTIVE_RECALL_ENABLED="true")
        core = asker.core
        asked = with_block = with_evidence = 0
        tokens: list[int] = []
        t0 = time.perf_counter()
        for conversation, to_dia in maps:
            for question in conversation.questions:
                asked += 1
                block = turncontext.recall_block(core, question.text, False)
                if block is None:
                    continue
                with_block += 1
                tokens.append(count_tokens(block))
                shown = {to_dia.get(int(i)) for i in re.findall(r"store_id=(\d+)", block)}
                with_evidence += bool(shown & question.evidence)
        related_ms = (time.perf_counter() - t0) / max(1, asked) * 1000
        unrelated_blocks = [
            m for m in UNRELATED if turncontext.recall_block(core, m, False) is not None
        ]
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        kept, planted = _demo(home)
        demo_core = _engine(home, "demo-asker", LCM_PROACTIVE_RECALL_ENABLED="true").core
        demo_blocks = [turncontext.recall_block(demo_core, q, False) for q, _ in planted]
        demo_found = sum(
            1
            for b, (_, detail) in zip(demo_blocks, planted, strict=True)
            if b is not None and any(w in b for w in detail.split()[-3:])
        )
        demo_unrelated = [
            m for m in CHAT if turncontext.recall_block(demo_core, m, False) is not None
        ]
        assert kept.core is not None
    result = {
        "questions": asked,
        "related_with_block": round(with_block / max(1, asked), 3),
        "related_evidence_in_block": round(with_evidence / max(1, asked), 3),
        "block_tokens_median": statistics.median(tokens) if tokens else 0,
        "block_tokens_max": max(tokens, default=0),
        "unrelated": len(UNRELATED),
        "unrelated_with_block": len(unrelated_blocks),
        "ms_per_message": round(related_ms, 2),
        "demo_planted": len(planted),
        "demo_planted_with_block": sum(b is not None for b in demo_blocks),
        "demo_planted_detail_in_block": demo_found,
        "demo_unrelated": len(CHAT),
        "demo_unrelated_with_block": len(demo_unrelated),
    }
    for key, value in result.items():
        print(f"{key:28} {value}")
    for message in unrelated_blocks + demo_unrelated:
        print(f"  unrelated message that got a block: {message}")
    if save:
        from common import save_result

        rows = [
            {
                "target": "proactive recall: no block for unrelated messages",
                "ours": f"LoCoMo {result['unrelated_with_block']}/{result['unrelated']}, demo "
                f"{result['demo_unrelated_with_block']}/{result['demo_unrelated']}",
                "reference": "coding/ops/errand messages vs LoCoMo; small talk vs the demo fixture",
                "verdict": "met" if not unrelated_blocks and not demo_unrelated else "missed",
            },
            {
                "target": "proactive recall: related messages get a block",
                "ours": f"LoCoMo {result['related_with_block']} with a block, {result['related_evidence_in_block']} "
                f"with an evidence turn in it ({asked} questions); demo planted "
                f"{result['demo_planted_detail_in_block']}/{result['demo_planted']}",
                "reference": f"block tokens median {result['block_tokens_median']}, max {result['block_tokens_max']} "
                f"(budget 500); {result['ms_per_message']} ms per message",
                "verdict": "measured",
            },
        ]
        save_result("proactive_floor", rows, result)
    return result


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT.parent))
    sys.path.insert(0, str(ROOT))
    main()

"""LoCoMo recall as the agent really uses it: every question asked from inside a live session.

One command: ``.venv/bin/python bench/locomo_inuse.py [--files conv-30] [--context 32000]``.

bench/locomo_recall.py asks the questions from outside the conversation. Here each of the seven
conversations is replayed through the engine as a live session (one LoCoMo session per host
step, the engine compacting whenever the host's prompt passes its threshold), and then, for each
question in turn, as a host would run the turn: the question is appended as a user message and
stored, ``lcm_grep`` and ``lcm_recall`` are called from inside that turn with the raw question,
the assistant's tool call and both tool results are appended (the answers as the tools returned
them), then a short assistant answer quoting the top hit. Earlier questions, their searches and
answers accumulate in the store, so later searches must find the evidence among them.

Each search is made twice at the same moment: with the defaults (hits the prompt shows are listed
last, LCM's own tool traffic is not searched) and with both turned off; only the default answers
are stored. Recall counts as bench/locomo_recall.py does (category 5 excluded; lenient: any
evidence turn among the first k hits, strict: all of them). The offline figure is
bench/locomo_recall.py's, run in the same process. Target: in-use R@10 within 0.02 of it.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import locomo_recall as offline
from common import print_table, save_result
from locomo_recall import KS, Conversation, Tally, call, session_store_ids

ROOT = Path(__file__).resolve().parents[1]
CONTEXT = 32_000  # the model's context window: small enough that every conversation compacts
TOOLS = ("lcm_grep", "lcm_recall")
DEFAULTS_OFF = {"include_in_context": True, "include_lcm_traffic": True}
TARGET_GAP = 0.02
OVERHEAD = 1500  # system prompt and tool schemas the host adds to every request


def make_engine(home: Path, session: str, context: int) -> Any:
    from hermes_lcm.engine import LcmEngine

    env = {"HERMES_HOME": str(home), "LCM_SUMMARY_PROVIDER": "extractive"}
    engine = copy.deepcopy(LcmEngine(env=env))
    engine.update_model("bench-model", context)
    engine.on_session_start(session, hermes_home=str(home), platform="locomo")
    return engine


class LiveSession:
    """One conversation as the host holds it: its prompt list, stored and compacted like Hermes does."""

    def __init__(self, home: Path, conversation: Conversation, context: int) -> None:
        self.conversation = conversation
        self.session = f"locomo-{conversation.name}"
        self.engine = make_engine(home, self.session, context)
        self.live: list[dict[str, Any]] = []
        self.compactions = 0
        self.to_dia: dict[int, str] = {}

    def step(self, messages: list[dict[str, Any]]) -> None:
        """Append a host step's messages, store them, and compress when the prompt is over the threshold."""
        from hermes_lcm.base.tokens import count_messages

        self.live.extend(messages)
        self.engine.ingest_host(list(self.live))
        tokens = count_messages(self.live) + OVERHEAD
        if self.engine.should_compress(tokens):
            self.live = list(self.engine.compress(list(self.live), current_tokens=tokens))
            self.compactions += 1

    def replay(self) -> None:
        """The conversation's turns, one LoCoMo session per host step."""
        turns, ids = self.conversation.turns, self.conversation.dia_ids
        start = 0
        for end in range(1, len(turns) + 1):
            if end == len(turns) or ids[end].split(":")[0] != ids[start].split(":")[0]:
                self.step(turns[start:end])
                start = end
        stored = session_store_ids(self.engine, self.session)[: len(turns)]
        self.to_dia = dict(zip(stored, ids, strict=True))

    def ranks(self, answer: dict[str, Any]) -> list[str | None]:
        return [
            self.to_dia.get(h["store_id"]) if "store_id" in h else None for h in answer["hits"]
        ][: max(KS)]

    def ask(
        self,
        n: int,
        question: str,
        at: float,
        tallies: dict[tuple[str, str], Tally],
        evidence: frozenset[str],
    ) -> None:
        """One turn: the question stored, both tools called from inside it, their traffic and an answer stored."""
        self.step([{"role": "user", "content": question, "timestamp": at}])
        answers = {}
        for tool in TOOLS:
            answers[tool] = call(self.engine, tool, {"query": question, "limit": max(KS)})
            tallies[(tool, "in-use")].add(self.ranks(answers[tool]), evidence)
            off = call(self.engine, tool, {"query": question, "limit": max(KS), **DEFAULTS_OFF})
            tallies[(tool, "in-use, defaults off")].add(self.ranks(off), evidence)
        calls = [
            {
                "id": f"call_{n}_{tool}",
                "type": "function",
                "function": {"name": tool, "arguments": json.dumps({"query": question})},
            }
            for tool in TOOLS
        ]
        top = next((h["snippet"] for h in answers["lcm_grep"]["hits"]), "nothing relevant")
        self.step(
            [
                {"role": "assistant", "content": "", "tool_calls": calls, "timestamp": at + 1},
                *(
                    {
                        "role": "tool",
                        "name": tool,
                        "tool_call_id": f"call_{n}_{tool}",
                        "content": json.dumps(answers[tool]),
                        "timestamp": at + 2,
                    }
                    for tool in TOOLS
                ),
                {
                    "role": "assistant",
                    "content": f"From our earlier conversation: {top[:160]}",
                    "timestamp": at + 3,
                },
            ]
        )


def in_use(
    conversations: list[Conversation], context: int
) -> tuple[dict[tuple[str, str], Tally], dict[str, Any]]:
    """Replay every conversation into one database, then ask each one's questions inside its session."""
    home = Path(tempfile.mkdtemp(prefix="lcm-locomo-inuse-"))
    tallies = {
        (tool, mode): Tally() for tool in TOOLS for mode in ("in-use", "in-use, defaults off")
    }
    sessions = []
    started = time.perf_counter()
    for conversation in conversations:
        live = LiveSession(home, conversation, context)
        live.replay()
        sessions.append(live)
    replayed = time.perf_counter() - started
    for live in sessions:
        at = max(t["timestamp"] for t in live.conversation.turns) + 3600
        for n, question in enumerate(live.conversation.questions):
            live.ask(n, question.text, at + 60 * n, tallies, question.evidence)
    asked = time.perf_counter() - started - replayed
    info = {
        "replay_seconds": round(replayed, 1),
        "questions_seconds": round(asked, 1),
        "compactions": {s.conversation.name: s.compactions for s in sessions},
        "stored_messages": {
            s.conversation.name: len(s.conversation.turns) + 5 * len(s.conversation.questions)
            for s in sessions
        },
    }
    return tallies, info


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    offline.add_data_arguments(parser)
    parser.add_argument(
        "--context", type=int, default=CONTEXT, help="the model's context window in tokens"
    )
    parser.add_argument(
        "--no-save", action="store_true", help="print only; do not write bench/results"
    )
    args = parser.parse_args(argv)
    conversations = offline.load_selected(args.data, args.files)
    results: dict[str, dict[str, Any]] = {}
    for name, tool, tally in offline.evaluate(conversations, TOOLS):
        if name == "all":
            results[f"{tool} offline"] = tally.figures()
    tallies, info = in_use(conversations, args.context)
    for (tool, mode), tally in tallies.items():
        results[f"{tool} {mode}"] = tally.figures()
    print(f"{'system':34} {'qs':>5}  " + " ".join(f"R@{k:<4}" for k in KS) + "   strict R@10")
    for name, figures in results.items():
        cells = " ".join(f"{figures['lenient'][k]:6.3f}" for k in KS)
        print(f"{name:34} {figures['questions']:5}  {cells}   {figures['strict'][10]:.3f}")
    print(json.dumps(info))
    rows = []
    for tool in TOOLS:
        base, used = (
            results[f"{tool} offline"]["lenient"][10],
            results[f"{tool} in-use"]["lenient"][10],
        )
        off = results[f"{tool} in-use, defaults off"]["lenient"][10]
        gap = base - used
        rows.append(
            {
                "target": f"LoCoMo in-use R@10 via {tool} within {TARGET_GAP} of offline",
                "ours": f"{used:.3f} in use ({off:.3f} with the defaults off), offline {base:.3f} "
                f"({results[f'{tool} in-use']['questions']} questions, context {args.context})",
                "reference": "offline: questions asked from outside (bench/locomo_recall.py)",
                "verdict": "met" if gap <= TARGET_GAP else f"missed by {gap - TARGET_GAP:.3f}",
            }
        )
    print_table(rows)
    if not args.no_save:
        save_result(
            "recall_inuse",
            rows,
            {
                "systems": results,
                "context": args.context,
                **info,
                "conversations": len(conversations),
            },
        )
    return results


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT.parent))
    main()

"""BEAM source-turn recall@k of lcm_grep and lcm_recall, next to a plain bm25 query in the same run.

One command: ``.venv/bin/python bench/beam_recall.py --data <BEAM> [--size 100K] [--chats 1-10]``.

Data: BEAM (Tavakoli et al., ICLR 2026; github.com/mohammadtavakoli78/BEAM), research data read
in place and never copied: ``<BEAM>`` is a checkout of that repository, or the git directory of a
mirror of it (read with ``git show``; ``BEAM_DATA`` names it when ``--data`` is not given). Each
chat ``chats/<size>/<n>/chat.json`` is a list of batches of sessions of messages, each message
with its ``id``; its ``probing_questions/probing_questions.json`` holds ten categories of
questions, most of which cite the messages they were written from (``source_chat_ids``: a list,
or a dict of lists such as ``first_event`` / ``second_event``). Only questions that cite a
stored message are asked; ``abstention`` cites none.

Each chat is stored through the engine's own ingest as one session (all chats share one
database), its messages in order, host timestamps from the time anchors the user's messages
carry; no compaction runs, so every hit is a message. The questions are asked from outside (no
turn in the asker's prompt). A question counts at k when any (lenient) or all (strict) of its cited
messages are among the first k hits. lcm_grep is conversation-scoped; lcm_recall searches the whole
database with its bias to the current conversation, so the other chats compete.

The baseline is the simplest one: an SQLite FTS5 table (the default unicode61 tokenizer, no
stemming) holding the same chat's messages, asked the question's words as one OR query, ranked by
bm25. It runs in the same process over the same messages.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from locomo_recall import (
    HYBRID_ENV,
    KS,
    Tally,
    backfilled,
    call,
    make_engine,
    session_store_ids,
)

ROOT = Path(__file__).resolve().parents[1]
CATEGORIES = (
    "contradiction_resolution",
    "event_ordering",
    "information_extraction",
    "instruction_following",
    "knowledge_update",
    "multi_session_reasoning",
    "preference_following",
    "summarization",
    "temporal_reasoning",
)
BASELINE = "bm25"
_WORD = re.compile(r"\w+")
START = datetime(2024, 1, 1, tzinfo=UTC).timestamp()


@dataclass(frozen=True)
class Question:
    category: str
    text: str
    sources: frozenset[int]  # the BEAM message ids it cites


@dataclass
class Chat:
    name: str  # "<size>-<n>"
    turns: list[dict[str, Any]]  # host messages, in order
    ids: list[int]  # the BEAM id of each turn, same order
    questions: list[Question] = field(default_factory=list)


class Source:
    """A BEAM checkout, or the git directory of a mirror of it (files read with ``git show``)."""

    def __init__(self, where: str) -> None:
        self.root = Path(where)
        self.git = not (self.root / "chats").is_dir()
        if self.git and not (self.root / "HEAD").exists():
            raise SystemExit(
                f"BEAM data not found at {where}: pass --data (a checkout of "
                "github.com/mohammadtavakoli78/BEAM, or its git directory) or set BEAM_DATA"
            )

    def read(self, path: str) -> Any:
        if not self.git:
            return json.loads((self.root / path).read_text(encoding="utf-8"))
        out = subprocess.run(
            ["git", "--git-dir", str(self.root), "show", f"HEAD:{path}"],
            capture_output=True,
            check=True,
        )
        return json.loads(out.stdout.decode("utf-8"))


def _anchor(text: str | None) -> float | None:
    """``"March-15-2024"`` -> epoch seconds (UTC); None when absent or not a date."""
    if not text:
        return None
    try:
        return datetime.strptime(text.strip(), "%B-%d-%Y").replace(tzinfo=UTC).timestamp()
    except ValueError:
        return None


def _cited(raw: Any) -> set[int]:
    """``source_chat_ids`` as the set of ids it names (a list, or a dict of lists)."""
    if isinstance(raw, dict):
        return {i for part in raw.values() for i in _cited(part)}
    if isinstance(raw, list):
        return {int(i) for i in raw if isinstance(i, int) or str(i).isdigit()}
    return set()


def load_chat(source: Source, size: str, number: int) -> Chat:
    base = f"chats/{size}/{number}"
    batches = source.read(f"{base}/chat.json")
    turns, ids = [], []
    clock = START
    for batch in batches:
        for session in batch["turns"]:
            for message in session:
                anchored = _anchor(message.get("time_anchor"))
                clock = max(clock + 60, anchored or 0)
                turns.append(
                    {"role": message["role"], "content": message["content"], "timestamp": clock}
                )
                ids.append(int(message["id"]))
    chat = Chat(f"{size}-{number}", turns, ids)
    known = set(ids)
    probing = source.read(f"{base}/probing_questions/probing_questions.json")
    for category, questions in probing.items():
        for q in questions:
            cited = frozenset(_cited(q.get("source_chat_ids")) & known)
            if cited:
                chat.questions.append(Question(category, q["question"], cited))
    return chat


def chat_numbers(spec: str) -> list[int]:
    """``"1-10"`` or ``"1,3,5"`` -> the chat numbers."""
    out: list[int] = []
    for part in spec.split(","):
        lo, _, hi = part.strip().partition("-")
        out += list(range(int(lo), int(hi or lo) + 1))
    return out


def ingest(home: Path, chat: Chat) -> tuple[Any, dict[int, int]]:
    """Store a chat through the engine; the engine and store_id -> BEAM id."""
    session = f"beam-{chat.name}"
    engine = make_engine(home, session)
    stored = engine.ingest_host(chat.turns)
    store_ids = session_store_ids(engine, session)
    if stored != len(chat.turns) or len(store_ids) != len(chat.ids):
        raise RuntimeError(f"{chat.name}: stored {stored}, walked {len(store_ids)}")
    return engine, dict(zip(store_ids, chat.ids, strict=True))


class Bm25:
    """The baseline: one chat's messages in a plain FTS5 table, asked an OR of the question's words."""

    def __init__(self, chat: Chat) -> None:
        self.db = sqlite3.connect(":memory:")
        self.db.execute("CREATE VIRTUAL TABLE t USING fts5(content)")
        self.db.executemany(
            "INSERT INTO t(rowid, content) VALUES (?, ?)",
            [(i, m["content"]) for i, m in zip(chat.ids, chat.turns, strict=True)],
        )

    def ranked(self, question: str, k: int) -> list[int]:
        words = sorted({w.lower() for w in _WORD.findall(question)})
        if not words:
            return []
        query = " OR ".join('"' + w.replace('"', '""') + '"' for w in words)
        rows = self.db.execute(
            "SELECT rowid FROM t WHERE t MATCH ? ORDER BY bm25(t) LIMIT ?", (query, k)
        ).fetchall()
        return [int(r[0]) for r in rows]


def ranked_ids(engine: Any, tool: str, question: str, to_beam: dict[int, int], k: int) -> list[Any]:
    answer = call(engine, tool, {"query": question, "limit": k, "include_in_context": True})
    return [to_beam.get(h["store_id"]) if "store_id" in h else None for h in answer["hits"]][:k]


EMBEDDED = "lcm_recall+local"  # lcm_recall with the local embedder on


def embedded_engines(home: Path, chats: list[Chat]) -> dict[str, Any]:
    """Per chat, an engine on the same database with the local embedder on, after one backfill
    embedded every stored message (vectors cached by text, like the LoCoMo bench's)."""
    return backfilled({c.name: make_engine(home, f"beam-{c.name}", HYBRID_ENV) for c in chats})


def evaluate(
    chats: list[Chat], tools: tuple[str, ...] = ("lcm_grep", "lcm_recall"), home: Path | None = None
) -> Iterator[tuple[str, str, str, Tally]]:
    """Yields (chat, tool, category, tally) per chat, tool and category ("all" for a chat's
    whole set), then ("all", tool, category, total) over every chat. ``EMBEDDED`` among the
    tools asks lcm_recall of a second engine with the local embedder on."""
    home = home or Path(tempfile.mkdtemp(prefix="lcm-beam-"))
    loaded = [(chat, *ingest(home, chat)) for chat in chats]
    embedded = embedded_engines(home, chats) if EMBEDDED in tools else {}
    names = (BASELINE, *tools)
    totals: dict[tuple[str, str], Tally] = {}
    for chat, engine, to_beam in loaded:
        baseline = Bm25(chat)
        for tool in names:
            tallies: dict[str, Tally] = {}
            started = time.perf_counter()
            for q in chat.questions:
                if tool == BASELINE:
                    ranked: list[Any] = baseline.ranked(q.text, max(KS))
                elif tool == EMBEDDED:
                    ranked = ranked_ids(embedded[chat.name], "lcm_recall", q.text, to_beam, max(KS))
                else:
                    ranked = ranked_ids(engine, tool, q.text, to_beam, max(KS))
                evidence = frozenset(str(i) for i in q.sources)
                as_text = [None if i is None else str(i) for i in ranked]
                for key in (q.category, "all"):
                    tallies.setdefault(key, Tally()).add(as_text, evidence)
                    totals.setdefault((tool, key), Tally()).add(as_text, evidence)
            seconds = time.perf_counter() - started
            tallies.setdefault("all", Tally()).seconds = seconds
            totals.setdefault((tool, "all"), Tally()).seconds += seconds
            for category, tally in tallies.items():
                yield chat.name, tool, category, tally
    for (tool, category), tally in totals.items():
        yield "all", tool, category, tally


def verdict(
    args: argparse.Namespace, tools: tuple[str, ...], overall: dict[str, Any]
) -> dict[str, str]:
    """The target: lcm_grep, and lcm_recall with the local embedder, above bm25 at R@10 over all
    questions and below it in no category (lcm_recall without vectors is reported, not judged)."""
    at10 = {c: {t: f[t]["lenient"][10] for t in f} for c, f in overall.items()}
    judged = [t for t in ("lcm_grep", EMBEDDED) if t in tools]
    below = sorted(f"{t} in {c}" for c, f in at10.items() for t in judged if f[t] < f[BASELINE])
    ours = ", ".join(f"{t} {at10['all'][t]}" for t in tools)
    met = (
        EMBEDDED in tools
        and not below
        and all(at10["all"][t] > at10["all"][BASELINE] for t in judged)
    )
    return {
        "target": f"BEAM {args.size} (chats {args.chats}) source-turn R@10 above plain bm25, "
        "overall and in no category below it",
        "ours": ours
        + (f"; below bm25: {', '.join(below)}" if below else "")
        + ("" if EMBEDDED in tools else "; the local embedder not run"),
        "reference": f"plain FTS5 bm25 OR, same run: {at10['all'][BASELINE]}",
        "verdict": "met" if met else "missed",
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=os.environ.get("BEAM_DATA", ""))
    parser.add_argument("--size", default="100K", help="the chat set: 100K, 500K, 1M, 10M")
    parser.add_argument("--chats", default="1-10", help="chat numbers: 1-10 or 1,3,5")
    parser.add_argument("--save", action="store_true", help="write bench/results/beam_recall.json")
    parser.add_argument(
        "--embed",
        action="store_true",
        help=f"also {EMBEDDED}: lcm_recall with the local embedder (the 'local' extra)",
    )
    args = parser.parse_args(argv)
    source = Source(args.data)
    tools = ("lcm_grep", "lcm_recall", *((EMBEDDED,) if args.embed else ()))
    chats = [load_chat(source, args.size, n) for n in chat_numbers(args.chats)]
    print(
        f"BEAM {args.size} chats {args.chats}: {sum(len(c.turns) for c in chats):,} messages, "
        f"{sum(len(c.questions) for c in chats)} questions citing their sources",
        flush=True,
    )
    result: dict[str, Any] = {"size": args.size, "chats": args.chats, "overall": {}, "per_chat": {}}
    for name, tool, category, tally in evaluate(chats, tools):
        figures = tally.figures()
        if name == "all":
            result["overall"].setdefault(category, {})[tool] = figures
        elif category == "all":
            result["per_chat"].setdefault(name, {})[tool] = figures
    print(f"{'category':26} {'qs':>4}  " + "  ".join(f"{t:>22}" for t in (BASELINE, *tools)))
    print(f"{'':32}" + "  ".join(f"{'R@1   R@5   R@10':>22}" for _ in (BASELINE, *tools)))
    for category in ("all", *CATEGORIES):
        row = result["overall"].get(category)
        if not row:
            continue
        cells = "  ".join(
            f"{row[t]['lenient'][1]:6.3f}{row[t]['lenient'][5]:6.3f}{row[t]['lenient'][10]:6.3f}".rjust(
                22
            )
            for t in (BASELINE, *tools)
        )
        print(f"{category:26} {row[BASELINE]['questions']:4}  {cells}")
    if args.save:
        from common import save_result

        save_result("beam_recall", [verdict(args, tools, result["overall"])], result)
    return result


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT.parent))
    main()

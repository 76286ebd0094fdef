"""LoCoMo evidence recall@k of lcm_grep and lcm_recall (full-text only), next to plain bm25.

One command: ``.venv/bin/python bench/locomo_recall.py [--data ../shared/data/locomo] [--files conv-30]``.

Data: the seven LoCoMo conversations in ``../shared/data/locomo`` (research data, read in place,
never copied). Each conversation is stored through the engine's own ingest, one message per turn
with content ``"speaker: text"`` (plus ``[image: caption]`` when the turn shared one), speaker A as
user and speaker B as assistant, host timestamps from the session dates; all seven share one
database, each in its own session. The turn -> store_id map comes from walking the session with
lcm_load_session. No compaction runs, so every hit is a turn. The questions come from outside the
conversation (none is stored, no turn is in the asker's prompt); bench/locomo_inuse.py asks them
from inside, as a live session would.

Recall (the data README's definition): per conversation, the raw question text, category 5
excluded; a question counts at k when any (lenient) or all (strict) of its evidence turns are
among the first k hits. lcm_grep is conversation-scoped (its default); lcm_recall searches the
whole database with its soft bias to the current conversation, so other conversations compete. With
``--hybrid`` (``--weights 0.2,0.3``) lcm_recall is also asked with local embeddings on
(``hybrid@<LCM_RECALL_VECTOR_WEIGHT>``), every stored turn embedded first.
The baseline is the data README's plain FTS5 bm25 OR query (R@10 0.68 lenient, 0.56 strict).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import re
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "locomo"
KS = (1, 5, 10, 20)
BASELINE = {"lenient": {1: 0.35, 5: 0.59, 10: 0.68, 20: 0.74}, "strict": {10: 0.56}}
TARGET_R10 = 0.75


@dataclass(frozen=True)
class Question:
    text: str
    evidence: frozenset[str]


@dataclass
class Conversation:
    name: str
    turns: list[dict[str, Any]]  # host messages, in order
    dia_ids: list[str]  # the dia_id of each turn, same order
    questions: list[Question]


def _session_time(text: str) -> float:
    """``"1:47 pm on 18 May, 2023"`` -> epoch seconds (UTC)."""
    moment = datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y")
    return moment.replace(tzinfo=UTC).timestamp()


def _dia(raw: str) -> str | None:
    """Evidence ids as written in the data ("D1:3", "D30:05", "D:11:26") -> "D1:3"."""
    numbers = re.findall(r"\d+", raw)
    return f"D{int(numbers[0])}:{int(numbers[1])}" if len(numbers) == 2 else None


def load_conversation(path: Path) -> Conversation:
    data = json.loads(path.read_text(encoding="utf-8"))
    first = data["speaker_a"]
    turns, dia_ids = [], []
    n = 1
    while f"session_{n}" in data:
        start = _session_time(data[f"session_{n}_date_time"])
        for i, turn in enumerate(data[f"session_{n}"]):
            text = f"{turn['speaker']}: {turn['text']}"
            if turn.get("blip_caption"):
                text += f" [image: {turn['blip_caption']}]"
            role = "user" if turn["speaker"] == first else "assistant"
            turns.append({"role": role, "content": text, "timestamp": start + 30 * i})
            dia_ids.append(turn["dia_id"])
        n += 1
    known = set(dia_ids)
    questions = []
    for qa in data["qa"]:
        evidence = frozenset(
            d for d in (_dia(e) for e in qa.get("evidence", [])) if d is not None and d in known
        )
        if qa.get("category") != 5 and evidence:
            questions.append(Question(qa["question"], evidence))
    return Conversation(path.stem, turns, dia_ids, questions)


# Settings every engine of a run gets (bench/pg_recall.py puts the run on PostgreSQL with LCM_DATABASE_URL).
EXTRA_ENV: dict[str, str] = {}


def make_engine(home: Path, session: str, extra: dict[str, str] | None = None) -> Any:
    """An engine on the shared database, bound to one session, with no compaction."""
    from hermes_lcm.engine import LcmEngine

    env = {
        "HERMES_HOME": str(home),
        "LCM_SUMMARY_PROVIDER": "extractive",
        **EXTRA_ENV,
        **(extra or {}),
    }
    engine = copy.deepcopy(LcmEngine(env=env))
    engine.update_model("bench-model", 1_000_000)
    engine.on_session_start(session, hermes_home=str(home), platform="locomo")
    return engine


def call(engine: Any, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    answer = json.loads(engine.handle_tool_call(tool, args))
    if "error" in answer:
        raise RuntimeError(f"{tool} {args}: {answer['error']}")
    return answer


def session_store_ids(engine: Any, session: str) -> list[int]:
    """Every store_id of a session in order, by walking lcm_load_session's pages."""
    ids: list[int] = []
    cursor = 0
    while True:
        page = call(
            engine,
            "lcm_load_session",
            {"session_id": session, "after_store_id": cursor, "limit": 100},
        )
        ids += [m["store_id"] for m in page["messages"]]
        if page["next_cursor"] is None:
            return ids
        cursor = page["next_cursor"]


def ingest(home: Path, conversation: Conversation) -> tuple[Any, dict[int, str]]:
    """Store a conversation through the engine; returns the engine and store_id -> dia_id."""
    session = f"locomo-{conversation.name}"
    engine = make_engine(home, session)
    stored = engine.ingest_host(conversation.turns)
    ids = session_store_ids(engine, session)
    if stored != len(conversation.turns) or len(ids) != len(conversation.dia_ids):
        raise RuntimeError(
            f"{conversation.name}: stored {stored}, walked {len(ids)}, turns {len(conversation.turns)}"
        )
    return engine, dict(zip(ids, conversation.dia_ids, strict=True))


def ranked_turns(
    engine: Any, tool: str, question: str, to_dia: dict[int, str], k: int, **flags: Any
) -> list[str | None]:
    """The first ``k`` hits as dia_ids (None for a hit outside this conversation, or a summary).

    Asked from outside: no turn is in the asker's prompt (``include_in_context``), although the
    engine that stored them, which asks here, has them all in its uncompacted context."""
    answer = call(
        engine, tool, {"query": question, "limit": k, "include_in_context": True, **flags}
    )
    return [to_dia.get(h["store_id"]) if "store_id" in h else None for h in answer["hits"]][:k]


@dataclass
class Tally:
    questions: int = 0
    lenient: dict[int, int] | None = None
    strict: dict[int, int] | None = None
    seconds: float = 0.0

    def __post_init__(self) -> None:
        self.lenient = {k: 0 for k in KS}
        self.strict = {k: 0 for k in KS}

    def add(self, ranked: list[str | None], evidence: frozenset[str]) -> None:
        assert self.lenient is not None and self.strict is not None
        self.questions += 1
        for k in KS:
            top = set(ranked[:k])
            self.lenient[k] += bool(top & evidence)
            self.strict[k] += evidence <= top

    def figures(self) -> dict[str, Any]:
        """The tally as a result records it: questions, lenient and strict rates."""
        return {
            "questions": self.questions,
            "lenient": self.rates("lenient"),
            "strict": self.rates("strict"),
        }

    def rates(self, which: str) -> dict[int, float]:
        counts = self.lenient if which == "lenient" else self.strict
        assert counts is not None
        return {k: round(counts[k] / max(1, self.questions), 3) for k in KS}


# The embedded arm: the local provider, with the model LCM_EMBEDDING_MODEL names when it is set
# (multilingual-e5-small-q4 for the stronger one; the default is MiniLM).
HYBRID_ENV = {
    "LCM_EMBEDDINGS_ENABLED": "true",
    "LCM_EMBEDDING_PROVIDER": "local",
    **{k: v for k, v in os.environ.items() if k == "LCM_EMBEDDING_MODEL" and v},
}


DEFAULT_COVER: dict[str, float] = {}
VECTOR_CACHE = Path(tempfile.gettempdir()) / "lcm-locomo-vectors.npz"


class CachedProvider:
    """The provider with its answers kept by text in a file (``VECTOR_CACHE``): a second run,
    tuning the fusion, embeds nothing again. The vectors are the provider's own, unchanged."""

    cache: ClassVar[dict[str, Any]] = {}

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name, self.local = inner.name, inner.local
        self.max_chars = getattr(inner, "max_chars", 2000)

    @classmethod
    def load(cls) -> None:
        import numpy as np

        if not cls.cache and VECTOR_CACHE.exists():
            data = np.load(VECTOR_CACHE, allow_pickle=False)
            cls.cache = dict(zip(data["keys"].tolist(), data["rows"], strict=True))

    @classmethod
    def save(cls) -> None:
        import numpy as np

        if cls.cache:
            keys = list(cls.cache)
            part = VECTOR_CACHE.with_name(f"{VECTOR_CACHE.stem}.{os.getpid()}.npz")
            np.savez(part, keys=np.array(keys), rows=np.stack([cls.cache[k] for k in keys]))
            os.replace(part, VECTOR_CACHE)  # whole or not at all: another bench may be reading it

    def embed(self, texts: Any, *, timeout: float | None = None) -> Any:
        return self._cached(texts, timeout, self.inner.embed, "")

    def embed_query(self, texts: Any, *, timeout: float | None = None) -> Any:
        """A query's vector, for a model that embeds queries apart (e5); else as ``embed``."""
        if not hasattr(self.inner, "embed_query"):
            return self.embed(texts, timeout=timeout)
        return self._cached(texts, timeout, self.inner.embed_query, "query|")

    def _cached(self, texts: Any, timeout: float | None, embed: Any, side: str) -> Any:
        import hashlib

        import numpy as np

        keys = [hashlib.sha256(f"{self.name}|{side}{t}".encode()).hexdigest() for t in texts]
        missing = [i for i, k in enumerate(keys) if k not in self.cache]
        if missing:
            rows = embed([texts[i] for i in missing], timeout=timeout)
            for i, row in zip(missing, rows, strict=True):
                self.cache[keys[i]] = np.asarray(row, dtype=np.float32)
        return np.stack([self.cache[k] for k in keys]) if keys else np.zeros((0, 1), np.float32)


def hybrid_engines(
    home: Path, conversations: list[Conversation], env: dict[str, str]
) -> dict[str, Any]:
    """A second engine per conversation on the same database with embeddings on, after one
    backfill embedded every stored turn (see ``backfilled``)."""
    return backfilled({c.name: make_engine(home, f"locomo-{c.name}", env) for c in conversations})


def backfilled(engines: dict[str, Any]) -> dict[str, Any]:
    """The engines (one database, embeddings on) after one backfill embedded every stored row.
    Vectors are cached by text (``CachedProvider``), so a rerun over the same data embeds
    nothing; progress goes to stderr. A bench that asked for embeddings and got none stops
    with the engine's reason rather than measuring full text under the hybrid name."""
    CachedProvider.load()
    first = next(iter(engines.values()))
    if first.core.semantic.embedder is None:
        raise SystemExit(f"embeddings did not start: {first.core.semantic.problem}")
    for engine in engines.values():
        embedder = engine.core.semantic.embedder
        embedder.provider = CachedProvider(embedder.provider)
    embedder = first.core.semantic.embedder
    embedder.warmup()
    started = time.perf_counter()
    done = embedder.backfill(
        on_progress=lambda p: print(f"\rembedded {p.done}/{p.total}", end="", file=sys.stderr)
    )
    print(f"\nembedded {done.done} rows in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    CachedProvider.save()
    return engines


def _weighted(engine: Any, weight: float) -> Any:
    """The engine with LCM_RECALL_VECTOR_WEIGHT set to ``weight`` (one run measures several)."""
    from dataclasses import replace

    engine.core.config = replace(engine.core.config, recall_vector_weight=weight)
    return engine


def _gate(tool: str) -> None:
    """``hybrid@w:c``: search.CONFIDENT_COVER set to c for this tool's questions (tuning only);
    plain ``hybrid@w`` uses the shipped value."""
    from hermes_lcm.search import searcher as search

    DEFAULT_COVER.setdefault("shipped", search.CONFIDENT_COVER)
    search.CONFIDENT_COVER = float(tool.split(":")[1]) if ":" in tool else DEFAULT_COVER["shipped"]


def evaluate(
    conversations: list[Conversation],
    tools: tuple[str, ...] = ("lcm_grep", "lcm_recall"),
    home: Path | None = None,
    weights: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
) -> Iterator[tuple[str, str, Tally]]:
    """Yields (conversation, tool, tally) for each conversation and tool, then ("all", tool, total).
    With ``weights``, lcm_recall is also asked with embeddings on at each vector weight
    (tool "hybrid@<weight>"; "<weight>:<cover>" also sets search.CONFIDENT_COVER, for tuning)."""
    home = home or Path(tempfile.mkdtemp(prefix="lcm-locomo-"))
    loaded = [(c, *ingest(home, c)) for c in conversations]
    hybrid = hybrid_engines(home, conversations, env or HYBRID_ENV) if weights else {}
    names = list(tools) + [f"hybrid@{w}" for w in weights]
    totals = {tool: Tally() for tool in names}
    for conversation, engine, to_dia in loaded:
        for tool in names:
            tally = Tally()
            started = time.perf_counter()
            asker, asked = engine, tool
            if tool.startswith("hybrid@"):
                weight = float(tool.split("@")[1].split(":")[0])
                asker, asked = _weighted(hybrid[conversation.name], weight), "lcm_recall"
                _gate(tool)
            for question in conversation.questions:
                ranked = ranked_turns(asker, asked, question.text, to_dia, max(KS))
                tally.add(ranked, question.evidence)
                totals[tool].add(ranked, question.evidence)
            tally.seconds = time.perf_counter() - started
            totals[tool].seconds += tally.seconds
            yield conversation.name, tool, tally
    if weights:
        CachedProvider.save()
    for tool in names:
        yield "all", tool, totals[tool]


def _row(name: str, tool: str, tally: Tally) -> str:
    lenient, strict = tally.rates("lenient"), tally.rates("strict")
    ms = tally.seconds / max(1, tally.questions) * 1000
    cells = (
        " ".join(f"{lenient[k]:5.3f}" for k in KS)
        + "  "
        + " ".join(f"{strict[k]:5.3f}" for k in KS)
    )
    return f"{name:9} {tool:10} {tally.questions:5}  {cells}  {ms:6.1f}"


def add_data_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data", default=str(DEFAULT_DATA))
    parser.add_argument(
        "--files", default="", help="comma-separated conversation names (default: all)"
    )


def load_selected(data_dir: str, files: str) -> list[Conversation]:
    """The conversations named in ``files`` (all when empty), in name order."""
    data = Path(data_dir)
    if not data.is_dir():
        raise SystemExit(f"LoCoMo data not found at {data}")
    wanted = {f.strip() for f in files.split(",") if f.strip()}
    return [
        load_conversation(p)
        for p in sorted(data.glob("conv-*.json"))
        if not wanted or p.stem in wanted
    ]


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_data_arguments(parser)
    parser.add_argument(
        "--hybrid",
        action="store_true",
        help="also lcm_recall with local embeddings (every turn embedded first)",
    )
    parser.add_argument(
        "--weights", default="0.3", help="vector weights to measure with --hybrid, comma-separated"
    )
    args = parser.parse_args(argv)
    conversations = load_selected(args.data, args.files)
    weights = tuple(w.strip() for w in args.weights.split(",") if w.strip()) if args.hybrid else ()
    ks = " ".join(f"R@{k:<3}" for k in KS)
    print(f"{'':27}lenient{'':22}strict")
    print(f"{'conv':9} {'tool':10} {'qs':>5}  {ks}  {ks}  ms/q")
    result: dict[str, Any] = {}
    per_conversation: dict[str, dict[str, Any]] = {}
    for name, tool, tally in evaluate(conversations, weights=weights):
        print(_row(name, tool, tally), flush=True)
        figures = {
            "questions": tally.questions,
            "lenient": tally.rates("lenient"),
            "strict": tally.rates("strict"),
            "ms_per_query": round(tally.seconds / max(1, tally.questions) * 1000, 2),
        }
        if name == "all":
            result[tool] = figures
        else:
            per_conversation.setdefault(name, {})[tool] = figures
    if weights:
        result["per_conversation"] = per_conversation
    print(
        f"baseline (plain FTS5 bm25 OR, data README): lenient {BASELINE['lenient']}, strict {BASELINE['strict']}"
    )
    for tool, figures in result.items():
        if tool == "per_conversation":
            continue
        r10 = figures["lenient"][10]
        verdict = "met" if r10 >= TARGET_R10 else "missed"
        print(
            f"{tool}: R@10 lenient {r10:.3f} vs baseline 0.68 (target >= {TARGET_R10}: {verdict})"
        )
    return result


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT.parent))
    main()

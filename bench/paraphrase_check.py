"""The paraphrase rule: a question shares no content word with the message that answers it.

Content words are what full-text search could match on: the text is split into words the way
FTS5's ``unicode61`` tokenizer splits it (letters and digits; case and diacritics folded), the
engine's own stop words are dropped (``hermes_lcm.search.query.STOPWORDS``, the words lcm_grep drops
from a question, and single letters), and each remaining word is stemmed by SQLite's own FTS5
``porter`` tokenizer, the one the message index uses. So "settled"/"settle" and "batches"/"batch"
count as the same word, and a question passes only if keyword search has nothing to hold on to.

``python bench/paraphrase_check.py`` checks fixtures/paraphrase_questions.json (the LoCoMo half
only when the data is present) and prints every question that shares a word with its evidence.
"""

from __future__ import annotations

import argparse
import json
import re
import sqlite3
import sys
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
QUESTIONS = ROOT / "fixtures" / "paraphrase_questions.json"
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "locomo"
_WORD = re.compile(r"[^\W_]+", re.UNICODE)


def _stopwords() -> frozenset[str]:
    try:
        from hermes_lcm.search.query import STOPWORDS
    except ImportError:  # run from a checkout whose directory is not named hermes_lcm
        sys.path.insert(0, str(ROOT))
        from query import STOPWORDS  # type: ignore[import-not-found, no-redef]
    return STOPWORDS


@lru_cache(maxsize=1)
def _scratch() -> sqlite3.Connection:
    con = sqlite3.connect(":memory:")
    con.execute("CREATE VIRTUAL TABLE t USING fts5(x, tokenize='porter unicode61')")
    con.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, 'row')")
    return con


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """One word as FTS5's porter unicode61 tokenizer indexes it."""
    con = _scratch()
    con.execute("DELETE FROM t")
    con.execute("INSERT INTO t(x) VALUES (?)", (word,))
    terms = [row[0] for row in con.execute("SELECT term FROM v")]
    return terms[0] if terms else ""


def content_words(text: str) -> dict[str, str]:
    """stem -> the first word of ``text`` that has it, stop words and single letters left out."""
    stops = _stopwords()
    out: dict[str, str] = {}
    for word in _WORD.findall(text):
        lower = word.lower()
        if lower in stops or (len(lower) == 1 and not lower.isdigit()):
            continue
        key = stem(lower)
        if key:
            out.setdefault(key, lower)
    return out


def shared_words(question: str, evidence: Iterable[str]) -> list[str]:
    """The question's content words that also occur (stemmed) in any evidence text; [] = a paraphrase."""
    asked = content_words(question)
    found: set[str] = set()
    for text in evidence:
        found |= set(content_words(text))
    return sorted(asked[k] for k in asked if k in found)


# ---------------------------------------------------------------------------- the evidence texts


def demo_texts() -> dict[str, str]:
    """Demo-fixture message id ("t12.m0" = turn 12's user message, m1.. its steps) -> searchable text.

    Searchable text is what the engine indexes: content plus tool-call arguments."""
    fixture = json.loads((ROOT / "fixtures" / "coding_session.json").read_text(encoding="utf-8"))
    out = {}
    for t, turn in enumerate(fixture["turns"], start=1):
        for m, message in enumerate([{"role": "user", "content": turn["user"]}, *turn["messages"]]):
            out[f"t{t}.m{m}"] = searchable(message)
    return out


def searchable(message: dict[str, Any]) -> str:
    parts = [str(message.get("content") or "")]
    for call in message.get("tool_calls") or []:
        parts.append(str(call.get("function", {}).get("arguments", "")))
    return "\n".join(parts)


def locomo_texts(data: Path) -> dict[tuple[str, str], str]:
    """(conversation, dia_id) -> the stored text of that turn, as bench/locomo_recall.py stores it."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from locomo_recall import load_conversation

    out = {}
    for path in sorted(data.glob("conv-*.json")):
        conv = load_conversation(path)
        for dia, turn in zip(conv.dia_ids, conv.turns, strict=True):
            out[(conv.name, dia)] = turn["content"]
    return out


def load_questions(path: Path = QUESTIONS) -> list[dict[str, Any]]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    questions: list[dict[str, Any]] = data["questions"]
    return questions


def evidence_texts(
    question: dict[str, Any], demo: dict[str, str], locomo: dict[tuple[str, str], str] | None
) -> list[str] | None:
    """The texts of a question's evidence; None when its source is not available here."""
    if question["source"] == "demo":
        return [demo[e] for e in question["evidence"]]
    if locomo is None:
        return None
    return [locomo[(question["conversation"], e)] for e in question["evidence"]]


def violations(questions: list[dict[str, Any]], data: Path | None) -> tuple[list[str], int]:
    """Lines describing every question that shares a word with its evidence; and how many were checked."""
    demo = demo_texts()
    locomo = locomo_texts(data) if data is not None and data.is_dir() else None
    bad, checked = [], 0
    for q in questions:
        texts = evidence_texts(q, demo, locomo)
        if texts is None:
            continue
        checked += 1
        shared = shared_words(q["question"], texts)
        if shared:
            bad.append(f"{q['id']}: {q['question']!r} shares {shared}")
    return bad, checked


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", default=str(QUESTIONS))
    parser.add_argument("--data", default=str(DEFAULT_DATA))
    args = parser.parse_args(argv)
    questions = load_questions(Path(args.questions))
    bad, checked = violations(questions, Path(args.data))
    for line in bad:
        print(line)
    print(
        f"{checked} of {len(questions)} questions checked, {len(bad)} share a content word with their evidence"
    )
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())

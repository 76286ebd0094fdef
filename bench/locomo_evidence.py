"""LoCoMo: does the evidence pack hold the gold answer, against lcm_grep's top-10 snippets?

One command: ``.venv/bin/python bench/locomo_evidence.py [--data ../shared/data/locomo] [--files conv-30]``.

The seven conversations are stored as bench/locomo_recall.py stores them (one database, one
session each, session date-times as the messages' host timestamps). Each question (category 5,
adversarial, left out) is asked from outside, of its own conversation, and each system gives at
most ``BUDGET`` tokens (tokens.py) of text:

* ``grep_snippets``: the top-10 lcm_grep hits as the model reads them (each hit's ``at`` and
  snippet, one line each), cut to the budget;
* ``pack_grep``: lcm_evidence_pack's pack (evidence.build_pack) of the same ten hits' store ids:
  the exact lines, their timestamps, and the dates their words resolve to;
* ``pack_retrieve``: the pack lcm_retrieve's controller builds (evidence.retrieve), budget 1,500.

A system "contains" the answer when the normalised gold answer (lower-case, punctuation gone,
number words as digits, dates as canonical day / month / year tokens) is a substring of the
normalised text (``exact``), or when every content word of it is there (``words``; LoCoMo's
multi-hop answers are sentences no text repeats verbatim). For the temporal questions (category 2)
whose whole gold answer is one date, ``date`` counts the system's dates (a snippet's ``at``; the
pack's timestamps and resolved dates) holding that day / month / year, and ``compute`` counts
lcm_compute(operation="date") over the pack's refs answering it. The pack columns are measured
when the evidence package is importable (they are left out, not zero, before it is).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BUDGET = 1500
TOP = 10
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
MONTHS = {
    m: i + 1
    for i, m in enumerate(
        (
            "january",
            "february",
            "march",
            "april",
            "may",
            "june",
            "july",
            "august",
            "september",
            "october",
            "november",
            "december",
        )
    )
}
NUMBERS = {
    w: str(i)
    for i, w in enumerate(
        (
            "zero",
            "one",
            "two",
            "three",
            "four",
            "five",
            "six",
            "seven",
            "eight",
            "nine",
            "ten",
            "eleven",
            "twelve",
        )
    )
}
STOP = frozenset(
    "a an the of and or to in on at for with by is was were be been his her their its it he she they "
    "them this that as from".split()
)
_MONTH = r"(january|february|march|april|may|june|july|august|september|october|november|december)"
_DMY = re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s*{_MONTH},?\s+(\d{{4}})\b")
_MDY = re.compile(rf"\b{_MONTH}\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+(\d{{4}})\b")
_MY = re.compile(rf"\b{_MONTH},?\s+(\d{{4}})\b")
_ISO = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})(?:[t ][0-9:.]+z?(?:[+-]\d{2}:?\d{2})?)?\b")
_YEAR = re.compile(r"\b(19\d\d|20\d\d)\b")
_PUNCT = re.compile(r"[^\w\s]")


def _day(y: str, m: int, d: str) -> str:
    try:
        when = date(int(y), m, int(d))
    except ValueError:
        return f"{y} {m} {d}"
    return f" d{when:%Y%m%d} m{when:%Y%m} y{when:%Y} "


def normalise(text: str) -> str:
    """Lower-case; dates as tokens (a day also as its month and year, so a day in the text
    answers a question whose gold is the month); number words as digits; punctuation gone."""
    out = text.lower()
    out = _ISO.sub(lambda m: _day(m[1], int(m[2]), m[3]), out)
    out = _DMY.sub(lambda m: _day(m[3], MONTHS[m[2]], m[1]), out)
    out = _MDY.sub(lambda m: _day(m[3], MONTHS[m[1]], m[2]), out)
    out = _MY.sub(lambda m: f" m{m[2]}{MONTHS[m[1]]:02d} y{m[2]} ", out)
    out = _YEAR.sub(lambda m: f"y{m[1]}", out)
    out = _PUNCT.sub(" ", out)
    return " ".join(NUMBERS.get(w, w) for w in out.split())


def gold_date(answer: str) -> str | None:
    """The gold's one date token at its own granularity (d/m/y), when the whole answer is a date."""
    text = normalise(answer)
    parts = text.split()
    if not parts or not all(re.fullmatch(r"[dmy]\d{4,8}", p) for p in parts):
        return None
    return parts[0]  # the finest: a day renders d, m, y; a month m, y; a year y


def contains(answer: str, text: str) -> tuple[bool, bool]:
    """(exact, words): the normalised answer as a substring; every content word present."""
    gold, have = normalise(answer), normalise(text)
    exact = bool(gold) and f" {gold} " in f" {have} "
    words = [w for w in gold.split() if w not in STOP]
    present = set(have.split())
    return exact, bool(words) and all(w in present for w in words)


@dataclass(frozen=True)
class Asked:
    """One question with its gold answer and category."""

    text: str
    answer: str
    category: int


def load_questions(path: Path) -> list[Asked]:
    data = json.loads(path.read_text(encoding="utf-8"))
    return [
        Asked(qa["question"], str(qa["answer"]), int(qa["category"]))
        for qa in data["qa"]
        if qa.get("category") in CATEGORIES and qa.get("answer") not in (None, "")
    ]


@dataclass
class Tally:
    """Counts per category for one system."""

    asked: dict[int, int] = field(default_factory=dict)
    exact: dict[int, int] = field(default_factory=dict)
    words: dict[int, int] = field(default_factory=dict)
    dated: int = 0  # temporal questions whose gold is one date
    date_ok: int = 0
    top_ok: int = (
        0  # the date of the best-ranked line alone (its resolved day, else its time) is right
    )
    compute_ok: int = 0
    compute_answered: int = 0
    tokens: list[int] = field(default_factory=list)
    seconds: float = 0.0

    def add(self, asked: Asked, text: str, tokens: int) -> None:
        exact, words = contains(asked.answer, text)
        c = asked.category
        self.asked[c] = self.asked.get(c, 0) + 1
        self.exact[c] = self.exact.get(c, 0) + exact
        self.words[c] = self.words.get(c, 0) + words
        self.tokens.append(tokens)

    def figures(self) -> dict[str, Any]:
        per = {
            CATEGORIES[c]: {
                "questions": n,
                "exact": round(self.exact[c] / n, 3),
                "words": round(self.words[c] / n, 3),
            }
            for c, n in sorted(self.asked.items())
        }
        total = sum(self.asked.values())
        out: dict[str, Any] = {
            "questions": total,
            "per_category": per,
            "exact": round(sum(self.exact.values()) / max(1, total), 3),
            "words": round(sum(self.words.values()) / max(1, total), 3),
            "tokens_median": sorted(self.tokens)[len(self.tokens) // 2] if self.tokens else 0,
            "tokens_max": max(self.tokens, default=0),
            "ms_per_question": round(self.seconds / max(1, total) * 1000, 2),
            "dated_questions": self.dated,
            "date_right": round(self.date_ok / max(1, self.dated), 3),
            "top_date_right": round(self.top_ok / max(1, self.dated), 3),
        }
        if self.compute_answered or self.compute_ok:
            out["compute_answered"] = round(self.compute_answered / max(1, self.dated), 3)
            out["compute_right"] = round(self.compute_ok / max(1, self.dated), 3)
        return out


def grep_snippets(engine: Any, question: str) -> tuple[str, list[int]]:
    """The top-10 lcm_grep hits as the model reads them, cut to the budget (whole lines)."""
    from bench.locomo_recall import call
    from hermes_lcm.base.tokens import count_tokens

    answer = call(engine, "lcm_grep", {"query": question, "limit": TOP, "include_in_context": True})
    lines: list[str] = []
    refs: list[int] = []
    for hit in answer["hits"]:
        line = f"{hit.get('at', '')}: {hit['snippet']}"
        if count_tokens("\n".join([*lines, line])) > BUDGET:
            break
        lines.append(line)
        if "store_id" in hit:
            refs.append(int(hit["store_id"]))
    return "\n".join(lines), refs


def _evidence() -> Any:
    """The evidence package, or None before it is part of this build."""
    try:
        from hermes_lcm import evidence
    except ImportError:
        return None
    return evidence if hasattr(evidence, "build_pack") else None


def pack_text(pack: Any) -> tuple[str, str]:
    """(everything the pack shows, its dates only) as text: timestamps and resolved dates."""
    shown = pack.as_dict() if hasattr(pack, "as_dict") else pack
    dates: list[str] = []
    for line in shown.get("lines", []):
        dates += [str(line.get(k, "")) for k in ("at", "timestamp")]
        dates += [
            json.dumps(d, default=str) for d in line.get("dates", line.get("resolved_dates", []))
        ]
    dates += [json.dumps(d, default=str) for d in shown.get("resolved_dates", [])]
    return json.dumps(shown, ensure_ascii=False, default=str), " ".join(dates)


def top_date(pack: Any, ranked: list[int]) -> str:
    """The date the best-ranked line in the pack gives: the first date its words resolve to,
    else its own time (as text for ``normalise``)."""
    lines = {line.get("store_id"): line for line in pack.as_dict().get("lines", [])}
    for ref in ranked:
        line = lines.get(ref)
        if line is not None:
            dates = line.get("dates") or []
            return (
                str(dates[0]["first"])
                if dates and dates[0].get("first") == dates[0].get("last")
                else str(line.get("at", ""))
            )
    return ""


def _date_right(gold: str, text: str) -> bool:
    return gold in normalise(text).split()


def gate(store: Any, conversations: list[Any], data: str) -> dict[str, Any]:
    """The pre-answer hook's recall-need gate (evidence/need.py) with the store lookup of the
    stored conversations: how often it fires on the LoCoMo questions (per category) and on the
    ordinary requests of bench/proactive_floor.py (coding, operations, errands, small talk)."""
    from proactive_floor import CHAT, UNRELATED

    from hermes_lcm.evidence.need import needs_recall
    from hermes_lcm.evidence.preanswer import known_in

    known = known_in(store)
    anchor = time.time()
    fired: dict[int, list[int]] = {}
    for conversation in conversations:
        for asked in load_questions(Path(data) / f"{conversation.name}.json"):
            fired.setdefault(asked.category, [0, 0])
            fired[asked.category][0] += 1
            fired[asked.category][1] += needs_recall(asked.text, anchor, known).recall
    ordinary = [m for m in UNRELATED + CHAT if needs_recall(m, anchor, known).recall]
    bare = [
        needs_recall(a.text, anchor).recall
        for c in conversations
        for a in load_questions(Path(data) / f"{c.name}.json")
    ]
    total = sum(n for n, _ in fired.values())
    return {
        "questions": total,
        "fired": round(sum(f for _, f in fired.values()) / max(1, total), 3),
        "per_category": {
            CATEGORIES[c]: round(f / max(1, n), 3) for c, (n, f) in sorted(fired.items())
        },
        "ordinary_requests": len(UNRELATED + CHAT),
        "ordinary_fired": len(ordinary),
        "ordinary_fired_examples": ordinary[:5],
        "without_store_lookup": {
            "fired": round(sum(bare) / max(1, len(bare)), 3),
            "ordinary_fired": sum(needs_recall(m, anchor).recall for m in UNRELATED + CHAT),
        },
    }


def evaluate(data: str, files: str) -> dict[str, Any]:
    import tempfile

    from bench.locomo_recall import ingest, load_selected
    from hermes_lcm.base.tokens import count_tokens

    conversations = load_selected(data, files)
    evidence = _evidence()
    tallies: dict[str, Tally] = {"grep_snippets": Tally()}
    if evidence is not None:
        tallies["pack_grep"] = Tally()
        if importlib.util.find_spec("hermes_lcm.evidence.retrieve") is not None:
            tallies["pack_retrieve"] = Tally()
    home = Path(tempfile.mkdtemp(prefix="lcm-locomo-evidence-"))
    for conversation in conversations:
        engine, _ = ingest(home, conversation)
        questions = load_questions(Path(data) / f"{conversation.name}.json")
        for asked in questions:
            gold = gold_date(asked.answer) if asked.category == 2 else None
            started = time.perf_counter()
            text, refs = grep_snippets(engine, asked.text)
            tally = tallies["grep_snippets"]
            tally.seconds += time.perf_counter() - started
            tally.add(asked, text, count_tokens(text))
            if gold is not None:
                tally.dated += 1
                tally.date_ok += _date_right(
                    gold, " ".join(line.split(": ", 1)[0] for line in text.splitlines())
                )
                tally.top_ok += _date_right(gold, text.split(": ", 1)[0] if text else "")
            if evidence is None:
                continue
            builders = _builders(
                evidence, engine.core, refs, asked.text, "pack_retrieve" in tallies
            )
            for name, build in builders.items():
                started = time.perf_counter()
                pack, ranked = build()
                tally = tallies[name]
                tally.seconds += time.perf_counter() - started
                shown, dates = pack_text(pack)
                tally.add(asked, shown, _pack_tokens(pack, count_tokens))
                if gold is None:
                    continue
                tally.dated += 1
                tally.date_ok += _date_right(gold, dates)
                tally.top_ok += _date_right(gold, top_date(pack, ranked))
                _compute(evidence, pack, ranked, asked, gold, tally)
    return {"tallies": tallies, "gate": gate(engine.core.store, conversations, data)}


def _builders(
    evidence: Any, core: Any, refs: list[int], question: str, controller: bool
) -> dict[str, Callable[[], Any]]:
    """The pack systems for one question: the pack of grep's refs, and lcm_retrieve's pack."""
    reach = core.reach(False)
    out: dict[str, Callable[[], Any]] = {
        "pack_grep": lambda: (
            evidence.build_pack(core.store, refs, reach, budget_tokens=BUDGET, question=question),
            refs,
        )
    }
    if controller:
        from hermes_lcm.evidence.retrieve import retrieve

        current = core.binding.conversation_id

        def controlled() -> tuple[Any, list[int]]:
            found = retrieve(
                core.store,
                core.dag,
                question,
                conversation_id=current,
                reach=reach,
                budget_tokens=BUDGET,
            )
            return found.pack, list(found.refs)

        out["pack_retrieve"] = controlled
    return out


def _pack_tokens(pack: Any, count: Callable[[str], int]) -> int:
    shown = pack.as_dict() if hasattr(pack, "as_dict") else pack
    text = "\n".join(str(line.get("text", "")) for line in shown.get("lines", []))
    return int(shown.get("used_tokens") or count(text))


def _compute(
    evidence: Any, pack: Any, ranked: list[int], asked: Asked, gold: str, tally: Tally
) -> None:
    """lcm_compute(operation="date") over the best-ranked line of the pack that names a date (the
    operation takes exactly one line): answered at all (it fails closed otherwise), and right."""
    if not hasattr(evidence, "compute"):
        return
    lines = {line.ref.store_id: line for line in getattr(pack, "hydrated", ())}
    line = next((lines[r] for r in ranked if r in lines and lines[r].dates), None)
    if line is None:
        return
    result = evidence.compute("date", [line], asked.text)
    if result.get("status") != "ok":
        return
    tally.compute_answered += 1
    found = result.get("result")
    if isinstance(found, str):
        tally.compute_ok += _date_right(gold, found)
    elif isinstance(found, dict) and not gold.startswith(
        "d"
    ):  # a range answers a month or year only
        tally.compute_ok += _date_right(gold, str(found.get("first"))) and _date_right(
            gold, str(found.get("last"))
        )


def main(argv: list[str] | None = None, save: bool = True) -> dict[str, Any]:
    from bench.locomo_recall import add_data_arguments

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_data_arguments(parser)
    args = parser.parse_args(argv)
    measured = evaluate(args.data, args.files)
    result: dict[str, Any] = {name: tally.figures() for name, tally in measured["tallies"].items()}
    result["budget_tokens"] = BUDGET
    result["preanswer_gate"] = measured["gate"]
    for name, figures in result.items():
        if isinstance(figures, dict):
            print(name, json.dumps(figures))
    if save:
        from common import save_result

        base = result["grep_snippets"]
        rows = []
        for name in ("pack_retrieve", "pack_grep"):
            if name in result:
                best = result[name]
                rows.append(
                    {
                        "target": f"LoCoMo evidence: gold answer in the {BUDGET}-token {name}",
                        "ours": f"words {best['words']} exact {best['exact']}; temporal date "
                        f"{best['date_right']}"
                        + (f", compute {best['compute_right']}" if "compute_right" in best else ""),
                        "reference": f"top-10 lcm_grep snippets: words {base['words']} exact {base['exact']}; "
                        f"date {base['date_right']}",
                        "verdict": "measured",
                    }
                )
                break
        else:
            rows.append(
                {
                    "target": f"LoCoMo evidence: gold answer in top-10 lcm_grep snippets ({BUDGET} tokens)",
                    "ours": f"words {base['words']} exact {base['exact']}; temporal date {base['date_right']}",
                    "reference": "the evidence pack: not in this build yet",
                    "verdict": "measured",
                }
            )
        save_result("locomo_evidence", rows, result)
    return result


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT.parent))
    sys.path.insert(0, str(ROOT))
    main()

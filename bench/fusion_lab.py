"""Fusion lab: score candidate settings of lcm_recall's hybrid fusion on LoCoMo and the paraphrase set.

One command: ``.venv/bin/python bench/fusion_lab.py 'name:CONST=value,CONST=value' ...`` (each
argument a configuration: ``search`` / ``arms`` / ``rank`` module constants set for its run; an
empty argument is the shipped code). The stores are built once (LoCoMo: the seven conversations
through the engine's ingest, as bench/locomo_recall.py stores them; paraphrase: the demo fixture
and the named LoCoMo conversations, as bench/paraphrase_recall.py stores them), every row embedded
through the vector cache of bench/locomo_recall.py, so each configuration costs only its questions.

Prints, per configuration: LoCoMo lenient R@1/5/10 of lcm_recall hybrid (the full-text figures once,
first) with the worst per-conversation R@10 delta against full text, and paraphrase R@1/5/10
(demo, locomo, all). A tuning tool: the questions are scored, never inspected one by one.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import locomo_recall  # noqa: E402
import paraphrase_recall  # noqa: E402

MODULES = ("search.fusion", "search.searcher", "search.arms", "search.rank")
SHIPPED_WEIGHT: dict[
    int, float
] = {}  # each engine's LCM_RECALL_VECTOR_WEIGHT as its model ships it


def _apply(spec: str, engines: list[Any]) -> dict[tuple[Any, str], Any]:
    """Set the constants of ``spec`` ("A=1,B=0.5"; WEIGHT is LCM_RECALL_VECTOR_WEIGHT on every hybrid
    engine, else the weight its model ships with); returns the old values to restore."""
    import importlib
    from dataclasses import replace

    old: dict[tuple[Any, str], Any] = {}
    for e in engines:
        shipped = SHIPPED_WEIGHT.setdefault(id(e), e.core.config.recall_vector_weight)
        e.core.config = replace(e.core.config, recall_vector_weight=shipped)
    for part in filter(None, (p.strip() for p in spec.split(","))):
        name, _, value = part.partition("=")
        if name == "WEIGHT":
            for e in engines:
                e.core.config = replace(e.core.config, recall_vector_weight=float(value))
            continue
        for mod_name in MODULES:
            mod = importlib.import_module(f"hermes_lcm.{mod_name}")
            if hasattr(mod, name):
                old[(mod, name)] = getattr(mod, name)
                setattr(
                    mod,
                    name,
                    type(getattr(mod, name))(float(value))
                    if not isinstance(getattr(mod, name), bool)
                    else value.lower() in ("1", "true"),
                )
                break
        else:
            raise SystemExit(f"no constant {name} in {MODULES}")
    return old


def _ranked(engine: Any, question: str, to_id: dict[int, str]) -> list[str | None]:
    return locomo_recall.ranked_turns(engine, "lcm_recall", question, to_id, 10)


def _hits(ranked: list[str | None], evidence: Any) -> tuple[int, int, int]:
    ev = set(evidence)
    return tuple(int(bool(set(ranked[:k]) & ev)) for k in (1, 5, 10))  # type: ignore[return-value]


def main(argv: list[str]) -> None:
    conversations = locomo_recall.load_selected(str(locomo_recall.DEFAULT_DATA), "")
    home = Path(tempfile.mkdtemp(prefix="lcm-lab-"))
    loaded = [(c, *locomo_recall.ingest(home / "locomo", c)) for c in conversations]
    hybrid = locomo_recall.hybrid_engines(home / "locomo", conversations, locomo_recall.HYBRID_ENV)
    mode = paraphrase_recall.Mode(True, dict(locomo_recall.HYBRID_ENV))
    questions = paraphrase_recall.load_questions()
    para: dict[tuple[str, str], tuple[Any, dict[int, str]]] = {
        ("demo", "coding_session"): paraphrase_recall.ingest_demo(home / "pdemo", mode)
    }
    names = [q["conversation"] for q in questions if q["source"] == "locomo"]
    for name, pair in paraphrase_recall.ingest_locomo(
        home / "plocomo", locomo_recall.DEFAULT_DATA, names, mode
    ).items():
        para[("locomo", name)] = pair
    fts: dict[str, list[tuple[int, int, int]]] = {}
    for c, engine, to_dia in loaded:
        fts[c.name] = [_hits(_ranked(engine, q.text, to_dia), q.evidence) for q in c.questions]
    print(
        f"{'config':28} LoCoMo R@1   R@5   R@10  minΔconv      | para demo  locomo  all R@1  R@5   R@10"
    )
    _report("fts", fts, fts, None)
    for spec in argv or [""]:
        label, _, consts = spec.rpartition(":") if ":" in spec else (spec or "shipped", "", spec)
        old = _apply(consts, [*hybrid.values(), *(e for e, _ in para.values())])
        try:
            got = {
                c.name: [
                    _hits(_ranked(hybrid[c.name], q.text, to_dia), q.evidence) for q in c.questions
                ]
                for c, _, to_dia in loaded
            }
            pr: dict[str, list[tuple[int, int, int]]] = {"demo": [], "locomo": []}
            for q in questions:
                engine, to_id = para[(q["source"], q["conversation"])]
                pr[q["source"]].append(_hits(_ranked(engine, q["question"], to_id), q["evidence"]))
            _report(label or "shipped", got, fts, pr)
        finally:
            for (mod, name), value in old.items():
                setattr(mod, name, value)


def _rate(rows: list[tuple[int, int, int]], i: int) -> float:
    return sum(r[i] for r in rows) / max(1, len(rows))


def _report(
    label: str,
    got: dict[str, list[tuple[int, int, int]]],
    fts: dict[str, list[tuple[int, int, int]]],
    para: dict[str, list[tuple[int, int, int]]] | None,
) -> None:
    every = [r for rows in got.values() for r in rows]
    deltas = {n: _rate(got[n], 2) - _rate(fts[n], 2) for n in got}
    worst = min(deltas, key=lambda n: deltas[n])
    line = (
        f"{label[:28]:28} {_rate(every, 0):.3f} {_rate(every, 1):.3f} {_rate(every, 2):.3f} "
        f"{deltas[worst]:+.3f} {worst:8}"
    )
    if para:
        both = para["demo"] + para["locomo"]
        line += (
            f" | {_rate(para['demo'], 2):.3f} {_rate(para['locomo'], 2):.3f}  "
            f"{_rate(both, 0):.3f} {_rate(both, 1):.3f} {_rate(both, 2):.3f}"
        )
    print(line, " ".join(f"{n[5:]}{d:+.3f}" for n, d in deltas.items()), flush=True)


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT.parent))
    main(sys.argv[1:])

"""The two offline embedding models side by side: dense recall alone and embedding speed, one run.

One command: ``.venv/bin/python bench/local_models.py`` (needs ``hermes-lcm[local]`` and
``hermes-lcm[local-e5]``).

For all-MiniLM-L6-v2 (int8, the default) and multilingual-e5-small (4-bit, ``local-e5``): every
LoCoMo turn and every message of the paraphrase set's sources embedded as stored texts, each
question as a query (e5's ``query:`` side), and R@1/5/10 of the cosine ranking alone, per
conversation, with no full text and no fusion: what each model brings to the hybrid arm before
any weighting. A question counts when any of its evidence turns is among the first k. Beside
it, rows embedded per second over all of those texts on this machine (2 cores), MiniLM the
baseline of the ratio. The hybrid figures (full text fused with each model) are
bench/recall.py --hybrid and bench/fusion_lab.py with ``LCM_EMBEDDING_MODEL`` set.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import locomo_recall  # noqa: E402
import paraphrase_recall  # noqa: E402
from common import print_table, save_result  # noqa: E402

from hermes_lcm.embed.e5 import E5Provider  # noqa: E402
from hermes_lcm.embed.local import LocalProvider  # noqa: E402

KS = (1, 5, 10)
BATCH = 32


def _text(message: dict[str, Any]) -> str:
    """A message's text as the host sent it: its content and each tool call's function."""
    text = str(message.get("content") or "")
    for call in message.get("tool_calls") or []:
        text += " " + json.dumps(call.get("function", {}))
    return text


class Model:
    """A provider with its texts embedded once, and the time that took."""

    def __init__(self, provider: Any) -> None:
        self.provider = provider
        self.query: Callable[[Sequence[str]], np.ndarray] = getattr(
            provider, "embed_query", provider.embed
        )
        self.rows = 0
        self.seconds = 0.0

    def documents(self, texts: Sequence[str]) -> np.ndarray:
        cut = [t[: self.provider.max_chars].strip() or "." for t in texts]
        started = time.perf_counter()
        out = self.provider.embed(cut)
        self.seconds += time.perf_counter() - started
        self.rows += len(cut)
        return np.asarray(out)


def _hits(matrix: np.ndarray, query: np.ndarray, evidence: set[int]) -> tuple[bool, ...]:
    order = np.argsort(-(matrix @ query), kind="stable")[: max(KS)].tolist()
    return tuple(bool(set(order[:k]) & evidence) for k in KS)


def _rates(rows: list[tuple[bool, ...]]) -> dict[str, float]:
    return {str(k): round(sum(r[i] for r in rows) / max(1, len(rows)), 3) for i, k in enumerate(KS)}


def measure(model: Model) -> dict[str, Any]:
    conversations = {
        path.stem: locomo_recall.load_conversation(path)
        for path in sorted(locomo_recall.DEFAULT_DATA.glob("conv-*.json"))
    }
    vectors = {
        name: model.documents([t["content"] for t in c.turns]) for name, c in conversations.items()
    }
    locomo: dict[str, list[tuple[bool, ...]]] = {}
    for name, conv in conversations.items():
        queries = model.query([q.text for q in conv.questions])
        locomo[name] = [
            _hits(vectors[name], qv, {i for i, d in enumerate(conv.dia_ids) if d in q.evidence})
            for qv, q in zip(queries, conv.questions, strict=True)
        ]
    messages, ids = paraphrase_recall.demo_messages()
    demo = model.documents([_text(m) for m in messages])
    para: dict[str, list[tuple[bool, ...]]] = {"demo": [], "locomo": []}
    for q in paraphrase_recall.load_questions():
        if q["source"] == "demo":
            matrix, names = demo, ids
        else:
            matrix, names = vectors[q["conversation"]], conversations[q["conversation"]].dia_ids
        wanted = set(q["evidence"])
        evidence = {i for i, n in enumerate(names) if n in wanted}
        para[q["source"]].append(_hits(matrix, model.query([q["question"]])[0], evidence))
    every = [r for rows in locomo.values() for r in rows]
    return {
        "model": model.provider.name,
        "locomo": _rates(every) | {"questions": len(every)},
        "locomo_per_conversation": {n: _rates(rows)["10"] for n, rows in locomo.items()},
        "paraphrase": {
            "demo": _rates(para["demo"]),
            "locomo": _rates(para["locomo"]),
            "all": _rates(para["demo"] + para["locomo"]),
            "questions": len(para["demo"]) + len(para["locomo"]),
        },
        "rows_embedded": model.rows,
        "rows_per_s": round(model.rows / model.seconds, 1),
    }


def main() -> None:
    results = [
        measure(Model(LocalProvider(batch_size=BATCH, threads=2))),
        measure(Model(E5Provider(batch_size=BATCH))),
    ]
    base = results[0]
    rows = []
    for r in results:
        per = r["locomo_per_conversation"]
        worst = min(per[n] - base["locomo_per_conversation"][n] for n in per)
        rows.append(
            {
                "target": f"dense recall alone, {r['model']}",
                "ours": f"LoCoMo R@10 {r['locomo']['10']} (R@1 {r['locomo']['1']}), worst conversation "
                f"{worst:+.3f} vs MiniLM; paraphrase R@10 {r['paraphrase']['all']['10']} (demo "
                f"{r['paraphrase']['demo']['10']}, LoCoMo {r['paraphrase']['locomo']['10']}); "
                f"{r['rows_per_s']} rows/s ({r['rows_per_s'] / base['rows_per_s']:.2f}x MiniLM)",
                "reference": f"MiniLM: LoCoMo R@10 {base['locomo']['10']}, paraphrase "
                f"{base['paraphrase']['all']['10']}, {base['rows_per_s']} rows/s",
            }
        )
    print_table(rows)
    save_result("local_models", rows, {"models": results, "batch": BATCH})


if __name__ == "__main__":
    main()

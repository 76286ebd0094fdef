"""The BEAM loader of bench/beam_recall.py reads the data's own layout (batches of sessions of
messages, questions citing message ids as a list or a dict of lists) from a checkout or from a
git directory, and its run stores every message and scores the cited ones. A small chat in
BEAM's shape is written here; the real data is fetched by whoever runs the benchmark."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _bench() -> ModuleType:
    if str(ROOT / "bench") not in sys.path:
        sys.path.insert(0, str(ROOT / "bench"))
    spec = importlib.util.spec_from_file_location("beam_recall", ROOT / "bench" / "beam_recall.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["beam_recall"] = module
    spec.loader.exec_module(module)
    return module


def _message(i: int, role: str, content: str, anchor: str | None = None) -> dict[str, Any]:
    m: dict[str, Any] = {"role": role, "id": i, "content": content}
    if anchor:
        m["time_anchor"] = anchor
    return m


CHAT = [
    {
        "batch_number": 1,
        "time_anchor": None,
        "turns": [
            [
                _message(
                    0, "user", "My first sprint ends on March 29, planning login.", "March-15-2024"
                ),
                _message(1, "assistant", "Here is a plan for the sprint with login and tests."),
            ],
            [
                _message(2, "user", "I never wrote any Flask routes in this project."),
                _message(3, "assistant", "Understood, we can start with a homepage route."),
            ],
        ],
    },
    {
        "batch_number": 2,
        "time_anchor": None,
        "turns": [
            [
                _message(4, "user", "The dashboard API now answers in about 250ms after caching."),
                _message(5, "assistant", "Caching helped: keep measuring the dashboard."),
            ]
        ],
    },
]
QUESTIONS = {
    "abstention": [{"question": "What did the users say about colours?"}],
    "information_extraction": [
        {"question": "When does my first sprint end?", "source_chat_ids": [0]}
    ],
    "knowledge_update": [
        {
            "question": "How fast is the dashboard API?",
            "source_chat_ids": {"original_info": [5], "updated_info": [4]},
        }
    ],
    "temporal_reasoning": [{"question": "Which came first?", "source_chat_ids": [99]}],
}


def _write(root: Path) -> None:
    chat = root / "chats" / "100K" / "1"
    (chat / "probing_questions").mkdir(parents=True)
    (chat / "chat.json").write_text(json.dumps(CHAT), encoding="utf-8")
    (chat / "probing_questions" / "probing_questions.json").write_text(
        json.dumps(QUESTIONS), encoding="utf-8"
    )


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    _write(tmp_path / "beam")
    return tmp_path / "beam"


def test_the_loader_reads_the_datas_own_layout(checkout: Path) -> None:
    beam = _bench()
    chat = beam.load_chat(beam.Source(str(checkout)), "100K", 1)
    assert chat.ids == [0, 1, 2, 3, 4, 5]
    assert [t["role"] for t in chat.turns] == ["user", "assistant"] * 3
    times = [t["timestamp"] for t in chat.turns]
    assert times == sorted(times) and len(set(times)) == len(times)
    assert times[0] == beam._anchor("March-15-2024")
    # abstention cites nothing and a question citing no stored message is not asked
    asked = {(q.category, q.sources) for q in chat.questions}
    assert asked == {
        ("information_extraction", frozenset({0})),
        ("knowledge_update", frozenset({4, 5})),
    }


def test_a_git_directory_reads_as_the_checkout(checkout: Path, tmp_path: Path) -> None:
    beam = _bench()
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(checkout)]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "data"], check=True)
    from_git = beam.load_chat(beam.Source(str(checkout / ".git")), "100K", 1)
    assert from_git == beam.load_chat(beam.Source(str(checkout)), "100K", 1)
    with pytest.raises(SystemExit, match="BEAM data not found"):
        beam.Source(str(tmp_path / "nowhere"))


def test_a_run_stores_every_message_and_scores_the_cited_ones(
    checkout: Path, tmp_path: Path
) -> None:
    beam = _bench()
    chat = beam.load_chat(beam.Source(str(checkout)), "100K", 1)
    rows = {
        (name, tool, category): tally
        for name, tool, category, tally in beam.evaluate([chat], home=tmp_path / "home")
    }
    for tool in ("bm25", "lcm_grep", "lcm_recall"):
        total = rows[("all", tool, "all")]
        assert total.questions == 2
        assert total.rates("lenient")[10] == 1.0, (
            tool
        )  # six messages: every cited one is in the top 10
        assert rows[("100K-1", tool, "information_extraction")].rates("lenient")[1] == 1.0, tool


def test_the_embedded_arm_ranks_with_vectors_on(
    checkout: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--embed``: lcm_recall of a second engine with the local model, after one backfill."""
    beam = _bench()
    import locomo_recall

    monkeypatch.setattr(locomo_recall, "VECTOR_CACHE", tmp_path / "vectors.npz")
    monkeypatch.setattr(locomo_recall.CachedProvider, "cache", {})
    chat = beam.load_chat(beam.Source(str(checkout)), "100K", 1)
    tools = ("lcm_grep", beam.EMBEDDED)
    rows = {
        (name, tool, category): tally
        for name, tool, category, tally in beam.evaluate([chat], tools, home=tmp_path / "home")
    }
    assert rows[("all", beam.EMBEDDED, "all")].rates("lenient")[10] == 1.0
    assert len(locomo_recall.CachedProvider.cache) > len(chat.turns), "the messages and questions"
    assert (tmp_path / "vectors.npz").exists()


def test_the_verdict_names_where_a_ranker_is_below_the_baseline() -> None:
    beam = _bench()
    args = beam.argparse.Namespace(size="100K", chats="1-2")

    def at10(**by_tool: float) -> dict[str, Any]:
        return {t: {"lenient": {10: v}} for t, v in by_tool.items()}

    tools = ("lcm_grep", beam.EMBEDDED)
    above = {
        "all": at10(bm25=0.5, lcm_grep=0.6, **{beam.EMBEDDED: 0.7}),
        "x": at10(bm25=1.0, lcm_grep=1.0, **{beam.EMBEDDED: 1.0}),
    }
    assert beam.verdict(args, tools, above)["verdict"] == "met"
    below = {**above, "y": at10(bm25=0.5, lcm_grep=0.6, **{beam.EMBEDDED: 0.4})}
    got = beam.verdict(args, tools, below)
    assert got["verdict"] == "missed" and f"{beam.EMBEDDED} in y" in got["ours"]
    lexical = {c: {t: f[t] for t in ("bm25", "lcm_grep")} for c, f in above.items()}
    got = beam.verdict(args, ("lcm_grep",), lexical)
    assert got["verdict"] == "missed" and "not run" in got["ours"]
    # lcm_recall without vectors is reported beside them, not judged
    with_lexical = {c: {**f, "lcm_recall": {"lenient": {10: 0.1}}} for c, f in above.items()}
    got = beam.verdict(args, ("lcm_grep", "lcm_recall", beam.EMBEDDED), with_lexical)
    assert got["verdict"] == "met" and "lcm_recall 0.1" in got["ours"]

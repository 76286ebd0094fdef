"""The paraphrase question set (fixtures/paraphrase_questions.json) and its harness (bench/paraphrase_recall.py).

The set is what semantic recall is judged by, so it must really be paraphrases: every question
shares no content word with its evidence under the checker (FTS5's own porter stemmer, the
engine's stop words), every demo evidence id is a message the engine stores when the demo is
replayed, and the harness runs end to end and reproduces the full-text figures it published.
The LoCoMo half needs ../shared/data/locomo; without it those checks are skipped.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from hermes_lcm import store as store_module
from hermes_lcm.config import load_config
from hermes_lcm.demo.replay import load_fixture, make_engine, replay

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "locomo"
QUESTIONS = ROOT / "fixtures" / "paraphrase_questions.json"
RESULT = ROOT / "bench" / "results" / "paraphrase_recall.json"

# The replayed demo stores every evidence message on both backends; the harness's published
# figures are SQLite's (bm25), so that test runs it as published.
pytestmark = pytest.mark.both_backends


@functools.cache
def bench(name: str) -> ModuleType:
    if str(ROOT / "bench") not in sys.path:
        sys.path.insert(0, str(ROOT / "bench"))
    spec = importlib.util.spec_from_file_location(name, ROOT / "bench" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def questions() -> list[dict[str, Any]]:
    data = json.loads(QUESTIONS.read_text(encoding="utf-8"))
    return list(data["questions"])


def _locomo_or_skip() -> Path:
    if not DATA.is_dir():
        pytest.skip(f"LoCoMo data absent: {DATA} not found (../shared is not checked out here)")
    return DATA


# ---------------------------------------------------------------------------- shape


def test_the_set_has_its_shape(questions: list[dict[str, Any]]) -> None:
    demo = [q for q in questions if q["source"] == "demo"]
    locomo = [q for q in questions if q["source"] == "locomo"]
    assert (
        len(demo) >= 60 and len(locomo) >= 60 and len(questions) == len(demo) + len(locomo) >= 120
    )
    assert len({q["id"] for q in questions}) == len(questions)
    assert len({q["question"].lower() for q in questions}) == len(questions)
    for q in questions:
        assert set(q) == {"id", "source", "conversation", "question", "evidence", "paraphrase"}, q[
            "id"
        ]
        assert q["question"].strip() and q["evidence"], q["id"]
        assert isinstance(q["paraphrase"], dict) and q["paraphrase"], q["id"]
        pattern = r"t\d+\.m\d+" if q["source"] == "demo" else r"D\d+:\d+"
        assert all(re.fullmatch(pattern, e) for e in q["evidence"]), q["id"]
    assert {q["conversation"] for q in demo} == {"coding_session"}
    assert all(re.fullmatch(r"conv-\d+", q["conversation"]) for q in locomo)
    assert len({q["conversation"] for q in locomo}) >= 5  # spread over the conversations, not one


def test_the_json_is_what_the_generator_writes() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "fixtures" / "make_paraphrase_questions.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr


# ---------------------------------------------------------------------------- the checker


def test_the_checker_sees_through_case_stems_and_diacritics() -> None:
    check = bench("paraphrase_check")
    assert check.shared_words(
        "What did we settle on for the id format?", ["Decision: batch ids move from UUID4 to ULID"]
    ) == ["id"]
    assert check.shared_words("Which Batches were SETTLED?", ["the batch settles it"]) == [
        "batches",
        "settled",
    ]
    assert check.shared_words("Who is Jurgen?", ["contact: Jürgen Weiß"]) == ["jurgen"]
    assert check.shared_words("Is pantry 14 open?", ["pantry fourteen"]) == ["pantry"]
    assert check.shared_words("what about 14?", ["14 kg"]) == ["14"]  # numbers are content words
    assert (
        check.shared_words("What is it that they would do?", ["it is what they would do"]) == []
    )  # stop words


def test_every_demo_question_shares_no_content_word_with_its_evidence(
    questions: list[dict[str, Any]],
) -> None:
    check = bench("paraphrase_check")
    texts = check.demo_texts()
    demo = [q for q in questions if q["source"] == "demo"]
    bad = {
        q["id"]: check.shared_words(q["question"], [texts[e] for e in q["evidence"]]) for q in demo
    }
    assert {k: v for k, v in bad.items() if v} == {}


def test_every_locomo_question_shares_no_content_word_with_its_evidence(
    questions: list[dict[str, Any]],
) -> None:
    check = bench("paraphrase_check")
    texts = check.locomo_texts(_locomo_or_skip())
    locomo = [q for q in questions if q["source"] == "locomo"]
    bad = {
        q["id"]: check.shared_words(
            q["question"], [texts[(q["conversation"], e)] for e in q["evidence"]]
        )
        for q in locomo
    }
    assert {k: v for k, v in bad.items() if v} == {}


def test_locomo_entries_describe_their_evidence_without_quoting_it(
    questions: list[dict[str, Any]],
) -> None:
    """Only ids point into LoCoMo: no phrase of three or more words of a mapping is copied from the turn."""
    check = bench("paraphrase_check")
    texts = check.locomo_texts(_locomo_or_skip())
    for q in (q for q in questions if q["source"] == "locomo"):
        evidence = " ".join(texts[(q["conversation"], e)] for e in q["evidence"]).lower()
        for value in q["paraphrase"].values():
            words = value.lower().split()
            for i in range(len(words) - 2):
                assert " ".join(words[i : i + 3]) not in evidence, (q["id"], value)


# ---------------------------------------------------------------------------- evidence resolves


def test_every_demo_evidence_id_is_a_message_the_replayed_demo_stored(
    tmp_path: Path, questions: list[dict[str, Any]], backend_env: dict[str, str]
) -> None:
    """Replayed as scripts/demo.sh replays it (compaction included), the engine stores every fixture message
    once and in order, so each evidence id names one stored message with exactly that text."""
    recall = bench("paraphrase_recall")
    messages, ids = recall.demo_messages()
    engine = make_engine(tmp_path, env=backend_env)
    evidence = sorted({e for q in questions if q["source"] == "demo" for e in q["evidence"]})
    try:
        replay(engine, load_fixture(), session_id="paraphrase-replay")
        stored: list[dict[str, Any]] = []
        cursor = 0
        while cursor is not None:
            page = json.loads(
                engine.handle_tool_call(
                    "lcm_load_session",
                    {"session_id": "paraphrase-replay", "after_store_id": cursor, "limit": 100},
                )
            )
            stored += page["messages"]
            cursor = page["next_cursor"]
        assert [m["role"] for m in stored] == [m["role"] for m in messages]
        store_ids = dict(zip(ids, (m["store_id"] for m in stored), strict=True))
        full = {
            e: json.loads(engine.handle_tool_call("lcm_expand", {"store_id": store_ids[e]}))[
                "message"
            ]
            for e in evidence
        }
    finally:
        store_module.close_all()
    fixture_by_id = dict(zip(ids, messages, strict=True))
    for e in evidence:
        assert full[e]["role"] == fixture_by_id[e]["role"] in ("user", "assistant"), (
            e
        )  # said, not tool dumps
        assert full[e]["content"] == fixture_by_id[e]["content"], e


# ---------------------------------------------------------------------------- the harness


def test_the_harness_runs_the_demo_half_and_reproduces_its_published_figures(
    tmp_path: Path,
) -> None:
    recall = bench("paraphrase_recall")
    try:
        out = recall.main(["--sources", "demo", "--no-save"], save=False)
    finally:
        store_module.close_all()
    demo = out["results"]["demo"]
    assert out["mode"] == "fts" and set(demo) == {"lcm_grep", "lcm_recall"}
    for entry in demo.values():
        assert entry["questions"] >= 60
        r = entry["recall"]
        assert 0.0 <= r["1"] <= r["5"] <= r["10"] <= 0.2  # keyword search has nothing to hold on to
    published = json.loads(RESULT.read_text(encoding="utf-8"))["details"]["results"]["demo"]
    for tool, entry in demo.items():
        assert entry["recall"] == published[tool]["recall"], tool
        assert entry["missed"] == published[tool]["missed"], tool


def test_hybrid_finds_the_vector_arm() -> None:
    """--hybrid refuses to run on an engine without a vector arm (it would measure full text again
    under the hybrid's name); lcm_recall has one, so the check must find it."""
    recall = bench("paraphrase_recall")
    assert recall.vector_arm_missing() is None


def test_hybrid_passes_the_command_line_settings_to_the_engine() -> None:
    """--hybrid is one flag: LCM_EMBEDDINGS_ENABLED plus the provider settings given, under the names the
    engine's configuration reads (no note about an unknown or unsupported variable)."""
    recall = bench("paraphrase_recall")
    args = recall.build_parser().parse_args(
        [
            "--hybrid",
            "--embedding-provider",
            "ollama",
            "--embedding-model",
            "nomic-embed-text",
            "--ollama-base-url",
            "http://127.0.0.1:11434",
            "--recall-vector-weight",
            "0.3",
        ]
    )
    mode = recall.hybrid_mode(args)
    assert mode.hybrid and mode.env == {
        "LCM_EMBEDDINGS_ENABLED": "true",
        "LCM_EMBEDDING_PROVIDER": "ollama",
        "LCM_EMBEDDING_MODEL": "nomic-embed-text",
        "LCM_OLLAMA_BASE_URL": "http://127.0.0.1:11434",
        "LCM_RECALL_VECTOR_WEIGHT": "0.3",
    }
    loaded = load_config(dict(mode.env))
    assert loaded.problems == ()
    assert loaded.config.embeddings_enabled and loaded.config.embedding_provider == "ollama"
    assert (
        loaded.config.embedding_model == "nomic-embed-text"
        and loaded.config.recall_vector_weight == 0.3
    )

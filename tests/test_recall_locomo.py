"""Recall quality on real conversational data: one LoCoMo conversation, stored through the engine.

lcm_grep with the raw question must put an evidence turn in its top 10 for a majority of the
questions. The full figure over all seven conversations (and lcm_recall) is bench/locomo_recall.py.
The data lives outside the project (../shared/data/locomo); without it this test is skipped.
"""

from __future__ import annotations

import functools
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from hermes_lcm import store as store_module

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "locomo"
CONVERSATION = "conv-30"


@functools.cache
def bench_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "locomo_recall", ROOT / "bench" / "locomo_recall.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["locomo_recall"] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def conversation():
    path = DATA / f"{CONVERSATION}.json"
    if not path.is_file():
        pytest.skip(f"LoCoMo data absent: {path} not found (../shared is not checked out here)")
    return bench_module().load_conversation(path)


def test_ingest_keeps_one_row_per_turn_in_order(tmp_path, conversation):
    bench = bench_module()
    engine, to_dia = bench.ingest(tmp_path, conversation)
    try:
        assert list(to_dia.values()) == conversation.dia_ids
        first = min(to_dia)
        assert bench.call(engine, "lcm_expand", {"store_id": first})["message"] == {
            "role": conversation.turns[0]["role"],
            "content": conversation.turns[0]["content"],
        }
    finally:
        store_module.close_all()


def test_grep_finds_evidence_in_top_10_for_most_questions(tmp_path, conversation):
    bench = bench_module()
    try:
        results = {
            (name, tool): tally
            for name, tool, tally in bench.evaluate(
                [conversation], tools=("lcm_grep",), home=tmp_path
            )
        }
    finally:
        store_module.close_all()
    tally = results[(CONVERSATION, "lcm_grep")]
    lenient = tally.rates("lenient")
    print(f"\n{CONVERSATION} lcm_grep recall@k lenient {lenient} strict {tally.rates('strict')}")
    assert tally.questions == len(conversation.questions) > 50
    assert lenient[10] > 0.5, lenient
    assert lenient[10] >= 0.68, "no worse than the plain bm25 baseline on this conversation"

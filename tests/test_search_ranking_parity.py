"""Ranking by full text on either backend: a rare term of an OR query weighs more than common ones
(bm25's idf; PostgreSQL's ts_rank_cd alone has none, see storage/pg/search.py)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.both_backends


def test_the_row_with_the_rare_word_outranks_rows_with_only_common_ones(make_engine):
    engine = make_engine(threshold=10**9)
    history = []
    for i in range(60):
        history += [
            {"role": "user", "content": f"deploy config {i}"},
            {"role": "assistant", "content": f"done {i}"},
        ]
    rare = (
        "the zebra migration is blocked until the review of the storage notes is done by the team"
    )
    history += [{"role": "user", "content": rare}, {"role": "assistant", "content": "ok"}]
    engine.ingest_host(history)
    core = engine.ensure_core()
    assert core is not None
    rows = core.store.message_hits(
        '"deploy" OR "config" OR "zebra"', order="rank", limit=5, bounds=None, text_chars=200
    )
    assert rows and "zebra" in str(rows[0])

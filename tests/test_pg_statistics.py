"""The planner's statistics follow the tables as they grow (storage/pg/statistics.py).

A table filled since its last ANALYZE is planned with the statistics of the smaller one: a
search scoped to the conversation's id range then read every row through the primary key instead
of the full-text index. The store's own job analyzes a table once enough of it changed; what is
checked here is the plan the rare-term count gets before and after the job ran, and that the job
leaves a table alone that did not change. Plans and the server's own counters, not clocks.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from hermes_lcm import store as store_module
from hermes_lcm.base.records import MessageIn
from hermes_lcm.storage.pg import statistics
from hermes_lcm.storage.pg.dialect import translate
from hermes_lcm.store import open_store

from .backends import raw_sql
from .pgserver import fresh_url


@pytest.fixture(autouse=True)
def _close() -> Iterator[None]:
    yield
    store_module.close_all()


def _word(n: int) -> str:
    """A letters-only word per number (a vocabulary of 17,576, as varied as real text)."""
    return "".join(chr(97 + n // 26**k % 26) for k in range(3))


def _rows(start: int, count: int) -> list[MessageIn]:
    return [
        MessageIn(
            "user" if i % 2 == 0 else "assistant",
            " ".join(_word(i * 7919 + k * 104729) for k in range(12))
            + (" zqrareword" if i == 7 else ""),
            None,
            None,
            None,
            None,
            None,
            9,
            f"fp{i}",
        )
        for i in range(start, start + count)
    ]


def _count_plan(url: str) -> str:
    sql = translate(
        "EXPLAIN SELECT count(*) FROM (SELECT 1 FROM messages WHERE tsv @@ lcm_tsq('(zqrareword)') "
        "AND id BETWEEN 1 AND 1000000 LIMIT 8001) AS c"
    )
    return "\n".join(str(r[0]) for r in raw_sql(url, sql))


def _last_analyzed(url: str, table: str) -> object:
    return raw_sql(
        url,
        "SELECT last_analyze FROM pg_stat_user_tables WHERE relid = %s::regclass",
        (table,),
    )[0][0]


def test_a_grown_table_is_analyzed_and_searched_through_its_index() -> None:
    url = fresh_url()
    store = open_store(url)
    assert store.statistics is not None
    conversation = store.ensure_conversation("k")
    raw_sql(url, "ANALYZE messages")  # statistics of an empty table, then the rows arrive
    for start in range(0, 20_000, 2_000):
        store.append(conversation, "s1", "cli", lambda _p, s=start: _rows(s, 2_000))
    assert "messages_pkey" in _count_plan(url)  # the stale plan: every row of the range
    time.sleep(
        1.1
    )  # a backend hands its counters to the server at a transaction's end, at most once a second
    store.append(conversation, "s1", "cli", lambda _p: _rows(20_000, 1))
    store.statistics.step()  # what the job runs every CHECK_EVERY_COMMITS commits
    assert "messages" in store.statistics.analyzed
    assert _last_analyzed(url, "messages") is not None
    plan = _count_plan(url)
    assert "messages_tsv" in plan and "messages_pkey" not in plan, plan


def test_an_unchanged_table_is_left_alone() -> None:
    url = fresh_url()
    store = open_store(url)
    assert store.statistics is not None
    conversation = store.ensure_conversation("k")
    store.append(conversation, "s1", "cli", lambda _p: _rows(0, 50))
    raw_sql(url, "ANALYZE messages")
    time.sleep(1.1)
    store.append(conversation, "s1", "cli", lambda _p: _rows(50, 1))
    store.statistics.step()
    assert "messages" not in store.statistics.analyzed  # 1 changed row of 51: under STALE_ROWS
    assert statistics.stale(100_000, 10_000) and not statistics.stale(100_000, 9_999)
    assert not statistics.stale(100, 499) and statistics.stale(100, 500)


def test_a_read_only_store_never_analyzes() -> None:
    url = fresh_url()
    open_store(url).ensure_conversation("k")
    store_module.close_all()
    viewer = store_module.open_readonly(url)
    assert getattr(viewer, "statistics", None) is None

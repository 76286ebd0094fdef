"""The host's list is normalized once per host call, whatever path the call takes.

One compress visits the host's list several times (alignment, the records, the unstored rest,
the same-prompt check, a session that stores nothing trimming it). Each visit needs a message's
host view, which scans its text; ``ingest.hostlist.HostList`` makes the views once per call. These
tests count the views made per message object on each path, so a visit that normalizes again (a
second filter over the list) fails here, and a usual turn's ingest reads only the newest few.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hermes_lcm import store as store_module
from hermes_lcm.base.tokens import count_messages
from hermes_lcm.ingest import hostlist

from .conftest import new_engine
from .convo import conversation

TURNS = 40


@pytest.fixture
def views(monkeypatch: pytest.MonkeyPatch) -> Iterator[Counter[int]]:
    """Host views made, per id of the message they were made of."""
    made: Counter[int] = Counter()
    real = hostlist.host_view

    def counted(message: Any, seal: Any) -> Any:
        made[id(message)] += 1
        return real(message, seal)

    monkeypatch.setattr(hostlist, "host_view", counted)
    yield made
    store_module.close_all()


def _history() -> list[dict[str, Any]]:
    return [m for t in conversation(7, TURNS, 120) for m in t]


def _compress(engine: Any, history: list[dict[str, Any]], made: Counter[int]) -> Counter[int]:
    made.clear()
    engine.compress(list(history), current_tokens=count_messages(history) + 500, force=True)
    return Counter({k: v for k, v in made.items() if k in {id(m) for m in history}})


@pytest.mark.parametrize(
    "env",
    [
        {},  # a session that stores
        {"LCM_IGNORE_SESSION_PATTERNS": "s1"},  # stores nothing, trims the list
        {"LCM_STATELESS_SESSION_PATTERNS": "s1"},  # reads the store, never writes
    ],
    ids=["stored", "ignored", "stateless"],
)
def test_one_compress_views_each_host_message_at_most_once(
    tmp_path: Path, views: Counter[int], env: dict[str, str]
) -> None:
    engine = new_engine(tmp_path, 3000, "s1", **env)
    history = _history()
    per_message = _compress(engine, history, views)
    assert per_message, "the compress made no host view: the counter is not on the path"
    assert max(per_message.values()) == 1, per_message.most_common(3)


def test_a_compress_of_a_list_never_ingested_views_each_message_once(
    tmp_path: Path, views: Counter[int]
) -> None:
    """The first compress of a resumed session: the whole list is unstored, so it is aligned,
    stored and compacted in one call, each message still viewed once."""
    engine = new_engine(tmp_path, 3000, "s1")
    history = _history()
    per_message = _compress(engine, history, views)
    assert len(per_message) == len(history)
    assert max(per_message.values()) == 1


def test_a_turn_of_an_ingested_history_views_only_the_newest_messages(
    tmp_path: Path, views: Counter[int]
) -> None:
    """The host re-sends the whole list on every turn; what is stored is not normalized again."""
    engine = new_engine(tmp_path, 10**6, "s1")
    history = _history()
    engine.ingest_host(list(history))
    turn = next(iter(conversation(8, 1, 120)))
    history += turn
    views.clear()
    engine.ingest_host(list(history))
    assert 0 < sum(views.values()) <= len(turn) + 2, (sum(views.values()), len(turn))
    assert len(history) > 10 * (len(turn) + 2)

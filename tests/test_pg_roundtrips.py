"""A host turn and an lcm_grep on PostgreSQL send a small, fixed number of statements.

Each statement to a PostgreSQL server is a network round trip, so their count is what a turn's
latency is made of on a remote server (bench/pg_roundtrips.py prints them, bench/pg_compare.py
times them). The count comes from the connection's own counter (``StatementCount``: every
execute on every pooled connection), so an added round trip fails here whatever the machine's
load; no timing is asserted. Before the cut a turn's ingest sent 11 (BEGIN, the write lock, the
newest row, last_seq twice, the session key in two, the rows, last_seq, the new ids, COMMIT).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from hermes_lcm.base.records import MessageIn
from hermes_lcm.storage.errors import WriteFailed
from hermes_lcm.storage.pg.connection import POOL_MAX, StatementCount

from .test_search_statements import RARE_STATEMENTS
from .tooltest import ok

# BEGIN, the write lock, an insert that checks the conversation still ends where this process's
# last write left it, and COMMIT: one simple query. (When another writer moved it: BEGIN, the lock
# and the newest row with last_seq in one message, then the insert with its COMMIT.)
INGEST = 1
SHOULD_COMPRESS = 0
# The conversation, the raw window (its new rows whole), the context summaries and the pinned
# request: one statement, its plan mode set and set back in the same simple query.
ASSEMBLE = 1
# Besides those, each pooled connection prepares the insert and the assembly once.
PREPARED_STATEMENTS = 2

# What the prompt shows (one pipeline), the scope, the counts, the rows, one spare.
RARE_ROUND_TRIPS = 5

pytestmark = pytest.mark.parametrize("backend", ["postgres"], indirect=True)


def _message(i: int) -> dict[str, Any]:
    role = "user" if i % 2 == 0 else "assistant"
    return {
        "role": role,
        "content": f"turn {i}: the invoice batch {i * 7} needs a retry on the gateway",
    }


def counted(call: Any) -> tuple[Any, int]:
    """``call()`` and the statements it sent, its PREPAREs (once per connection) left out."""
    before, prepared = StatementCount.sent, StatementCount.prepared
    result = call()
    return result, (StatementCount.sent - before) - (StatementCount.prepared - prepared)


def _turns(engine: Any, turns: int) -> list[dict[str, int]]:
    """Host turns (4 new messages each: ingest, should_compress, assembly), statements per step."""
    core = engine.core
    budget = core.budget(engine.threshold_tokens, 0)
    host = [_message(i) for i in range(40)]
    engine.ingest_host(host)
    core.assemble(budget)
    counts = []
    for turn in range(turns):
        host.extend(_message(40 + 4 * turn + k) for k in range(4))
        _, ingest = counted(lambda: engine.ingest_host(host))
        _, should = counted(lambda: engine.should_compress(100))
        _, assemble = counted(lambda: core.assemble(budget))
        counts.append({"ingest": ingest, "should_compress": should, "assemble": assemble})
    return counts


def test_a_host_turn_sends_few_statements(make_engine):
    engine = make_engine(threshold=1_000_000)
    prepared = StatementCount.prepared
    counts = _turns(engine, 6)
    # The PREPAREs left out of the counts: once per statement and pooled connection, not per turn.
    assert StatementCount.prepared - prepared <= PREPARED_STATEMENTS * POOL_MAX
    stored = engine.core.store.message_count()
    assert stored == 40 + 6 * 4  # every turn stored its 4 messages: the count is of real work
    for turn in counts:
        assert turn["ingest"] > 0, counts  # the counter sees the statements
        assert turn["ingest"] <= INGEST, counts
        assert turn["should_compress"] <= SHOULD_COMPRESS, counts
        assert turn["assemble"] <= ASSEMBLE, counts


def _other_writer(engine: Any) -> Any:
    """A second store on the same database: another host's process."""
    from hermes_lcm.storage.pg.store import PgStore

    return PgStore(engine.core.store.path)


@pytest.mark.parametrize("move", ["append", "delete newest"])
def test_a_conversation_another_writer_moved_is_decided_again_under_the_lock(
    make_engine, move: str
):
    """The one-round-trip insert is decided from this process's last write; when another host
    appended to the conversation, or an operator removed its newest row, in between, nothing is
    written from that decision: the turn is decided again under the lock and stored once, after
    the other writer's rows, in order."""
    engine = make_engine(threshold=1_000_000)
    host = [_message(i) for i in range(8)]
    engine.ingest_host(host)
    cid = engine.core.binding.conversation_id
    other = _other_writer(engine)
    try:
        if move == "append":
            record = MessageIn(
                "user", "from another host", None, None, None, None, None, 5, "elsewhere"
            )
            other.append(cid, "other-session", "other", lambda prints: [record])
        else:
            newest = other.messages_after(cid, 0)[-1]
            other.delete_messages([newest.id])
    finally:
        other.close()
    host.extend(_message(8 + k) for k in range(4))
    _, sent = counted(lambda: engine.ingest_host(host))
    rows = engine.core.store.messages_after(cid, 0)
    contents = [m.content for m in rows]
    assert [m.seq for m in rows] == sorted(m.seq for m in rows)
    assert len(set(m.seq for m in rows)) == len(rows)
    for i in range(12):  # the removed row may come back from the host's list, never twice
        want = {0, 1} if move == "delete newest" and i == 7 else {1}
        assert contents.count(_message(i)["content"]) in want, (i, contents)
    if move == "append":
        assert contents.index("from another host") < contents.index(_message(8)["content"])
    assert sent > INGEST, sent  # the checked insert wrote nothing; the turn was decided again
    host.extend(_message(12 + k) for k in range(4))
    _, sent = counted(lambda: engine.ingest_host(host))  # the next turn: one round trip again
    assert sent == INGEST, sent
    assert [m.content for m in engine.core.store.messages_after(cid, 0)][-4:] == [
        _message(12 + k)["content"] for k in range(4)
    ]


def test_a_turn_another_host_stored_first_is_not_stored_twice(make_engine):
    """Two hosts on one session (a gateway and a CLI, two processes): the other stores the turn
    first; this one's insert, decided from its own last write, writes nothing, and the turn
    decided again under the lock finds every message stored."""
    engine = make_engine(threshold=1_000_000)
    host = [_message(i) for i in range(8)]
    engine.ingest_host(host)
    url = engine.core.store.path
    other = make_engine(threshold=1_000_000, LCM_DATABASE_URL=f"{url}&application_name=other")
    assert other.core.store is not engine.core.store  # its own store, as in another process
    host.extend(_message(8 + k) for k in range(4))
    other.ingest_host(list(host))
    engine.ingest_host(host)
    contents = [
        m.content for m in engine.core.store.messages_after(engine.core.binding.conversation_id, 0)
    ]
    assert contents == [_message(i)["content"] for i in range(12)], contents


def test_a_turn_with_nothing_new_takes_no_write_lock(make_engine):
    """The same list again (a copy): nothing to store, and no statement at all (the engine knows
    the list it saw last), so no write transaction and no write lock."""
    engine = make_engine(threshold=1_000_000)
    host = [_message(i) for i in range(12)]
    engine.ingest_host(host)
    _, again = counted(lambda: engine.ingest_host(list(host)))
    assert engine.core.store.message_count() == 12
    assert again == 0, again


def test_a_rare_lcm_grep_sends_few_statements(make_engine):
    engine = make_engine(threshold=1_000_000)
    engine.ingest_host(
        [_message(i) for i in range(30)] + [{"role": "user", "content": "zqvortexrare here"}]
    )
    ok(engine, "lcm_grep", query="gateway")  # the database's first search ever makes its cursor key
    # Another engine's first search reads that key: one read, no write transaction (which was
    # BEGIN + the write lock, insert, read, COMMIT).
    again = make_engine(threshold=1_000_000)
    first, sent_first = counted(lambda: ok(again, "lcm_grep", query="zqvortexrare"))
    answer, sent = counted(lambda: ok(engine, "lcm_grep", query="zqvortexrare"))
    assert len(answer["hits"]) == 1, answer
    assert first["hits"] == answer["hits"]
    assert 0 < sent <= RARE_ROUND_TRIPS <= RARE_STATEMENTS, sent
    assert sent_first <= sent + 1, (sent_first, sent)


def test_a_secret_is_made_once_and_then_read(make_engine):
    """Every engine of a database gets the same secret; only the first one writes it."""
    engine = make_engine(threshold=1_000_000)
    store = engine.core.store
    made, _ = counted(lambda: store.secret("rt-new"))
    again, sent = counted(lambda: store.secret("rt-new"))
    other = make_engine(threshold=1_000_000, session="s2").core.store
    assert made == again == other.secret("rt-new") and len(made) == 32
    assert store.secret("rt-other") != made
    assert sent == 1, sent


def test_the_memory_turn_filter_never_reads_every_message(make_engine: Any) -> None:
    """An EXISTS inside the filter's OR is planned by PostgreSQL as a "hashed SubPlan" that reads
    the whole messages table before the first candidate (1.6 s of a 1.7 s lcm_grep at 1M
    messages); the store's filter must be planned as a lookup per candidate. A plan, not a clock."""
    from hermes_lcm.storage.message_search import _all_lcm_calls
    from hermes_lcm.storage.pg.dialect import translate

    from .backends import raw_sql

    engine = make_engine(threshold=10**9)
    engine.ingest_host([_message(i) for i in range(3000)])
    store = engine.ensure_core().store
    raw_sql(store.url, "ANALYZE messages")

    def plan(where: str) -> str:
        sql = (
            "SELECT m.id FROM messages m WHERE m.tsv @@ lcm_tsq('(invoice)') AND m.id BETWEEN 1 AND 10000000 "
            f"{where} ORDER BY m.id DESC LIMIT 100"
        )
        return "\n".join(str(r[0]) for r in raw_sql(store.url, translate("EXPLAIN " + sql)))

    exists_form = (
        "AND NOT ((m.role = 'assistant' AND EXISTS (SELECT 1 FROM messages p WHERE p.conversation_id = "
        "m.conversation_id AND p.seq = m.seq - 1 AND coalesce(p.tool_name, '') LIKE 'lcm\\_%' ESCAPE "
        "'\\')) OR (m.role = 'user' AND EXISTS (SELECT 1 FROM messages n WHERE n.conversation_id = "
        f"m.conversation_id AND n.seq = m.seq + 1 AND {_all_lcm_calls('n')})))"
    )
    assert "hashed SubPlan" in plan(
        exists_form
    )  # the form this filter had: the data does provoke it
    where, _ = type(store)._message_filters({"skip_memory_turns": True, "skip_own_tools": True})
    assert "hashed SubPlan" not in plan(where)


def test_the_pinned_request_is_read_from_its_index_whatever_the_statistics(
    make_engine: Any,
) -> None:
    """Every assembly reads the newest request. Trusting statistics older than the rows (a table
    filled since its last ANALYZE, as every growing conversation is between autovacuum runs), the
    planner read the whole conversation and sorted it, a cost growing with the history; the
    requests index answers it from one entry. The unindexed plan is shown to be what the data
    provokes, then the store's own query is planned with the index. A plan, not a clock."""
    from hermes_lcm.storage.messages import REQUEST_WHERE
    from hermes_lcm.storage.pg.dialect import translate

    from .backends import raw_sql

    engine = make_engine(threshold=10**9)
    store = engine.ensure_core().store
    raw_sql(store.url, "ANALYZE messages")  # statistics of an empty table, then the rows arrive
    engine.ingest_host([_message(i) for i in range(3000)])
    conversation = engine.ensure_core()._conversation()
    sql = translate(f"EXPLAIN (ANALYZE, BUFFERS) SELECT id FROM messages WHERE {REQUEST_WHERE}")

    def plan() -> str:
        return "\n".join(str(r[0]) for r in raw_sql(store.url, sql, (conversation, 2**62)))

    indexed = plan()
    assert "messages_requests" in indexed, indexed
    assert "Sort" not in indexed, indexed
    request = store.newest_request(conversation)
    assert request is not None and request.content.startswith("turn 2998:")
    raw_sql(store.url, "DROP INDEX messages_requests")
    assert "Sort" in plan()  # without it the same statistics sort the whole conversation


def test_a_refused_insert_with_its_commit_loses_nothing(make_engine: Any) -> None:
    """The turn's insert goes to the server with its COMMIT. When the server refuses it (here a
    read-only transaction), the transaction is rolled back, the failure is reported, the
    messages stay unstored in the prompt, and the next turn stores each of them once."""
    from .backends import allow_writes, refuse_writes

    engine = make_engine(threshold=10**9)
    host = [_message(i) for i in range(8)]
    engine.ingest_host(host)
    store = engine.ensure_core().store
    refuse_writes(store)
    host.extend(_message(8 + k) for k in range(4))
    core = engine.ensure_core()
    conversation = core._conversation()
    record = MessageIn("user", "refused", None, None, None, None, None, 3, "fp-refused")
    for _ in range(8):  # refused again and again on one connection, each pipeline aborted
        with pytest.raises(WriteFailed):
            store.append(conversation, "s1", "cli", lambda _prints: [record])
    # An aborted pipeline must leave no statement psycopg believes the server prepared: the
    # reads of an assembly on that connection still answer.
    assert len(core.assemble(core.budget(engine.threshold_tokens, 0))) == 8
    engine.ingest_host(host)
    status = engine.get_status()
    assert "read-only" in status["last_store_write_failure"]
    assert store.message_count() == 8
    allow_writes(store)
    host.extend(_message(12 + k) for k in range(4))
    engine.ingest_host(host)
    conversation = engine.ensure_core()._conversation()
    rows = store.messages_after(conversation, 0)
    assert [m.content for m in rows] == [m["content"] for m in host]
    assert [m.seq for m in rows] == list(range(1, 17))
    # the pooled connection that carried the refused pipeline is usable again
    assert store.conversation(conversation).last_seq == 16


def test_an_append_inside_an_outer_write_never_commits_it(make_engine: Any) -> None:
    """Inside another write the append joins that transaction: its insert does not carry a
    COMMIT, so a failure after it takes the appended rows back with the rest."""
    engine = make_engine(threshold=10**9)
    engine.ingest_host([_message(i) for i in range(4)])
    store = engine.ensure_core().store
    conversation = engine.ensure_core()._conversation()
    record = MessageIn("user", "inside", None, None, None, None, None, 3, "fp-inside")
    with pytest.raises(RuntimeError), store.write():
        store.append(conversation, "s1", "cli", lambda _prints: [record])
        raise RuntimeError("after the append")
    assert store.message_count() == 4
    assert store.conversation(conversation).last_seq == 4
    assert store.append(conversation, "s1", "cli", lambda _prints: [record])
    assert store.message_count() == 5


def test_the_assembly_and_the_insert_alone_run_under_a_generic_plan(make_engine: Any) -> None:
    """The assembly's statement and the turn's insert are planned once (generic), every other
    statement still for its values: after a dozen turns the session's own prepared statements
    ran on generic plans only, each pooled connection is back on custom plans, and a prompt
    built on a generic plan is the one a fresh engine builds."""
    engine = make_engine(threshold=1_000_000)
    _turns(engine, 12)
    core = engine.core
    budget = core.budget(engine.threshold_tokens, 0)
    prompts = [core.assemble(budget) for _ in range(3)]
    store = core.store
    modes, plans = set(), []
    with _every_pooled_connection(store) as conns:
        for conn in conns:
            modes.add(conn.execute("SHOW plan_cache_mode").fetchone()[0])
            plans += conn.execute(
                "SELECT generic_plans, custom_plans FROM pg_prepared_statements "
                "WHERE name LIKE 'lcm%'"
            ).fetchall()
    assert modes == {"force_custom_plan"}
    assert plans and all(generic > 0 and custom == 0 for generic, custom in plans), plans
    fresh = make_engine(threshold=1_000_000).core
    assert prompts[0] == prompts[-1] == fresh.assemble(budget)


@contextmanager
def _every_pooled_connection(store: Any) -> Iterator[list[Any]]:
    """Every connection the store's pool may hand out, all checked out at once (so none comes
    twice), given back after."""
    pool = store.pool
    conns = [pool.getconn() for _ in range(pool.max_size)]
    try:
        yield conns
    finally:
        for conn in conns:
            pool.putconn(conn)


def test_statements_the_session_lost_are_prepared_again(make_engine: Any) -> None:
    """psycopg deallocates every prepared statement of a session (DEALLOCATE ALL) when it sees a
    ROLLBACK or a DROP once it has prepared one of its own, so a statement this process prepared
    can be gone from a connection that still has it marked. Each turn after that on every
    connection still stores all its messages and builds the same prompt as a fresh engine."""
    engine = make_engine(threshold=1_000_000)
    core = engine.core
    budget = core.budget(engine.threshold_tokens, 0)
    host = [_message(i) for i in range(40)]
    engine.ingest_host(host)
    core.assemble(budget)
    for turn in range(3):
        with _every_pooled_connection(core.store) as conns:
            for conn in conns:
                conn.execute("DEALLOCATE ALL")
        host.extend(_message(40 + 4 * turn + k) for k in range(4))
        engine.ingest_host(host)
        assert core.store.message_count() == len(host)
        prompt = core.assemble(budget)
    assert [m.content for m in core.store.messages_after(core.binding.conversation_id, 0)] == [
        m["content"] for m in host
    ]
    assert prompt == make_engine(threshold=1_000_000).core.assemble(budget)

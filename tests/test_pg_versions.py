"""The PostgreSQL releases the store runs on: 14 and later, said at connect.

The reads that walk a message's ``tool_calls`` JSON (doctor's tool-link check, the text a message
is embedded as) once used ``IS JSON ARRAY``, PostgreSQL 16's; PostgreSQL 15 answered with a syntax
error and the doctor logged a traceback. Their rewrite (storage/pg/calls.py) must answer exactly as
the ``IS JSON ARRAY`` form on valid, invalid, array and object JSON (compared on the test server,
PostgreSQL 16, where the old form still runs), and run on a real PostgreSQL 15 when this machine
has one. A server older than the minimum is refused at connect with one clear line.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hermes_lcm import store as store_module
from hermes_lcm.storage.errors import StoreError
from hermes_lcm.storage.operator import OperatorQueries
from hermes_lcm.storage.pg import families, schema
from hermes_lcm.storage.pg.calls import as_json_array
from hermes_lcm.store import open_store

from .backends import raw_sql
from .conftest import new_engine
from .pgserver import Server, fresh_url

PG15 = Path("/usr/lib/postgresql/15/bin")
# A call row's tool_calls text, the id its tool result names, and whether that result is linked
# (an earlier call of its conversation has the id).
CASES: dict[str, tuple[str, str, bool]] = {
    "array": (
        '[{"id": "call_a", "type": "function", "function": {"name": "grep", "arguments": "{\\"q\\": 1}"}}]',
        "call_a",
        True,
    ),
    "blank-led array": (
        ' \n\t[{"id": "call_b", "function": {"name": "ls", "arguments": ""}}]',
        "call_b",
        True,
    ),
    "two calls": (
        '[{"id": "call_x", "function": {"name": "a"}}, {"id": "call_c", "function": {"name": "b"}}]',
        "call_c",
        True,
    ),
    "object": ('{"id": "call_d", "function": {"name": "grep"}}', "call_d", False),
    "array cut short": ('[{"id": "call_e", "function": {"name": "gr', "call_e", False),
    "array, bad inside": (
        '[{"id": "call_f", "function": {"name": "grep"}}, {oops}]',
        "call_f",
        False,
    ),
    "not json": ("call_g grep(q)", "call_g", False),
    "a string": ('"call_h"', "call_h", False),
    "empty array": ("[]", "call_i", False),
}
OLD_GUARD = {
    "jsonb": "CASE WHEN a.tool_calls IS JSON ARRAY THEN a.tool_calls::jsonb ELSE '[]'::jsonb END",
    "json": "CASE WHEN m.tool_calls IS JSON ARRAY THEN m.tool_calls::json ELSE '[]'::json END",
}


def fill(home: Path, url: str, cases: dict[str, tuple[str, str, bool]] = CASES) -> Any:
    """One conversation: per case an assistant call and its tool result, then the case's text put
    into the call's row behind the store's back (as an import or a hand edit leaves it)."""
    engine = new_engine(home, 10**9, "s1", LCM_DATABASE_URL=url)
    messages: list[dict[str, Any]] = [{"role": "user", "content": "start"}]
    for n, (_, call, _) in enumerate(cases.values()):
        messages.append(
            {
                "role": "assistant",
                "content": f"calling {n}",
                "tool_calls": [
                    {
                        "id": call,
                        "type": "function",
                        "function": {"name": "grep", "arguments": "{}"},
                    }
                ],
            }
        )
        messages.append({"role": "tool", "tool_call_id": call, "content": f"result {n}"})
    messages.append({"role": "tool", "tool_call_id": "call_nobody_made", "content": "stray"})
    engine.ingest_host(messages)
    for text, call, _ in cases.values():
        raw_sql(
            url,
            "UPDATE messages SET tool_calls = ? WHERE role = 'assistant' AND strpos(tool_calls, ?) > 0",
            (text, f'"{call}"'),
        )
    store_module.close_all()
    return open_store(url)


def expected_orphans(url: str, cases: dict[str, tuple[str, str, bool]] = CASES) -> set[int]:
    linked = {call for _, call, ok in cases.values() if ok}
    return {
        i
        for i, call in raw_sql(url, "SELECT id, tool_call_id FROM messages WHERE role = 'tool'")
        if call not in linked
    }


def old_tool_links(store: Any, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """tool_link_counts with the ``IS JSON ARRAY`` guard it had before (PostgreSQL 16 runs it)."""
    old = store._call_exists().replace(
        as_json_array("a.tool_calls", "a.id", store._bad_calls), OLD_GUARD["jsonb"]
    )
    with monkeypatch.context() as patch:
        patch.setattr(store, "_call_exists", lambda: old)
        return dict(OperatorQueries.tool_link_counts(store))


def old_unembedded(store: Any, model: int) -> list[tuple[int, str]]:
    sql = families._unembedded_sql("m").replace(
        as_json_array("m.tool_calls", "m.id", (), "json"), OLD_GUARD["json"]
    )
    with store.read() as db:
        return [(int(r[0]), str(r[1])) for r in db.execute(sql, (0, model, 1000)).fetchall()]


@pytest.fixture
def pg16(tmp_path: Path) -> Iterator[Any]:
    url = fresh_url()
    store = fill(tmp_path, url)
    yield url, store
    store_module.close_all()


def test_the_rewrite_answers_as_is_json_array_did(pg16, monkeypatch):
    url, store = pg16
    before = old_tool_links(store, monkeypatch)
    assert store._bad_calls == ()
    after = store.tool_link_counts()
    assert after == before
    assert set(after["sample_orphaned"]) == expected_orphans(url) and after["orphaned"] == 7
    # the two rows that start like an array and do not parse were found by the server, and only they
    cut = {
        i
        for i, text in raw_sql(
            url, "SELECT id, tool_calls FROM messages WHERE tool_calls IS NOT NULL"
        )
        if text in (CASES["array cut short"][0], CASES["array, bad inside"][0])
    }
    assert set(store._bad_calls) == cut and len(cut) == 2
    store.ensure_vector_tables()
    model = store.vector_model("probe", 4, "float32")
    assert store.unembedded(model, "m", 0, 1000) == old_unembedded(store, model)
    texts = dict(store.unembedded(model, "m", 0, 1000))
    assert any(
        t.endswith('grep {"q": 1}') for t in texts.values()
    )  # an array's calls are in the text
    assert store.embedding_backlog(model, 10_000)[0] == len(texts)


def test_a_row_jsonb_cannot_hold_no_longer_fails_the_check(tmp_path, monkeypatch):
    """A NUL escape is valid json but not jsonb: the old guard let it through to the cast, which
    raised; now it is one more row that calls nothing."""
    url = fresh_url()
    cases = {**CASES, "nul": ('[{"id": "call_nul", "x": "\\u0000"}]', "call_nul", False)}
    store = fill(tmp_path, url, cases)
    with pytest.raises(Exception, match=r"Unicode|unsupported"):
        old_tool_links(store, monkeypatch)
    links = store.tool_link_counts()
    assert links["orphaned"] == 8 and set(links["sample_orphaned"]) == expected_orphans(url, cases)
    store_module.close_all()


@pytest.fixture(scope="module")
def pg15(tmp_path_factory) -> Iterator[Server]:
    """This machine's PostgreSQL 15 (Debian's package), when it has one."""
    if not (PG15 / "postgres").exists():
        pytest.skip("no PostgreSQL 15 here")
    from . import pgserver

    found = pgserver.binaries
    pgserver.binaries = lambda: PG15
    try:
        srv = Server()
    finally:
        pgserver.binaries = found
    yield srv
    srv.stop()


def test_doctor_and_embedding_reads_run_on_postgresql_15(pg15, tmp_path, caplog):
    import psycopg

    from hermes_lcm.maintenance import doctor as mt

    with psycopg.connect(pg15.url(), autocommit=True) as pg:
        assert pg.info.server_version // 10000 == 15
        pg.execute("CREATE SCHEMA t15")
    url = pg15.url(schema="t15")
    store = fill(tmp_path, url)
    caplog.set_level(logging.WARNING)
    links = store.tool_link_counts()
    assert set(links["sample_orphaned"]) == expected_orphans(url) and links["orphaned"] == 7
    report = mt.doctor_report(store, deep=True)
    assert not [c for c in report["checks"] if c["status"] == "fail"], report["checks"]
    store.ensure_vector_tables()
    model = store.vector_model("probe", 4, "float32")
    texts = [text for _, text in store.unembedded(model, "m", 0, 1000)]
    assert (
        len(texts) == len(raw_sql(url, "SELECT id FROM messages"))
        and 'calling 0\ngrep {"q": 1}' in texts
    )
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
    store_module.close_all()


@pytest.mark.parametrize(
    ("number", "release"), [(130004, "13.4"), (120018, "12.18"), (90624, "9.6.24")]
)
def test_a_server_older_than_the_minimum_is_named_and_refused(number, release):
    said = f"is PostgreSQL {release}: hermes-lcm needs PostgreSQL 14 or newer"
    with pytest.raises(StoreError, match=re.escape(said)):
        schema.check_server(number, "postgresql://h/db")
    schema.check_server(schema.MIN_SERVER_VERSION, "postgresql://h/db")
    schema.check_server(160002, "postgresql://h/db")


def test_an_old_server_is_refused_at_connect(tmp_path, monkeypatch):
    """The real server, reporting an older ``server_version_num`` (psycopg's, faked): refused when
    the store connects, before any table is made, and the engine says why."""
    import psycopg

    url = fresh_url()
    monkeypatch.setattr(psycopg.ConnectionInfo, "server_version", property(lambda _self: 130004))
    with pytest.raises(
        StoreError, match=re.escape("PostgreSQL 13.4: hermes-lcm needs PostgreSQL 14 or newer")
    ):
        open_store(url)
    engine = new_engine(tmp_path, LCM_DATABASE_URL=url)
    engine.ingest_host([{"role": "user", "content": "hello"}])
    assert "needs PostgreSQL 14 or newer" in str(engine.startup_error)
    monkeypatch.undo()
    assert raw_sql(
        url, "SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema()"
    ) == [(0,)]

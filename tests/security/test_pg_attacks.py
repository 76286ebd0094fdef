"""Attacks only a shared PostgreSQL server has: another memory in the same database, another
program's tables at the URL, a newer layout, a role without rights, the server going away
(down at start, killed mid-write), another host holding the write lock, threads draining the
pool, and a text larger than a tsvector. Each runs on the real test server (tests/pgserver.py);
the same behaviour on SQLite is covered by the backend-neutral tests beside this one.
"""

from __future__ import annotations

import copy
import json
import threading
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hermes_lcm import store as store_module
from hermes_lcm.base.tokens import count_messages
from hermes_lcm.engine import LcmEngine
from hermes_lcm.storage.pg import schema as pg_schema
from hermes_lcm.store import ForeignDatabase, NewerSchema, StoreError, WriteFailed, open_store

from ..backends import raw_sql
from ..convo import assert_valid_sequence, conversation
from ..pgserver import Server, fresh_url, server


def engine_on(
    home: Path, url: str, session: str = "s1", threshold: int = 3000, **env: str
) -> LcmEngine:
    base = {
        "HERMES_HOME": str(home),
        "LCM_SUMMARY_PROVIDER": "extractive",
        "LCM_DATABASE_URL": url,
        **env,
    }
    engine = copy.deepcopy(LcmEngine(env=base))
    engine.update_model("fake-model", 64000)
    engine.threshold_tokens = threshold
    engine.on_session_start(session, hermes_home=str(home), platform="cli")
    return engine


def grep(engine: LcmEngine, query: str, **args: Any) -> dict[str, Any]:
    return json.loads(engine.handle_tool_call("lcm_grep", {"query": query, **args}))


def stored_count(url: str) -> int:
    return int(raw_sql(url, "SELECT count(*) FROM messages")[0][0])


@pytest.fixture(autouse=True)
def _close_stores():
    yield
    store_module.close_all()


def test_two_schemas_of_one_database_are_two_memories(tmp_path: Path):
    """options=-csearch_path selects the memory: nothing of one schema is seen through the other."""
    first, second = fresh_url(), fresh_url()
    one = engine_on(tmp_path, first, session="a", threshold=60_000)
    two = engine_on(tmp_path, second, session="a", threshold=60_000, LCM_SHARED_MEMORY="1")
    one.ingest_host([{"role": "user", "content": "schemaonesecret lives here"}])
    two.ingest_host([{"role": "user", "content": "schematwosecret lives there"}])
    assert grep(two, "schemaonesecret", session_scope="all")["hits"] == []
    assert grep(one, "schematwosecret", session_scope="all")["hits"] == []
    assert grep(one, "schemaonesecret")["hits"] and grep(two, "schematwosecret")["hits"]
    assert stored_count(first) == stored_count(second) == 1


def test_a_schema_holding_another_programs_tables_is_refused_and_not_written(tmp_path: Path):
    url = fresh_url()
    raw_sql(url, "CREATE TABLE invoices(id int PRIMARY KEY, amount numeric)")
    with pytest.raises(ForeignDatabase):
        open_store(url)
    engine = engine_on(tmp_path, url)
    history = [m for t in conversation(seed=3, turns=20) for m in t]
    out = engine.compress(list(history), current_tokens=count_messages(history))
    assert engine.opening.refused and "invoices" in str(engine.startup_error)
    assert out and count_messages(out) <= 3000  # refused for good: trimmed like an ignored session
    tables = {
        r[0]
        for r in raw_sql(
            url,
            "SELECT table_name FROM information_schema.tables "
            "WHERE table_schema = current_schema()",
        )
    }
    assert tables == {"invoices"}


def test_a_newer_layout_is_refused_and_not_written(tmp_path: Path):
    url = fresh_url()
    open_store(url).close()
    store_module.close_all()
    raw_sql(
        url,
        "UPDATE meta SET value = ? WHERE key = 'pg_schema'",
        (str(pg_schema.PG_SCHEMA_VERSION + 1),),
    )
    with pytest.raises(NewerSchema):
        open_store(url)
    engine = engine_on(tmp_path, url)
    engine.ingest_host([{"role": "user", "content": "never written"}])
    assert engine.opening.refused and stored_count(url) == 0


def test_a_role_without_create_rights_gets_one_clear_error(tmp_path: Path):
    srv = server()
    role, name = "r_" + uuid.uuid4().hex[:10], "t_" + uuid.uuid4().hex[:16]
    raw_sql(srv.url(), f"CREATE ROLE {role} LOGIN")
    raw_sql(srv.url(), f"CREATE SCHEMA {name}")
    raw_sql(srv.url(), f"GRANT USAGE ON SCHEMA {name} TO {role}")
    url = f"postgresql://{role}@127.0.0.1:{srv.port}/postgres?options={quote(f'-csearch_path={name}')}"
    with pytest.raises(Exception) as caught:
        open_store(url)
    assert "permission denied" in str(caught.value)
    engine = engine_on(tmp_path, url)
    history = [m for t in conversation(seed=4, turns=20) for m in t]
    out = engine.compress(list(history), current_tokens=count_messages(history))
    assert out == history  # nothing could be stored, so nothing leaves the host's list
    assert "permission denied" in str(engine.startup_error) and not engine.opening.refused


@pytest.fixture(scope="module")
def own_server():
    """A server of this module's own, to stop and start without disturbing the other tests."""
    srv = Server()
    yield srv
    srv.stop()


def test_a_server_down_at_start_is_one_error_drops_nothing_and_recovers(
    tmp_path: Path, own_server: Server
):
    import psycopg

    name = "t_" + uuid.uuid4().hex[:16]
    with psycopg.connect(own_server.url(), autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {name}")
    url = own_server.url(schema=name) + "&connect_timeout=2"
    own_server.halt()
    try:
        engine = engine_on(tmp_path, url)
        history = [m for t in conversation(seed=5, turns=30) for m in t]
        out = engine.compress(list(history), current_tokens=count_messages(history))
        assert out == history  # a transient outage: nothing is dropped (not "refused for good")
        assert not engine.opening.refused and "cannot connect" in str(engine.startup_error)
        assert engine.opening.attempts == 1
        engine.compress(list(history), current_tokens=count_messages(history))
        assert (
            engine.opening.attempts == 1
        )  # one startup error, then the back-off: no retry per call
    finally:
        own_server.start()
    engine.opening._retry_at = 0.0  # the back-off has passed
    out = engine.compress(list(history), current_tokens=count_messages(history))
    assert engine.startup_error is None and engine.core is not None
    assert count_messages(out) <= 3000 and stored_count(url) == len(history)


@pytest.mark.parametrize("shape", ["api", "cli"])
def test_a_server_down_mid_conversation_keeps_every_prompt_bounded_and_loses_nothing(
    tmp_path: Path, own_server: Server, shape: str
):
    """The server goes away after the conversation is stored and stays away for three turns: each
    prompt stays within its budget (what the last stored ingest proved stored may be left out,
    every new message is kept verbatim), and once the server is back every message is stored
    once, in order. ``api``: the host re-sends its whole history each turn as new objects;
    ``cli``: it goes on with the prompt it was given."""
    import psycopg

    name = "t_" + uuid.uuid4().hex[:16]
    with psycopg.connect(own_server.url(), autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {name}")
    url = own_server.url(schema=name) + "&connect_timeout=2"
    engine = engine_on(tmp_path, url)
    turns = list(conversation(seed=9, turns=44))
    history = [m for t in turns[:40] for m in t]
    prompt = engine.compress(copy.deepcopy(history), current_tokens=count_messages(history))
    own_server.halt()
    try:
        for upto in (41, 42, 43):
            new = turns[upto - 1]
            if shape == "api":
                sent = copy.deepcopy([m for t in turns[:upto] for m in t])
            else:
                sent = prompt + copy.deepcopy(new)
            prompt = engine.compress(sent, current_tokens=count_messages(sent))
            assert count_messages(prompt) < 3000, (upto, count_messages(prompt))
            assert_valid_sequence(prompt)
            # Kept whole only when it fits anyway (a list that goes on from our prompt).
            assert engine._last_compress_aborted is False or (shape == "cli" and prompt == sent)
            assert all(m in prompt for m in new if m.get("content"))
    finally:
        own_server.start()
    everything = [m for t in turns[:43] for m in t]
    for _ in range(60):  # the host's next calls, until the pool has connected again
        sent = copy.deepcopy(everything) if shape == "api" else prompt
        prompt = engine.compress(sent, current_tokens=count_messages(everything))
        if stored_count(url) == len(everything):
            break
        time.sleep(0.5)
    stored = engine.core.store.messages_after(engine.core.binding.conversation_id, 0)
    assert [m.to_host() for m in stored] == everything


def test_a_backend_killed_mid_write_stores_nothing_half_and_the_turn_stays_bounded(tmp_path: Path):
    url = fresh_url()
    engine = engine_on(tmp_path, url)
    turns = list(conversation(seed=6, turns=41))
    history = [m for t in turns[:40] for m in t]
    engine.ingest_host(list(history))
    before = (stored_count(url), raw_sql(url, "SELECT count(*) FROM summaries")[0][0])
    # The server process serving the write dies in the middle of its INSERT (an operator's
    # pg_terminate_backend, an OOM kill): the server rolls its transaction back.
    raw_sql(
        url,
        "CREATE FUNCTION die() RETURNS trigger LANGUAGE plpgsql AS "
        "$$ BEGIN PERFORM pg_terminate_backend(pg_backend_pid()); RETURN NEW; END $$",
    )
    for table in ("messages", "summaries"):
        raw_sql(
            url, f"CREATE TRIGGER die BEFORE INSERT ON {table} FOR EACH ROW EXECUTE FUNCTION die()"
        )
    longer = history + turns[40]
    out = engine.compress(list(longer), current_tokens=count_messages(longer))
    assert (stored_count(url), raw_sql(url, "SELECT count(*) FROM summaries")[0][0]) == before
    assert out and count_messages(out) < 3000 + count_messages(
        turns[40]
    )  # bounded; the unstored turn kept
    assert all(m in out for m in turns[40] if m.get("content"))
    assert_valid_sequence(out)
    status = engine.get_status()
    assert status["store_write_failures"] >= 1, status
    for table in ("messages", "summaries"):
        raw_sql(url, f"DROP TRIGGER die ON {table}")
    engine.compress(list(longer), current_tokens=count_messages(longer))
    assert stored_count(url) == len(longer)
    assert [
        m.to_host()
        for m in engine.core.store.messages_after(engine.core.binding.conversation_id, 0)
    ][-2:] == [m for m in longer[-2:]]


def test_a_held_write_lock_fails_the_write_as_locked_never_hangs(tmp_path: Path):
    """Another host stuck inside a write: the server's lock_timeout ends our wait as WriteFailed("locked")."""
    import psycopg

    from hermes_lcm.storage.pg.connection import LOCK_NAMESPACE, WRITE_LOCK

    base = fresh_url()
    url = base.replace("options=", "options=" + quote("-clock_timeout=300 "))
    engine = engine_on(tmp_path, url, threshold=60_000)
    engine.ingest_host([{"role": "user", "content": "first"}])
    with psycopg.connect(base) as holder:  # a transaction that never ends, holding the write lock
        holder.execute("SELECT pg_advisory_xact_lock(%s, %s)", (LOCK_NAMESPACE, WRITE_LOCK))
        done = threading.Event()

        def turn() -> None:
            engine.ingest_host(
                [{"role": "user", "content": "first"}, {"role": "user", "content": "second"}]
            )
            done.set()

        worker = threading.Thread(target=turn, daemon=True)
        worker.start()
        assert done.wait(60), "the write waited on the lock without end"
        holder.rollback()
    status = engine.get_status()
    assert status["store_write_failures"] >= 1 and "locked" in status["last_store_write_failure"]
    engine.ingest_host(
        [{"role": "user", "content": "first"}, {"role": "user", "content": "second"}]
    )
    assert stored_count(base) == 2


def test_without_a_server_setting_a_write_still_has_a_lock_timeout():
    """No lock_timeout from the server: ours applies (SQLite's busy timeout), never an endless wait."""
    from hermes_lcm.storage.connection import BUSY_TIMEOUT_MS

    store = open_store(fresh_url())
    with store.read() as db:
        value = db.execute("SELECT current_setting('lock_timeout')").fetchone()[0]
    assert value == f"{BUSY_TIMEOUT_MS}ms" or value == f"{BUSY_TIMEOUT_MS // 1000}s"


def test_threads_beyond_the_pool_all_get_answers(tmp_path: Path):
    from hermes_lcm.storage.pg.connection import POOL_MAX

    engine = engine_on(tmp_path, fresh_url(), threshold=60_000)
    engine.ingest_host([{"role": "user", "content": f"pooled word{i} answer"} for i in range(20)])
    answers: list[dict[str, Any]] = []
    lock = threading.Lock()

    def ask(i: int) -> None:
        for _ in range(5):
            answer = grep(engine, f"word{i % 20}")
            with lock:
                answers.append(answer)

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(POOL_MAX * 6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert len(answers) == POOL_MAX * 6 * 5
    assert all(len(a.get("hits", [])) == 1 for a in answers), [
        a for a in answers if len(a.get("hits", [])) != 1
    ][:2]


def test_a_text_larger_than_a_tsvector_is_found_by_its_end(tmp_path: Path):
    """A 5 MB tool output: the index keeps its last words (SQLite's FTS5 indexes all of it)."""
    url = fresh_url()
    engine = engine_on(tmp_path, url, threshold=60_000)
    body = (
        "".join(f"line {i}: value={i * 7919 % 10007}\n" for i in range(200_000))
        + "closing verdict zebrafinal"
    )
    engine.ingest_host(
        [{"role": "user", "content": "run it"}, {"role": "assistant", "content": body}]
    )
    assert grep(engine, "zebrafinal")["hits"]
    assert grep(engine, "closing verdict zebrafinal")["hits"]  # a phrase: its positions are kept
    assert grep(engine, "line 3: value")["hits"]  # the beginning is still indexed


def test_an_old_layout_reindexes_its_huge_rows(tmp_path: Path):
    """A database of layout 1 indexed only the head of a huge text: opening it re-indexes the row."""
    url = fresh_url()
    engine = engine_on(tmp_path, url, threshold=60_000)
    body = "".join(f"row {i} holds {i * 31 % 9973}\n" for i in range(250_000)) + "tailmarker"
    engine.ingest_host([{"role": "user", "content": body}])
    store_module.close_all()
    old = (
        "CREATE OR REPLACE FUNCTION lcm_tsv(body text) RETURNS tsvector LANGUAGE plpgsql IMMUTABLE "
        "AS $$ BEGIN RETURN to_tsvector('lcm'::regconfig, lcm_words(body)); EXCEPTION WHEN "
        "program_limit_exceeded THEN RETURN to_tsvector('lcm'::regconfig, lcm_words(left(body, 200000))); END $$"
    )
    raw_sql(url, old)
    raw_sql(url, "UPDATE messages SET content = content")
    raw_sql(url, "UPDATE meta SET value = '1' WHERE key = 'pg_schema'")
    raw_sql(url, "DROP INDEX messages_requests")  # layout 1 had no requests index either
    assert (
        raw_sql(url, "SELECT count(*) FROM messages WHERE tsv @@ lcm_tsq('tailmarker')")[0][0] == 0
    )
    store = open_store(url)
    assert store.schema_version() >= 4
    assert raw_sql(url, "SELECT value FROM meta WHERE key = 'pg_schema'")[0][0] == str(
        pg_schema.PG_SCHEMA_VERSION
    )
    assert (
        raw_sql(url, "SELECT count(*) FROM messages WHERE tsv @@ lcm_tsq('tailmarker')")[0][0] == 1
    )
    assert raw_sql(url, "SELECT to_regclass('messages_requests') IS NOT NULL")[0][0]


def test_a_url_to_nowhere_is_an_outage_named_without_its_password():
    """Not a StoreError (that means "refused for good"): a WriteFailed the engine retries after its back-off."""
    with pytest.raises(WriteFailed) as caught:
        open_store("postgresql://lcm:hunter2@127.0.0.1:1/postgres?connect_timeout=1")
    assert caught.value.reason == "cannot connect" and "hunter2" not in str(caught.value)
    assert not isinstance(caught.value, StoreError)


def test_a_missing_driver_is_an_outage_that_loses_nothing(tmp_path):
    """Without the ``postgres`` extra, a URL cannot be opened: one startup error naming the extra, and
    (unlike another program's database) the host's list comes back whole: nothing unstored is dropped."""
    import subprocess
    import sys

    code = (
        "import json, sys\n"
        "sys.modules['psycopg'] = None\n"  # as if the extra were not installed
        "sys.modules['psycopg_pool'] = None\n"
        "from hermes_lcm.engine import LcmEngine\n"
        f"env = {{'HERMES_HOME': {str(tmp_path)!r}, 'LCM_SUMMARY_PROVIDER': 'extractive',\n"
        "       'LCM_DATABASE_URL': 'postgresql://lcm@127.0.0.1:1/none'}\n"
        "e = LcmEngine(env=env)\n"
        "e.update_model('m', 64000)\n"
        f"e.on_session_start('s', hermes_home={str(tmp_path)!r}, platform='cli')\n"
        "history = [{'role': 'user', 'content': f'message {i} ' * 200} for i in range(40)]\n"
        "e.ingest_host(history)\n"
        "out = e.compress(list(history), current_tokens=10**6)\n"
        "print(json.dumps({'error': e.get_status().get('startup_error') or e.startup_error, 'same': out == history}))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert "postgres' extra" in (seen["error"] or ""), seen
    assert seen["same"] is True


_TEXTS = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=300) | st.lists(
    st.sampled_from(
        ["Café", "naïve", "résumé", "ÀÉÎ", "straße", "東京", "x_y", "a-b", "ﬁ", "42", "--"]
    ),
    max_size=40,
).map(" ".join)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(text=_TEXTS)
def test_the_index_function_gives_every_text_the_vector_of_its_guarded_body(
    pg_conn: Any, text: str
):
    """lcm_tsv sends only a text that could overflow a tsvector through the PL/pgSQL body with
    its exception block; every other text must get exactly the vector that body gives it (the
    stored vectors of an upgraded database are not recomputed)."""
    text = text.replace("\x00", "")
    row = pg_conn.execute(
        "SELECT lcm_tsv(%s) = lcm_tsv_large(%s), lcm_tsv(%s)::text", (text, text, text)
    ).fetchone()
    assert row[0], (text, row[1])


def test_the_index_function_agrees_on_both_sides_of_its_size_cap(pg_conn: Any):
    """Texts just under and over the cap, of many distinct words, and one over a tsvector's 1 MB."""
    for size in (499_990, 500_010, 1_400_000):
        words, n = [], 0
        while n < size:
            words.append(f"w{len(words):x}é")
            n += len(words[-1].encode()) + 1
        text = " ".join(words)
        same, length = pg_conn.execute(
            "SELECT lcm_tsv(%s) = lcm_tsv_large(%s), length(lcm_tsv(%s))", (text, text, text)
        ).fetchone()
        assert same and length > 1000, size


@pytest.fixture
def pg_conn(tmp_path: Path):
    import psycopg

    url = fresh_url()
    open_store(url).close()  # the schema and its functions
    with psycopg.connect(url, autocommit=True) as conn:
        yield conn


_LITERAL_TEXTS = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"])) | st.lists(
    st.sampled_from(["'", "''", "\\", "\\'", "E'", "\x00", "\x01", "\x010", "$$", ";", "--", "é"]),
    max_size=30,
).map("".join)


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    text=_LITERAL_TEXTS,
    number=st.integers(-(2**63), 2**63 - 1),
    ids=st.lists(st.integers(-(2**63), 2**63 - 1), max_size=20),
)
def test_a_prepared_statements_parameters_reach_the_server_as_sent(
    pg_db: Any, text: str, number: int, ids: list[int]
):
    """A turn's prepared statements take their parameters written into the query as literals
    (one simple query): any string (quotes, backslashes, NUL, the NUL escape's own marker, SQL
    that would end the statement), any bigint and any list of them reach the server as the
    values they were, and come back so."""
    sql = "SELECT %s::text, %s::bigint, %s::bigint[], %s::text IS NULL"
    got = pg_db.run_prepared(sql, [text, number, ids, None]).fetchone()
    assert got == (text, number, ids, True)


@pytest.fixture
def pg_db(tmp_path: Path):
    store = open_store(fresh_url())
    try:
        with store._bound() as db:
            yield db
    finally:
        store.close()

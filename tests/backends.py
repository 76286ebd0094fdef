"""What a backend-neutral test needs beyond the store's API: the database's own answer to a
full-text query (read past our search code), and the two ways a store fails under the engine."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

from hermes_lcm.store import Store, is_url


def matching_ids(
    path: str, match: str, conversation_id: int | None, kind: str = "messages"
) -> set[int]:
    """Raw rows of ``kind`` (messages or summaries) matching an FTS expression, straight from the
    database: FTS5 for a file, the ``tsv`` index for a URL (with the same expression as ``tsquery``)."""
    table = {"messages": "messages", "summaries": "summaries"}[kind]
    scope, args = (
        (" AND m.conversation_id=?", (conversation_id,))
        if conversation_id is not None
        else ("", ())
    )
    if is_url(path):
        import psycopg

        from hermes_lcm.storage.pg.fulltext import to_tsquery_text

        with psycopg.connect(path, autocommit=True) as pg:
            sql = f"SELECT m.id FROM {table} m WHERE m.tsv @@ lcm_tsq(%s){scope.replace('?', '%s')}"
            return {r[0] for r in pg.execute(sql, (to_tsquery_text(match), *args))}
    db = sqlite3.connect(path)
    try:
        sql = f"SELECT m.id FROM {table}_fts JOIN {table} m ON m.id={table}_fts.rowid WHERE {table}_fts MATCH ?"
        return {r[0] for r in db.execute(sql + scope, (match, *args))}
    finally:
        db.close()


def break_store(store: Store) -> None:
    """The store's connection goes away under the engine's feet (every call fails from now on)."""
    if is_url(store.path):
        store.close()
    else:
        store.conn.close()  # type: ignore[attr-defined]


def refuse_writes(store: Store) -> None:
    """Reads keep working, every write is refused by the database itself."""
    if not is_url(store.path):
        store.conn.execute("PRAGMA query_only=ON")  # type: ignore[attr-defined]
        return
    import psycopg_pool

    from hermes_lcm.storage.pg.connection import POOL_MAX

    pg: Any = store
    parts = urlsplit(pg.url)
    options = parse_qs(parts.query).get("options", [""])[0] + " -cdefault_transaction_read_only=on"
    pg.pool.close()
    pg.pool = psycopg_pool.ConnectionPool(
        parts._replace(query="options=" + quote(options.strip())).geturl(),
        min_size=1,
        max_size=POOL_MAX,  # the store's own size: a compaction holds one for its slot
        kwargs={"autocommit": True},
        configure=pg._configure,
        open=True,
    )


def table_names(where: str) -> set[str]:
    """The tables and triggers the database at ``where`` holds (its schema in use, for a URL)."""
    if is_url(where):
        import psycopg

        with psycopg.connect(where, autocommit=True) as pg:
            return {
                r[0]
                for r in pg.execute(
                    "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() "
                    "UNION SELECT trigger_name FROM information_schema.triggers WHERE trigger_schema = current_schema()"
                )
            }
    db = sqlite3.connect(f"file:{where}?mode=ro", uri=True)
    try:
        return {
            r[0]
            for r in db.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'trigger')")
        }
    finally:
        db.close()


def raw_sql(where: str, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Run one statement on the database at ``where`` past the store (``?`` placeholders), committed:
    what a test does to the database behind the engine's back (an operator, another program)."""
    if is_url(where):
        import psycopg

        with psycopg.connect(where, autocommit=True) as pg:
            cur = pg.execute(sql.replace("?", "%s"), args)
            return [tuple(r) for r in cur.fetchall()] if cur.description else []
    db = sqlite3.connect(where)
    try:
        with db:
            return [tuple(r) for r in db.execute(sql, args).fetchall()]
    finally:
        db.close()


def allow_writes(store: Store) -> None:
    """Undo :func:`refuse_writes`: the database takes writes again (the disk has room again)."""
    if not is_url(store.path):
        store.conn.execute("PRAGMA query_only=OFF")  # type: ignore[attr-defined]
        return
    import psycopg_pool

    from hermes_lcm.storage.pg.connection import POOL_MAX

    pg: Any = store
    pg.pool.close()
    pg.pool = psycopg_pool.ConnectionPool(
        pg.url,
        min_size=1,
        max_size=POOL_MAX,  # the store's own size: a compaction holds one for its slot
        kwargs={"autocommit": True},
        configure=pg._configure,
        open=True,
    )


def with_password(url: str, password: str) -> str:
    """``url`` with ``password`` for its user (the test server trusts loopback: it is sent, never needed)."""
    if not is_url(url):
        return url
    parts = urlsplit(url)
    user = parts.username or ""
    return parts._replace(
        netloc=f"{user}:{quote(password, safe='')}@{parts.hostname}:{parts.port}"
    ).geturl()


def every_value(where: str) -> dict[str, str]:
    """Every stored value of every table at ``where`` (its schema in use, for a URL; FTS and vector
    tables included), as one text per table: what is "at rest" for a secret, past the store's
    reads. Bytes are decoded (payload bytes live in a table on PostgreSQL), the rest as its text."""

    def text(value: Any) -> str:
        if isinstance(value, (bytes, bytearray, memoryview)):
            return bytes(value).decode("utf-8", "replace")
        return value if isinstance(value, str) else repr(value)

    out: dict[str, str] = {}
    for table in sorted(t for t in table_names(where) if t in _tables(where)):
        rows = raw_sql(where, f'SELECT * FROM "{table}"')
        out[table] = "\n".join(" ".join(text(v) for v in row) for row in rows)
    return out


def _tables(where: str) -> set[str]:
    """The base tables at ``where`` (no triggers, no views)."""
    if is_url(where):
        sql = (
            "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() "
            "AND table_type = 'BASE TABLE'"
        )
    else:
        sql = "SELECT name FROM sqlite_master WHERE type = 'table'"
    return {r[0] for r in raw_sql(where, sql)}


PAYLOAD_DIR = "lcm-payloads"  # payloads.PayloadGuard's directory beside a database file


def refuse_payloads(store: Store) -> None:
    """Every payload write fails as on a full disk, every other write still works: on SQLite the
    payload directory cannot be created (a file holds its name), on PostgreSQL the server refuses
    rows of the ``payloads`` table with ``disk_full`` (a trigger)."""
    if not is_url(store.path):
        directory = Path(store.path).parent / PAYLOAD_DIR
        directory.parent.mkdir(parents=True, exist_ok=True)
        directory.write_bytes(b"")
        return
    from hermes_lcm.storage.pg.payloads import _TABLE

    raw_sql(store.path, _TABLE)
    raw_sql(
        store.path,
        "CREATE OR REPLACE FUNCTION lcm_test_disk_full() RETURNS trigger LANGUAGE plpgsql AS "
        "$f$BEGIN RAISE EXCEPTION 'could not extend file' USING ERRCODE = 'disk_full'; END$f$",
    )
    raw_sql(
        store.path,
        "CREATE TRIGGER lcm_test_disk_full BEFORE INSERT ON payloads "
        "FOR EACH ROW EXECUTE FUNCTION lcm_test_disk_full()",
    )


def allow_payloads(store: Store) -> None:
    """Undo :func:`refuse_payloads`: payload writes work again (the disk has room again)."""
    if not is_url(store.path):
        (Path(store.path).parent / PAYLOAD_DIR).unlink()
        return
    raw_sql(store.path, "DROP TRIGGER lcm_test_disk_full ON payloads")

"""The SQLite SQL of the shared query mixins, as PostgreSQL runs it.

The mixins in ``storage/`` are written once, in the subset of SQL both engines share; the few
spellings that differ are rewritten here, once per distinct statement (cached), so the SQLite
path pays nothing. What cannot be rewritten by spelling (FTS5, PRAGMAs, ``sqlite_master``) is
not here: the PostgreSQL store overrides those methods (``storage/pg/``). A statement this
module does not know passes through with only its placeholders changed, and PostgreSQL rejects
what it cannot run: a missing rewrite fails loudly in the backend tests, never silently.
"""

from __future__ import annotations

import functools

import regex

# ``IN (SELECT value FROM json_each(?))``: a JSON array of integer ids bound as one parameter.
_ID_LIST = regex.compile(r"SELECT value FROM json_each\(\?\)")
_ID_TABLE = regex.compile(r"FROM json_each\(\?\) (\w+)")
_OR_IGNORE = regex.compile(r"^\s*INSERT OR IGNORE INTO", regex.IGNORECASE)
_WHERE_ONE = regex.compile(r"\bWHERE 1\b(?!\s*[=<>])")
_BLOB_LENGTH = regex.compile(r"length\(CAST\(([\w.]+) AS BLOB\)\)")
# ``INSERT INTO t(id, ...) VALUES (NULL, ...)``: SQLite numbers the row; PostgreSQL's identity
# column takes DEFAULT, and RETURNING gives the cursor its ``lastrowid``.
_NULL_ID = regex.compile(r"^(\s*INSERT INTO \w+\(id, [^)]*\) VALUES \()NULL, ")
# Edge kinds compared as both schemas' spellings (an older SQLite file has text kinds).
_EDGE_KIND = regex.compile(r"IN \(([01]), '(?:message|summary)'\)")
# SQLite's LIMIT -1 is "no limit"; PostgreSQL wants NULL (or ALL) there.
_LIMIT = regex.compile(r"\bLIMIT \?")
_LIMIT_ALL = regex.compile(r"\bLIMIT -1\b")
# Whether a table exists (the optional families' sidecars): the catalog of the current schema.
_TABLE_EXISTS = regex.compile(r"SELECT (name|1) FROM sqlite_master WHERE type='table' AND name\b")
# ``sidecar.has_tables``: which of a family's tables exist, from the catalog of the schema in use.
_TABLE_NAMES = regex.compile(r"^SELECT name FROM sqlite_master WHERE type='table' AND name IN \(")
# ``? IS NULL`` (an optional argument): PostgreSQL must know a parameter's type; any type casts to text.
_PARAM_NULL = regex.compile(r"\?(?=\s+IS\s+(?:NOT\s+)?NULL\b)")
# The tables of the schema in use, from the catalog itself: information_schema.tables is a view that
# checks privileges over every relation and cost a preparer's lookup 0.6-1.4 ms on a 3k-message database.
_CATALOG = "pg_catalog.pg_class WHERE relnamespace = current_schema()::regnamespace AND relkind IN ('r', 'p')"
# A quoted literal, or a placeholder outside one.
_TOKENS = regex.compile(r"'(?:[^']|'')*'|\?|%")


@functools.lru_cache(maxsize=4096)
def translate(sql: str) -> str:
    """``sql`` (SQLite spelling, ``?`` placeholders) in PostgreSQL's spelling with ``%s`` ones."""
    sql = _TABLE_NAMES.sub(f"SELECT relname FROM {_CATALOG} AND relname IN (", sql)
    sql = _PARAM_NULL.sub("?::text", sql)
    sql = _ID_LIST.sub("SELECT value::bigint FROM json_array_elements_text(?::json)", sql)
    sql = _ID_TABLE.sub(
        r"FROM (SELECT value::bigint AS value FROM json_array_elements_text(?::json)) AS \1", sql
    )
    sql = _TABLE_EXISTS.sub(
        lambda m: (
            f"SELECT {'relname' if m.group(1) == 'name' else '1'} FROM {_CATALOG} AND relname"
        ),
        sql,
    )
    sql = _BLOB_LENGTH.sub(r"octet_length(\1)", sql)
    sql = _WHERE_ONE.sub("WHERE true", sql).replace("char(10)", "chr(10)")
    sql = _EDGE_KIND.sub(r"= \1", sql)
    sql = _LIMIT_ALL.sub("LIMIT ALL", _LIMIT.sub("LIMIT nullif(?::bigint, -1)", sql))
    if _NULL_ID.match(sql):
        sql = _NULL_ID.sub(r"\1DEFAULT, ", sql, count=1).rstrip().rstrip(";") + " RETURNING id"
    if _OR_IGNORE.match(sql):
        sql = (
            _OR_IGNORE.sub("INSERT INTO", sql, count=1).rstrip().rstrip(";")
            + " ON CONFLICT DO NOTHING"
        )
    return _TOKENS.sub(_placeholder, sql)


def _placeholder(match: regex.Match[str]) -> str:
    token = match.group()
    if token == "?":
        return "%s"
    if token == "%":
        return "%%"
    return token.replace("%", "%%")  # a literal: psycopg reads ``%`` even inside quotes

"""The schema: the forward-only migrations (tables, indexes, FTS5 tables and their
triggers), the identity check that keeps us off foreign and newer files, and migrating.

A database written by another program, or by a newer hermes-lcm, is never written
to: :func:`check_identity` raises :class:`ForeignDatabase` or :class:`NewerSchema`.
"""

from __future__ import annotations

import sqlite3

from ..base.scaffold import HOST_USER_PREFIXES, prefix_label
from .errors import ForeignDatabase, NewerSchema
from .rows import pack_fingerprint

APP_ID = "hermes-lcm"
SCHEMA_VERSION = 5

_MIGRATIONS: dict[int, str] = {
    1: """
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE conversations(
  id INTEGER PRIMARY KEY,
  key TEXT NOT NULL UNIQUE,
  created_at REAL NOT NULL,
  frontier_seq INTEGER NOT NULL DEFAULT 0,
  last_seq INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE sessions(
  id TEXT PRIMARY KEY,
  conversation_id INTEGER NOT NULL REFERENCES conversations(id),
  platform TEXT NOT NULL DEFAULT '',
  mode TEXT NOT NULL DEFAULT 'normal',
  started_at REAL NOT NULL,
  ended_at REAL,
  parent_session_id TEXT,
  reason TEXT
);
CREATE TABLE messages(
  id INTEGER PRIMARY KEY,
  conversation_id INTEGER NOT NULL REFERENCES conversations(id),
  seq INTEGER NOT NULL,
  session_id TEXT NOT NULL,
  role TEXT NOT NULL,
  content TEXT NOT NULL,
  parts TEXT,
  tool_calls TEXT,
  tool_call_id TEXT,
  tool_name TEXT,
  source TEXT NOT NULL DEFAULT 'unknown',
  host_ts REAL,
  created_at REAL NOT NULL,
  tokens INTEGER NOT NULL,
  fingerprint TEXT NOT NULL,
  UNIQUE(conversation_id, seq)
);
CREATE INDEX messages_fingerprint ON messages(conversation_id, fingerprint, seq);
CREATE INDEX messages_session ON messages(session_id, id);
CREATE VIRTUAL TABLE messages_fts USING fts5(
  content, tool_calls, content='messages', content_rowid='id', tokenize='porter unicode61'
);
CREATE TRIGGER messages_ai AFTER INSERT ON messages BEGIN
  INSERT INTO messages_fts(rowid, content, tool_calls) VALUES (new.id, new.content, new.tool_calls);
END;
CREATE TRIGGER messages_ad AFTER DELETE ON messages BEGIN
  INSERT INTO messages_fts(messages_fts, rowid, content, tool_calls)
    VALUES ('delete', old.id, old.content, old.tool_calls);
END;
CREATE TRIGGER messages_au AFTER UPDATE OF content, tool_calls ON messages BEGIN
  INSERT INTO messages_fts(messages_fts, rowid, content, tool_calls)
    VALUES ('delete', old.id, old.content, old.tool_calls);
  INSERT INTO messages_fts(rowid, content, tool_calls) VALUES (new.id, new.content, new.tool_calls);
END;
CREATE TABLE summaries(
  id INTEGER PRIMARY KEY,
  conversation_id INTEGER NOT NULL REFERENCES conversations(id),
  session_id TEXT NOT NULL,
  depth INTEGER NOT NULL,
  content TEXT NOT NULL,
  tokens INTEGER NOT NULL,
  first_seq INTEGER NOT NULL,
  last_seq INTEGER NOT NULL,
  earliest_at REAL NOT NULL,
  latest_at REAL NOT NULL,
  source_tokens INTEGER NOT NULL,
  level TEXT NOT NULL,
  route TEXT NOT NULL,
  created_at REAL NOT NULL
);
CREATE INDEX summaries_conversation ON summaries(conversation_id, depth, id);
CREATE VIRTUAL TABLE summaries_fts USING fts5(
  content, content='summaries', content_rowid='id', tokenize='porter unicode61'
);
CREATE TRIGGER summaries_ai AFTER INSERT ON summaries BEGIN
  INSERT INTO summaries_fts(rowid, content) VALUES (new.id, new.content);
END;
CREATE TRIGGER summaries_ad AFTER DELETE ON summaries BEGIN
  INSERT INTO summaries_fts(summaries_fts, rowid, content) VALUES ('delete', old.id, old.content);
END;
CREATE TABLE edges(
  parent_id INTEGER NOT NULL REFERENCES summaries(id),
  child_kind TEXT NOT NULL CHECK (child_kind IN ('message', 'summary')),
  child_id INTEGER NOT NULL,
  ord INTEGER NOT NULL,
  PRIMARY KEY(parent_id, child_kind, child_id)
) WITHOUT ROWID;
CREATE INDEX edges_child ON edges(child_kind, child_id);
CREATE TABLE context_items(
  conversation_id INTEGER NOT NULL REFERENCES conversations(id),
  ord INTEGER NOT NULL,
  summary_id INTEGER NOT NULL REFERENCES summaries(id),
  PRIMARY KEY(conversation_id, ord)
);
CREATE TABLE events(
  id INTEGER PRIMARY KEY,
  at REAL NOT NULL,
  level TEXT NOT NULL,
  kind TEXT NOT NULL,
  conversation_id INTEGER,
  detail TEXT NOT NULL
);
""",
    # The host's other public message fields (reasoning_content, reasoning_details,
    # codex_reasoning_items, anthropic_content_blocks, ...) as one JSON object, so a
    # message rebuilt from the store is the message the host gave us. NULL: none.
    2: """
ALTER TABLE messages ADD COLUMN extra TEXT;
""",
}


def _sql_text(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _scaffold_migration() -> str:
    """Version 2, second half: ``messages.synthetic`` labels host scaffolding (NULL for a real message).

    Rows stored before it are labelled by the host's text prefixes (their private
    flags were never stored); a todo snapshot stored by 0.x stops being "the request".
    """
    updates = [
        f"UPDATE messages SET synthetic={_sql_text(prefix_label(p))} WHERE role='user' AND synthetic IS NULL "
        f"AND substr(ltrim(content), 1, {len(p)})={_sql_text(p)};"
        for p in HOST_USER_PREFIXES
    ]
    return "ALTER TABLE messages ADD COLUMN synthetic TEXT;\n" + "\n".join(updates)


_MIGRATIONS[2] += _scaffold_migration()

# Version 3: who owns each conversation, so the lcm_* tools of one person never read another's
# (``binding.owner_for``). Rows stored before it: a conversation keyed by the host's chat (the
# gateway's session key) is owned by that chat; the CLI's own and imported ones by the one local
# owner, which keeps a single-user store reading as it did. The whole migration runs in one
# write transaction with the version bump (``migrate``), so a crash leaves version 2 untouched.
_MIGRATIONS[3] = """
ALTER TABLE conversations ADD COLUMN owner TEXT NOT NULL DEFAULT 'local';
UPDATE conversations SET owner = CASE WHEN substr(key, 1, 8)='session:' OR substr(key, 1, 7)='import:'
  THEN 'local' ELSE 'chat:' || key END;
CREATE INDEX IF NOT EXISTS conversations_owner ON conversations(owner, id);
"""

# Version 4: compact keys (database size). A message's session is an integer key into
# ``session_keys`` instead of its text id repeated on every row (and in its index); a fingerprint
# is stored as its digest bytes (``rows.pack_fingerprint``: 16 hex digits -> 8 bytes, "import:" +
# 32 -> 16; anything else stays text), and an edge's child kind is 0 (message) or 1 (summary).
# Rowids never change (the FTS5 tables index ``messages``/``summaries`` by rowid, external content),
# and the whole upgrade is one write transaction with the version bump, so a killed process leaves
# version 3 as it was. The file shrinks by the freed pages only after a VACUUM.
_MIGRATIONS[4] = """
CREATE TABLE session_keys(id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);
INSERT INTO session_keys(name) SELECT session_id FROM messages GROUP BY session_id ORDER BY min(id);
DROP INDEX IF EXISTS messages_session;
ALTER TABLE messages ADD COLUMN session_key INTEGER NOT NULL DEFAULT 0;
UPDATE messages SET session_key=(SELECT k.id FROM session_keys k WHERE k.name=messages.session_id),
  fingerprint=lcm_pack_fingerprint(fingerprint);
ALTER TABLE messages DROP COLUMN session_id;
CREATE INDEX messages_session ON messages(session_key, id);
CREATE TABLE edges_v4(
  parent_id INTEGER NOT NULL REFERENCES summaries(id),
  child_kind INTEGER NOT NULL CHECK (child_kind IN (0, 1)),
  child_id INTEGER NOT NULL,
  ord INTEGER NOT NULL,
  PRIMARY KEY(parent_id, child_kind, child_id)
) WITHOUT ROWID;
INSERT INTO edges_v4(parent_id, child_kind, child_id, ord)
  SELECT parent_id, CASE child_kind WHEN 'message' THEN 0 ELSE 1 END, child_id, ord FROM edges;
DROP TABLE edges;
ALTER TABLE edges_v4 RENAME TO edges;
CREATE INDEX edges_child ON edges(child_kind, child_id);
"""


# Version 5: who may read a payload. A row's grant (``payload_refs``) is written by the engine in
# the same transaction as the row when it itself kept a payload for it (payloads.PayloadGuard
# collecting); a row that merely names a ref gets none, and only a grant in the caller's reach
# opens a payload (handlers/expand.py). ``payload_ref_aliases`` maps the old unkeyed refs of a
# migrated database to their keyed ones (payload_rekey.py fills both for the rows written before:
# it needs the files and the key, so it runs after this, at the engine's start). A grant goes with
# its row (ON DELETE CASCADE: foreign keys are on for every connection).
PAYLOAD_REF_TABLES = """
CREATE TABLE IF NOT EXISTS payload_refs(
  ref TEXT NOT NULL,
  message_id INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
  kind TEXT NOT NULL,
  mime TEXT NOT NULL,
  PRIMARY KEY(ref, message_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS payload_refs_message ON payload_refs(message_id);
CREATE TABLE IF NOT EXISTS payload_ref_aliases(old_ref TEXT PRIMARY KEY, new_ref TEXT NOT NULL) WITHOUT ROWID;
"""
_MIGRATIONS[5] = PAYLOAD_REF_TABLES


def split_sql(script: str) -> list[str]:
    """Split a migration into statements, keeping trigger bodies whole."""
    statements, current = [], []
    for line in script.strip().splitlines():
        current.append(line)
        joined = "\n".join(current).strip()
        if joined.endswith(";") and sqlite3.complete_statement(joined):
            statements.append(joined)
            current = []
    return statements


def trigger_sql() -> dict[str, str]:
    """The newest CREATE TRIGGER statement of each trigger the migrations define."""
    found: dict[str, str] = {}
    for version in sorted(_MIGRATIONS):
        for statement in split_sql(_MIGRATIONS[version]):
            words = statement.split()
            if words[:2] == ["CREATE", "TRIGGER"]:
                found[words[2]] = statement
    return found


def tables(conn: sqlite3.Connection) -> set[str]:
    rows = conn.execute("SELECT name FROM sqlite_master WHERE type='table'").fetchall()
    return {r[0] for r in rows}


def is_ours(conn: sqlite3.Connection, found: set[str]) -> bool:
    """Whether a database holding the tables ``found`` was written by hermes-lcm (its meta says so)."""
    return "meta" in found and conn.execute(
        "SELECT value FROM meta WHERE key='app'"
    ).fetchone() == (APP_ID,)


def check_identity(conn: sqlite3.Connection, path: str) -> None:
    """Refuse a file holding tables we did not write, or a newer schema than ours."""
    found = tables(conn)
    if not found:
        return
    if "meta" not in found:
        raise ForeignDatabase(f"{path} holds tables not written by {APP_ID}: {sorted(found)[:8]}")
    rows = dict(conn.execute("SELECT key, value FROM meta").fetchall())
    if rows.get("app") != APP_ID:
        raise ForeignDatabase(f"{path} belongs to {rows.get('app')!r}, not {APP_ID}")
    version = int(rows.get("schema_version", "0"))
    if version > SCHEMA_VERSION:
        raise NewerSchema(
            f"{path} has schema {version}; this hermes-lcm knows up to {SCHEMA_VERSION}"
        )


def schema_version(conn: sqlite3.Connection) -> int:
    if "meta" not in tables(conn):
        return 0
    row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
    return int(row[0]) if row else 0


def _column_exists(conn: sqlite3.Connection, statement: str) -> bool:
    """Whether ``statement`` adds a column the table already has: a file whose version was set
    back (by hand, or by a copy of an older schema's meta) migrates again without failing."""
    words = statement.split()
    if (
        [w.upper() for w in words[:2]] != ["ALTER", "TABLE"]
        or len(words) < 6
        or [w.upper() for w in words[3:5]] != ["ADD", "COLUMN"]
    ):
        return False
    return words[5] in {r[1] for r in conn.execute(f"PRAGMA table_info({words[2]})")}


def shadow_older(conn: sqlite3.Connection) -> None:
    """Let a read-only connection to an older file answer the newest schema's SQL, without writing it.

    The CLI reads without migrating, so a file the host has not opened since an upgrade is still
    at its old version. TEMP views named like the changed tables shadow them for this connection
    only (TEMP is searched before main; the file is never written): ``messages`` with its
    ``session_key`` (from a TEMP ``session_keys``, numbered here) and a packed ``fingerprint``,
    ``edges`` with integer kinds. Filters on those columns scan instead of seeking an index,
    which is acceptable for the CLI until the next read-write open upgrades the file. A file
    older than 5 gets empty TEMP grant tables: it holds no grant, so no payload opens through it.
    """
    version = schema_version(conn)
    if version < 5:  # no grant was written yet: none reads as none (no payload opens)
        for statement in split_sql(
            PAYLOAD_REF_TABLES.replace("EXISTS ", "EXISTS temp.").replace(
                "REFERENCES messages(id) ON DELETE CASCADE", ""
            )
        ):
            conn.execute(statement)
    if version >= 4:
        return
    conn.create_function("lcm_pack_fingerprint", 1, pack_fingerprint, deterministic=True)
    columns = [r[1] for r in conn.execute("PRAGMA main.table_info(messages)")]
    picked = ", ".join(
        "lcm_pack_fingerprint(m.fingerprint) AS fingerprint" if c == "fingerprint" else f"m.{c}"
        for c in columns
    )
    conn.execute(
        "CREATE TEMP TABLE session_keys(id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE)"
    )
    conn.execute(
        "INSERT INTO temp.session_keys(name) SELECT session_id FROM main.messages GROUP BY session_id"
    )
    conn.execute(
        f"CREATE TEMP VIEW messages AS SELECT {picked}, (SELECT k.id FROM temp.session_keys k "
        "WHERE k.name=m.session_id) AS session_key FROM main.messages m"
    )
    conn.execute(
        "CREATE TEMP VIEW edges AS SELECT parent_id, CASE child_kind WHEN 'message' THEN 0 "
        "WHEN 'summary' THEN 1 ELSE child_kind END AS child_kind, child_id, ord FROM main.edges"
    )


def migrate(conn: sqlite3.Connection) -> None:
    """Run the migrations above the file's version, in the caller's write transaction."""
    current = schema_version(conn)
    conn.create_function("lcm_pack_fingerprint", 1, pack_fingerprint, deterministic=True)
    for version in range(current + 1, SCHEMA_VERSION + 1):
        # already compact (a file whose version was set back): only the version is written
        done = version == 4 and "session_key" in {
            r[1] for r in conn.execute("PRAGMA table_info(messages)")
        }
        for statement in [] if done else split_sql(_MIGRATIONS[version]):
            if not _column_exists(conn, statement):
                conn.execute(statement)
        conn.execute(
            "INSERT INTO meta(key, value) VALUES ('app', ?), ('schema_version', ?) "
            "ON CONFLICT(key) DO UPDATE SET value=excluded.value",
            (APP_ID, str(version)),
        )

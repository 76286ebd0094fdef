"""The operator's queries (maintenance/, cli/): inventory counts and pages, database
facts, retention, FTS health and repair, the narrow cleanups, and backups.

Read-only connections serve every read here; the writes are the narrow repairs and
cleanups doctor offers, each re-checking its condition inside its own transaction.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from . import schema
from .connection import SqliteConnection, faults_mapped
from .errors import StoreError
from .prepared import forget_prepared
from .rows import BUMP_REWRITES


def verify_backup(path: Path) -> str | None:
    """What is wrong with a backup file (quick_check, our identity), or None when it is sound."""
    with faults_mapped():
        con = sqlite3.connect(f"file:{quote(str(path.resolve()))}?mode=ro", uri=True)
        try:
            check = [r[0] for r in con.execute("PRAGMA quick_check").fetchall()]
            app = con.execute("SELECT value FROM meta WHERE key='app'").fetchone()
        finally:
            con.close()
    if check != ["ok"] or app is None or app[0] != schema.APP_ID:
        return f"quick_check={check[:3]} app={app}"
    return None


class OperatorQueries(SqliteConnection):
    """Inventory, health checks, repairs, cleanups and backups."""

    def table_counts(self) -> dict[str, int]:
        with self.read() as db:
            return {
                t: int(db.execute(f"SELECT count(*) FROM {t}").fetchone()[0])
                for t in (
                    "conversations",
                    "sessions",
                    "messages",
                    "summaries",
                    "edges",
                    "context_items",
                    "events",
                )
            }

    def database_header(self) -> dict[str, Any]:
        """Pages, free pages, schema version and journal mode: what the file header and the schema
        table say, in constant time whatever the size (``lcm status`` must answer in milliseconds,
        and ``dbstat`` or an integrity check read every page)."""
        with self.read() as db:
            facts: dict[str, Any] = {
                p: int(db.execute(f"PRAGMA {p}").fetchone()[0])
                for p in ("page_size", "page_count", "freelist_count")
            }
            facts["schema_version"] = schema.schema_version(db)
            facts["journal_mode"] = db.execute("PRAGMA journal_mode").fetchone()[0]
        return facts

    def database_sizes(self) -> dict[str, Any]:
        """:meth:`database_header` and bytes by table or index (None without ``dbstat``), with no
        integrity check: ``lcm view`` reads this, and on a large file the check alone costs seconds."""
        facts = self.database_header()
        with self.read() as db:
            try:
                rows = db.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name").fetchall()
                facts["bytes_by_table"] = {str(n): int(b) for n, b in rows}
            except sqlite3.DatabaseError:
                facts["bytes_by_table"] = None
        return facts

    def database_facts(self) -> dict[str, Any]:
        """:meth:`database_sizes` plus a quick integrity check (doctor, which may take seconds)."""
        facts = self.database_sizes()
        with self.read() as db:
            facts["quick_check"] = [r[0] for r in db.execute("PRAGMA quick_check(20)").fetchall()]
        return facts

    def conversations_page(
        self, after_id: int, limit: int, key: str | None = None
    ) -> list[dict[str, Any]]:
        """Conversations by id after ``after_id``; with ``key``, those whose key is it, or
        matches it where it holds ``*`` (any characters)."""
        where, args = "c.id>?", list[Any]([after_id])
        if key is not None and "*" in key:
            escaped = key.replace("!", "!!").replace("%", "!%").replace("_", "!_")
            where += " AND c.key LIKE ? ESCAPE '!'"
            args = [*args, re.sub(r"\*+", "%", escaped)]
        elif key is not None:
            where, args = where + " AND c.key=?", [*args, key]
        with self.read() as db:
            rows = db.execute(
                "SELECT c.id, c.key, c.created_at, c.frontier_seq, c.last_seq, "
                "(SELECT count(*) FROM messages m WHERE m.conversation_id=c.id), "
                "(SELECT count(*) FROM summaries s WHERE s.conversation_id=c.id), "
                "(SELECT count(*) FROM sessions s WHERE s.conversation_id=c.id), "
                "(SELECT created_at FROM messages m WHERE m.conversation_id=c.id ORDER BY seq LIMIT 1), "
                "(SELECT created_at FROM messages m WHERE m.conversation_id=c.id ORDER BY seq DESC LIMIT 1) "
                f"FROM conversations c WHERE {where} ORDER BY c.id LIMIT ?",
                (*args, limit),
            ).fetchall()
        keys = (
            "id",
            "key",
            "created_at",
            "frontier_seq",
            "last_seq",
            "messages",
            "summaries",
            "sessions",
            "first_message_at",
            "last_message_at",
        )
        return [dict(zip(keys, r, strict=True)) for r in rows]

    # The sessions' insertion order, their paging cursor: SQLite's rowid (PostgreSQL's table has ``rid``).
    _SESSION_ROW = "rowid"

    def sessions_page(
        self, conversation_id: int | None, after_rowid: int, limit: int
    ) -> list[dict[str, Any]]:
        scope, args = (
            ("AND s.conversation_id=?", (after_rowid, conversation_id, limit))
            if conversation_id is not None
            else ("", (after_rowid, limit))
        )
        with self.read() as db:
            rows = db.execute(
                f"SELECT s.{self._SESSION_ROW}, s.id, s.conversation_id, s.platform, s.mode, s.started_at, s.ended_at, "
                "s.parent_session_id, s.reason, (SELECT count(*) FROM messages m WHERE m.session_key="  # schema 4 key
                "(SELECT k.id FROM session_keys k WHERE k.name=s.id)) "
                f"FROM sessions s WHERE s.{self._SESSION_ROW}>? {scope} ORDER BY s.{self._SESSION_ROW} LIMIT ?",
                args,
            ).fetchall()
        keys = (
            "rowid",
            "id",
            "conversation_id",
            "platform",
            "mode",
            "started_at",
            "ended_at",
            "parent_session_id",
            "reason",
            "messages",
        )
        return [dict(zip(keys, r, strict=True)) for r in rows]

    def all_sessions(self) -> list[tuple[str, int, str]]:
        with self.read() as db:
            return [
                (str(r[0]), int(r[1]), str(r[2]))
                for r in db.execute(
                    f"SELECT id, conversation_id, platform FROM sessions ORDER BY {self._SESSION_ROW}"
                ).fetchall()
            ]

    def retention_rows(self, cutoffs: Sequence[float]) -> list[dict[str, Any]]:
        """Per conversation: messages, bytes, tokens, time span, and counts older than each cutoff."""
        older = ", ".join("sum(CASE WHEN m.created_at < ? THEN 1 ELSE 0 END)" for _ in cutoffs)
        with self.read() as db:
            rows = db.execute(
                "SELECT m.conversation_id, c.key, count(*), "
                "sum(length(CAST(m.content AS BLOB)) + coalesce(length(CAST(m.parts AS BLOB)), 0) "
                "+ coalesce(length(CAST(m.tool_calls AS BLOB)), 0)), sum(m.tokens), min(m.created_at), "
                f"max(m.created_at){', ' + older if cutoffs else ''} "
                "FROM messages m JOIN conversations c ON c.id=m.conversation_id GROUP BY m.conversation_id, c.key",
                tuple(cutoffs),
            ).fetchall()
            nodes = dict(
                db.execute(
                    "SELECT conversation_id, count(*) || ',' || sum(length(CAST(content AS BLOB))) FROM summaries "
                    "GROUP BY conversation_id"
                ).fetchall()
            )
        out = []
        for r in rows:
            count, size = (str(nodes.get(r[0]) or "0,0")).split(",")
            out.append(
                {
                    "conversation_id": r[0],
                    "key": r[1],
                    "messages": r[2],
                    "message_bytes": r[3] or 0,
                    "message_tokens": r[4] or 0,
                    "first_at": r[5],
                    "last_at": r[6],
                    "older_than": [int(v or 0) for v in r[7:]],
                    "summaries": int(count),
                    "summary_bytes": int(size or 0),
                }
            )
        return out

    # -- FTS health and repair ----------------------------------------------------

    FTS_TABLES: tuple[tuple[str, str], ...] = (
        ("messages_fts", "messages"),
        ("summaries_fts", "summaries"),
    )

    def fts_tables(self) -> list[str]:
        """The full-text indexes, by name."""
        return [table for table, _content in self.FTS_TABLES]

    def _fts_content(self, table: str) -> str:
        return dict(self.FTS_TABLES)[table]

    def fts_counts(self, table: str) -> dict[str, Any]:
        """Structural, read-only: indexed rows against content rows, both ways."""
        content = self._fts_content(table)
        with self.read() as db:
            missing = db.execute(
                f"SELECT c.id FROM {content} c WHERE NOT EXISTS (SELECT 1 FROM {table}_docsize d "
                "WHERE d.id=c.id) ORDER BY c.id LIMIT 1000"
            ).fetchall()
            stale = db.execute(
                f"SELECT d.id FROM {table}_docsize d WHERE NOT EXISTS (SELECT 1 FROM {content} c "
                "WHERE c.id=d.id) ORDER BY d.id LIMIT 1000"
            ).fetchall()
            return {
                "content_rows": int(db.execute(f"SELECT count(*) FROM {content}").fetchone()[0]),
                "indexed_rows": int(
                    db.execute(f"SELECT count(*) FROM {table}_docsize").fetchone()[0]
                ),
                "missing_ids": [int(r[0]) for r in missing],
                "stale_ids": [int(r[0]) for r in stale],
            }

    def fts_sample(self, table: str, count: int) -> list[tuple[int, str]]:
        """Up to ``count`` content rows spread evenly over the id range."""
        content = self._fts_content(table)
        with self.read() as db:
            low, high = db.execute(f"SELECT min(id), max(id) FROM {content}").fetchone()
            if low is None:
                return []
            step = max(1, (high - low) // max(1, count - 1))
            rows = [
                db.execute(
                    f"SELECT id, content FROM {content} WHERE id>=? ORDER BY id LIMIT 1", (start,)
                ).fetchone()
                for start in range(low, high + 1, step)
            ][:count]
        return [(int(r[0]), str(r[1])) for r in rows if r is not None]

    def fts_finds(self, table: str, rowid: int, phrase: str) -> bool:
        """Whether the index finds ``phrase`` in that row (False when the index cannot answer)."""
        with self.read() as db:
            try:
                return (
                    db.execute(
                        f"SELECT 1 FROM {table} WHERE {table} MATCH ? AND rowid=?", (phrase, rowid)
                    ).fetchone()
                    is not None
                )
            except sqlite3.DatabaseError:
                return False

    def fts_integrity(self, table: str) -> str | None:
        """FTS5's own integrity-check against the content table; None when sound.

        It must run as a write statement, so it runs inside a transaction that is
        always rolled back: nothing is changed. Read-only connections cannot run it.
        """
        if self.readonly:
            raise StoreError("the FTS integrity-check needs a writable connection")
        with self.lock, faults_mapped():
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                self.conn.execute(
                    f"INSERT INTO {table}({table}, rank) VALUES('integrity-check', 1)"
                )
                return None
            except sqlite3.DatabaseError as exc:
                return str(exc)
            finally:
                self.conn.execute("ROLLBACK")

    def fts_rebuild(self, table: str) -> None:
        """Rebuild one external-content index from its content table."""
        with self.write() as db:
            db.execute(f"INSERT INTO {table}({table}) VALUES('rebuild')")

    def missing_triggers(self) -> list[str]:
        with self.read() as db:
            present = {
                r[0]
                for r in db.execute(
                    "SELECT name FROM sqlite_master WHERE type='trigger'"
                ).fetchall()
            }
        return sorted(set(schema.trigger_sql()) - present)

    def restore_triggers(self, names: Sequence[str]) -> list[str]:
        """Recreate the named triggers that are still missing; returns those created."""
        wanted = schema.trigger_sql()
        with self.write() as db:
            present = {
                r[0]
                for r in db.execute(
                    "SELECT name FROM sqlite_master WHERE type='trigger'"
                ).fetchall()
            }
            created = [n for n in names if n in wanted and n not in present]
            for name in created:
                db.execute(wanted[name])
        return created

    # -- narrow cleanups (every write re-checks its condition in its own transaction) ----------

    def blank_source_ids(self, limit: int = 1000) -> tuple[int, list[int]]:
        with self.read() as db:
            total = int(
                db.execute("SELECT count(*) FROM messages WHERE trim(source)=''").fetchone()[0]
            )
            ids = [
                int(r[0])
                for r in db.execute(
                    "SELECT id FROM messages WHERE trim(source)='' ORDER BY id LIMIT ?", (limit,)
                ).fetchall()
            ]
        return total, ids

    # An assistant row's call with the tool result's id (the JSON functions differ by engine).
    _CALL_EXISTS = (
        "EXISTS (SELECT 1 FROM messages a, json_each(CASE WHEN json_valid(a.tool_calls) "
        "THEN a.tool_calls ELSE '[]' END) j WHERE a.conversation_id=t.conversation_id "
        "AND a.role='assistant' AND a.seq < t.seq AND json_extract(j.value, '$.id')=t.tool_call_id)"
    )

    def _call_exists(self) -> str:
        """SQL: an earlier assistant call of ``t``'s conversation has ``t``'s tool_call_id (PostgreSQL's
        names the rows whose JSON does not parse, known only at run time)."""
        return self._CALL_EXISTS

    def tool_link_counts(self, limit: int = 10) -> dict[str, Any]:
        """Tool results and their links: how many have no tool_call_id, and how many name an id that no
        earlier assistant call in their conversation made (an orphan); a few sample ids of each."""
        calls = self._call_exists()
        unlinked = "coalesce(t.tool_call_id, '')=''"
        orphan = f"NOT {unlinked} AND NOT {calls}"
        with self.read() as db:
            total, missing, orphans, unnamed = db.execute(
                f"SELECT count(*), coalesce(sum(CASE WHEN {unlinked} THEN 1 ELSE 0 END), 0), "
                f"coalesce(sum(CASE WHEN {orphan} THEN 1 ELSE 0 END), 0), "
                "coalesce(sum(CASE WHEN coalesce(t.tool_name, '')='' THEN 1 ELSE 0 END), 0) "
                "FROM messages t WHERE t.role='tool'"
            ).fetchone()
            missing_ids = [
                int(r[0])
                for r in db.execute(
                    f"SELECT t.id FROM messages t WHERE t.role='tool' AND {unlinked} ORDER BY t.id LIMIT ?",
                    (limit,),
                ).fetchall()
            ]
            orphan_ids = [
                int(r[0])
                for r in db.execute(
                    f"SELECT t.id FROM messages t WHERE t.role='tool' AND {orphan} ORDER BY t.id LIMIT ?",
                    (limit,),
                ).fetchall()
            ]
        return {
            "tool_results": int(total),
            "without_call_id": int(missing),
            "orphaned": int(orphans),
            "without_name": int(unnamed),
            "sample_without_call_id": missing_ids,
            "sample_orphaned": orphan_ids,
        }

    def normalize_blank_sources(self) -> int:
        with self.write() as db:
            return db.execute("UPDATE messages SET source='unknown' WHERE trim(source)=''").rowcount

    _EMPTY_SESSION = (
        "NOT EXISTS (SELECT 1 FROM messages m WHERE m.session_key="  # schema 4: integer key
        "(SELECT k.id FROM session_keys k WHERE k.name=s.id)) "
        "AND NOT EXISTS (SELECT 1 FROM summaries n WHERE n.session_id=s.id)"
    )

    def empty_sessions(self, started_before: float, limit: int = 10000) -> list[dict[str, Any]]:
        """Lifecycle rows of sessions that stored no message and no summary."""
        with self.read() as db:
            rows = db.execute(
                "SELECT s.id, s.conversation_id, s.platform, s.started_at FROM sessions s "
                f"WHERE s.started_at < ? AND {self._EMPTY_SESSION} ORDER BY s.started_at LIMIT ?",
                (started_before, limit),
            ).fetchall()
        return [
            {"id": r[0], "conversation_id": r[1], "platform": r[2], "started_at": r[3]}
            for r in rows
        ]

    def delete_empty_sessions(self, session_ids: Sequence[str]) -> dict[str, int]:
        """Delete those sessions if still empty, then conversations left with nothing at all."""
        marks = ",".join("?" * len(session_ids))
        with self.write() as db:
            sessions = (
                db.execute(
                    f"DELETE FROM sessions AS s WHERE s.id IN ({marks}) AND {self._EMPTY_SESSION}",
                    tuple(session_ids),
                ).rowcount
                if session_ids
                else 0
            )
            conversations = db.execute(
                "DELETE FROM conversations AS c "
                "WHERE NOT EXISTS (SELECT 1 FROM sessions s WHERE s.conversation_id=c.id) "
                "AND NOT EXISTS (SELECT 1 FROM messages m WHERE m.conversation_id=c.id) "
                "AND NOT EXISTS (SELECT 1 FROM summaries n WHERE n.conversation_id=c.id)"
            ).rowcount
        return {"sessions": sessions, "conversations": conversations}

    def harness_turns(self, starts: Sequence[str]) -> list[dict[str, Any]]:
        """Turns of the host's review forks stored as the user's by earlier versions: each user row
        opening with one of ``starts``, and the ids of it and the rows after it up to the next user row."""
        if not starts:
            return []
        match = " OR ".join(
            f"substr(content, 1, {len(start)}) = ?" for start in starts
        )  # lengths: ints
        params = tuple(starts)
        turns = []
        with self.read() as db:
            heads = db.execute(
                f"SELECT conversation_id, seq FROM messages WHERE role='user' AND ({match}) "
                "ORDER BY conversation_id, seq",
                params,
            ).fetchall()
            for conversation_id, seq in heads:
                after = db.execute(
                    "SELECT min(seq) FROM messages WHERE conversation_id=? AND seq>? AND role='user'",
                    (conversation_id, seq),
                ).fetchone()[0]
                ids = db.execute(
                    "SELECT id FROM messages WHERE conversation_id=? AND seq>=? AND seq<? ORDER BY seq",
                    (conversation_id, seq, after if after is not None else 1 << 62),
                ).fetchall()
                turns.append(
                    {
                        "conversation_id": int(conversation_id),
                        "seq": int(seq),
                        "message_ids": [int(r[0]) for r in ids],
                    }
                )
        return turns

    def summaries_over(self, message_ids: Sequence[int]) -> list[int]:
        """The summary nodes made directly from any of these messages."""
        if not message_ids:
            return []
        marks = ",".join("?" * len(message_ids))
        with self.read() as db:
            rows = db.execute(
                f"SELECT DISTINCT parent_id FROM edges WHERE child_kind IN (0, 'message') "
                f"AND child_id IN ({marks}) ORDER BY parent_id",
                tuple(message_ids),
            ).fetchall()
        return [int(r[0]) for r in rows]

    def delete_messages(self, message_ids: Sequence[int]) -> dict[str, int]:
        """Remove these messages and the edges that name them as a summary's source (FTS rows and
        vectors go with them). Only the harness cleanup does this, after a verified backup."""
        if not message_ids:
            return {}
        marks = ",".join("?" * len(message_ids))
        ids = tuple(message_ids)
        with self.write() as db:
            # rows leave the indexes: what a search learnt of them no longer holds
            db.execute(BUMP_REWRITES)
            forget_prepared(db, f"SELECT conversation_id FROM messages WHERE id IN ({marks})", ids)
            edges = db.execute(
                f"DELETE FROM edges WHERE child_kind IN (0, 'message') AND child_id IN ({marks})",
                ids,
            ).rowcount
            messages = db.execute(f"DELETE FROM messages WHERE id IN ({marks})", ids).rowcount
        return {"messages": messages, "edges": edges}

    def delete_conversations(self, conversation_ids: Sequence[int]) -> dict[str, int]:
        """Remove whole conversations: messages, nodes, edges, context, sessions. Lineage
        stays closed because no edge ever crosses a conversation."""
        if not conversation_ids:
            return {}
        marks = ",".join("?" * len(conversation_ids))
        ids = tuple(conversation_ids)
        nodes = f"SELECT id FROM summaries WHERE conversation_id IN ({marks})"
        counts: dict[str, int] = {}
        with self.write() as db:
            # rows leave the indexes: what a search learnt of them no longer holds
            db.execute(BUMP_REWRITES)
            forget_prepared(db, f"SELECT id FROM conversations WHERE id IN ({marks})", ids)
            counts["edges"] = db.execute(
                f"DELETE FROM edges WHERE parent_id IN ({nodes})", ids
            ).rowcount
            for table in ("context_items", "summaries", "messages", "sessions"):
                counts[table] = db.execute(
                    f"DELETE FROM {table} WHERE conversation_id IN ({marks})", ids
                ).rowcount
            counts["conversations"] = db.execute(
                f"DELETE FROM conversations WHERE id IN ({marks})", ids
            ).rowcount
        return counts

    # -- payload files: GC and backfill (payload_gc.py, backfill.py) --------------------------------

    _MARK = "'[lcm-'"

    def payload_mentions(self, kind: str, after_id: int, limit: int) -> list[tuple[int, str]]:
        """Rows (``kind`` message or summary) after ``after_id`` whose text may name a payload file:
        (id, every column that mentions ``[lcm-`` joined); the caller parses the refs."""
        if kind == "summary":
            sql = (
                f"SELECT id, content FROM summaries WHERE id>? AND instr(content, {self._MARK})>0 "
                "ORDER BY id LIMIT ?"
            )
        else:
            extra = "extra" if "extra" in self.message_columns else "NULL"
            cols = (
                "content",
                "coalesce(parts, '')",
                "coalesce(tool_calls, '')",
                f"coalesce({extra}, '')",
            )
            text = " || char(10) || ".join(cols)
            where = " OR ".join(f"instr({c}, {self._MARK})>0" for c in cols)
            sql = f"SELECT id, {text} FROM messages WHERE id>? AND ({where}) ORDER BY id LIMIT ?"
        with self.read() as db:
            return [(int(r[0]), str(r[1])) for r in db.execute(sql, (after_id, limit)).fetchall()]

    def inline_tool_rows(
        self, min_chars: int, after_id: int, limit: int, with_text: bool = True
    ) -> list[tuple[int, int, int, str]]:
        """Tool results kept inline as plain text of at least ``min_chars`` characters (not a stub, not an
        lcm_* tool's own answer): (id, chars, tokens, content or '' without ``with_text``), by id."""
        text = "content" if with_text else "''"
        with self.read() as db:
            rows = db.execute(
                f"SELECT id, length(content), tokens, {text} FROM messages WHERE id>? AND role='tool' "
                "AND parts IS NULL AND length(content)>=? AND substr(content, 1, 16)<>'[lcm-output ref=' "
                "AND coalesce(tool_name, '') NOT LIKE 'lcm\\_%' ESCAPE '\\' ORDER BY id LIMIT ?",
                (after_id, min_chars, limit),
            ).fetchall()
        return [(int(r[0]), int(r[1]), int(r[2]), str(r[3])) for r in rows]

    def swap_contents(self, changes: Sequence[tuple[int, str, str, int]]) -> list[int]:
        """In one transaction, each ``(id, expected, new, tokens)``: the row's content becomes ``new``
        (and its token count ``tokens``) only if it still is exactly ``expected``; the ids changed.
        The fingerprint stays (alignment still knows the host's copy); FTS follows by trigger."""
        changed: list[int] = []
        with self.write() as db:
            if changes:
                db.execute(BUMP_REWRITES)
            for row_id, expected, new, tokens in changes:
                if db.execute(
                    "UPDATE messages SET content=?, tokens=? WHERE id=? AND content=?",
                    (new, tokens, row_id, expected),
                ).rowcount:
                    changed.append(row_id)
        return changed

    # -- backups ----------------------------------------------------------------------------------

    def backup_to(
        self, target: Path, progress: Callable[[int, int | None], None] | None = None
    ) -> None:
        """Copy the whole database into a new file with SQLite's online backup API.

        Without ``progress``: one step, which holds one read transaction. With it: steps of about
        half a percent, each reported as ``progress(pages_done, pages_total)``, all inside ONE read
        transaction opened first, so the copy is the same consistent snapshot (WAL readers never
        block writers, and another process's writes neither restart nor leak into it). An
        exception from ``progress`` (Ctrl-C) aborts the copy; the caller removes the file. The
        copy is switched to a rollback journal so it is one self-contained file.
        """
        with faults_mapped():
            dest = sqlite3.connect(str(target), isolation_level=None)
            try:
                with self.lock:
                    if progress is None:
                        self.conn.backup(dest, pages=-1)
                    else:
                        self._stepped_backup(dest, progress)
                dest.execute("PRAGMA journal_mode=DELETE")
            finally:
                dest.close()

    def _stepped_backup(
        self, dest: sqlite3.Connection, progress: Callable[[int, int | None], None]
    ) -> None:
        total = int(self.conn.execute("PRAGMA page_count").fetchone()[0])
        owned = self.conn.in_transaction is False
        if owned:
            self.conn.execute("BEGIN")
            self.conn.execute(
                "SELECT count(*) FROM sqlite_master"
            ).fetchone()  # the read snapshot starts here
        try:
            self.conn.backup(
                dest,
                pages=max(16, total // 200),
                progress=lambda _status, remaining, count: progress(count - remaining, count),
            )
            progress(total, total)
        finally:
            if owned:
                self.conn.execute("COMMIT")

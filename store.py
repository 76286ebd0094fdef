"""The front door of the data layer: the interface the services use, and opening a store.

:class:`Store` lists every method the services call, with plain records in and out
(``records.py`` dataclasses, ints, strs, dicts); no service sees a connection or SQL.
The one implementation today is SQLite (``storage/``: one connection per database file
and process, WAL mode, ``BEGIN IMMEDIATE`` for every write, forward-only migrations);
another backend implements the same protocols and raises the same error types.

Guarantees, in the manner of SQLite's own documentation:

* A message is stored at most once per conversation. Identity is the pair
  ``(conversation_id, seq)`` under a UNIQUE constraint; the caller decides which
  host messages are new while holding the write lock (:meth:`Store.append`), so
  two processes replaying the same history serialize and the second finds the
  first one's rows.
* A database written by another program, or by a newer hermes-lcm, is never
  written to: opening it raises :class:`ForeignDatabase` or :class:`NewerSchema`.
* A failed operation raises :class:`WriteFailed` (the database cannot be written now)
  or :class:`StoreFault`; nothing of a failed write transaction is stored.
* All SQL of the project lives in the data layer (``storage/``).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Protocol

from .records import ConversationState, MessageIn, NewNode, SessionInfo, StoredMessage, SummaryNode
from .storage.claw import LCL_TABLES, ClawDatabase, detect_source
from .storage.connection import CHECKPOINT_EVERY_COMMITS, WAL_AUTOCHECKPOINT_PAGES
from .storage.errors import ForeignDatabase, NewerSchema, StoreError, StoreFault, WriteFailed
from .storage.operator import verify_backup
from .storage.schema import APP_ID, SCHEMA_VERSION
from .storage.sqlite import SqliteStore

__all__ = [
    "APP_ID", "CHECKPOINT_EVERY_COMMITS", "LCL_TABLES", "SCHEMA_VERSION", "WAL_AUTOCHECKPOINT_PAGES", "ClawDatabase",
    "ConversationStore", "ForeignDatabase", "MessageStore", "NewerSchema", "OperatorStore", "Store", "StoreError",
    "StoreFault", "StoredPrints", "SummaryStore", "WriteFailed", "close_all", "detect_source", "open_readonly",
    "open_store", "verify_backup",
]


class StoredPrints(Protocol):
    """Read access to one conversation's message fingerprints, for alignment (ingest.py)."""

    def tail(self, limit: int) -> list[str]:
        """The newest ``limit`` fingerprints, oldest first."""

    def tail_rows(self, limit: int) -> list[tuple[int, str]]:
        """The newest ``limit`` rows as ``(seq, fingerprint)``, oldest first."""

    def last_seq(self) -> int:
        """The conversation's newest seq (0 when it has no messages)."""

    def seqs(self, fingerprint: str, limit: int) -> list[int]:
        """Where a fingerprint occurs, newest first."""

    def fingerprint_of(self, message_id: int) -> str | None:
        """The stored fingerprint of one of this conversation's rows."""

    def row_of(self, message_id: int) -> tuple[int, str] | None:
        """``(seq, fingerprint)`` of one of this conversation's rows."""

    def present(self, fingerprints: Sequence[str]) -> set[str]:
        """Which of these fingerprints the conversation holds."""

    def after(self, seq: int, limit: int) -> list[tuple[int, str]]:
        """The ``limit`` rows after ``seq`` as ``(seq, fingerprint)``, oldest first."""

    def once(self, fingerprints: Sequence[str]) -> set[str]:
        """Which of these fingerprints the conversation holds exactly once."""

    def window(self, seq: int, size: int) -> list[str]:
        """Fingerprints of the ``size`` messages ending at ``seq``, oldest first."""


Select = Callable[[StoredPrints], Sequence[MessageIn]]


class MessageStore(Protocol):
    """Storing messages at most once, reading them back, and searching them."""

    def append(self, conversation_id: int, session_id: str, source: str, select: Select) -> list[int]:
        """Store the records ``select`` picks as new (it runs under the write lock); their ids."""

    def probe(self, conversation_id: int, select: Select) -> list[MessageIn]:
        """What ``select`` would store now, without writing."""

    def append_imported(self, conversation_id: int, session_id: str, source: str,
                        records: Sequence[MessageIn]) -> tuple[list[int], int]:
        """Append import records whose fingerprint is new; (new ids, skipped as existing)."""

    def fingerprint_ids(self, conversation_id: int) -> dict[str, int]: ...
    def messages_after(self, conversation_id: int, seq: int, limit: int = -1) -> list[StoredMessage]: ...
    def messages_newest(self, conversation_id: int, after_seq: int, limit: int,
                        upto: int | None = None) -> list[StoredMessage]: ...
    def message_ids_newest(self, conversation_id: int, after_seq: int, limit: int,
                           upto: int | None = None) -> list[int]: ...
    def raw_tokens(self, conversation_id: int, after_seq: int, upto: int | None = None) -> int: ...
    def messages_between(self, conversation_id: int, first_seq: int, last_seq: int) -> list[StoredMessage]: ...
    def message(self, message_id: int) -> StoredMessage | None: ...
    def messages_by_ids(self, ids: Sequence[int]) -> list[StoredMessage]: ...
    def session_messages(self, session_id: str, after_id: int, limit: int) -> list[StoredMessage]: ...
    def messages_tail(self, conversation_id: int, limit: int) -> list[StoredMessage]: ...
    def last_fingerprint(self, conversation_id: int) -> str | None: ...
    def newest_request(self, conversation_id: int, upto: int | None = None) -> StoredMessage | None: ...
    def message_count(self, conversation_id: int | None = None) -> int: ...

    # full-text search (search.py and the handlers, cli.py)
    def message_id_bounds(self, conversation_id: int | None = None, session_id: str | None = None,
                          conversation_ids: Sequence[int] | None = None) -> tuple[int, int]: ...
    def fts_term_counts(self, kind: str, matches: Sequence[str], bounds: tuple[int, int] | None,
                        cap: int) -> list[int]: ...
    def message_hits(self, match: str, *, order: str, limit: int, bounds: tuple[int, int] | None,
                     text_chars: int, **filters: Any) -> list[tuple[Any, ...]]: ...
    def messages_at(self, conversation_id: int, seqs: Sequence[int], text_chars: int,
                    **filters: Any) -> list[tuple[Any, ...]]: ...
    def search_messages(self, match: str, conversation_id: int | None,
                        limit: int) -> list[tuple[StoredMessage, float]]: ...
    def message_ids_mentioning(self, token: str, conversation_id: int | None, limit: int = 50,
                               conversation_ids: Sequence[int] | None = None) -> list[int]: ...
    def messages_in_period(self, conversation_id: int | None, since: float, until: float,
                           cap: int = 1000, conversation_ids: Sequence[int] | None = None) -> int: ...
    def scratch_fts(self, docs: Sequence[tuple[int, str]], matches: Sequence[str], snippet_match: str | None = None,
                    snippet_tokens: int = 24) -> tuple[list[set[int]], dict[int, str]]: ...


class ConversationStore(Protocol):
    """Conversations, sessions, events and per-store secrets."""

    def ensure_conversation(self, key: str, owner: str = "local") -> int: ...
    def conversation_owner(self, conversation_id: int) -> str | None: ...
    def owner_conversations(self, owner: str) -> list[int]: ...
    def conversation(self, conversation_id: int) -> ConversationState: ...
    def conversation_by_key(self, key: str) -> ConversationState | None: ...
    def advance_frontier(self, conversation_id: int, seq: int) -> bool: ...
    def upsert_session(self, session_id: str, conversation_id: int, *, platform: str = "", mode: str = "normal",
                       parent_session_id: str | None = None, reason: str | None = None) -> None: ...
    def session(self, session_id: str) -> SessionInfo | None: ...
    def session_facts(self, session_id: str) -> dict[str, Any] | None: ...
    def secret(self, name: str, size: int = 32) -> bytes: ...
    def record_event(self, level: str, kind: str, detail: str, conversation_id: int | None = None) -> None: ...
    def recent_events(self, limit: int = 20) -> list[tuple[float, str, str, str]]: ...


class SummaryStore(Protocol):
    """The summary DAG's nodes, edges and active context (dag.py holds its rules)."""

    def add_summary(self, node: NewNode) -> int: ...
    def publish_context(self, conversation_id: int, summary_ids: Sequence[int], frontier_seq: int) -> None: ...
    def context_nodes(self, conversation_id: int) -> list[SummaryNode]: ...
    def summary(self, node_id: int) -> SummaryNode | None: ...
    def summaries(self, conversation_id: int, limit: int = 1000, after_id: int = 0) -> list[SummaryNode]: ...
    def child_summaries(self, node_id: int) -> list[SummaryNode]: ...
    def summary_sources(self, node_id: int, offset: int = 0, limit: int = -1) -> list[StoredMessage]: ...
    def edge_count(self, node_id: int) -> int: ...
    def descendant_message_ids(self, node_id: int) -> list[int]: ...
    def descendant_span(self, node_id: int) -> tuple[int, int | None, int | None]: ...
    def parent_ids(self, kind: str, child_id: int) -> list[int]: ...
    def ancestors(self, node_id: int) -> list[SummaryNode]: ...
    def root_summaries(self, conversation_id: int, after_id: int, limit: int) -> list[SummaryNode]: ...
    def in_context(self, node_id: int) -> bool: ...
    def depth_counts(self, conversation_id: int | None) -> dict[int, int]: ...
    def summaries_page(self, conversation_id: int, depth: int | None, after_id: int,
                       limit: int) -> list[SummaryNode]: ...
    def node_ids_by_route(self, conversation_id: int, prefix: str) -> dict[str, int]: ...
    def summary_id_bounds(self, conversation_id: int | None,
                          conversation_ids: Sequence[int] | None = None) -> tuple[int, int]: ...
    def summary_hits(self, match: str, *, order: str, limit: int, bounds: tuple[int, int] | None,
                     conversation_id: int | None = None, session_id: str | None = None, source: str | None = None,
                     exclude_ids: Sequence[int] = (),
                     conversation_ids: Sequence[int] | None = None) -> list[tuple[SummaryNode, float]]: ...
    def summaries_in_period(self, conversation_id: int | None, since: float, until: float, *, depth: int | None,
                            after: tuple[float, int] | None, limit: int,
                            conversation_ids: Sequence[int] | None = None) -> list[SummaryNode]: ...
    def lineage_problems(self, sample: int = 10) -> dict[str, dict[str, Any]]: ...


class OperatorStore(Protocol):
    """Inventory, health checks, the narrow repairs and cleanups, backups (maintenance.py, cli.py)."""

    def table_counts(self) -> dict[str, int]: ...
    def database_facts(self) -> dict[str, Any]: ...
    def conversations_page(self, after_id: int, limit: int) -> list[dict[str, Any]]: ...
    def sessions_page(self, conversation_id: int | None, after_rowid: int, limit: int) -> list[dict[str, Any]]: ...
    def all_sessions(self) -> list[tuple[str, int, str]]: ...
    def retention_rows(self, cutoffs: Sequence[float]) -> list[dict[str, Any]]: ...
    def fts_tables(self) -> list[str]: ...
    def fts_counts(self, table: str) -> dict[str, Any]: ...
    def fts_sample(self, table: str, count: int) -> list[tuple[int, str]]: ...
    def fts_finds(self, table: str, rowid: int, phrase: str) -> bool: ...
    def fts_integrity(self, table: str) -> str | None: ...
    def fts_rebuild(self, table: str) -> None: ...
    def missing_triggers(self) -> list[str]: ...
    def restore_triggers(self, names: Sequence[str]) -> list[str]: ...
    def blank_source_ids(self, limit: int = 1000) -> tuple[int, list[int]]: ...
    def normalize_blank_sources(self) -> int: ...
    def empty_sessions(self, started_before: float, limit: int = 10000) -> list[dict[str, Any]]: ...
    def delete_empty_sessions(self, session_ids: Sequence[str]) -> dict[str, int]: ...
    def delete_conversations(self, conversation_ids: Sequence[int]) -> dict[str, int]: ...
    def backup_to(self, target: Path) -> None: ...


class Store(MessageStore, ConversationStore, SummaryStore, OperatorStore, Protocol):
    """An opened store: everything the services use."""

    path: str

    @property
    def readonly(self) -> bool:
        """Whether this connection refuses every write (an operator's view)."""

    def write(self) -> AbstractContextManager[object]:
        """One write transaction; store calls made inside it join it (all or nothing)."""

    def close(self) -> None: ...


_stores: dict[tuple[int, str], SqliteStore] = {}
_stores_lock = threading.Lock()


def open_store(path: str | os.PathLike[str]) -> Store:
    """The process's one connection to ``path`` (opened on first use, migrated to our schema)."""
    resolved = str(Path(path).expanduser().resolve()) if str(path) != ":memory:" else ":memory:"
    key = (os.getpid(), resolved)
    with _stores_lock:
        store = _stores.get(key)
        if store is None:
            store = SqliteStore(resolved)
            _stores[key] = store
        return store


def open_readonly(path: str | os.PathLike[str]) -> Store:
    """A query-only connection of its own: no migration, no WAL switch, never a write."""
    return SqliteStore.open_readonly(Path(path))


def close_all() -> None:
    """Close every connection this process opened (tests, shutdown)."""
    with _stores_lock:
        for key, store in list(_stores.items()):
            if key[0] == os.getpid():
                store.close()
            del _stores[key]

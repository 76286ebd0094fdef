"""The front door of the data layer: the interface the services use, and opening a store.

:class:`Store` lists every method the services call, with plain records in and out
(``base/records.py`` dataclasses, ints, strs, dicts); no service sees a connection or SQL.
Two implementations: SQLite, the embedded default (``storage/``: one connection per database
file and process, WAL mode, ``BEGIN IMMEDIATE`` for every write, forward-only migrations), and
PostgreSQL for a fleet sharing one memory (``storage/pg/``: a pool, an advisory write lock per
database), chosen by ``open_store`` from the path or URL; both implement the same protocols and
raise the same error types.

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

import atexit
import contextlib
import os
import threading
from collections.abc import Callable, Collection, Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Protocol

from .base.records import (
    ConversationState,
    MessageIn,
    NewNode,
    PayloadGrant,
    PayloadRef,
    PreparedSummary,
    PromptReads,
    Rollup,
    SessionInfo,
    StoredMessage,
    SummaryNode,
)
from .storage.claw import LCL_TABLES, ClawDatabase, detect_source
from .storage.connection import CHECKPOINT_EVERY_COMMITS, WAL_AUTOCHECKPOINT_PAGES
from .storage.errors import ForeignDatabase, NewerSchema, StoreError, StoreFault, WriteFailed
from .storage.message_search import ConversationRanges
from .storage.operator import verify_backup
from .storage.payload_dir import blobs_of, database_tag, directory_of, ref_key
from .storage.pg import is_url, redacted
from .storage.schema import APP_ID, SCHEMA_VERSION
from .storage.sqlite import SqliteStore

__all__ = [
    "APP_ID",
    "CHECKPOINT_EVERY_COMMITS",
    "LCL_TABLES",
    "SCHEMA_VERSION",
    "WAL_AUTOCHECKPOINT_PAGES",
    "ClawDatabase",
    "ConversationStore",
    "ForeignDatabase",
    "MessageStore",
    "NewerSchema",
    "OperatorStore",
    "PayloadRefStore",
    "RewriteStore",
    "Store",
    "StoreError",
    "StoreFault",
    "StoredPrints",
    "SummaryStore",
    "VectorStore",
    "WriteFailed",
    "blobs_of",
    "close_all",
    "database_tag",
    "detect_source",
    "directory_of",
    "is_read_only_file",
    "is_url",
    "open_readonly",
    "open_store",
    "redacted",
    "ref_key",
    "verify_backup",
    "writable_target",
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

    def append(
        self, conversation_id: int, session_id: str, source: str, select: Select
    ) -> list[int]:
        """Store the records ``select`` picks as new (it runs under the write lock); their ids."""

    def probe(self, conversation_id: int, select: Select) -> list[MessageIn]:
        """What ``select`` would store now, without writing."""

    def prompt_reads(
        self,
        conversation_id: int,
        window: int,
        upto: int | None,
        newer_than: int,
        held_nodes: Collection[int] = (),
    ) -> PromptReads:
        """An assembly's reads in one call: the conversation, its newest ``window`` raw rows'
        ids (none after ``upto``), whole those stored after ``newer_than``, the context
        summaries' ids, whole those not in ``held_nodes``, and the pinned request (PostgreSQL:
        one round trip, one snapshot)."""

    def append_imported(
        self, conversation_id: int, session_id: str, source: str, records: Sequence[MessageIn]
    ) -> tuple[list[int], int]:
        """Append import records whose fingerprint is new; (new ids, skipped as existing)."""

    def fingerprint_ids(self, conversation_id: int) -> dict[str, int]: ...
    def messages_after(
        self, conversation_id: int, seq: int, limit: int = -1
    ) -> list[StoredMessage]: ...
    def messages_newest(
        self, conversation_id: int, after_seq: int, limit: int, upto: int | None = None
    ) -> list[StoredMessage]: ...
    def message_ids_newest(
        self, conversation_id: int, after_seq: int, limit: int, upto: int | None = None
    ) -> list[int]: ...
    def raw_tokens(self, conversation_id: int, after_seq: int, upto: int | None = None) -> int: ...
    def messages_between(
        self, conversation_id: int, first_seq: int, last_seq: int
    ) -> list[StoredMessage]: ...
    def message(self, message_id: int) -> StoredMessage | None: ...
    def messages_by_ids(self, ids: Sequence[int]) -> list[StoredMessage]: ...
    def messages_in_reach(
        self, ids: Sequence[int], conversations: Sequence[int] | None
    ) -> list[StoredMessage]:
        """The rows of ``ids`` that belong to ``conversations`` (None: any); the filter is in the
        query, so a row beyond the caller's reach is never read."""
        ...

    def session_messages(
        self, session_id: str, after_id: int, limit: int
    ) -> list[StoredMessage]: ...
    def messages_tail(self, conversation_id: int, limit: int) -> list[StoredMessage]: ...
    def last_fingerprint(self, conversation_id: int) -> str | None: ...
    def newest_request(
        self, conversation_id: int, upto: int | None = None
    ) -> StoredMessage | None: ...
    def message_count(self, conversation_id: int | None = None) -> int: ...

    # full-text search (search/, the handlers, cli/)
    def message_id_bounds(
        self,
        conversation_id: int | None = None,
        session_id: str | None = None,
        conversation_ids: Sequence[int] | None = None,
    ) -> tuple[int, int]: ...
    def fts_term_counts(
        self, kind: str, matches: Sequence[str], bounds: tuple[int, int] | None, cap: int
    ) -> list[int]: ...
    def fts_probe_counts(
        self, probes: Sequence[tuple[str, str, tuple[int, int] | None, int]], exact: bool = True
    ) -> list[int]: ...
    def conversation_ranges(self, conversation_id: int) -> ConversationRanges: ...
    def rewrite_generation(self) -> int: ...
    def fts_snippets(self, match: str, ids: Sequence[int], tokens: int) -> dict[int, str]: ...
    def message_hits(
        self,
        match: str,
        *,
        order: str,
        limit: int,
        bounds: tuple[int, int] | None,
        text_chars: int,
        **filters: Any,
    ) -> list[tuple[Any, ...]]: ...
    def message_hits_by_ids(
        self, ids: Sequence[int], *, bounds: tuple[int, int] | None, text_chars: int, **filters: Any
    ) -> list[tuple[Any, ...]]: ...
    def message_ids_in_scope(
        self, *, bounds: tuple[int, int] | None, limit: int, **filters: Any
    ) -> list[int]: ...
    def messages_at(
        self, conversation_id: int, seqs: Sequence[int], text_chars: int, **filters: Any
    ) -> list[tuple[Any, ...]]: ...
    def search_messages(
        self, match: str, conversation_id: int | None, limit: int
    ) -> list[tuple[StoredMessage, float]]: ...
    def message_ids_mentioning(
        self,
        token: str,
        conversation_id: int | None,
        limit: int = 50,
        conversation_ids: Sequence[int] | None = None,
    ) -> list[int]: ...
    def messages_in_period(
        self,
        conversation_id: int | None,
        since: float,
        until: float,
        cap: int = 1000,
        conversation_ids: Sequence[int] | None = None,
    ) -> int: ...
    def scratch_fts(
        self,
        docs: Sequence[tuple[int, str]],
        matches: Sequence[str],
        snippet_match: str | None = None,
        snippet_tokens: int = 24,
    ) -> tuple[list[set[int]], dict[int, str]]: ...


class ConversationStore(Protocol):
    """Conversations, sessions, events and per-store secrets."""

    def ensure_conversation(self, key: str, owner: str = "local") -> int: ...
    def conversation_owner(self, conversation_id: int) -> str | None: ...
    def owner_conversations(self, owner: str) -> list[int]: ...
    def conversation(self, conversation_id: int) -> ConversationState: ...
    def conversation_by_key(self, key: str) -> ConversationState | None: ...
    def advance_frontier(self, conversation_id: int, seq: int) -> bool: ...
    def upsert_session(
        self,
        session_id: str,
        conversation_id: int,
        *,
        platform: str = "",
        mode: str = "normal",
        parent_session_id: str | None = None,
        reason: str | None = None,
    ) -> None: ...
    def session(self, session_id: str) -> SessionInfo | None: ...
    def subagent_links(self, conversation_id: int, limit: int = 50) -> dict[str, Any]: ...
    def session_facts(self, session_id: str) -> dict[str, Any] | None: ...
    def secret(self, name: str, size: int = 32) -> bytes: ...
    def mark(self, name: str) -> None: ...
    def marked(self, name: str) -> bool: ...
    def add_cache_usage(
        self, conversation_id: int, counts: Mapping[str, Mapping[str, int]]
    ) -> None: ...
    def cache_usage(self, conversation_id: int | None = None) -> dict[str, dict[str, int]]: ...
    def record_event(
        self, level: str, kind: str, detail: str, conversation_id: int | None = None
    ) -> None: ...
    def recent_events(self, limit: int = 20) -> list[tuple[float, str, str, str]]: ...


class SummaryStore(Protocol):
    """The summary DAG's nodes, edges and active context (dag.py holds its rules)."""

    def add_summary(self, node: NewNode) -> int: ...
    def publish_context(
        self, conversation_id: int, summary_ids: Sequence[int], frontier_seq: int
    ) -> None: ...
    def context_nodes(self, conversation_id: int) -> list[SummaryNode]: ...
    def summary(self, node_id: int) -> SummaryNode | None: ...
    def summaries(
        self, conversation_id: int, limit: int = 1000, after_id: int = 0
    ) -> list[SummaryNode]: ...
    def child_summaries(self, node_id: int) -> list[SummaryNode]: ...
    def summary_sources(
        self, node_id: int, offset: int = 0, limit: int = -1
    ) -> list[StoredMessage]: ...
    def edge_count(self, node_id: int) -> int: ...
    def descendant_message_ids(self, node_id: int) -> list[int]: ...
    def descendant_span(self, node_id: int) -> tuple[int, int | None, int | None]: ...
    def parent_ids(self, kind: str, child_id: int) -> list[int]: ...
    def ancestors(self, node_id: int) -> list[SummaryNode]: ...
    def root_summaries(
        self, conversation_id: int, after_id: int, limit: int
    ) -> list[SummaryNode]: ...
    def in_context(self, node_id: int) -> bool: ...
    def depth_counts(self, conversation_id: int | None) -> dict[int, int]: ...
    def summary_id_before_newest(self, newest: int) -> int: ...
    def summaries_page(
        self,
        conversation_id: int | None,
        depth: int | None,
        after_id: int,
        limit: int,
        since: float | None = None,
    ) -> list[SummaryNode]: ...
    def node_ids_by_route(self, conversation_id: int, prefix: str) -> dict[str, int]: ...
    def summary_id_bounds(
        self, conversation_id: int | None, conversation_ids: Sequence[int] | None = None
    ) -> tuple[int, int]: ...
    def summary_hits(
        self,
        match: str,
        *,
        order: str,
        limit: int,
        bounds: tuple[int, int] | None,
        conversation_id: int | None = None,
        session_id: str | None = None,
        source: str | None = None,
        exclude_ids: Sequence[int] = (),
        conversation_ids: Sequence[int] | None = None,
    ) -> list[tuple[SummaryNode, float]]: ...
    def summaries_in_period(
        self,
        conversation_id: int | None,
        since: float,
        until: float,
        *,
        depth: int | None,
        after: tuple[float, int] | None,
        limit: int,
        conversation_ids: Sequence[int] | None = None,
    ) -> list[SummaryNode]: ...
    def lineage_problems(self, sample: int = 10) -> dict[str, dict[str, Any]]: ...


class OperatorStore(Protocol):
    """Inventory, health checks, the narrow repairs and cleanups, backups (maintenance/, cli/)."""

    def table_counts(self) -> dict[str, int]: ...
    def database_facts(self) -> dict[str, Any]: ...
    def database_sizes(self) -> dict[str, Any]: ...
    def database_header(self) -> dict[str, Any]: ...
    def conversations_page(
        self, after_id: int, limit: int, key: str | None = None
    ) -> list[dict[str, Any]]: ...
    def sessions_page(
        self, conversation_id: int | None, after_rowid: int, limit: int
    ) -> list[dict[str, Any]]: ...
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
    def tool_link_counts(self, limit: int = 10) -> dict[str, Any]: ...
    def normalize_blank_sources(self) -> int: ...
    def empty_sessions(self, started_before: float, limit: int = 10000) -> list[dict[str, Any]]: ...
    def delete_empty_sessions(self, session_ids: Sequence[str]) -> dict[str, int]: ...
    def delete_conversations(self, conversation_ids: Sequence[int]) -> dict[str, int]: ...
    def harness_turns(self, starts: Sequence[str]) -> list[dict[str, Any]]: ...
    def summaries_over(self, message_ids: Sequence[int]) -> list[int]: ...
    def delete_messages(self, message_ids: Sequence[int]) -> dict[str, int]: ...
    def payload_mentions(self, kind: str, after_id: int, limit: int) -> list[tuple[int, str]]: ...
    def inline_tool_rows(
        self, min_chars: int, after_id: int, limit: int, with_text: bool = True
    ) -> list[tuple[int, int, int, str]]: ...
    def swap_contents(self, changes: Sequence[tuple[int, str, str, int]]) -> list[int]: ...
    def backup_to(
        self, target: Path, progress: Callable[[int, int | None], None] | None = None
    ) -> None: ...


class RewriteStore(Protocol):
    """Stored text rewritten in place (``lcm redact``, scrub.py); each call joins the caller's
    ``write()`` transaction, so one batch is read and rewritten under one lock."""

    def message_rows_after(self, after_id: int, limit: int) -> list[tuple[StoredMessage, str]]: ...
    def text_rows_after(self, table: str, after_id: int, limit: int) -> list[tuple[int, str]]: ...
    def rewrite_message(self, message_id: int, fields: dict[str, Any]) -> None: ...
    def rewrite_text(self, table: str, row_id: int, text: str) -> None: ...
    def refs_in_use(self, needles: Sequence[str]) -> set[str]: ...
    def secure_delete(self, on: bool) -> bool: ...
    def fts_optimize(self) -> None: ...
    def vacuum_and_truncate(self) -> dict[str, Any]: ...


class PayloadRefStore(Protocol):
    """Who may read a payload (storage/payload_refs.py): the grants the engine writes with the rows
    it kept payloads for, never inferred from text; and a migrated database's old refs."""

    def grant_payloads(self, grants: Sequence[tuple[int, PayloadRef]]) -> None: ...
    def revoke_payloads(self, message_id: int, refs: Sequence[str]) -> None: ...
    def payload_grant(
        self, ref: str, conversation_ids: Sequence[int] | None
    ) -> PayloadGrant | None: ...
    def output_grants(
        self, conversation_ids: Sequence[int] | None, limit: int
    ) -> list[PayloadGrant]: ...
    def granted_refs(self, message_ids: Sequence[int]) -> dict[int, set[str]]: ...
    def ref_aliases(self) -> dict[str, str]: ...
    def put_ref_aliases(self, aliases: Mapping[str, str]) -> None: ...
    def ref_rows_after(self, after_id: int, limit: int) -> list[tuple[StoredMessage, str, str]]: ...


class VectorStore(Protocol):
    """Embedding vectors (storage/vectors.py; the blobs are made by vectors.py). The tables exist
    only once :meth:`ensure_vector_tables` ran: a database that never had embeddings enabled has
    none, reads on it give nothing, and the writes below raise :class:`StoreFault`. A vector is
    dropped with its row, and when the row's text changes (triggers)."""

    def ensure_vector_tables(self) -> None: ...
    def has_vector_tables(self) -> bool: ...
    def vector_model(self, name: str, dim: int, dtype: str) -> int:
        """The id of ``(name, dim, dtype)``, created once; another model, dim or dtype is another id."""

    def put_vectors(
        self, model_id: int, kind: str, rows: Sequence[tuple[int, bytes, float]]
    ) -> int:
        """Upsert ``(item_id, blob, scale)`` of kind ``"m"`` (messages) or ``"s"`` (summaries)."""

    def load_vectors(
        self,
        model_id: int,
        kind: str,
        conversation_ids: Sequence[int] | None = None,
        after_id: int = 0,
    ) -> tuple[list[int], list[bytes], list[float]]: ...
    def vector_version(self, model_id: int, kind: str) -> tuple[int, int, int]:
        """``(count, newest item id)``: a cached index of the kind is current while it is unchanged."""

    def unembedded(
        self, model_id: int, kind: str, after_id: int, limit: int
    ) -> list[tuple[int, str]]:
        """``(id, text)`` with no vector of ``model_id`` and id above ``after_id``, ascending."""

    def embedding_backlog(self, model_id: int | None, max_chars: int) -> tuple[int, int]:
        """Rows with no vector of ``model_id`` (all rows when None) and their characters, each cut at ``max_chars``."""

    def vector_stats(self) -> dict[str, Any]: ...
    def build_vector_indexes(self) -> list[str]:
        """Build any missing approximate index without blocking writers (PostgreSQL); the names built."""

    def vector_knn_native(self) -> bool:
        """Whether :meth:`nearest_vectors` answers in SQL (PostgreSQL with pgvector)."""

    def nearest_vectors(
        self, model_id: int, kind: str, query: Any, k: int, allowed: Sequence[int] | None = None
    ) -> list[tuple[int, float]]:
        """``(item id, cosine)`` of the ``k`` rows nearest ``query``, best first (only when native)."""


class RollupStore(Protocol):
    """Temporal rollups (storage/rollups.py; built by rollups.py). The tables exist only once
    :meth:`ensure_rollup_tables` ran; reads without them give nothing, marks raise StoreFault."""

    def ensure_rollup_tables(self) -> None: ...
    def has_rollup_tables(self) -> bool: ...
    def rollup_cursor(self) -> tuple[int, int]: ...
    def rollup_changes(
        self, message_after: int, summary_after: int, limit: int
    ) -> tuple[list[tuple[int, int, float]], list[tuple[int, int, float, float, int]]]: ...
    def mark_rollups_stale(
        self, periods: Sequence[tuple[int, str, str, str]], cursor: tuple[int, int] | None = None
    ) -> int: ...
    def rollups_to_build(self, limit: int, retry_before: float) -> list[Rollup]: ...
    def rollups_in(
        self, conversation_ids: Sequence[int], kind: str, tz: str, first: str, last: str
    ) -> list[Rollup]: ...
    def finish_rollup(
        self,
        rollup_id: int,
        generation: int,
        status: str,
        *,
        content: str = "",
        tokens: int = 0,
        source_ids: Sequence[int] = (),
        error: str = "",
    ) -> bool: ...
    def drop_rollup(self, rollup_id: int, generation: int) -> bool: ...
    def restale_rollups(self, kinds: Sequence[str], start: str | None) -> int: ...
    def rollup_stats(self) -> dict[str, Any]: ...
    def leaf_message_times(self, node_ids: Sequence[int]) -> list[tuple[int, float]]: ...
    def leaves_within(
        self, conversation_id: int, since: float, until: float, limit: int
    ) -> list[SummaryNode]: ...
    def messages_outside_leaves(
        self, conversation_id: int, since: float, until: float, limit: int
    ) -> list[StoredMessage]: ...


class AssertionStore(Protocol):
    """The assertion sidecar (storage/assertions.py): its tables exist only once
    :meth:`ensure_assertion_tables` ran; reads without them give nothing. A row's quote is its
    message's text at its span (a trigger refuses anything else) and goes with that text."""

    def ensure_assertion_tables(self) -> None: ...
    def has_assertion_tables(self) -> bool: ...
    def assertion_sources(
        self, after_id: int, limit: int, max_chars: int
    ) -> list[dict[str, Any]]: ...
    def last_message_id(self) -> int: ...
    def assertion_cursor(self) -> int: ...
    def put_assertions(self, rows: Sequence[dict[str, Any]], cursor: int | None = None) -> int: ...
    def clear_assertions(self, extractor: str | None = None) -> int: ...
    def assertions_for(
        self,
        conversation_ids: Sequence[int] | None,
        subject: str,
        kind: str,
        before: float | None,
        limit: int,
    ) -> list[dict[str, Any]]: ...
    def assertion_stats(self) -> dict[str, Any]: ...


class ViewStore(Protocol):
    """What ``lcm view`` reads beyond the DAG queries (storage/views.py)."""

    def conversation_edges(self, conversation_id: int) -> list[tuple[int, str, int]]: ...
    def view_message_rows(
        self, conversation_id: int, after_seq: int, limit: int
    ) -> list[tuple[Any, ...]]: ...
    def events_of(
        self, kind: str, conversation_id: int | None, limit: int = 10_000
    ) -> list[dict[str, Any]]: ...
    def latest_conversation(self) -> int | None: ...
    def monthly_growth(
        self, conversation_ids: Sequence[int] | None = None
    ) -> list[dict[str, Any]]: ...


class PreparedStore(Protocol):
    """Summaries made ahead of compaction (storage/prepared.py; compaction/prepare.py makes and
    publishes them). The table exists once :meth:`ensure_prepared_tables` ran; reads without it
    give nothing."""

    def ensure_prepared_tables(self) -> None: ...
    def keep_prepared(self, summary: PreparedSummary) -> bool: ...
    def prepared_summary(self, conversation_id: int, key: str) -> PreparedSummary | None: ...
    def take_prepared(self, prepared_id: int) -> bool: ...
    def prepared_summaries(self, conversation_id: int) -> list[PreparedSummary]: ...
    def drop_stale_prepared(self, conversation_id: int, frontier_seq: int) -> int: ...
    def drop_prepared_for(
        self, conversation_ids: Sequence[int] | None = None, older_than: float | None = None
    ) -> int: ...
    def prepared_counts(self) -> dict[int, tuple[int, int]]: ...


class Store(
    MessageStore,
    ConversationStore,
    SummaryStore,
    OperatorStore,
    RewriteStore,
    VectorStore,
    RollupStore,
    AssertionStore,
    ViewStore,
    PayloadRefStore,
    PreparedStore,
    Protocol,
):
    """An opened store: everything the services use."""

    path: str

    @property
    def readonly(self) -> bool:
        """Whether this connection refuses every write (an operator's view)."""

    def write(self) -> AbstractContextManager[object]:
        """One write transaction; store calls made inside it join it (all or nothing)."""

    def compaction_slot(self, conversation_id: int) -> AbstractContextManager[bool]:
        """Whether this caller may compact ``conversation_id`` now (``True`` for the block's duration).

        Never waits: a caller that gets ``False`` skips compaction and assembles from the store,
        so two writers never summarize the same span at once. SQLite: a lock per conversation
        within this process (across processes the optimistic publish in compaction/passes.py decides);
        PostgreSQL: a session advisory lock, so across every host sharing the database.
        """

    def close(self) -> None: ...
    def checkpoint_now(self, wait_s: float = 2.0) -> bool: ...


_stores: dict[tuple[int, str], Store] = {}
_stores_lock = threading.Lock()


def open_store(path: str | os.PathLike[str]) -> Store:
    """The process's one store for ``path``: a SQLite file, or a ``postgresql://`` URL (its pool),
    opened on first use and migrated to our schema."""
    if is_url(path):
        resolved = str(path)
    else:
        resolved = str(Path(path).expanduser().resolve()) if str(path) != ":memory:" else ":memory:"
    key = (os.getpid(), resolved)
    with _stores_lock:
        store = _stores.get(key)
        if store is None:
            store = _open(resolved)
            _stores[key] = store
        return store


def _open(target: str) -> Store:
    if is_url(target):
        from .storage.pg.store import PgStore  # the driver is imported only for a URL

        return PgStore(target)
    return SqliteStore(target)


def writable_target(store: Store) -> str:
    """What reopens ``store`` for writing (the CLI reads through a read-only store): its file, or
    its URL with the password (``path``, what operators see, has none)."""
    return str(getattr(store, "url", store.path))


def is_read_only_file(store: Store) -> bool:
    """A SQLite file this process may not write; a server's rights show only when it writes."""
    return not is_url(store.path) and not os.access(store.path, os.W_OK)


def open_readonly(path: str | os.PathLike[str]) -> Store:
    """A query-only connection of its own: no migration, no WAL switch, never a write."""
    if is_url(path):
        from .storage.pg.store import PgStore

        return PgStore.open_readonly(str(path))
    return SqliteStore.open_readonly(Path(path))


def checkpoint_all() -> None:
    """At a clean exit: every SQLite file this process wrote gets its WAL merged in (registered
    with atexit below; a killed process leaves the WAL, which SQLite replays at the next open)."""
    with _stores_lock:
        stores = [store for key, store in _stores.items() if key[0] == os.getpid()]
    for store in stores:
        with contextlib.suppress(Exception):
            store.checkpoint_now()


atexit.register(checkpoint_all)


def close_all() -> None:
    """Close every connection this process opened (tests, shutdown)."""
    with _stores_lock:
        for key, store in list(_stores.items()):
            if key[0] == os.getpid():
                store.close()
            del _stores[key]

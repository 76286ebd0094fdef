"""The library's front door: one bound session of one logical conversation.

``LcmCore`` knows nothing about Hermes. It stores what it is given (idempotently), compacts when asked,
and builds the bounded prompt. The host adapter (engine.py) translates host calls into these methods.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .base.outputs import PREFIX as OUTPUT_PREFIX
from .base.outputs import settings_view as outputs_view
from .base.patterns import MessagePatterns
from .base.payloads import PLACEHOLDER_PREFIX
from .base.records import ConversationState, StoredMessage
from .base.scaffold import BlockSeal
from .base.tokens import MESSAGE_OVERHEAD_TOKENS, content_text
from .base.wire import problems
from .compaction.passes import CompactionReport, CompactionSettings, Compactor
from .compaction.rollups import Rollups
from .compaction.summarize import CallGuard, SourceItem, SummaryOutcome, build_routes, summarize
from .config import LcmConfig, reserve_for
from .dag import Dag
from .embed import Semantic
from .evidence import Assertions, PreAnswer
from .ingest.align import Seen, Selection
from .ingest.externalize import with_whole_outputs
from .ingest.normalize import is_storable, last_storable, storable
from .ingest.pipeline import pipeline_for
from .ingest.steps import Normalizer
from .maintenance.payload_rekey import open_guard
from .prompt import timeline
from .prompt.assemble import (
    Budget,
    Retention,
    build,
    is_block,
    newest_request,
    plan_budget,
    same_block,
)
from .prompt.blocks import Item
from .search.proactive import ProactiveRecall
from .sessions.binding import (
    FORK_REASON,
    MODE_IGNORED,
    MODE_NORMAL,
    MODE_STATELESS,
    ROLE_SUBAGENT,
    SUBAGENT_REASONS,
    Binder,
    Binding,
    storable_id,
)
from .sessions.unstored import Other, unstored_prompt
from .store import Store, WriteFailed, open_store

log = logging.getLogger("hermes_lcm")

# Prompt items kept between assemblies (rows never change once stored).
ITEM_CACHE_SIZE = 8192
# New messages stored per transaction when a host call brings many (the store's rows per INSERT
# statement): the time bound is checked between these, never on a usual turn's few messages.
INGEST_CHUNK_ROWS = 2000


@dataclass
class Stats:
    """Process-lifetime counters for status."""

    ingest_calls: int = 0
    stored: int = 0
    compactions: int = 0
    last_compaction: dict[str, Any] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    # Writes the store refused (disk full, I/O error, read-only, locked), counted here because
    # the store cannot record its own failure; and how many host messages that left unstored.
    write_failures: int = 0
    last_write_failure: str = ""
    unstored_messages: int = 0
    # Host messages the last ingest left for the next call because its time bound ran out (not
    # an error: each call stores what it can in order, and nothing leaves the list unstored).
    ingest_backlog: int = 0

    def error(self, text: str) -> None:
        self.errors.append(f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} {text}")
        del self.errors[:-20]

    def write_failed(self, operation: str, exc: WriteFailed) -> str:
        self.write_failures += 1
        self.last_write_failure = (
            f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} {operation}: {exc}"
        )
        self.error(f"store write failed during {operation}: {exc}")
        return self.last_write_failure


class LcmCore:
    def __init__(
        self,
        config: LcmConfig,
        database_path: str | Path,
        *,
        host_call_llm: Callable[..., Any] | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.config = config
        self.store: Store = open_store(database_path)
        self.dag = Dag(self.store)
        self.guard = open_guard(
            self.store, config.payload_min_base64_chars
        )  # keyed refs, old ones upgraded
        self.message_patterns = MessagePatterns.parse(config.ignore_message_patterns)
        # Seals our summary blocks so ingest knows them in any copy the host hands back.
        self.seal = BlockSeal(self.store.secret("summary_block"))
        pipeline = pipeline_for(
            config, self.store, self.guard
        )  # optional ingest steps: redaction, outputs
        self.redactor = pipeline.redactor
        self.normalizer = Normalizer(
            self.guard,
            self.message_patterns,
            self.seal,
            pipeline.steps,
            pipeline.shadow,
            self.redactor,
        )
        self.routes = self._routes(host_call_llm)
        self.semantic = Semantic(
            config, self.store, env or {}
        )  # LCM_EMBEDDINGS_ENABLED: vectors, their job
        self.rollups = Rollups(
            config, self.store, self._summarize
        )  # LCM_TEMPORAL_ROLLUPS_ENABLED: their job
        self.proactive = ProactiveRecall(
            self.store, self.dag, self.seal.recall(), config.proactive_recall_budget_tokens
        )  # turncontext.py uses both
        self.preanswer = PreAnswer(self.store, self.dag, self.seal.recall())
        self.call_guard = CallGuard(
            failure_threshold=config.summary_circuit_breaker_failure_threshold,
            cooldown_s=config.summary_circuit_breaker_cooldown_seconds,
            max_calls=config.summary_max_calls_per_hour,
            window_s=3600.0,
        )
        self.assertions = Assertions(
            config, self.store, self.redactor, self.routes, self.call_guard
        )
        self.compactor = Compactor(
            self.store,
            self.dag,
            CompactionSettings(
                leaf_chunk_tokens=config.leaf_chunk_tokens,
                max_depth=config.incremental_max_depth,
                condense_min_nodes=config.condense_min_nodes,
                max_passes=config.max_passes_per_compress,
                max_seconds=config.compaction_max_seconds,
            ),
            self._summarize,
        )
        self.binder = Binder(config, self.store)
        self.stats = Stats()
        self._fresh_start = False
        self._seen: Seen | None = None
        self._seen_also: Seen | None = None  # see _remember_stored_part
        # The message objects the last compress handed the host (align.Selection.handed).
        self._handed: dict[int, tuple[Any, int]] = {}
        self._items: dict[int, Item] = {}
        self._assembly_seconds = 0.0
        # The stored seq the list of the last ingest ends at (None: unknown, or nothing of it stored).
        self.position: int | None = None
        # Why the last compress returned the host's list unchanged to keep unstored messages (else None).
        self.kept_reason: str | None = None
        # A write failed since the last stored ingest: host messages may wait unstored, so which of
        # them are stored is decided strictly (align.Selection.strict) until one is stored again.
        self._backlog = False
        # The last ingest's selection when time ran out before every new message was stored (its
        # ``cut`` is the first one waiting); None when the last ingest stored everything.
        self._pending: Selection | None = None
        # Rows per ingest transaction; the time bound is checked after each (tests make it small).
        self.ingest_chunk_rows = INGEST_CHUNK_ROWS
        self.finalizing = False  # see finalize()
        # For a session that stores nothing: another compressor to try first (the host adapter
        # passes the host's built-in one); its answer is used when it is valid and fits.
        self.unstored_compressor: Other | None = None

    def _routes(self, host_call_llm: Callable[..., Any] | None) -> list[Any]:
        provider = self.config.summary_provider
        if provider == "extractive":
            return []
        host = host_call_llm if provider in ("auto", "auxiliary") else None
        model = self.config.summary_model if provider in ("auto", "openai") else ""
        base_url = self.config.summary_base_url if provider in ("auto", "openai") else ""
        return build_routes(
            model, base_url, self.config.summary_api_key, list(self.config.fallback_models), host
        )

    @property
    def summarizer_name(self) -> str:
        return ",".join(r.name for r in self.routes) or "extractive (offline)"

    # -- sessions ---------------------------------------------------------------

    @property
    def binding(self) -> Binding:
        return self.binder.binding

    def bind(self, session_id: str, **kwargs: Any) -> Binding:
        """Attach this core to a host session (binding.Binder.bind): what was remembered of the
        host's list belongs to the conversation it was seen in."""
        before = self.binding.conversation_id
        binding = self.binder.bind(session_id, **kwargs)
        self.finalizing = False  # a session bound now is not ending
        if binding.conversation_id != before:
            self._seen = self._seen_also = None
            self._handed = {}
            self._pending = None
        return binding

    def link_parent(self, parent_session_id: str) -> Binding:
        """The host named the bound subagent's parent (``subagent_start``): bind again, reading or linked to it."""
        again = self.binder.relink(parent_session_id)
        return self.binding if again is None else self.bind(self.binding.session_id, **again)

    def reach(self, shared: bool) -> tuple[int, ...] | None:
        return self.binder.reach(shared)

    def start_fresh_context(self) -> None:
        """Keep summaries at depth >= LCM_NEW_SESSION_RETAIN_DEPTH; raw history leaves the context.

        Nothing is deleted: every node and message stays expandable.
        """
        conversation_id = self.binding.conversation_id
        if conversation_id is None or self.binding.mode != MODE_NORMAL:
            return
        retain = self.config.new_session_retain_depth
        context = self.dag.context(conversation_id)
        kept = [n.id for n in context if retain < 0 or (retain > 0 and n.depth >= retain)]
        state = self.store.conversation(conversation_id)
        self.dag.publish(conversation_id, kept, state.last_seq)
        self._fresh_start = True

    # -- ingest ------------------------------------------------------------------

    @property
    def writable(self) -> bool:
        return self.binding.mode == MODE_NORMAL and self.binding.conversation_id is not None

    @property
    def retention(self) -> Retention:
        """What becomes of messages a prompt for the bound session leaves out (the prompt says so)."""
        why = self.binding.matched_pattern
        if why == FORK_REASON:
            return Retention.FORK
        if why in SUBAGENT_REASONS:
            return Retention.SUBAGENT
        if self.binding.mode == MODE_IGNORED:
            return Retention.IGNORED
        if self.binding.mode == MODE_STATELESS:
            return Retention.STATELESS
        return Retention.STORED if self.writable else Retention.UNCERTAIN

    def ingest(
        self, messages: Sequence[Any], source: str = "", deadline: float | None = None
    ) -> int:
        """Store the messages not stored yet; returns how many were stored.

        Also sets :attr:`position`, the stored seq the list ends at: compress bounds its answer there,
        so a list that is only the head of the history (``/compress here``) gets nothing newer back.
        A write the store refuses (disk full, I/O error, read-only, locked) is recorded, not
        raised: nothing of it was stored, the messages are still in the host's list, and the
        next ingest or compress stores them (alignment finds where the store ends).
        Many new messages are stored in order, a chunk per transaction, until ``deadline``
        (monotonic; by default LCM_COMPACTION_MAX_SECONDS from now) has passed: the rest waits
        for the next call, which resumes at the first message not stored (:meth:`_ingest`).
        """
        try:
            stored = self._ingest(messages, storable_id(source) or "", deadline)
        except WriteFailed as exc:
            self._write_failed("ingest", exc)
            return 0
        if stored and self.finalizing:
            self.store.checkpoint_now()
        if stored:
            self.semantic.after_ingest()  # embeds them on its own thread, after the reply
            self.rollups.after_ingest()  # marks their days stale and builds, on its own thread
            self.assertions.after_ingest()  # LCM_ASSERTIONS_ENABLED: facts read on their own thread
        return stored

    def finalize(self) -> None:
        """The host ends the session for good (its shutdown, a gateway reset): from now on every
        write is merged into the database file at once, so a copy of the file alone is complete
        even when the host then leaves by ``os._exit`` (no atexit, no close)."""
        self.finalizing = True
        self.store.checkpoint_now()

    def _write_failed(self, operation: str, exc: WriteFailed) -> None:
        self._backlog = self._backlog or operation != "compaction"
        text = self.stats.write_failed(operation, exc)
        log.warning("hermes-lcm: %s", text)
        with contextlib.suppress(Exception):  # the store may be unable to record its own failure
            self.store.record_event("error", "store_write", text, self.binding.conversation_id)

    def _ingest(self, messages: Sequence[Any], source: str, deadline: float | None = None) -> int:
        """Store the new messages as a series of prefixes, one transaction each, and stop after
        the one during which ``deadline`` passed (checked only between chunks of
        :attr:`ingest_chunk_rows`: a usual turn is one chunk and never looks at the clock).

        Each chunk ends by remembering the stored prefix as the list seen (:meth:`Selection.cut`),
        so the next chunk, or the next host call, extends exactly that prefix: nothing is stored
        twice, skipped or reordered. What is left is :attr:`_pending` (see :meth:`compress`).
        """
        end = (
            time.monotonic() + self.config.compaction_max_seconds if deadline is None else deadline
        )
        self.stats.ingest_calls += 1
        self.position = None
        self._pending = None
        if not self.writable or not messages:
            return 0
        select = self._selection(messages, strict=self._backlog)
        if select.empty:
            return 0
        if self._unchanged_since_last(select):
            assert self._seen is not None
            self.position = self._seen.end_seq
            return 0
        stored = self._store_selected(select, source)
        while select.cut is not None and time.monotonic() < end:
            select = self._selection(messages, strict=True)  # messages wait unstored meanwhile
            stored += self._store_selected(select, source)
        if select.cut is not None:
            self._pending, self._backlog = select, True
            self.stats.ingest_backlog = len(messages) - select.cut
        return stored

    def _selection(self, messages: Sequence[Any], strict: bool) -> Selection:
        return Selection(
            self.normalizer,
            messages,
            self._seen,
            fresh_start=self._fresh_start,
            strict=strict,
            limit=self.ingest_chunk_rows,
            handed=self._handed,
            also=self._seen_also,
        )

    def _store_selected(self, select: Selection, source: str) -> int:
        """One transaction: store what ``select`` picks and remember how far the host's list is stored."""
        assert self.binding.conversation_id is not None
        ids = self.store.append(
            self.binding.conversation_id, self.binding.session_id, source, select
        )
        self.position = select.end_seq
        self._fresh_start = False
        if ids or select.extended or self._seen is None:
            # A list that only re-read stored messages (the host's pre-compression copy at session
            # end, a replay) is not the one the host goes on with: keep the last that was.
            self._seen, self._seen_also = select.seen_after, None
        self.stats.stored += len(ids)
        self.stats.unstored_messages = self.stats.ingest_backlog = 0
        self._backlog = False
        return len(ids)

    def _unchanged_since_last(self, select: Selection) -> bool:
        """The host re-sent exactly the list we saw last: skip the write transaction.

        Exactly: the same length and the same message object at its end. An equal fingerprint
        is not enough: a list of the same length ending in another "ok" is another list.
        """
        now = select.seen_now()
        return (
            not self._fresh_start
            and self._seen is not None
            and now == self._seen
            and now is not None
            and now.anchor is self._seen.anchor
        )

    # -- compaction and assembly ----------------------------------------------

    def budget(self, threshold_tokens: int, overhead_tokens: int) -> Budget:
        return budget_for(self.config, threshold_tokens, overhead_tokens)

    def compact(
        self,
        budget: Budget,
        *,
        force: bool = False,
        focus: str | None = None,
        upto: int | None = None,
        deadline: float | None = None,
    ) -> CompactionReport:
        """Compact toward the budget's goal; nothing after seq ``upto`` is summarized.
        ``deadline`` (monotonic) bounds the passes, by default LCM_COMPACTION_MAX_SECONDS from now."""
        assert self.binding.conversation_id is not None
        report = self.compactor.run(
            self.binding.conversation_id,
            self.binding.session_id,
            budget,
            force=force,
            focus=focus,
            upto=upto,
            deadline=deadline,
        )
        self.stats.compactions += 1
        self.stats.last_compaction = {
            "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "leaf_passes": report.leaf_passes,
            "condense_passes": report.condense_passes,
            "evicted": report.evicted,
            "conflicts": report.conflicts,
            "stop_reason": report.stop_reason,
            "errors": report.errors[-5:],
        }
        for error in report.errors:
            self.store.record_event("warning", "summarizer", error, self.binding.conversation_id)
        self.rollups.after_ingest()  # new summaries re-stale the days they cover
        return report

    def assemble(
        self, budget: Budget, upto: int | None = None, state: ConversationState | None = None
    ) -> list[dict[str, Any]]:
        """The prompt from the store: context summaries, pinned request, fresh tail;
        with ``upto``, no raw message (nor request) stored after that seq.
        ``state``: the conversation's row when the caller read it already."""
        conversation_id = self.binding.conversation_id
        assert conversation_id is not None
        if state is None:
            state = self.store.conversation(conversation_id)
        # A message costs at least MESSAGE_OVERHEAD_TOKENS, so no more rows than this can fit.
        window = max(256, budget.total // MESSAGE_OVERHEAD_TOKENS)
        raw = self._raw_items(conversation_id, state.frontier_seq, window, upto)
        nodes, pinned = self.dag.context(conversation_id), self._newest_user(state, upto)
        return with_whole_outputs(
            lambda items: build(nodes, items, budget, pinned, header=self.seal.header()),
            raw,
            self.guard,
            self.store.granted_refs,
        )

    def _raw_items(
        self, conversation_id: int, after_seq: int, window: int, upto: int | None
    ) -> list[Item]:
        """The newest ``window`` raw rows as prompt items; only rows not cached yet are read whole."""
        ids = self.store.message_ids_newest(conversation_id, after_seq, window, upto)
        items = {i: self._items[i] for i in ids if i in self._items}
        fetched = {
            m.id: Item.stored(m)
            for m in self.store.messages_by_ids([i for i in ids if i not in items])
        }
        items.update(fetched)
        if len(self._items) + len(fetched) > ITEM_CACHE_SIZE:
            self._items.clear()
        if len(self._items) + len(fetched) <= ITEM_CACHE_SIZE:
            self._items.update(fetched)
        return [items[i] for i in ids]

    def _item(self, message: StoredMessage) -> Item:
        """Items are immutable per stored row; reuse them across assemblies."""
        item = self._items.get(message.id)
        if item is None:
            if len(self._items) >= ITEM_CACHE_SIZE:
                self._items.clear()
            item = self._items[message.id] = Item.stored(message)
        return item

    def _newest_user(self, state: ConversationState, upto: int | None = None) -> Item | None:
        """The request to pin: the newest user message a person sent at or before ``upto``,
        never host scaffolding (a todo snapshot, a nudge) that arrived after it."""
        message = self.store.newest_request(state.id, upto)
        return self._item(message) if message is not None else None

    def compress(
        self,
        messages: Sequence[Any],
        budget: Budget,
        *,
        force: bool = False,
        focus: str | None = None,
        deadline: float | None = None,
    ) -> list[dict[str, Any]]:
        """Ingest, compact to the goal, and return the bounded prompt.

        The answer covers the list it was given and nothing stored after it: the
        host may pass only the head of its history and keep the rest itself. When
        the prompt we would return is the host's list already (nothing compacted,
        the list fits and is valid as it is), the list comes back as given, every
        host field included, so the host sees no change and neither rotates nor
        rewrites its session; when it does not fit, the trimmed prompt is the change.
        ``deadline`` (monotonic) bounds ingest and compaction, by default LCM_COMPACTION_MAX_SECONDS
        from now. A message leaves the host's list only once it is stored: when the store cannot
        write, the prompt keeps every unstored message verbatim (:meth:`keep_unstored`), and
        so it does when the time bound ran out before a huge list was stored (:meth:`_keep_backlog`).
        """
        self.kept_reason = None
        if not self.writable:
            return self.compress_unstored(messages, budget, focus=focus, deadline=deadline)
        if deadline is None:  # the whole call, ingest included (the host adapter starts it earlier)
            deadline = time.monotonic() + self.config.compaction_max_seconds
        try:
            self._ingest(messages, "", deadline)
        except WriteFailed as exc:
            self._write_failed("compress", exc)
            return self.keep_unstored(messages, budget)
        if self._pending is not None:  # time ran out storing a huge list: the rest stays in it
            return self._keep_backlog(messages, self._pending, budget)
        upto = self.position
        if upto is None and last_storable(messages, seal=self.seal) is None:
            # Only our own summaries (or nothing): no raw row belongs to this list.
            upto = self.store.conversation(self._conversation()).frontier_seq
        report = None
        try:  # the passes leave the time the last assembly took
            report = self.compact(
                budget,
                force=force,
                focus=focus,
                upto=upto,
                deadline=deadline - self._assembly_seconds,
            )
        except (
            WriteFailed
        ) as exc:  # every message is stored: the prompt comes from what the store has
            self._write_failed("compaction", exc)
        started = time.monotonic()
        state = self.store.conversation(
            self._conversation()
        )  # read once: assembly and what it ends at
        result = self.assemble(budget, upto, state)
        self._assembly_seconds = time.monotonic() - started
        same = self.same_prompt(result, messages)
        if report is not None:  # the record lcm view draws: the prompt before and after
            timeline.record(
                self.store, state.id, messages, result, self.seal, report, budget, force, not same
            )
        if same:
            return list(messages)
        self._remember_output(result, upto, state.last_seq)
        return result

    def compress_unstored(
        self,
        messages: Sequence[Any],
        budget: Budget,
        *,
        focus: str | None = None,
        deadline: float | None = None,
    ) -> list[dict[str, Any]]:
        """The bounded prompt of a session that stores nothing (ignored, stateless, a host fork):
        summarized, never silently trimmed, and nothing written (unstored.py); the other compressor
        (:attr:`unstored_compressor`) is tried first."""
        end = (
            time.monotonic() + self.config.compaction_max_seconds if deadline is None else deadline
        )

        def summary(sources: Sequence[SourceItem], target: int) -> SummaryOutcome:
            return self._summarize(sources, 0, target, focus, end)

        return unstored_prompt(
            messages,
            budget,
            self.retention,
            self.seal,
            summary,
            self.unstored_compressor,
            focus,
            self.stats.error,
        )

    def same_prompt(self, ours: Sequence[dict[str, Any]], theirs: Sequence[Any]) -> bool:
        """Is the prompt we built the host's list already? Same summaries, and the same
        messages in the same order by their provider-visible identity (the host's own
        fields, which we may not have, do not count). The identity counts a payload and the
        placeholder naming its file as one, but the provider would get the payload itself
        (50 MB of base64): a message whose stored copy names a file the host's does not is a change."""
        if len(ours) != len(theirs) or problems(theirs):
            return False  # a list a provider would reject is never handed back as it is
        try:
            return all(
                same_block(mine, host)
                if is_block(mine)
                else is_storable(host)
                and self.normalizer.fingerprint(mine) == self.normalizer.fingerprint(host)
                and not any(
                    names_payload(mine, p) and not names_payload(host, p)
                    for p in (PLACEHOLDER_PREFIX, OUTPUT_PREFIX)
                )
                for mine, host in zip(ours, theirs, strict=True)
            )
        finally:
            self.normalizer.forget()

    def _conversation(self) -> int:
        assert self.binding.conversation_id is not None
        return self.binding.conversation_id

    def keep_unstored(self, messages: Sequence[Any], budget: Budget) -> list[dict[str, Any]]:
        """The prompt when the host's newest messages may not be stored: the store's context
        with every unstored message appended verbatim, or ``messages`` unchanged when that
        does not fit, or when it cannot be told which messages are stored.

        The host keeps its list when it gets it back unchanged (no progress) and retries
        later; an unstored message is never dropped, shortened or reordered.
        """
        conversation_id = self.binding.conversation_id
        assert conversation_id is not None
        select = Selection(
            self.normalizer,
            messages,
            self._seen,
            fresh_start=self._fresh_start,
            strict=True,
            also=self._seen_also,
        )
        unstored = self.store.probe(conversation_id, select)
        if not unstored:
            return self.assemble(budget)
        # ``_seen`` still says how much of the host's list is stored (a failed ingest leaves it
        # as it was), so while the host keeps its list the next ingest resumes exactly there.
        self.stats.unstored_messages = len(unstored)
        if select.start is not None and select.follows_newest:
            out = self._with_unstored(conversation_id, messages[select.start :], budget)
            if out is not None:
                return out
        return self._kept(
            messages,
            f"hermes-lcm could not store {len(unstored)} new messages "
            f"({self.stats.last_write_failure or 'store unavailable'}); none was dropped",
        )

    def _keep_backlog(
        self, messages: Sequence[Any], pending: Selection, budget: Budget
    ) -> list[dict[str, Any]]:
        """The prompt while a huge list is stored over several calls: the store's context with the
        messages not stored yet appended verbatim, else the list unchanged (the host keeps it and
        the next call stores more). Not a failure: nothing is recorded as an error.

        The ingest that stopped knows where (``pending.cut``, right after the store's newest row),
        so unlike :meth:`keep_unstored` nothing is aligned or normalized again.
        """
        assert pending.cut is not None
        waiting = self.stats.ingest_backlog
        out = self._with_unstored(self._conversation(), messages[pending.cut :], budget)
        if out is not None:
            return out
        return self._kept(
            messages,
            f"hermes-lcm is still storing {waiting} new messages (each call stores what "
            "LCM_COMPACTION_MAX_SECONDS allows); none was dropped",
        )

    def _with_unstored(
        self, conversation_id: int, rest: Sequence[Any], budget: Budget
    ) -> list[dict[str, Any]] | None:
        """The store's prompt followed by the unstored messages ``rest``, all of them verbatim, within
        ``budget``; None when that cannot be. The store's newest row must stay in it too, so the next
        ingest anchors there and stores exactly ``rest``."""
        window = max(256, budget.total // MESSAGE_OVERHEAD_TOKENS)
        if (
            len(rest) > window
        ):  # cannot all fit (each costs at least the overhead): do not count them
            return None
        pending = [Item.host(dict(m)) for m in storable(rest, self.seal)]
        state = self.store.conversation(conversation_id)
        raw = self._raw_items(conversation_id, state.frontier_seq, window, None)
        pinned = None if any(item.role == "user" for item in pending) else self._newest_user(state)
        out = build(
            self.dag.context(conversation_id),
            raw + pending,
            budget,
            pinned,
            header=self.seal.header(),
        )
        shown = {id(m) for m in out}
        if not raw or not all(id(item.message) in shown for item in pending + raw[-1:]):
            return None
        self._remember_stored_part(out, raw[-1].message)
        return out

    def _remember_stored_part(self, out: list[dict[str, Any]], newest: dict[str, Any]) -> None:
        """The host goes on with ``out``: it is stored up to ``newest`` (the store's newest row), so
        the next ingest stores what follows, by position rather than by content (repeated replies
        would make content alignment take an unstored message for a stored one)."""
        count = next(i for i, m in enumerate(out) if m is newest) + 1
        stored = (
            self.store.last_fingerprint(self.binding.conversation_id)
            if self.binding.conversation_id
            else None
        )
        self._seen_also = (
            self._seen
        )  # the host may also go on with its own list (a discarded prompt)
        self._seen = Seen(count, self.normalizer.fingerprint(newest), stored or "", anchor=newest)

    def _kept(self, messages: Sequence[Any], reason: str) -> list[dict[str, Any]]:
        self.kept_reason = reason
        return list(messages)

    def fallback(self, messages: Sequence[Any], budget: Budget) -> list[dict[str, Any]]:
        """The prompt after an internal error: bounded where that drops no unstored message.

        Sessions that store nothing by configuration are trimmed as always. Otherwise what
        the store holds decides; when even that cannot be read, the list stays as it is.
        """
        self.kept_reason = None
        if not self.writable:
            return trim(
                messages, budget, self.retention, self.seal
            )  # no summary after an error: no new failure
        try:
            return self.keep_unstored(messages, budget)
        except Exception as exc:  # noqa: BLE001 - the store or the assembler is what failed
            reason = f"hermes-lcm store unavailable ({exc.__class__.__name__}: {exc}); no message was dropped"
            self.stats.error(reason)
            return self._kept(messages, reason)

    def _remember_output(
        self, result: list[dict[str, Any]], upto: int | None, last_seq: int
    ) -> None:
        """The host continues from the list we return: the next ingest extends it.

        Only when that list ends at the newest stored row: an answer bounded before
        it (the host keeps the newer messages itself and appends them) is found by
        alignment instead, which sees those messages are stored already.
        ``last_seq``: the conversation's newest seq when ``result`` was assembled.
        """
        by_object = {id(item.message): item for item in self._items.values()}
        self._handed = {
            id(m): (m, by_object[id(m)].store_id or 0)
            for m in result
            if id(m) in by_object and by_object[id(m)].message is m
        }
        seen = Selection(self.normalizer, result, None).seen_now()
        conversation_id = self._conversation()
        self._seen_also = None
        if seen is None or (upto is not None and upto < last_seq):
            self._seen = None
            return
        stored = self.store.last_fingerprint(conversation_id)
        self._seen = Seen(
            seen.count, seen.fingerprint, stored or "", anchor=seen.anchor, end_seq=last_seq
        )

    def summarize_text(self, sources: Sequence[tuple[str, str]], target: int) -> str:
        """A summary of ``(label, text)`` sources within ``target`` tokens, through this core's
        summarizer (maintenance rebuilds a summary with it)."""
        deadline = time.monotonic() + self.config.compaction_max_seconds
        return self._summarize(
            [SourceItem(label, text) for label, text in sources], 0, target, None, deadline
        ).text

    def _summarize(
        self,
        sources: Sequence[SourceItem],
        depth: int,
        target: int,
        focus: str | None,
        deadline: float | None,
    ) -> SummaryOutcome:
        """A summary of ``sources``. With redaction on, the summarizer's input is redacted too (rows
        stored before it was turned on still hold their secrets, and the input may go to a remote
        model), and so is what it answers, before it is stored."""
        redactor = self.redactor
        if redactor is not None:
            sources = [SourceItem(s.label, redactor.redact(s.text)) for s in sources]
            focus = redactor.redact(focus) if focus else focus
        outcome = summarize(
            sources,
            depth=depth,
            target_tokens=target,
            focus=focus,
            routes=self.routes,
            guard=self.call_guard,
            deadline=deadline,
            timeout_s=self.config.summary_timeout_ms / 1000,
        )
        if redactor is None:
            return outcome
        return dataclasses.replace(outcome, text=redactor.redact(outcome.text))

    # -- reporting ------------------------------------------------------------

    def conversation_state(self) -> ConversationState | None:
        if self.binding.conversation_id is None:
            return None
        return self.store.conversation(self.binding.conversation_id)

    def privacy(self) -> dict[str, Any]:
        """What status and doctor show of the ingest filters: redaction's policy and counts, the
        message patterns; never a secret or a message."""
        redaction = (
            self.redactor.describe()
            if self.redactor is not None
            else {
                "enabled": False,
                "note": "off (LCM_SENSITIVE_PATTERNS_ENABLED): messages are stored as sent",
            }
        )
        return {
            "redaction": redaction,
            "ignore_message_patterns": len(self.message_patterns.compiled),
            "ignore_message_pattern_problems": list(self.message_patterns.problems),
            "ignored_messages_this_process": self.normalizer.ignored_count,
        }

    def status(self) -> dict[str, Any]:
        state = self.conversation_state()
        info: dict[str, Any] = {
            "database_path": self.store.path,
            "session_id": self.binding.session_id or None,
            "session_mode": self.binding.mode,
            "matched_session_pattern": self.binding.matched_pattern,
            "agent_role": self.binding.role,
            "summarizer": self.summarizer_name,
            "summarizer_guard": self.call_guard.snapshot(),
            "ingest_calls": self.stats.ingest_calls,
            "messages_stored_this_process": self.stats.stored,
            "ignored_messages_this_process": self.normalizer.ignored_count,
            "compactions_this_process": self.stats.compactions,
            "last_compaction": self.stats.last_compaction,
            "payload_write_failures": self.guard.failures,
            "store_write_failures": self.stats.write_failures,
            "last_store_write_failure": self.stats.last_write_failure or None,
            "unstored_messages": self.stats.unstored_messages,
            "ingest_backlog_messages": self.stats.ingest_backlog,
            "errors": list(self.stats.errors),
            "privacy": self.privacy(),
            "embeddings": self.semantic.status(),
            "temporal_rollups": self.rollups.status(),
            "assertions": self.assertions.status(),
            "proactive_recall": self.proactive.status(self.config.proactive_recall_enabled),
            "large_outputs": outputs_view(self.config),
        }
        if self.binding.role == ROLE_SUBAGENT:
            info["linked_parent"] = self.binder.linked_parent()
        if state is not None:
            context = self.dag.context(state.id)
            info.update(
                {
                    "conversation_id": state.id,
                    "conversation_key": state.key,
                    "messages_in_conversation": self.store.message_count(state.id),
                    "frontier_seq": state.frontier_seq,
                    "last_seq": state.last_seq,
                    "context_summaries": [n.node_id for n in context],
                    "context_summary_tokens": sum(n.tokens for n in context),
                    "summaries_by_depth": self.dag.depth_counts(state.id),
                }
            )
        return info


def names_payload(message: Any, prefix: str = PLACEHOLDER_PREFIX) -> bool:
    """Does the message name a payload file (the payload guard moved an inline payload out, or,
    with outputs.PREFIX, a large tool output is its stub)?"""
    content = message.get("content") if isinstance(message, dict) else None
    text = (
        content
        if isinstance(content, str)
        else content_text(content)
        if isinstance(content, list)
        else ""
    )
    calls = message.get("tool_calls") if isinstance(message, dict) else None
    return prefix in text or (bool(calls) and prefix in json.dumps(calls, default=str))


def budget_for(config: LcmConfig, threshold_tokens: int, overhead_tokens: int) -> Budget:
    """The prompt budget under ``config``: threshold minus the host's overhead minus room for a turn.

    ``threshold_tokens`` comes from :func:`config.compute_threshold` (or the host's own lowering
    of it); the reserve from :func:`config.reserve_for`, which refuses one that eats the threshold.
    """
    return plan_budget(
        threshold_tokens,
        overhead_tokens,
        reserve_for(config, threshold_tokens),
        tail_count=config.fresh_tail_count,
        tail_max_tokens=config.fresh_tail_max_tokens,
        target_ratio=config.compaction_target_ratio,
        summary_ratio=config.summary_budget_ratio,
    )


def trim(
    messages: Sequence[Any],
    budget: Budget,
    retention: Retention = Retention.UNCERTAIN,
    seal: BlockSeal | None = None,
) -> list[dict[str, Any]]:
    """Deterministic bounded fallback without the store: the newest valid tail that fits.

    ``retention`` is what the caller knows of the messages it drops (nothing, by default).
    Our own earlier block is left out (known by ``seal`` when the host dropped its key).
    """
    items = [Item.host(dict(m), ref=i + 1) for i, m in enumerate(storable(messages, seal))]
    return build(
        [],
        items,
        budget,
        newest_request(items),
        retention=retention,
        header=seal.header() if seal is not None else None,
    )

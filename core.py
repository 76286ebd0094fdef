"""The library's front door: one bound session of one logical conversation.

``LcmCore`` knows nothing about Hermes. It stores what it is given (idempotently), compacts when asked,
and builds the bounded prompt. The host adapter (engine.py) translates host calls into these methods.
Each call that brings the host's list normalizes it once, at the door (ingest/hostlist.py), and
every path of the call reads that one copy.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from .base.patterns import MessagePatterns
from .base.records import ConversationState
from .base.scaffold import BlockSeal
from .base.stats import CacheTally, Stats, add_cache_counts
from .base.tokens import MESSAGE_OVERHEAD_TOKENS
from .compaction.passes import CompactionReport, CompactionSettings, Compactor
from .compaction.prepare import PreparedSummaries, ahead_of, settings_tag
from .compaction.preparer import Preparer
from .compaction.rollups import Rollups
from .compaction.summarize import CallGuard, SourceItem, SummaryOutcome
from .compaction.summarizer import Summarizer, expansion_routes_for, routes_for
from .config import LcmConfig
from .dag import Dag
from .embed import Semantic
from .evidence import Assertions, PreAnswer
from .ingest.externalize import with_whole_outputs
from .ingest.hostlist import HostList
from .ingest.memory import INGEST_CHUNK_ROWS, ListMemory, same_prompt
from .ingest.pipeline import pipeline_for
from .ingest.steps import Normalizer
from .maintenance.payload_rekey import open_guard
from .prompt import timeline
from .prompt.assemble import Retention, build, newest_request
from .prompt.blocks import Item
from .prompt.budget import Budget, budget_for
from .prompt.stored import StoredItems
from .search.proactive import ProactiveRecall
from .sessions.binding import (
    FORK_REASON,
    MODE_IGNORED,
    MODE_NORMAL,
    MODE_STATELESS,
    SUBAGENT_REASONS,
    Binder,
    Binding,
    storable_id,
)
from .sessions.unstored import Other, trim, trimmed, unstored_prompt
from .store import Store, WriteFailed, open_store

# What callers import from the front door (the session modes, the store-less fallback).
__all__ = ["MODE_IGNORED", "MODE_NORMAL", "LcmCore", "trim"]

log = logging.getLogger("hermes_lcm")


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
        # Keyed payload refs; old ones are upgraded on open.
        self.guard = open_guard(self.store, config.payload_min_base64_chars)
        self.message_patterns = MessagePatterns.parse(config.ignore_message_patterns)
        # Seals our summary blocks so ingest knows them in any copy the host hands back.
        self.seal = BlockSeal(self.store.secret("summary_block"))
        # The optional ingest steps: redaction, large outputs.
        pipeline = pipeline_for(config, self.store, self.guard)
        self.redactor = pipeline.redactor
        self.normalizer = Normalizer(
            self.guard,
            self.message_patterns,
            self.seal,
            pipeline.steps,
            pipeline.shadow,
            self.redactor,
        )
        self.call_guard = CallGuard(
            failure_threshold=config.summary_circuit_breaker_failure_threshold,
            cooldown_s=config.summary_circuit_breaker_cooldown_seconds,
            max_calls=config.summary_max_calls_per_hour,
            window_s=3600.0,
        )
        self.routes = routes_for(config, host_call_llm)
        self.expansion_routes = expansion_routes_for(config, host_call_llm, self.routes)
        self.summarizer = Summarizer(config, self.routes, self.call_guard, self.redactor)
        # LCM_EMBEDDINGS_ENABLED, LCM_TEMPORAL_ROLLUPS_ENABLED: each runs its own job.
        self.semantic = Semantic(config, self.store, env or {})
        self.rollups = Rollups(config, self.store, self.summarizer)
        # turncontext.py uses both.
        self.proactive = ProactiveRecall(
            self.store, self.dag, self.seal.recall(), config.proactive_recall_budget_tokens
        )
        self.preanswer = PreAnswer(self.store, self.dag, self.seal.recall())
        self.assertions = Assertions(
            config, self.store, self.redactor, self.routes, self.call_guard
        )
        settings = CompactionSettings(
            leaf_chunk_tokens=config.leaf_chunk_tokens,
            max_depth=config.incremental_max_depth,
            condense_min_nodes=config.condense_min_nodes,
            max_passes=config.max_passes_per_compress,
            max_seconds=config.compaction_max_seconds,
        )
        # LCM_COMPACTION_MODE=deferred: summaries prepared between turns (compaction/prepare.py),
        # looked up by the compactor; each side has a compactor of its own, sharing the counts.
        prepared = (
            PreparedSummaries(self.store, settings_tag(config, self.summarizer.name))
            if config.compaction_mode == "deferred"
            else None
        )
        self.compactor = Compactor(self.store, self.dag, settings, self.summarizer, prepared)
        self.preparer = (
            Preparer(
                Compactor(self.store, self.dag, settings, self.summarizer, prepared),
                config.prepare_at_ratio,
            )
            if prepared is not None
            else None
        )
        self.binder = Binder(config, self.store)
        self.stats = Stats()
        self._cache_compactions = 0  # compactions seen at the last reply's cache counts
        self.cache_tally = CacheTally()
        self.memory = ListMemory(self.store, self.normalizer, self.stats)
        self.items = StoredItems(self.store)
        self._assembly_seconds = 0.0
        # Why the last compress returned the host's list unchanged to keep unstored messages (else None).
        self.kept_reason: str | None = None
        # Rows per ingest transaction; the time bound is checked after each (tests make it small).
        self.ingest_chunk_rows = INGEST_CHUNK_ROWS
        self.finalizing = False  # see finalize()
        # For a session that stores nothing: another compressor to try first (the host adapter
        # passes the host's built-in one); its answer is used when it is valid and fits.
        self.unstored_compressor: Other | None = None

    @property
    def summarizer_name(self) -> str:
        return self.summarizer.name

    def record_cache_usage(
        self, prompt: int, usage: Mapping[str, Any], on_error: Callable[[str], None]
    ) -> None:
        """One reply's prompt-cache counts (the host's ``cache_read_tokens`` and
        ``cache_write_tokens``), kept for the bound conversation of a session that writes; the
        replies right after a compaction apart. In memory only: the next ingest writes them
        (flush_cache_usage), so a reply costs the turn no write. Telemetry never fails a turn."""
        if "cache_read_tokens" not in usage and "cache_write_tokens" not in usage:
            return
        compacted = self.stats.compactions != self._cache_compactions
        self._cache_compactions = self.stats.compactions
        conversation = self.binding.conversation_id
        if conversation is None or self.binding.mode != MODE_NORMAL:
            return
        try:
            read = int(usage.get("cache_read_tokens") or 0)
            write = int(usage.get("cache_write_tokens") or 0)
        except (TypeError, ValueError) as exc:
            on_error(f"cache usage: {exc.__class__.__name__}: {exc}")
            return
        self.cache_tally.add(conversation, max(0, prompt), read, write, compacted)

    def flush_cache_usage(self) -> None:
        """Write the cache counts gathered since the last ingest; a refused write keeps them for
        the next one, and a read-only store (nothing of it is written) drops them."""
        taken = self.cache_tally.take()
        if not taken:
            return
        try:
            if self.store.readonly:
                return
            for conversation_id, counts in list(taken.items()):
                self.store.add_cache_usage(conversation_id, counts)
                del taken[conversation_id]
        except Exception as exc:  # noqa: BLE001 - telemetry never fails a turn
            self.cache_tally.give_back(taken)
            self.stats.error(f"cache usage: {exc.__class__.__name__}: {exc}")

    def cache_usage(self, conversation_id: int) -> dict[str, dict[str, int]]:
        """A conversation's prompt-cache totals: what is stored and what is not written yet."""
        return add_cache_counts(
            self.store.cache_usage(conversation_id), self.cache_tally.pending(conversation_id)
        )

    def summarize_text(self, sources: Sequence[tuple[str, str]], target: int) -> str:
        """A summary of ``(label, text)`` sources within ``target`` tokens, through this core's
        summarizer (maintenance rebuilds a summary with it)."""
        return self.summarizer.text(sources, target)

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
            self.memory.forget()
        return binding

    def link_parent(self, parent_session_id: str) -> Binding:
        """The host named the bound subagent's parent (``subagent_start``): bind again, reading or linked to it."""
        again = self.binder.relink(parent_session_id)
        return self.binding if again is None else self.bind(self.binding.session_id, **again)

    def reach(self, shared: bool) -> tuple[int, ...] | None:
        return self.binder.reach(shared)

    def start_fresh_context(self) -> None:
        """Keep summaries at depth >= LCM_NEW_SESSION_RETAIN_DEPTH; raw history leaves the context.

        Nothing is deleted: every node and message stays expandable. What was prepared for the
        next compaction is dropped: its rows left the context, and its condensations were of
        nodes that did too.
        """
        conversation_id = self.binding.conversation_id
        if conversation_id is None or self.binding.mode != MODE_NORMAL:
            return
        retain = self.config.new_session_retain_depth
        context = self.dag.context(conversation_id)
        kept = [n.id for n in context if retain < 0 or (retain > 0 and n.depth >= retain)]
        state = self.store.conversation(conversation_id)
        self.dag.publish(conversation_id, kept, state.last_seq)
        self.store.drop_prepared_for([conversation_id])
        self.memory.fresh_start = True

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

    @property
    def position(self) -> int | None:
        """The stored seq the list of the last ingest ends at (None: unknown, or nothing of it stored)."""
        return self.memory.position

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
        for the next call, which resumes at the first message not stored (ListMemory.ingest).
        """
        host = HostList(messages, self.seal)
        self.flush_cache_usage()
        try:
            with self.normalizer.reading(host):
                stored = self._ingest(host, storable_id(source) or "", deadline)
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
        self.flush_cache_usage()
        self.store.checkpoint_now()

    def _write_failed(self, operation: str, exc: WriteFailed) -> None:
        self.memory.backlog = self.memory.backlog or operation != "compaction"
        text = self.stats.write_failed(operation, exc)
        log.warning("hermes-lcm: %s", text)
        with contextlib.suppress(Exception):  # the store may be unable to record its own failure
            self.store.record_event("error", "store_write", text, self.binding.conversation_id)

    def _ingest(self, host: HostList, source: str, deadline: float | None = None) -> int:
        end = (
            time.monotonic() + self.config.compaction_max_seconds if deadline is None else deadline
        )
        self.stats.ingest_calls += 1
        return self.memory.ingest(
            host,
            self.binding.conversation_id if self.writable else None,
            self.binding.session_id,
            source,
            end,
            self.ingest_chunk_rows,
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
        held: contextlib.AbstractContextManager[None] = contextlib.nullcontext()
        if self.preparer is not None:  # a summary it is making now is not made twice
            until = (
                deadline
                if deadline is not None
                else time.monotonic() + self.config.compaction_max_seconds
            )
            held = self.preparer.holding(self.binding.conversation_id, until - time.monotonic())
        with held:
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
            "prepared_published": report.prepared_published,
            "errors": report.errors[-5:],
        }
        for error in report.errors:
            self.store.record_event("warning", "summarizer", error, self.binding.conversation_id)
        self.rollups.after_ingest()  # new summaries re-stale the days they cover
        return report

    def prepare_soon(
        self,
        prompt_tokens: int | None,
        threshold_tokens: int,
        budget: Callable[[], Budget],
        growth: tuple[int, int] = (0, 0),
        user_tokens: int = 0,
    ) -> bool:
        """After a reply: ask the preparer for a run when the prompt passed the preparation point
        (deferred mode, a stored session). Costs a turn a comparison, and a request when due;
        ``budget`` (the one compress will compute) is only worked out then.
        ``growth`` is what the last turn added (tokens, messages), ``user_tokens`` its user
        message: the run plans for the turns still to come (:class:`~.compaction.prepare.Ahead`),
        so what it makes is what that compaction takes: whole leaf chunks while it is turns away,
        then, in the last turns, what it condenses and the chunk the tail cuts."""
        preparer, conversation = self.preparer, self.binding.conversation_id
        if (
            preparer is None
            or conversation is None
            or not self.writable
            or not preparer.due(prompt_tokens, threshold_tokens)
        ):
            return False
        prompt = prompt_tokens or 0
        ahead = ahead_of(prompt, threshold_tokens, growth, user_tokens)
        if not preparer.wanted(conversation, ahead, prompt):
            return False
        preparer.ask(conversation, self.binding.session_id, budget(), ahead)
        return True

    def assemble(self, budget: Budget, upto: int | None = None) -> list[dict[str, Any]]:
        """The prompt from the store: context summaries, pinned request, fresh tail;
        with ``upto``, no raw message (nor request) stored after that seq."""
        return self.assemble_read(budget, upto)[1]

    def assemble_read(
        self, budget: Budget, upto: int | None = None
    ) -> tuple[ConversationState, list[dict[str, Any]]]:
        """:meth:`assemble`, with the conversation's row it was built from (one store call)."""
        conversation_id = self._conversation()
        # A message costs at least MESSAGE_OVERHEAD_TOKENS, so no more rows than this can fit.
        window = max(256, budget.total // MESSAGE_OVERHEAD_TOKENS)
        state, raw, nodes, pinned = self.items.prompt(conversation_id, window, upto)
        return state, with_whole_outputs(
            lambda items: build(
                nodes, items, budget, pinned, header=self.seal.header(str(conversation_id))
            ),
            raw,
            self.guard,
            self.store.granted_refs,
        )

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
        The host's list is normalized here, once, for every path below.
        """
        self.kept_reason = None
        host = HostList(messages, self.seal)
        with self.normalizer.reading(host):
            if not self.writable:
                return self.compress_unstored(host, budget, focus=focus, deadline=deadline)
            return self._compress(host, budget, force, focus, deadline)

    def _compress(
        self,
        host: HostList,
        budget: Budget,
        force: bool,
        focus: str | None,
        deadline: float | None,
    ) -> list[dict[str, Any]]:
        if deadline is None:  # the whole call, ingest included (the host adapter starts it earlier)
            deadline = time.monotonic() + self.config.compaction_max_seconds
        try:
            self._ingest(host, "", deadline)
        except WriteFailed as exc:
            self._write_failed("compress", exc)
            return self.keep_unstored(host, budget)
        if (
            self.memory.pending is not None
        ):  # time ran out storing a huge list: the rest stays in it
            return self._keep_backlog(host, budget)
        upto = self.position
        if upto is None and host.last() is None:
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
        # Read once: assembly and what it ends at.
        state, result = self.assemble_read(budget, upto)
        self._assembly_seconds = time.monotonic() - started
        same = same_prompt(self.normalizer, result, host)
        if report is not None:  # the record lcm view draws: the prompt before and after
            timeline.record(
                self.store,
                state.id,
                host.messages,
                result,
                self.seal,
                report,
                budget,
                force,
                not same,
            )
        if same:
            return list(host.messages)
        by_message = self.items.by_message()
        self.memory.remember_output(result, by_message, state.id, upto, state.last_seq)
        return result

    def compress_unstored(
        self,
        host: HostList,
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
            return self.summarizer(sources, 0, target, focus, end)

        return unstored_prompt(
            host,
            budget,
            self.retention,
            summary,
            self.unstored_compressor,
            focus,
            self.stats.error,
        )

    def _conversation(self) -> int:
        assert self.binding.conversation_id is not None
        return self.binding.conversation_id

    def keep_unstored(self, host: HostList, budget: Budget) -> list[dict[str, Any]]:
        """The prompt when the host's newest messages may not be stored: the store's context
        with every unstored message appended verbatim, or the host's list unchanged when that
        does not fit, or when it cannot be told which messages are stored.

        The host keeps its list when it gets it back unchanged (no progress) and retries
        later; an unstored message is never dropped, shortened or reordered.
        """
        conversation_id = self._conversation()
        with self.normalizer.reading(host):
            select = self.memory.selection(host, strict=True, limit=None)
            unstored = self.store.probe(conversation_id, select)
        if not unstored:
            return self.assemble(budget)
        # What is remembered still says how much of the host's list is stored (a failed ingest
        # leaves it as it was), so while the host keeps its list the next ingest resumes there.
        self.stats.unstored_messages = len(unstored)
        if select.start is not None and select.follows_newest:
            out = self._with_unstored(conversation_id, host, select.start, budget)
            if out is not None:
                return out
        return self._kept(
            host,
            f"hermes-lcm could not store {len(unstored)} new messages "
            f"({self.stats.last_write_failure or 'store unavailable'}); none was dropped",
        )

    def _keep_backlog(self, host: HostList, budget: Budget) -> list[dict[str, Any]]:
        """The prompt while a huge list is stored over several calls: the store's context with the
        messages not stored yet appended verbatim, else the list unchanged (the host keeps it and
        the next call stores more). Not a failure: nothing is recorded as an error.

        The ingest that stopped knows where (its ``cut``, right after the store's newest row),
        so unlike :meth:`keep_unstored` nothing is aligned again.
        """
        pending = self.memory.pending
        assert pending is not None and pending.cut is not None
        waiting = self.stats.ingest_backlog
        out = self._with_unstored(self._conversation(), host, pending.cut, budget)
        if out is not None:
            return out
        return self._kept(
            host,
            f"hermes-lcm is still storing {waiting} new messages (each call stores what "
            "LCM_COMPACTION_MAX_SECONDS allows); none was dropped",
        )

    def _with_unstored(
        self, conversation_id: int, host: HostList, start: int, budget: Budget
    ) -> list[dict[str, Any]] | None:
        """The store's prompt followed by the unstored messages from ``start`` on, all of them
        verbatim, within ``budget``; None when that cannot be. The store's newest row must stay in
        it too, so the next ingest anchors there and stores exactly those messages."""
        window = max(256, budget.total // MESSAGE_OVERHEAD_TOKENS)
        if len(host) - start > window:  # cannot all fit (each costs at least the overhead)
            return None
        pending = [Item.host(dict(m)) for m in host.storable(start)]
        _, raw, nodes, request = self.items.prompt(conversation_id, window, None)
        pinned = None if any(item.role == "user" for item in pending) else request
        out = build(
            nodes,
            raw + pending,
            budget,
            pinned,
            header=self.seal.header(str(conversation_id)),
        )
        shown = {id(m) for m in out}
        if not raw or not all(id(item.message) in shown for item in pending + raw[-1:]):
            return None
        self.memory.remember_stored_part(out, raw[-1].message, self.binding.conversation_id)
        return out

    def _kept(self, host: HostList, reason: str) -> list[dict[str, Any]]:
        self.kept_reason = reason
        return list(host.messages)

    def fallback(self, messages: Sequence[Any], budget: Budget) -> list[dict[str, Any]]:
        """The prompt after an internal error: bounded where that drops no unstored message.

        Sessions that store nothing by configuration are trimmed as always. Otherwise what
        the store holds decides; when even that cannot be read, what is remembered of the
        stored list (:meth:`_without_store`), and failing that the list stays as it is.
        """
        self.kept_reason = None
        host = HostList(messages, self.seal)
        if not self.writable:  # no summary after an error: no new failure
            return trimmed(host, budget, self.retention)
        try:
            return self.keep_unstored(host, budget)
        except Exception as exc:  # noqa: BLE001 - the store or the assembler is what failed
            reason = f"hermes-lcm store unavailable ({exc.__class__.__name__}: {exc}); no message was dropped"
            self.stats.error(reason)
        try:
            out = self._without_store(host, budget)
        except Exception as exc:  # noqa: BLE001 - what is remembered did not hold: keep the list
            self.stats.error(
                f"hermes-lcm prompt without the store: {exc.__class__.__name__}: {exc}"
            )
            out = None
        return out if out is not None else self._kept(host, reason)

    def _without_store(self, host: HostList, budget: Budget) -> list[dict[str, Any]] | None:
        """The prompt while the store can be neither read nor written: the newest of the host's
        messages that fit, where only messages known stored without the store
        (:meth:`ListMemory.stored_prefix`) may be left out and every other one stays verbatim;
        None when that cannot be within ``budget`` (the list then stays as it is).

        A host that re-sends its whole history every turn (the gateway shape) would otherwise
        get it all back, over its budget, for as long as the outage lasts. The host may go on
        with this prompt or with its own list; the next ingest that stores resumes from either.
        """
        with self.normalizer.reading(host):
            known = self.memory.stored_prefix(host)
        if known is None:
            return None
        count, seen = known
        indexes = [i for i in range(len(host)) if host.is_storable(i)]
        items = [Item.host(dict(host.messages[i]), ref=i + 1) for i in indexes]
        stored = [item for i, item in zip(indexes, items, strict=True) if i < count]
        unstored = [item for i, item in zip(indexes, items, strict=True) if i >= count]
        if not stored:
            return None
        out = build(
            [],
            items,
            budget,
            newest_request(items),
            retention=Retention.STORED,
            header=self.seal.header(str(self._conversation())),
        )
        shown = {id(m): at for at, m in enumerate(out)}
        if all(id(item.message) in shown for item in items) or not all(
            id(item.message) in shown for item in [*unstored, stored[-1]]
        ):
            return None  # nothing left out, or an unstored message (or the anchor) would not fit
        self.memory.remember_prefix(out, shown[id(stored[-1].message)] + 1, seen.stored)
        return out

    # -- reporting ------------------------------------------------------------

    def conversation_state(self) -> ConversationState | None:
        if self.binding.conversation_id is None:
            return None
        return self.store.conversation(self.binding.conversation_id)

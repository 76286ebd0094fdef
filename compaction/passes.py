"""Compaction: plan and run leaf and condensation passes until the prompt fits.

Each pass either moves the frontier forward (a leaf pass turns the oldest raw
chunk outside the fresh tail into a depth-0 node), shrinks the summary prefix
(a condensation pass turns a run of same-depth nodes into one node a level
deeper), or takes the oldest summary out of the active context (only when
nothing can be condensed at the depth cap; the node stays in the DAG). A call
makes at most ``max_passes`` passes and each pass makes progress or the loop
stops and says why, so compaction never loops.

Time is bounded too: no pass starts once the call's deadline (``max_seconds``
after the host call began) has passed, except the first, which then summarizes
deterministically (the summarizer skips LLM routes after the deadline). What a
pass reads and summarizes is bounded in size (row windows, MAX_SUMMARY_INPUT_CHARS),
so the overshoot is one bounded pass; assembly then trims whatever is still over.

Summarizing happens outside any transaction. The result is published only if
the conversation's context did not change meanwhile (another process may be
compacting the same conversation); otherwise it is dropped and the loop re-plans.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from ..base.records import NewNode, PreparedSummary, StoredMessage, SummaryNode
from ..base.tokens import count_tokens
from ..dag import Dag
from ..prompt.assemble import SUMMARY_WRAPPER_TOKENS, tail_start
from ..prompt.blocks import Item, group
from ..prompt.budget import Budget
from ..store import Store
from .prepare import NOW, Ahead, PreparedSummaries, fits
from .sources import MAX_SUMMARY_INPUT_CHARS, fit_sources, message_source
from .summarize import SourceItem, SummaryOutcome

SummarizeFn = Callable[
    [Sequence[SourceItem], int, int, "str | None", "float | None"], SummaryOutcome
]

MAX_CONDENSE_FANOUT = 8
# Summary levels that are a model's answer (summarize.py): a preparation keeps those.
LLM_LEVELS = frozenset({"normal", "aggressive"})
# Rows a pass reads from the oldest end of the raw backlog (a leaf chunk comes from these).
OLDEST_WINDOW = 2048


@dataclass(frozen=True)
class CompactionSettings:
    leaf_chunk_tokens: int
    max_depth: int
    condense_min_nodes: int
    max_passes: int
    max_seconds: float


@dataclass
class CompactionReport:
    leaf_passes: int = 0
    condense_passes: int = 0
    evicted: int = 0
    conflicts: int = 0
    stop_reason: str = ""
    nodes: list[int] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    prepared_published: int = 0  # nodes written from prepared summaries, without a call
    waiting: bool = False  # stopped where a call would be needed: the next preparation makes it

    @property
    def passes(self) -> int:
        return self.leaf_passes + self.condense_passes + self.evicted


@dataclass
class _Overlay:
    """The conversation as a preparation sees it: the store's rows, with the frontier and context
    its own passes would have published (virtual nodes have negative ids)."""

    frontier: int
    context: list[SummaryNode]
    made: int = 0


@dataclass(frozen=True)
class _Plan:
    """One pass's view: the context, the size of the raw backlog, and its oldest rows
    outside the fresh tail (read in a bounded window, whatever the backlog's length)."""

    frontier: int
    context: list[SummaryNode]
    raw_tokens: int
    oldest: list[StoredMessage]
    compactable: list[list[Item]]

    @property
    def summary_tokens(self) -> int:
        return sum(n.tokens for n in self.context)

    @property
    def total_tokens(self) -> int:
        return self.summary_tokens + self.raw_tokens


def _cut_block_start(oldest: Sequence[StoredMessage]) -> int | None:
    """Where the tool-call block the window's edge cuts starts, when something comes before it.

    That block cannot be summarized from this window and is left for a later pass; it is not
    grouped at all, since checking a call message with 100k calls takes longer than a pass may.
    """
    k = len(oldest)
    while k and oldest[k - 1].role == "tool":
        k -= 1
    if 0 < k < len(oldest) and oldest[k - 1].role == "assistant" and oldest[k - 1].tool_calls:
        return k - 1 if k > 1 else None
    return None


class Compactor:
    def __init__(
        self,
        store: Store,
        dag: Dag,
        settings: CompactionSettings,
        summarize: SummarizeFn,
        prepared: PreparedSummaries | None = None,
    ) -> None:
        self.store, self.dag, self.settings, self.summarize = store, dag, settings, summarize
        self.prepared = prepared  # None: compaction inline only (no lookups, nothing prepared)
        self._budget = Budget(total=0, goal=0, summaries=0, tail_count=0, tail_tokens=0)
        self._overlay: _Overlay | None = None  # set while this compactor prepares (prepare.py)
        # The smallest chunk cut by the fresh tail a preparation makes (Ahead.cut_chunk_tokens).
        self._cut_from: int | None = None

    def run(
        self,
        conversation_id: int,
        session_id: str,
        budget: Budget,
        *,
        force: bool = False,
        focus: str | None = None,
        upto: int | None = None,
        deadline: float | None = None,
    ) -> CompactionReport:
        """Passes until the context is within the goal, stuck, out of passes or out of time.

        With ``upto``, the conversation is taken to end at that seq: the fresh tail is counted
        back from it and nothing after it is summarized (the host keeps those messages itself).
        ``deadline`` (a ``time.monotonic()`` value) is when the host call must be done;
        by default ``max_seconds`` from now.
        """
        with self.store.compaction_slot(conversation_id) as ours:
            if not ours:  # another writer is compacting it: the prompt is assembled from the store
                return CompactionReport(
                    stop_reason="another writer is compacting this conversation"
                )
            report = self._run(conversation_id, session_id, budget, force, focus, upto, deadline)
            if self.prepared is not None and report.nodes:
                self.prepared.counts.published += report.prepared_published
                self.prepared.tidy(
                    conversation_id, self.store.conversation(conversation_id).frontier_seq
                )
            return report

    def prepare(
        self,
        conversation_id: int,
        session_id: str,
        budget: Budget,
        *,
        stopping: Callable[[], bool],
        deadline: float,
        ahead: Ahead = NOW,
    ) -> str:
        """Make now, as prepared summaries, what the compaction to ``budget`` will summarize once
        the conversation grew by ``ahead`` (below the goal by its tokens); publish nothing.
        Returns why it stopped. Passes already prepared cost no call (their key is found), so a
        run after a run prepares only what is new.

        A leaf is made over a whole chunk (one the next group would overflow): its rows are then
        exactly those a compaction's pass takes from the same frontier, whenever it runs. The
        chunk the fresh tail still cuts is left for a later run, once the turns after it have
        grown it: made sooner it would cover only the turns so far, and the calls would
        outnumber inline compaction's. Only the last run before the compaction
        (:attr:`Ahead.last`) makes it, up to where the tail will cut it then; the compaction
        takes it whole, or as the first rows of its own chunk when the tail moved further than
        the last turn's size predicted. A run while the compaction is still turns away
        (:attr:`Ahead.early`) makes the whole chunks outside today's tail and nothing else: a
        user whose pauses fit a call or two gets the leaves made over many of them, and only
        what condenses (which depends on where that compaction stops) is left for the last."""
        if self.prepared is None:
            return "preparation is off"
        state = self.store.conversation(conversation_id)
        self._overlay = _Overlay(state.frontier_seq, list(self.dag.context(conversation_id)))
        self._budget = budget
        # The last run before the compaction also makes the chunk the fresh tail cuts.
        self._cut_from = ahead.cut_chunk_tokens
        planned = ahead.budget(budget)
        report = CompactionReport()
        try:
            while report.passes < self.settings.max_passes:
                if stopping():
                    return "stopped: the engine is closing, or a compaction began"
                if time.monotonic() >= deadline:
                    return "time limit reached; the next run goes on"
                plan = self._sized(conversation_id, None)
                if plan.total_tokens <= planned.goal:
                    return f"ready: {report.passes} passes prepared or found"
                plan = self._with_backlog(plan, conversation_id, planned, None)
                if ahead.early:  # leaves only: a chunk's rows are the same whenever it is made
                    if not plan.compactable:
                        return (
                            f"ready: {report.passes} leaves prepared or found; what is condensed "
                            "is prepared in the last turns before the compaction"
                        )
                    step: Callable[..., None] | None = self._leaf
                else:
                    step = self._next_step(plan, budget, False)
                if step is None:
                    return self._stuck_reason(plan, True)
                step(conversation_id, session_id, plan, report, None, deadline)
                if report.waiting:
                    return report.stop_reason
            return f"pass limit {self.settings.max_passes} reached"
        finally:
            self._overlay = None

    def _run(
        self,
        conversation_id: int,
        session_id: str,
        budget: Budget,
        force: bool,
        focus: str | None,
        upto: int | None,
        deadline: float | None,
    ) -> CompactionReport:
        report = CompactionReport()
        self._budget = budget
        deadline = time.monotonic() + self.settings.max_seconds if deadline is None else deadline
        longest = 0.0  # a pass is not started unless one as long as the longest so far still fits
        while report.passes + report.conflicts < self.settings.max_passes:
            started = time.monotonic()
            if report.passes + report.conflicts and started + longest >= deadline:
                report.stop_reason = (
                    f"time limit {self.settings.max_seconds:g}s reached; "
                    "assembly trims the rest to the budget"
                )
                return report
            plan = self._sized(conversation_id, upto)
            over = plan.total_tokens > budget.goal
            if not over and not (force and report.passes == 0):
                report.stop_reason = "within budget"  # the usual last pass: no backlog rows read
                return report
            plan = self._with_backlog(plan, conversation_id, budget, upto)
            step = self._next_step(plan, budget, force and report.passes == 0)
            if step is None:
                report.stop_reason = self._stuck_reason(plan, over)
                return report
            step(conversation_id, session_id, plan, report, focus, deadline)
            if report.waiting:
                return report
            longest = max(longest, time.monotonic() - started)
        report.stop_reason = f"pass limit {self.settings.max_passes} reached"
        return report

    # -- planning ---------------------------------------------------------------

    def _plan(self, conversation_id: int, budget: Budget, upto: int | None = None) -> _Plan:
        return self._with_backlog(self._sized(conversation_id, upto), conversation_id, budget, upto)

    def _sized(self, conversation_id: int, upto: int | None) -> _Plan:
        """The plan's sizes only (context and raw backlog tokens): enough to tell whether a pass is due."""
        overlay = self._overlay
        if overlay is not None:
            frontier, context = overlay.frontier, list(overlay.context)
        else:
            frontier = self.store.conversation(conversation_id).frontier_seq
            context = self.dag.context(conversation_id)
        return _Plan(
            frontier,
            context,
            self.store.raw_tokens(conversation_id, frontier, upto),
            [],
            [],
        )

    def _with_backlog(
        self, plan: _Plan, conversation_id: int, budget: Budget, upto: int | None
    ) -> _Plan:
        """``plan`` with the oldest rows outside the fresh tail and their groups (what a leaf pass takes)."""
        frontier = plan.frontier
        tail_first = self._tail_first_seq(conversation_id, frontier, budget, upto)
        oldest = self.store.messages_after(conversation_id, frontier, OLDEST_WINDOW)
        complete = len(oldest) < OLDEST_WINDOW
        oldest = [m for m in oldest if m.seq < tail_first]
        cut = None if complete else _cut_block_start(oldest)
        groups = group([Item.stored(m) for m in oldest[:cut]])
        if not complete and cut is None and len(groups) > 1:
            groups = groups[:-1]  # the window may end inside a tool-call group
        return replace(plan, oldest=oldest, compactable=groups)

    def _tail_first_seq(
        self, conversation_id: int, frontier: int, budget: Budget, upto: int | None = None
    ) -> int:
        """Where the protected fresh tail starts, from a window of the newest rows (up to ``upto``)."""
        newest = self.store.messages_newest(
            conversation_id, frontier, budget.tail_count * 2 + 64, upto
        )
        while newest and newest[0].role == "tool":
            newest = newest[1:]  # a group cut by the window's edge cannot be in the tail
        groups = group([Item.stored(m) for m in newest])
        start = tail_start(groups, budget.tail_count, budget.tail_tokens)
        if start < len(groups):
            seq_of = {m.id: m.seq for m in newest}
            return min(seq_of[item.store_id] for item in groups[start] if item.store_id in seq_of)
        return newest[-1].seq + 1 if newest else frontier + 1

    def _next_step(self, plan: _Plan, budget: Budget, forced: bool) -> Callable[..., None] | None:
        if plan.summary_tokens > budget.summaries and self._condensable(plan.context) is not None:
            return self._condense
        if plan.compactable:
            return self._leaf
        if (plan.summary_tokens > budget.summaries or forced) and self._condensable(
            plan.context
        ) is not None:
            return self._condense
        if plan.summary_tokens > budget.summaries and len(plan.context) > 1:
            return self._evict
        return None

    def _stuck_reason(self, plan: _Plan, over: bool) -> str:
        if not over:
            return "forced, but nothing outside the fresh tail to compact"
        if not plan.raw_tokens and not plan.context:
            return "nothing stored for this conversation"
        return (
            "over goal, but the rest is the protected fresh tail and the summaries fit their budget; "
            "assembly trims the tail to the hard budget"
        )

    def _condensable(self, context: Sequence[SummaryNode]) -> tuple[int, int] | None:
        """(start, end) of the nodes to condense, all below the depth cap: the oldest run
        of at least ``condense_min_nodes`` same-depth nodes, else the oldest such run of
        2, else the oldest adjacent pair of any depths (better than evicting one)."""
        runs = []
        i = 0
        while i < len(context):
            j = i
            while j < len(context) and context[j].depth == context[i].depth:
                j += 1
            if j - i >= 2 and not self._capped(context[i].depth):
                runs.append((i, j))
            i = j
        if runs:
            start, end = next(
                (r for r in runs if r[1] - r[0] >= self.settings.condense_min_nodes), runs[0]
            )
            return start, min(end, start + MAX_CONDENSE_FANOUT)
        for k in range(len(context) - 1):
            if not self._capped(max(context[k].depth, context[k + 1].depth)):
                return k, k + 2
        return None

    def _capped(self, depth: int) -> bool:
        return 0 <= self.settings.max_depth <= depth

    # -- passes -------------------------------------------------------------------

    def _leaf(
        self,
        conversation_id: int,
        session_id: str,
        plan: _Plan,
        report: CompactionReport,
        focus: str | None,
        deadline: float,
    ) -> None:
        chunk: list[Item] = []
        tokens = 0
        whole = False  # the next group overflows the chunk: it ends here whatever comes later
        for g in plan.compactable:
            if chunk and tokens + sum(i.tokens for i in g) > self.settings.leaf_chunk_tokens:
                whole = True
                break
            chunk.extend(g)
            tokens += sum(i.tokens for i in g)
        item_tokens = {i.store_id: i.tokens for i in chunk}
        last_seq = max(m.seq for m in plan.oldest if m.id in item_tokens)
        # Everything up to last_seq leaves the raw context, including rows no group replays
        # (orphan tool results, unknown roles), so each one is linked to this node.
        covered = [m for m in plan.oldest if m.seq <= last_seq]
        target = _target(tokens, 4, self._budget.summaries // 4)
        sources = fit_sources([message_source(m) for m in covered], MAX_SUMMARY_INPUT_CHARS)
        found = self._prepared_leaf(conversation_id, covered, item_tokens, focus)
        if (
            found is None
            and self._overlay is not None
            and not whole
            and (self._cut_from is None or tokens < self._cut_from)
        ):
            report.waiting = True
            report.stop_reason = (
                "ready up to the chunk the fresh tail still cuts; it is made once whole"
            )
            return
        if found is not None and self.prepared is not None:
            covered, prepared = found
            report.prepared_published += self._overlay is None
            made: tuple[SummaryOutcome, int | None] | None = (
                self.prepared.outcome(prepared),
                prepared.id,
            )
        else:
            made = self._made(
                conversation_id,
                plan,
                report,
                (sources, 0, target, focus, deadline),
                (covered[0].seq, last_seq),
            )
        if made is None:
            return
        outcome, prepared_id = made
        last_seq = covered[-1].seq
        node = NewNode.over_messages(
            covered,
            conversation_id=conversation_id,
            session_id=session_id,
            content=outcome.text,
            tokens=_node_tokens(outcome.text),
            level=outcome.level,
            route=outcome.route,
        )
        context_ids = [n.id for n in plan.context]
        if self._overlay is not None:
            self._overlay.frontier = last_seq
            self._overlay.context = [*plan.context, self._virtual(node)]
            report.leaf_passes += 1
        elif self._publish(
            conversation_id,
            plan,
            node,
            lambda nid: [*context_ids, nid],
            last_seq,
            report,
            prepared_id,
        ):
            report.leaf_passes += 1
        report.errors.extend(outcome.errors)

    def _prepared_leaf(
        self,
        conversation_id: int,
        covered: list[StoredMessage],
        item_tokens: dict[int | None, int],
        focus: str | None,
    ) -> tuple[list[StoredMessage], PreparedSummary] | None:
        """A prepared leaf over this chunk, or over its first rows (the longest that is): made
        from exactly those rows, as they are stored now, under these settings. A preparation
        takes it too, so a later run goes on after it instead of summarizing its rows again."""
        if self.prepared is None or not covered:
            return None
        first, last = covered[0].seq, covered[-1].seq
        candidates = [
            p
            for p in self.store.prepared_summaries(conversation_id)
            if p.depth == 0 and p.first_seq == first and p.last_seq <= last
        ]
        for candidate in sorted(candidates, key=lambda p: -p.last_seq):
            part = [m for m in covered if m.seq <= candidate.last_seq]
            sources = fit_sources([message_source(m) for m in part], MAX_SUMMARY_INPUT_CHARS)
            target = _target(
                sum(item_tokens.get(m.id, 0) for m in part), 4, self._budget.summaries // 4
            )
            if self.prepared.key(sources, 0, focus) == candidate.key and fits(candidate, target):
                return part, candidate  # the row is in hand: no second read of it
        return None

    def _made(
        self,
        conversation_id: int,
        plan: _Plan,
        report: CompactionReport,
        call: tuple[list[SourceItem], int, int, str | None, float],
        span: tuple[int, int],
    ) -> tuple[SummaryOutcome, int | None] | None:
        """The summary a pass needs and the prepared row it came from (None: made now). Looked up
        by key (a condensation, or a preparation finding its own earlier work), else made by a
        call. A
        compaction that published prepared summaries and is at most halfway from its goal to its
        budget waits instead (None: a few turns remain before the next threshold), and
        a preparation keeps what it made, an answer the model gave on a second try included
        (inline compaction would have made the same calls and taken it); one that got no answer
        at all stops (the next run tries again) rather than keep a truncation that inline
        compaction, once the model answers again, could still do better."""
        sources, depth, target, focus, deadline = call
        prepared = self.prepared
        key = prepared.key(sources, depth, focus) if prepared is not None else ""
        if prepared is not None:
            found = prepared.find(conversation_id, key, target)
            if found is not None:
                report.prepared_published += self._overlay is None
                return prepared.outcome(found), found.id
            if (
                self._overlay is None
                and report.prepared_published
                and plan.total_tokens <= (self._budget.goal + self._budget.total) // 2
            ):
                report.waiting = True
                report.stop_reason = (
                    f"{report.prepared_published} prepared summaries published and the prompt fits; "
                    "the rest is prepared after the next reply"
                )
                return None
        outcome = self.summarize(sources, depth, target, focus, deadline)
        if self._overlay is not None and prepared is not None:
            if outcome.errors and outcome.level not in LLM_LEVELS:
                report.waiting = True
                report.stop_reason = f"a summary call failed ({outcome.errors[-1]}); not kept"
                return None
            prepared.keep(
                conversation_id,
                key,
                depth=depth,
                span=span,
                target=target,
                outcome=outcome,
                tokens=_node_tokens(outcome.text),
            )
        return outcome, None

    def _virtual(self, node: NewNode) -> SummaryNode:
        """``node`` as the preparation's overlay holds it (never written)."""
        assert self._overlay is not None
        self._overlay.made += 1
        return SummaryNode(
            id=-self._overlay.made,
            conversation_id=node.conversation_id,
            session_id=node.session_id,
            depth=node.depth,
            content=node.content,
            tokens=node.tokens,
            first_seq=node.first_seq,
            last_seq=node.last_seq,
            earliest_at=node.earliest_at,
            latest_at=node.latest_at,
            source_tokens=node.source_tokens,
            level=node.level,
            route=node.route,
            created_at=0.0,
        )

    def _condense(
        self,
        conversation_id: int,
        session_id: str,
        plan: _Plan,
        report: CompactionReport,
        focus: str | None,
        deadline: float,
    ) -> None:
        span = self._condensable(plan.context)
        assert span is not None
        start, end = span
        run = plan.context[start:end]
        # Labels name what a source covers, not its node id: a preparation condenses nodes that
        # have no id yet, and the key of its summary must be the one the compaction computes.
        sources = fit_sources(
            [SourceItem(f"d{n.depth} seq {n.first_seq}..{n.last_seq}", n.content) for n in run],
            MAX_SUMMARY_INPUT_CHARS,
        )
        tokens = sum(n.tokens for n in run)
        depth = max(n.depth for n in run) + 1
        target = _target(tokens, 2, self._budget.summaries // 2)
        made = self._made(
            conversation_id,
            plan,
            report,
            (sources, depth, target, focus, deadline),
            (run[0].first_seq, run[-1].last_seq),
        )
        if made is None:
            return
        outcome, prepared_id = made
        node = NewNode.over_nodes(
            run,
            conversation_id=conversation_id,
            session_id=session_id,
            content=outcome.text,
            tokens=_node_tokens(outcome.text),
            level=outcome.level,
            route=outcome.route,
        )
        ids = [n.id for n in plan.context]
        if self._overlay is not None:
            self._overlay.context = [
                *plan.context[:start],
                self._virtual(node),
                *plan.context[end:],
            ]
            report.condense_passes += 1
        elif self._publish(
            conversation_id,
            plan,
            node,
            lambda nid: [*ids[:start], nid, *ids[end:]],
            plan.frontier,
            report,
            prepared_id,
        ):
            report.condense_passes += 1
        report.errors.extend(outcome.errors)

    def _evict(
        self,
        conversation_id: int,
        session_id: str,
        plan: _Plan,
        report: CompactionReport,
        focus: str | None,
        deadline: float,
    ) -> None:
        """Take the oldest summary out of the active context; the DAG keeps it."""
        if self._overlay is not None:
            self._overlay.context = plan.context[1:]
            report.evicted += 1
            return
        with self.store.write():
            if not self._unchanged(conversation_id, plan):
                report.conflicts += 1
                return
            self.dag.publish(conversation_id, [n.id for n in plan.context[1:]], plan.frontier)
        report.evicted += 1
        self.store.record_event(
            "info",
            "context_evict",
            f"{plan.context[0].node_id} left the active context: the summaries are over "
            "budget and none can be condensed below the depth cap (still stored, searchable)",
            conversation_id,
        )

    def _publish(
        self,
        conversation_id: int,
        plan: _Plan,
        node: NewNode,
        items: Callable[[int], list[int]],
        frontier: int,
        report: CompactionReport,
        prepared_id: int | None = None,
    ) -> bool:
        """Write the node and the new context in one transaction, only if nothing changed since the
        plan; a prepared summary it was written from leaves the prepared table in the same one."""
        with self.store.write():
            if not self._unchanged(conversation_id, plan):
                report.conflicts += 1
                return False
            node_id = self.dag.add_node(node)
            self.dag.publish(conversation_id, items(node_id), frontier)
            if prepared_id is not None:
                self.store.take_prepared(prepared_id)
        report.nodes.append(node_id)
        return True

    def _unchanged(self, conversation_id: int, plan: _Plan) -> bool:
        state = self.store.conversation(conversation_id)
        current = [n.id for n in self.dag.context(conversation_id)]
        return state.frontier_seq == plan.frontier and current == [n.id for n in plan.context]


def _target(source_tokens: int, ratio: int, share: int) -> int:
    """Summary size: 1/ratio of the source, at most 2,400 tokens and at most ``share``
    (a slice of the summary budget, so several summaries fit the prompt together)."""
    return max(64, min(2400, source_tokens // ratio, share))


def _node_tokens(text: str) -> int:
    """What the node costs in the prompt, wrapper included."""
    return count_tokens(text) + SUMMARY_WRAPPER_TOKENS

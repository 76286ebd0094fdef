"""The preparer: the job that makes a conversation's next compaction ahead of it (prepare.py
says how prepared summaries are keyed and published).

A reply's ingest asks it for a run (:meth:`Preparer.ask`, microseconds); its thread runs the
compactor's :meth:`~.passes.Compactor.prepare` on a compactor of its own, so the host's compress
and a preparation never share a plan. One preparation per conversation at a time across every
host on the database: it holds the conversation's preparation slot (``Store.compaction_slot``
under the negated id, apart from compaction's own, so a compaction never waits for it). A
compaction that would make a summary the preparer is making right now waits for that call to
end (:meth:`Preparer.wait`), at most as long as its own time bound: the turn never waits longer
than the same call made inline.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from ..base.jobs import BackgroundJob
from .passes import Compactor
from .prepare import NOW, Ahead

# How a run that stopped on a failed summary call says so (passes.Compactor._made).
FAILED = "a summary call failed"
# A preparation run's own bound: many calls, none in anyone's turn.
RUN_SECONDS = 600.0


@dataclass(frozen=True)
class PrepareRequest:
    """What a reply asked to prepare: the conversation and the budget its compaction will use."""

    conversation_id: int
    session_id: str
    budget: Any  # prompt.budget.Budget (not imported: the job runs the compactor's own call)
    ahead: Ahead = NOW  # what the conversation adds before that compaction


@dataclass
class RunCounts:
    """The preparer's runs in this process and how the last one ended (status shows them)."""

    runs: int = 0
    last_run_at: float | None = None
    last_error: str = ""
    last_stop: str = ""

    def view(self) -> dict[str, Any]:
        return {
            "runs": self.runs,
            "last_run_at": self.last_run_at,
            "last_stop": self.last_stop,
            "last_error": self.last_error or None,
        }


class PrepareJob(BackgroundJob):
    """The preparation after each reply past the preparation point, on its own thread.

    Requests coalesce per conversation (the newest budget wins); a run prepares what the
    conversation's next compaction would do now. Closing never waits for a run under way: the
    thread is a daemon, its writes are single transactions, and what it did not finish is
    prepared again by the next run or compacted inline."""

    name = "hermes-lcm-prepare"

    def __init__(self, run_one: Callable[[PrepareRequest, Callable[[], bool]], str]) -> None:
        super().__init__()
        self.run_one = run_one
        self._pending: dict[int, PrepareRequest] = {}
        self._pending_lock = threading.Lock()
        self._active = False
        self.counts = RunCounts()

    def ask(self, request: PrepareRequest) -> None:
        with self._pending_lock:
            self._pending[request.conversation_id] = request
        self.request()

    def pending(self) -> bool:
        """Whether a request waits or a run is under way."""
        with self._pending_lock:
            return bool(self._pending) or self._active

    def step(self) -> None:
        while True:
            with self._pending_lock:
                if not self._pending or self._stopping:
                    self._active = False
                    return
                _, request = self._pending.popitem()
                self._active = True
            self.counts.runs += 1
            self.counts.last_run_at = time.time()
            try:
                self.counts.last_stop = self.run_one(request, lambda: self._stopping)
                self.counts.last_error = ""
            except Exception as exc:  # kept for status and doctor, then the job's errors
                self.counts.last_error = f"{type(exc).__name__}: {exc}"
                with self._pending_lock:
                    self._active = False
                raise

    def stop(self) -> None:
        """Ask the thread to end after its current call; never wait for it (a summary call may
        take minutes, and a session's end or the CLI's exit must not)."""
        self._stopping = True
        self._wake.set()


class Preparer:
    """A conversation's next compaction, prepared between turns."""

    def __init__(self, compactor: Compactor, prepare_at_ratio: float) -> None:
        self.compactor = compactor
        self.prepare_at_ratio = prepare_at_ratio
        self.job = PrepareJob(self._run)
        self.busy_with: int | None = None
        self._idle = threading.Condition()
        self._yielding: set[int] = set()  # conversations a compaction has started on
        self._early: dict[int, int] = {}  # the prompt figure at each conversation's last early ask

    def due(self, prompt_tokens: int | None, threshold_tokens: int) -> bool:
        """Whether the prompt passed the preparation point (a comparison: free on every turn)."""
        return (
            bool(prompt_tokens)
            and bool(threshold_tokens)
            and (
                prompt_tokens >= self.prepare_at_ratio * threshold_tokens  # type: ignore[operator]
            )
        )

    def wanted(self, conversation_id: int, ahead: Ahead, prompt_tokens: int) -> bool:
        """Whether a run is worth asking for. While the compaction is turns away a run makes whole
        leaf chunks only, and none can have left the fresh tail since the last such run until the
        prompt grew by half a chunk: until then the run would only re-read the conversation (on
        a thread of its own, but in the process whose next turn may be starting)."""
        if not ahead.early:
            self._early.pop(conversation_id, None)
            return True
        last = self._early.get(conversation_id)
        half = self.compactor.settings.leaf_chunk_tokens // 2
        if last is not None and last <= prompt_tokens < last + half:
            return False
        self._early[conversation_id] = prompt_tokens
        return True

    def ask(self, conversation_id: int, session_id: str, budget: Any, ahead: Ahead = NOW) -> None:
        self.job.ask(PrepareRequest(conversation_id, session_id, budget, ahead))

    def settle(self, timeout: float) -> bool:
        """Until nothing is asked or running (True), at most ``timeout`` s: for a caller that must
        see what the preparations made (a test, a benchmark's user who pauses)."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.busy_with is None and not self.job.pending():
                return True
            time.sleep(0.01)
        return False

    @contextlib.contextmanager
    def holding(self, conversation_id: int, timeout: float) -> Iterator[None]:
        """While a compaction runs on ``conversation_id``: the run under way there (if any) ends
        after its current call, and this first waits for that call, at most ``timeout`` s. Its
        summary is then found by the compaction, so the turn waits for the rest of one call where
        inline compaction would have made it whole. A run that starts meanwhile (one the job had
        taken before the compaction began) stops before its first call: none makes a summary the
        compaction is making too."""
        end = time.monotonic() + max(0.0, timeout)
        with self._idle:
            self._yielding.add(conversation_id)
        try:
            with self._idle:
                while self.busy_with == conversation_id and time.monotonic() < end:
                    self._idle.wait(end - time.monotonic())
            yield
        finally:
            with self._idle:
                self._yielding.discard(conversation_id)

    def _run(self, request: PrepareRequest, stopping: Callable[[], bool]) -> str:
        store = self.compactor.store
        with store.compaction_slot(-request.conversation_id) as ours:
            if not ours:
                return "another preparer is preparing this conversation"
            with self._idle:
                self.busy_with = request.conversation_id
            try:
                stop = self.compactor.prepare(
                    request.conversation_id,
                    request.session_id,
                    request.budget,
                    stopping=lambda: stopping() or request.conversation_id in self._yielding,
                    deadline=time.monotonic() + RUN_SECONDS,
                    ahead=request.ahead,
                )
                if stop.startswith(FAILED):  # doctor and status read it from the events
                    store.record_event("warning", "prepare", stop, request.conversation_id)
                return stop
            finally:
                with self._idle:
                    self.busy_with = None
                    self._idle.notify_all()

    def view(self) -> dict[str, Any]:
        """The preparer for status: its runs (the job's) and what was prepared and published (the
        compactors' shared counts)."""
        shared = self.compactor.prepared
        runs = {"runs": 0, "prepared": 0, "published": 0, **self.job.counts.view()}
        if shared is not None:
            runs.update(prepared=shared.counts.prepared, published=shared.counts.published)
        return {
            "prepare_at_ratio": self.prepare_at_ratio,
            "busy": self.busy_with is not None,
            **runs,
            "job_errors": list(self.job.errors),
        }

    def close(self) -> None:
        self.job.stop()

"""Maintenance off the host's turn: work a turn asks for and a thread of the job's own does.

A turn only requests a job (setting an event costs microseconds); the job's thread runs it,
so no host call waits for maintenance. Requests coalesce: however many arrive while a run is
under way, one more run follows. A run that raises is kept in ``errors`` for status/doctor and
the next request runs again. Today's job is the WAL checkpoint (storage/connection.py); jobs
that fill indexes in the background (vectors, rollups) subclass :class:`BackgroundJob` the same
way, each doing a bounded step per run.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from typing import Any


class BackgroundJob:
    """One job and its thread: started by the first :meth:`request`, ended by :meth:`stop`."""

    name = "hermes-lcm-job"

    def __init__(self) -> None:
        self._wake = threading.Event()
        self._stopping = False
        self._thread: threading.Thread | None = None
        self.runs = 0
        self.errors: deque[str] = deque(maxlen=5)

    def request(self) -> None:
        """Ask for one more run; never blocks."""
        if self._thread is None or not self._thread.is_alive():
            self._stopping = False
            self._thread = threading.Thread(target=self._loop, name=self.name, daemon=True)
            self._thread.start()
        self._wake.set()

    def stop(self) -> None:
        """End the thread after the run under way (waits up to 5 s)."""
        self._stopping = True
        self._wake.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)

    def _loop(self) -> None:
        self.setup()
        try:
            while True:
                self._wake.wait()
                self._wake.clear()
                if self._stopping:
                    return
                try:
                    self.step()
                    self.runs += 1
                except Exception as exc:  # noqa: BLE001 - a job's failure never reaches a turn
                    self.errors.append(f"{self.name}: {type(exc).__name__}: {exc}")
        finally:
            self.teardown()

    # -- what a job defines (all run on the job's thread) -------------------------------------

    def setup(self) -> None:
        """Before the first run: open what the job needs (a connection of its own)."""

    def step(self) -> None:
        """One bounded run."""
        raise NotImplementedError

    def teardown(self) -> None:
        """After the last run: close what :meth:`setup` opened."""


class JobOwner:
    """A family whose work runs on a job of its own (embeddings, rollups, assertions): a turn only
    asks for a run after it stored something, and closing the family ends the job."""

    job: BackgroundJob | None = None

    def after_ingest(self) -> None:
        """Ask the job to handle what was just stored; costs a turn nothing."""
        if self.job is not None:
            self.job.request()

    def close(self) -> None:
        if self.job is not None:
            self.job.stop()

    def job_view(self) -> dict[str, Any] | None:
        """The job's runs and last errors for status (None: the family has no job)."""
        return (
            None if self.job is None else {"runs": self.job.runs, "errors": list(self.job.errors)}
        )


def read_stats(read: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """A family's store statistics for status, or the error that kept them: status never fails."""
    try:
        return read()
    except Exception as exc:  # noqa: BLE001 - status never fails
        from .redact import clip  # lazily: the redactor's patterns cost a cold start ~15 ms

        return {"error": clip(str(exc), 200)}

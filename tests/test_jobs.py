"""Maintenance off the turn (jobs.py): a request never runs the job on the caller's thread,
requests coalesce, a failing run is recorded and the next request runs again."""

from __future__ import annotations

import threading

from hermes_lcm.base.jobs import BackgroundJob


class Recorder(BackgroundJob):
    name = "test-job"

    def __init__(self, fail_first: bool = False) -> None:
        super().__init__()
        self.threads: list[str] = []
        self.fail_first = fail_first
        self.gate = threading.Event()
        self.lifecycle: list[str] = []

    def setup(self) -> None:
        self.lifecycle.append("setup")

    def step(self) -> None:
        self.gate.wait(5)
        self.threads.append(threading.current_thread().name)
        if self.fail_first and len(self.threads) == 1:
            raise RuntimeError("disk went away")

    def teardown(self) -> None:
        self.lifecycle.append("teardown")


def _wait_runs(job: Recorder, attempts: int) -> None:
    for _ in range(500):  # bounded wait for the job's thread, not a timing assertion
        if len(job.threads) >= attempts:
            return
        assert job._thread is not None
        job._thread.join(0.01)


def test_requests_run_on_the_jobs_thread_and_coalesce() -> None:
    job = Recorder()
    for _ in range(50):  # all arrive before the first run may start
        job.request()
    job.gate.set()
    _wait_runs(job, 1)
    job.request()
    _wait_runs(job, 2)
    job.stop()
    assert set(job.threads) == {"test-job"}
    assert 1 <= len(job.threads) <= 3, job.threads  # 51 requests, at most a few runs
    assert job.lifecycle == ["setup", "teardown"]
    assert job._thread is not None and not job._thread.is_alive()


def test_a_failing_run_is_recorded_and_the_next_request_runs_again() -> None:
    job = Recorder(fail_first=True)
    job.gate.set()
    job.request()
    _wait_runs(job, 1)
    job.request()
    _wait_runs(job, 2)
    job.stop()
    assert list(job.errors) == ["test-job: RuntimeError: disk went away"]
    assert job.runs == 1 and len(job.threads) == 2

"""A threshold below what the host itself adds, in the real host at its defaults.

Every CLI toolset's schemas and the system prompt are ~14-19k tokens: a threshold of 6,000 can
never be met, and each turn would pay a compaction. The engine measures the overhead from the
host's first request and says so where the user looks: the host's log (agent.log), the status
report and ``lcm doctor`` (from the events table, without the engine), with the value to set.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from .harness import make_home, run_host
from .stub_llm import StubLLM

pytestmark = pytest.mark.host


def test_a_threshold_below_the_hosts_overhead_is_reported_with_the_value_to_set(
    tmp_path, stub: StubLLM
) -> None:
    hh = make_home(
        tmp_path, stub, host_defaults=True, env={"LCM_ABSOLUTE_THRESHOLD_TOKENS": "6000"}
    )
    run = run_host(
        hh, ["turn 0: hello there", "turn 1: and a second note"], host_defaults=True, timeout=300
    )
    status = run.report["engine_final"]["status"]
    overhead = status["overhead_tokens"]["used"]
    assert overhead > 6000, status["overhead_tokens"]
    problem = status["threshold_problem"]
    assert problem and "the threshold (6,000 tokens)" in problem and f"{overhead:,}" in problem
    assert "LCM_ABSOLUTE_THRESHOLD_TOKENS=" in problem
    log = (hh.home / "logs" / "agent.log").read_text(encoding="utf-8", errors="replace")
    assert "hermes-lcm: the threshold (6,000 tokens) leaves" in log

    doctor = subprocess.run(
        [
            sys.executable,
            "-m",
            "hermes_lcm.cli.main",
            "--db",
            str(hh.lcm_db),
            "doctor",
            "--format",
            "json",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    check = next(c for c in json.loads(doctor.stdout)["checks"] if c["name"] == "threshold")
    assert check["status"] == "warn" and "every turn compacts" in check["detail"], check

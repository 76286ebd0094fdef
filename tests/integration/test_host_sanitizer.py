"""The host's own pre-call repairs find nothing to fix in what compress returns.

Hermes runs ``sanitize_api_messages`` (drops orphan results and unknown roles, stubs missing
results, renames blank tool names, drops empty ``tool_calls``) and ``sanitize_tool_call_arguments``
(replaces unparsable arguments with ``{}``) on every request. Each of those repairs loses content
silently, so hermes-lcm's output must already be what they leave unchanged. Outputs of malformed
and wide histories (engine and no-store fallback) go through the real functions in a subprocess.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from hermes_lcm.core import trim
from hermes_lcm.store import close_all

from ..conftest import new_engine
from ..fuzzmsgs import malformed_history, wide_history
from .harness import require_host

CHECK = textwrap.dedent(
    """\
    import copy, json, sys
    from agent.agent_runtime_helpers import sanitize_api_messages, sanitize_tool_call_arguments
    changed = []
    for k, out in enumerate(json.load(open(sys.argv[1]))):
        api = sanitize_api_messages(copy.deepcopy(out))
        repaired = sanitize_tool_call_arguments(api)
        if api != out or repaired:
            changed.append(k)
    print(json.dumps(changed))
    """
)


def _outputs(home: Path) -> list[list[dict[str, Any]]]:
    outs = []
    for seed in range(300):
        rng = random.Random(seed)
        history = malformed_history(rng, big=300) if seed % 10 else wide_history(rng)
        engine = new_engine(home, threshold=rng.randint(800, 6000), session=f"host-{seed}")
        outs.append(engine.compress(list(history), current_tokens=None))
        outs.append(
            trim(
                history, engine.core.budget(engine.threshold_tokens, engine.overhead(history, None))
            )
        )
    return outs


def test_the_hosts_sanitizers_change_nothing_in_our_output(tmp_path):
    require_host()
    try:
        outs = _outputs(tmp_path)
    finally:
        close_all()
    data = tmp_path / "outputs.json"
    data.write_text(json.dumps(outs), encoding="utf-8")
    script = tmp_path / "check.py"
    script.write_text(CHECK, encoding="utf-8")
    # -P and a neutral cwd: the repo root's modules (tools.py, ...) would shadow the host's packages
    proc = subprocess.run(
        [sys.executable, "-P", str(script), str(data)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    changed = json.loads(proc.stdout.strip().splitlines()[-1])
    assert changed == [], [outs[k] for k in changed[:2]]

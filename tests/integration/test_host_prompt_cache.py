"""The provider's prompt cache through the real host: the stub counts cached tokens as an
automatic prefix cache does (stub_llm.PrefixCache), the engine keeps what the host hands it, and
a compaction leaves the summary block's start, earlier summaries and all, as it was.

The host as a user has it (every toolset, memory and skill reviews on), so the review forks' own
requests are there too and must not be counted as the user's.
"""

from __future__ import annotations

import itertools
import json
import re
import time
from pathlib import Path

import pytest

from hermes_lcm.base.tokens import count_tokens

from .harness import make_home, require_host, run_host
from .stub_llm import PrefixCache, Recorded, Reply, StubLLM, directive_policy, text_of

pytestmark = pytest.mark.host

CLOSER = re.compile(r"</summary-[0-9a-f]{8}>")
SUMMARY_ID = re.compile(r'<summary-[0-9a-f]{8} id="([^"]+)"')


def message(i: int) -> str:
    body = " ".join(f"item{(i * 13 + k) % 89}v{k % 5}" for k in range(200))
    return f"turn {i}: keep these notes in mind. {body}"


def _policy(req: Recorded) -> Reply:
    if req.kind == "summary":
        time.sleep(0.2)
    return directive_policy(req)


def _block(req: Recorded) -> str:
    """Our summary block: the first message after the system prompt, when it is ours."""
    messages = [m for m in req.messages if m.get("role") != "system"]
    text = text_of(messages[0].get("content")) if messages else ""
    return text if text.startswith("[lcm:context ") else ""


def test_cache_counts_reach_status_and_a_compaction_keeps_the_earlier_summaries(
    tmp_path: Path,
) -> None:
    require_host()
    turns = [message(i) for i in range(40)]
    with StubLLM(_policy, prefix_cache=True) as stub:
        home = make_home(
            tmp_path, stub, env={"LCM_ABSOLUTE_THRESHOLD_TOKENS": "21000"}, host_defaults=True
        )
        run = run_host(
            home, turns, host_defaults=True, think_seconds=2, think_until_idle=True, timeout=900
        )
        requests = [r for r in stub.requests if r.kind == "main"]
    mine = [r for r in requests if any(r.last_user_text().startswith(t[:30]) for t in turns)]
    assert len(requests) > len(mine) >= len(turns)  # the reviews asked too, as themselves
    # What lcm_status shows is what the provider reported for the user's own replies.
    shown = run.report["engine_final"]["status"]["prompt_cache"]
    assert shown["replies"] == len(mine)
    assert shown["cache_read_tokens"] == sum(r.cached_tokens for r in mine)
    assert shown["input_tokens"] == sum(r.prompt_tokens for r in mine)
    assert shown["replies_after_compaction"] >= 3
    # A compaction that adds a leaf keeps the previous block up to its last summary, byte for
    # byte, and the cache keeps the request up to there (system, tools, earlier summaries). One
    # that condenses rewrites the block's start: nothing before it to keep, so not checked.
    kept = 0
    for before, after in itertools.pairwise(mine):
        old, new = _block(before), _block(after)
        old_ids, new_ids = set(SUMMARY_ID.findall(old)), set(SUMMARY_ID.findall(new))
        if not old_ids or not old_ids < new_ids:
            continue
        start = old[: list(CLOSER.finditer(old))[-1].end()]
        assert new.startswith(start), (old[:400], new[:400])
        rendered = PrefixCache.render(after.body)
        spelled = json.dumps(start, ensure_ascii=False)[1:-1]  # as the rendered request has it
        through = rendered.index(spelled) + len(spelled)
        assert after.cached_tokens >= count_tokens(rendered[:through]) - PrefixCache.BLOCK
        kept += 1
    assert kept >= 2, "too few compactions with earlier summaries to check"

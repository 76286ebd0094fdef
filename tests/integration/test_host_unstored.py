"""A session that stores nothing and crosses its threshold, in the real host: it is handed to
Hermes' own built-in compressor (as LCM-X does), summarized rather than trimmed, and nothing of
it reaches the database."""

from __future__ import annotations

import sqlite3

import pytest

from .harness import make_home, run_host
from .stub_llm import StubLLM, text_of

pytestmark = pytest.mark.host


def test_an_ignored_session_over_its_threshold_goes_to_the_hosts_compressor(
    tmp_path, stub: StubLLM
):
    hh = make_home(
        tmp_path,
        stub,
        env={"LCM_IGNORE_SESSION_PATTERNS": "cli", "LCM_ABSOLUTE_THRESHOLD_TOKENS": "6000"},
    )
    turns = [
        f"turn {i}: the value of key k{i} is V{i:03d}-OPAL, keep it in mind." for i in range(30)
    ]
    run = run_host(hh, turns, timeout=600)
    assert run.report["turns"][-1]["compression_count"] >= 1, run.report["turns"]
    summaries = stub.requests_of("summary")
    assert summaries, "the host's compressor never asked the model for a summary"
    main = stub.requests_of("main")
    told = [
        r
        for r in main
        if any(
            "summarized by Hermes' built-in compressor" in text_of(m.get("content"))
            for m in r.messages
        )
    ]
    assert told, "no request says what became of the earlier messages"
    assert told[-1] is main[-1]  # the last request still carries it
    texts = [text_of(m.get("content")) for m in main[-1].messages]
    assert (
        "summarized by Hermes' built-in compressor" in texts[1]
        and "LCM_IGNORE_SESSION_PATTERNS" in texts[1]
    )
    assert any(
        t.lstrip().startswith(("[CONTEXT COMPACTION", "[PRIOR CONTEXT")) for t in texts[2:]
    )  # the host's
    compactions = run.report["turns"][-1]["compression_count"]
    assert compactions <= len(turns) // 4, f"{compactions} compactions in {len(turns)} turns"
    assert not [r.problems for r in main if r.problems]
    assert main[-1].prompt_tokens < max(r.prompt_tokens for r in main[:-1]) + 1000
    assert "turn 0:" not in " ".join(
        text_of(m.get("content")) for m in main[-1].messages[1:]
    )  # it did compact
    con = sqlite3.connect(f"file:{hh.lcm_db}?mode=ro", uri=True)
    try:
        assert con.execute("SELECT count(*) FROM messages").fetchone() == (0,)
        assert con.execute("SELECT count(*) FROM conversations").fetchone() == (0,)
    finally:
        con.close()

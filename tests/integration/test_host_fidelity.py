"""What compress gives back to the host (the head of a /compress here, an unchanged list, the
host's fields), inside the real host (hermes-agent 0.19.0), offline.

* ``/compress here 2`` through the CLI's own handler: the head is compressed, the host re-appends
  the tail, and the transcript holds every message once (head-compressed + tail).
* ``/compress`` with nothing to compact, in place and with session rotation: the session id, the
  transcript and ``compression_count`` stay as they were.
* A model that returns ``reasoning_content`` and ``reasoning_details``: after compactions, every
  assistant message that stays verbatim goes back to the model with its own reasoning fields.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from .harness import HostHome, host_env, make_home, require_host
from .stub_llm import Policy, Recorded, Reply, StubLLM, make_directive_policy
from .test_host_e2e import user_turn

pytestmark = pytest.mark.host

DRIVER = Path(__file__).resolve().parent / "drive_cli.py"
SYNTHETIC = "[lcm:context"


def run_cli(hh: HostHome, steps: list[dict[str, str]], timeout: float = 240.0) -> dict[str, Any]:
    """Run ``steps`` (turns and slash commands) through drive_cli.py; the report, or a failure."""
    spec_path = hh.root / f"cli-spec-{time.time_ns()}.json"
    report_path = hh.root / f"cli-report-{time.time_ns()}.json"
    spec_path.write_text(
        json.dumps({"steps": steps, "report": str(report_path), "expect_engine": hh.engine_name}),
        encoding="utf-8",
    )
    proc = subprocess.run(
        [sys.executable, "-P", str(DRIVER), str(spec_path)],
        env=host_env(hh),
        cwd=str(hh.root),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    try:
        report = json.loads(report_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        report = {"error": "driver wrote no report"}
    if proc.returncode != 0 or report.get("error"):
        raise AssertionError(
            f"cli driver failed rc={proc.returncode}: {report.get('error')}\n"
            f"{report.get('traceback') or ''}\n{proc.stderr[-3000:]}"
        )
    return report


def key(m: dict[str, Any]) -> str:
    return json.dumps(
        [m.get("role"), m.get("content"), m.get("tool_calls"), m.get("tool_call_id")],
        sort_keys=True,
        default=str,
    )


def is_ours(m: dict[str, Any]) -> bool:
    return isinstance(m.get("content"), str) and m["content"].startswith(SYNTHETIC)


def split_tail(history: list[dict[str, Any]], keep_last: int) -> int:
    """Where hermes_cli.partial_compress.split_history_for_partial_compress puts the boundary."""
    users = [i for i, m in enumerate(history) if m.get("role") == "user"]
    return users[-keep_last]


def state_db(hh: HostHome) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{hh.state_db}?mode=ro", uri=True)


def lcm_db(hh: HostHome) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{hh.lcm_db}?mode=ro", uri=True)


# -- /compress here N ---------------------------------------------------------------------


def test_compress_here_keeps_every_message_once(tmp_path: Path) -> None:
    require_host()
    env = {
        "LCM_CONTEXT_THRESHOLD": "0.5",
        "LCM_FRESH_TAIL_COUNT": "4",
        "LCM_LEAF_CHUNK_TOKENS": "1200",
    }
    turns = [user_turn(i) for i in range(2, 10)]
    with StubLLM() as stub:
        hh = make_home(tmp_path, stub, env=env)
        report = run_cli(
            hh,
            [
                *({"turn": t} for t in turns),
                {"command": "/compress here 2"},
                {"turn": user_turn(10)},
            ],
        )
    step = next(s for s in report["steps"] if "command" in s)
    before, after = step["history_before"], step["history_after"]
    tail = before[split_tail(before, 2) :]
    head_out = after[: len(after) - len(tail)]

    assert after[len(after) - len(tail) :] == tail, (
        "the kept exchanges are not the transcript's end, verbatim"
    )
    assert head_out and is_ours(head_out[0]), f"the head was not compressed: {step['output']}"
    assert not {key(m) for m in head_out} & {key(m) for m in tail}, (
        "a kept message came back from compress"
    )
    raw = [key(m) for m in after if not is_ours(m)]
    assert len(raw) == len(set(raw)), "a message appears twice in the transcript"
    assert len(after) < len(before)
    assert (
        step["compression_count"] == 1 and step["flags"]["_last_compression_made_progress"] is True
    )

    # the next turn goes on from the rejoined transcript: every request valid, nothing stored twice
    mains = stub.requests_of("main")
    assert not [(r.seq, r.problems) for r in mains if r.problems]
    last = mains[-1].messages
    last_raw = [key(m) for m in last if m.get("role") != "system" and not is_ours(m)]
    assert len(last_raw) == len(set(last_raw))
    with lcm_db(hh) as db:
        stored = db.execute("SELECT role, content FROM messages ORDER BY seq").fetchall()
        nodes = db.execute("SELECT max(last_seq) FROM summaries").fetchone()[0]
    assert len(stored) == len(set(stored)) == len(before) + 2
    assert nodes is not None and nodes <= split_tail(before, 2), (
        "a summary covers the kept exchanges"
    )


# -- a /compress that changes nothing ---------------------------------------------------------


@pytest.mark.parametrize("in_place", [True, False], ids=["in_place", "rotation"])
def test_a_noop_compress_changes_nothing(tmp_path: Path, in_place: bool) -> None:
    require_host()
    env = {"LCM_CONTEXT_THRESHOLD": "0.5", "LCM_FRESH_TAIL_COUNT": "32"}
    with StubLLM() as stub:
        hh = make_home(
            tmp_path,
            stub,
            env=env,
            config_overrides={"compression": {"enabled": True, "in_place": in_place}},
        )
        report = run_cli(
            hh, [{"turn": user_turn(2)}, {"turn": user_turn(3)}, {"command": "/compress"}]
        )
    assert report["compression_in_place"] is in_place
    step = report["steps"][-1]
    assert step["history_before"], step
    assert any("reasoning" in m or "finish_reason" in m for m in step["history_before"]), (
        "the host's messages should carry its own fields (the case that used to differ)"
    )
    assert step["history_after"] == step["history_before"], step["output"]
    assert step["session_id_after"] == step["session_id_before"] == report["session_id_initial"]
    assert step["cli_session_id"] == report["session_id_initial"]
    assert step["compression_count"] == 0
    assert step["flags"] == {
        "_last_compression_made_progress": False,
        "_last_compress_aborted": False,
    }
    assert "No changes" in step["output"], step["output"]
    with state_db(hh) as db:
        sessions = db.execute("SELECT id, ended_at, end_reason FROM sessions").fetchall()
        rewritten = db.execute(
            "SELECT count(*) FROM messages WHERE active=0 OR compacted=1"
        ).fetchone()[0]
    assert [s[0] for s in sessions] == [report["session_id_initial"]], sessions
    assert sessions[0][2] != "compression"
    assert rewritten == 0, "the transcript was rewritten in place"


# -- provider reasoning fields across a compaction ----------------------------------------------


class ReasoningStub(StubLLM):
    """The stub model, answering main requests with ``reasoning_content`` as a thinking model does
    (streamed as its own deltas before the answer, which is how the host asks for it here)."""

    @staticmethod
    def _message_for(reply: Reply) -> dict[str, Any]:
        message = StubLLM._message_for(reply)
        reasoning = getattr(reply, "reasoning", None)
        if reasoning:
            message["reasoning_content"] = reasoning
        return message

    def _send_stream(
        self, h: Any, message: dict[str, Any], finish: str, usage: dict[str, int]
    ) -> None:
        reasoning = message.get("reasoning_content")
        if not reasoning:
            super()._send_stream(h, message, finish, usage)
            return
        chunk = {
            "id": "chatcmpl-reasoning",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": self.model,
            "choices": [
                {
                    "index": 0,
                    "delta": {"role": "assistant", "content": "", "reasoning_content": reasoning},
                    "finish_reason": None,
                }
            ],
        }
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.send_header("Cache-Control", "no-cache")
        h.send_header("Connection", "close")
        h.end_headers()
        h.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
        # the rest of the answer as the plain stub streams it (its headers are already sent)
        h.send_response = h.send_header = lambda *a, **k: None  # type: ignore[method-assign]
        h.end_headers = lambda *a, **k: None  # type: ignore[method-assign]
        super()._send_stream(h, message, finish, usage)


class ReasonedReply(Reply):
    reasoning: str = ""


def reasoning_policy() -> Policy:
    base = make_directive_policy()

    def policy(req: Recorded) -> Reply:
        reply = base(req)
        if req.kind != "main":
            return reply
        answer = ReasonedReply(
            text=reply.text, tool_name=reply.tool_name, tool_args=reply.tool_args
        )
        answer.reasoning = f"REASONING-{req.seq}: weigh the request, then answer."
        return answer

    return policy


def test_verbatim_messages_keep_their_reasoning_fields(tmp_path: Path) -> None:
    require_host()
    env = {
        "LCM_CONTEXT_THRESHOLD": "0.11",
        "LCM_FRESH_TAIL_COUNT": "8",
        "LCM_LEAF_CHUNK_TOKENS": "1500",
    }
    # "deepseek" in the model name: the host then sends reasoning_content back on assistant messages
    with ReasoningStub(reasoning_policy(), model="deepseek-reasoner-fake") as stub:
        hh = make_home(tmp_path, stub, env=env)
        run_cli(hh, [{"turn": user_turn(i)} for i in range(2, 20)])
    mains = stub.requests_of("main")
    assert not [(r.seq, r.problems) for r in mains if r.problems]
    said = {r.reply["content"]: r.reply for r in mains if r.reply and r.reply.get("content")}
    with lcm_db(hh) as db:
        assert db.execute("SELECT count(*) FROM summaries").fetchone()[0] >= 1, (
            "no compaction happened"
        )
    after = [r for r in mains if any(is_ours(m) for m in r.messages)]
    assert after, "no request was built from a compacted context"
    checked = 0
    for request in after:
        for m in request.messages:
            if m.get("role") != "assistant" or m.get("content") not in said:
                continue
            original = said[m["content"]]
            assert m.get("reasoning_content") == original["reasoning_content"], (request.seq, m)
            checked += 1
    assert checked >= 3, f"only {checked} verbatim assistant messages after a compaction"


def test_gateway_compress_here_writes_every_message_once(tmp_path: Path) -> None:
    """The gateway's ``/compress here 2`` on a rotating session: the transcript it writes for the
    continuation session is the compressed head followed by the kept exchanges, each once."""
    require_host()
    env = {
        "LCM_CONTEXT_THRESHOLD": "0.5",
        "LCM_FRESH_TAIL_COUNT": "4",
        "LCM_LEAF_CHUNK_TOKENS": "1200",
    }
    with StubLLM() as stub:
        hh = make_home(
            tmp_path,
            stub,
            env=env,
            config_overrides={"compression": {"enabled": True, "in_place": False}},
        )
        report = run_cli(
            hh, [*({"turn": user_turn(i)} for i in range(2, 10)), {"gateway_command": "here 2"}]
        )
    step = report["steps"][-1]
    assert step["session_id_after"] != step["session_id_before"], step["reply"]
    written = step["written"][step["session_id_after"]]
    before = [m for m in step["history_before"] if m.get("role") in ("user", "assistant", "tool")]
    tail = before[split_tail(before, 2) :]
    assert [key(m) for m in written[len(written) - len(tail) :]] == [key(m) for m in tail]
    head_out = written[: len(written) - len(tail)]
    assert head_out and is_ours(head_out[0]), step["reply"]
    raw = [key(m) for m in written if not is_ours(m)]
    assert len(raw) == len(set(raw)), "a message appears twice in the gateway's transcript"

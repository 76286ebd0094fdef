"""Large tool outputs inside the real host (hermes-agent 0.19.0), offline, against the stub model.

Turn 0: the model reads a 40,000-character log with the host's own read_file tool and answers.
Turns 1 and 2: the model calls lcm_describe, then answers. With externalization and active-replay
stubbing on, the requests of the later turns carry the output's stub (its head and tail and
ref), not the 40,000 characters: should_compress asked for a compress that handed the host
the stub, although no summary was needed. With the flag off they carry the whole output (no
normal compaction is due at this threshold). The model is never left without an output it has
not answered yet: the request that answers the read carries it whole either way.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from hermes_lcm.base.outputs import PREFIX, parse_stub

from .harness import make_home, require_host, run_host
from .stub_llm import Recorded, Reply, StubLLM, make_directive_policy, stepped_policy, text_of

pytestmark = pytest.mark.host

CONTEXT_LENGTH = 64_000
BASE_ENV = {"LCM_CONTEXT_THRESHOLD": "0.9", "LCM_LARGE_OUTPUT_EXTERNALIZATION_ENABLED": "true"}
REPLAY_ENV = {
    **BASE_ENV,
    "LCM_LARGE_OUTPUT_ACTIVE_REPLAY_STUBBING_ENABLED": "true",
    "LCM_LARGE_OUTPUT_ACTIVE_REPLAY_STUB_THRESHOLD_TOKENS": "2000",
}
MIDDLE = "LOGLINE-0200 "  # far from the head and the tail: only in the whole output
TURNS = [
    "turn 0: read the build log and tell me what failed",
    "turn 1: describe the memory",
    "turn 2: and once more",
]


def _log(tmp_path: Path) -> Path:
    lines = [
        f"LOGLINE-{i:04d} building module_{i % 23} ... ok (cached={i % 3 == 0})".ljust(99)
        for i in range(400)
    ]
    lines[-1] = "LOGLINE-0399 FAILED: linker error in module_7".ljust(99)
    path = tmp_path / "build.log"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert len(path.read_text()) == 40_000
    return path


def _policy(log: Path) -> Callable[[Recorded], Reply]:
    lock = threading.Lock()
    state = {"step": 0}
    plan = [
        Reply(tool_name="read_file", tool_args={"path": str(log), "limit": 500}),
        Reply(text="The linker failed in module_7."),
        Reply(tool_name="lcm_describe", tool_args={}),
        Reply(text="Described."),
        Reply(tool_name="lcm_describe", tool_args={}),
        Reply(text="Described again."),
    ]

    def policy(req: Recorded) -> Reply:
        if req.kind != "main":
            return make_directive_policy()(req)
        with lock:
            step = state["step"]
            state["step"] += 1
        return plan[min(step, len(plan) - 1)]

    return policy


def _holds_whole(req: Recorded) -> bool:
    return any(MIDDLE in text_of(m.get("content")) for m in req.messages if m.get("role") == "tool")


def _holds_stub(req: Recorded) -> bool:
    return any(
        text_of(m.get("content")).startswith(PREFIX)
        for m in req.messages
        if m.get("role") == "tool"
    )


def _run(tmp_path: Path, env: dict[str, str]) -> tuple[list[Recorded], Path]:
    log = _log(tmp_path)
    with StubLLM(_policy(log), context_length=CONTEXT_LENGTH) as stub:
        hh = make_home(tmp_path, stub, env=env)
        run = run_host(hh, TURNS, toolsets=["context_engine", "file"], timeout=240)
        mains = stub.requests_of("main")
    assert all(t["completed"] and not t["failed"] for t in run.report["turns"]), run.describe()
    assert not [(r.seq, r.problems) for r in mains if r.problems]
    return mains, hh.lcm_db


def test_active_replay_hands_the_host_the_stub_on_a_later_turn(tmp_path: Path) -> None:
    require_host()
    mains, db = _run(tmp_path, REPLAY_ENV)
    assert len(mains) == 6, [r.tail_role() for r in mains]
    assert _holds_whole(mains[1]), "the request answering the read must carry the whole output"
    later = mains[3:]
    assert later and all(_holds_stub(r) and not _holds_whole(r) for r in later), [
        (r.seq, _holds_stub(r), _holds_whole(r)) for r in mains
    ]
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        stored = [
            r[0]
            for r in conn.execute("SELECT content FROM messages WHERE role='tool' ORDER BY seq")
        ]
    info = parse_stub(stored[0])
    assert info is not None and MIDDLE not in stored[0]
    payload = db.parent / "lcm-payloads" / f"{info.ref}.payload"
    assert MIDDLE in payload.read_text(encoding="utf-8")
    print(
        f"\nrequest sizes (chars): {[sum(len(text_of(m.get('content'))) for m in r.messages) for r in mains]}"
    )


def test_without_the_flag_the_host_keeps_the_whole_output(tmp_path: Path) -> None:
    require_host()
    mains, _ = _run(tmp_path, BASE_ENV)
    assert len(mains) == 6
    assert all(_holds_whole(r) and not _holds_stub(r) for r in mains[1:]), [
        (r.seq, _holds_stub(r), _holds_whole(r)) for r in mains
    ]


# -- recovery: externalize -> expand -------------------------------------------------------------


def _expand_policy(log: Path, pages: list[str]) -> Callable[[Recorded], Reply]:
    """Turn 0 reads the log; turn 1 walks lcm_expand over the stub's ref, page after page, as a
    model would: each call takes next_content_offset from the answer it just received."""

    def plan(step: int, req: Recorded) -> Reply:
        if step == 0:
            return Reply(tool_name="read_file", tool_args={"path": str(log), "limit": 500})
        if step == 1:
            return Reply(text="The linker failed in module_7.")
        last = req.messages[-1]
        if last.get("role") == "tool" and step > 2:
            answer = json.loads(
                text_of(last.get("content"))
            )  # what the model received, as it received it
            pages.append(answer["content"])
            if answer["next_content_offset"] is None:
                return Reply(text="Read it all.")
            return Reply(
                tool_name="lcm_expand",
                tool_args={
                    "externalized_ref": answer["externalized_ref"],
                    "content_offset": answer["next_content_offset"],
                },
            )
        stub = next(
            parse_stub(text_of(m.get("content")))
            for m in req.messages
            if m.get("role") == "tool" and text_of(m.get("content")).startswith(PREFIX)
        )
        assert stub is not None
        return Reply(tool_name="lcm_expand", tool_args={"externalized_ref": stub.ref})

    return stepped_policy(plan)


def test_expand_of_an_externalized_output_reaches_the_model_whole(tmp_path: Path) -> None:
    require_host()
    log = _log(tmp_path)
    pages: list[str] = []
    with StubLLM(_expand_policy(log, pages), context_length=CONTEXT_LENGTH) as stub:
        hh = make_home(tmp_path, stub, env=REPLAY_ENV)
        run = run_host(
            hh,
            ["read the build log", "now read the whole log back from memory"],
            toolsets=["context_engine", "file"],
            timeout=300,
        )
        mains = stub.requests_of("main")
    assert all(t["completed"] and not t["failed"] for t in run.report["turns"]), run.describe()
    original = next(text_of(m.get("content")) for m in mains[1].messages if m.get("role") == "tool")
    assert MIDDLE in original and len(original) > 40_000
    # the model got the original text back, page by page, each page a plain JSON answer (never a
    # new stub, never the host's saved-to-a-file preview)
    assert len(pages) >= 4 and "".join(pages) == original
    answers = [
        text_of(m.get("content"))
        for r in mains[3:]
        for m in r.messages[-1:]
        if m.get("role") == "tool"
    ]
    assert all(len(a) < 12_000 for a in answers), [len(a) for a in answers]  # below the threshold
    assert not any("<persisted-output>" in a or a.startswith(PREFIX) for a in answers)
    with sqlite3.connect(f"file:{hh.lcm_db}?mode=ro", uri=True) as conn:
        rows = list(
            conn.execute(
                "SELECT content FROM messages WHERE role='tool' AND tool_name='lcm_expand'"
            )
        )
    assert len(rows) == len(pages) and not any(r[0].startswith(PREFIX) for r in rows)
    assert (
        len(list((hh.lcm_db.parent / "lcm-payloads").glob("*.payload"))) == 1
    )  # no stub of a stub

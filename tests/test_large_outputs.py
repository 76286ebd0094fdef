"""Large tool outputs (LCM_LARGE_OUTPUT_EXTERNALIZATION_ENABLED): the ingest step, recovery through
the tools, the prompt (unanswered whole, answered as stubs) and active-replay stubbing.

Real engines on real SQLite files and real payload files under tmp_path; the engine tests marked
``both_backends`` (the foreign-ref attack, the full disk and the random-session property too) also run on
PostgreSQL (payloads in its table); the payload-directory attacks stay SQLite-only (a directory
beside the file, which PostgreSQL has not)."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hermes_lcm import store as store_module
from hermes_lcm.base.outputs import is_stub, parse_stub, ref_for
from hermes_lcm.base.payloads import PayloadGuard
from hermes_lcm.base.tokens import count_messages
from hermes_lcm.engine import LcmEngine
from hermes_lcm.ingest.externalize import ExternalizeStep, clamped_stub
from hermes_lcm.ingest.normalize import Draft
from hermes_lcm.ingest.steps import Normalizer

from .backends import allow_payloads, refuse_payloads
from .conftest import database_env, new_engine
from .convo import assert_valid_sequence, stored_sequence
from .security.test_scope import engine_for
from .tooltest import err, ok

ON = {
    "LCM_LARGE_OUTPUT_EXTERNALIZATION_ENABLED": "true",
    "LCM_LARGE_OUTPUT_EXTERNALIZATION_THRESHOLD_CHARS": "2000",
}
REPLAY = {
    **ON,
    "LCM_LARGE_OUTPUT_ACTIVE_REPLAY_STUBBING_ENABLED": "true",
    "LCM_LARGE_OUTPUT_ACTIVE_REPLAY_STUB_THRESHOLD_TOKENS": "1000",
}


def big_output(n: int = 30_000, seed: str = "x") -> str:
    lines = [
        f"{seed} line {i}: PASSED tests/test_mod_{i % 17}.py::test_{i} ✓ ünïcödé 𝔘"
        for i in range(n // 50 + 1)
    ]
    return "\r\n".join(lines)[:n] + "\nFAILED tests/test_end.py::test_last - AssertionError: boom"


def tool_turn(ask: str, output: str, call_id: str) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": ask},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": "terminal", "arguments": '{"cmd": "pytest"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": call_id, "content": output},
    ]


def rows(engine: LcmEngine) -> list[Any]:
    core = engine.core
    assert core is not None and core.binding.conversation_id is not None
    return core.store.messages_after(core.binding.conversation_id, 0)


def payload_dir(engine: LcmEngine) -> Path:
    assert engine.core is not None
    return Path(engine.core.guard.directory)


def read_all(engine: LcmEngine, ref: str) -> str:
    """The whole output through lcm_expand, page by page, as a model would."""
    text, offset = "", 0
    while offset is not None:
        page = ok(engine, "lcm_expand", externalized_ref=ref, content_offset=offset)
        assert page["mime"] == "text/plain"
        text += page["content"]
        offset = page["next_content_offset"]
    return text


# -- the step -------------------------------------------------------------------------------------


def test_step_writes_the_file_keeps_the_stub_and_is_a_fixed_point(tmp_path: Path) -> None:
    guard = PayloadGuard(tmp_path / "lcm-payloads")
    step = ExternalizeStep(guard, 2000, 1200)
    output = big_output()
    draft = Draft(output, None, "tool")
    out = step(draft)
    info = parse_stub(out.content)
    assert info is not None and info.ref == ref_for(output, guard.key) and info.chars == len(output)
    assert len(out.content) < 2000 and out.content.endswith("AssertionError: boom")
    path = tmp_path / "lcm-payloads" / f"{info.ref}.payload"
    assert path.read_bytes().decode() == output and stat.S_IMODE(path.stat().st_mode) == 0o600
    again = Draft(out.content, None, "tool")
    assert step(again) is again  # a stub given again is never externalized again
    small = Draft("short", None, "tool")
    assert step(small) is small
    user = Draft(output, None, "user")
    assert step(user) is user  # user and assistant text stay inline
    calls = [{"id": "c", "function": {"name": "w", "arguments": output}}]
    assistant = Draft("", calls, "assistant")
    assert step(assistant) is assistant  # tool-call arguments stay inline


def test_step_stubs_text_parts_and_leaves_images(tmp_path: Path) -> None:
    step = ExternalizeStep(PayloadGuard(tmp_path / "p"), 2000, 300)
    image = {"type": "image_url", "image_url": {"url": "https://example.invalid/a.png"}}
    parts = [{"type": "text", "text": big_output()}, image, {"type": "text", "text": "small"}]
    out = step(Draft(parts, None, "tool"))
    assert (
        is_stub(out.content[0]["text"]) and out.content[1] is image and out.content[2] is parts[2]
    )


def test_a_preview_bigger_than_the_threshold_is_clamped_so_the_stub_stays_below_it() -> None:
    text = "y" * 50_000
    stub = clamped_stub(text, ref_for(text, bytes(32)), 100_000, 1000)
    assert len(stub) < 1000 and is_stub(stub)


def test_the_shadow_step_writes_nothing(tmp_path: Path) -> None:
    step = ExternalizeStep(PayloadGuard(tmp_path / "p"), 2000, 300, write=False)
    assert is_stub(step(Draft(big_output(), None, "tool")).content)
    assert not (tmp_path / "p").exists()


def test_the_draft_role_changes_no_fingerprint_of_todays_messages(tmp_path: Path) -> None:
    """Values computed by main before Draft had a role: stored databases must keep aligning (the
    first holds a placeholder, whose ref is keyed by the database: the value under this key)."""
    normalizer = Normalizer(PayloadGuard(tmp_path / "p", key=bytes(32)))
    messages = [
        {"role": "tool", "tool_call_id": "c1", "content": "x" * 20000},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "t", "arguments": "{}"}}
            ],
        },
        {"role": "user", "content": [{"type": "text", "text": "hi"}]},
    ]
    assert [normalizer.fingerprint(m) for m in messages] == [
        "799f226e1eee3819",
        "f4febafbc1c1e774",
        "95293b1309cf59d1",
    ]


def test_with_externalization_on_the_identity_is_the_stub_whether_the_host_sends_it_or_the_text(
    tmp_path: Path,
) -> None:
    guard = PayloadGuard(tmp_path / "p")
    normalizer = Normalizer(guard, steps=[ExternalizeStep(guard, 2000, 500)])
    output = big_output()
    whole = {"role": "tool", "tool_call_id": "c1", "content": output}
    stubbed = {**whole, "content": normalizer.stored_form(whole)[0]}
    assert is_stub(stubbed["content"]) and normalizer.fingerprint(whole) == normalizer.fingerprint(
        stubbed
    )


# -- through the engine ---------------------------------------------------------------------------


@pytest.mark.both_backends
def test_stored_row_is_the_stub_and_the_tools_give_back_every_byte(make_engine: Any) -> None:
    engine = make_engine(threshold=10**6, **ON)
    odd = "a\r\nb\r\n" * 3000 + '\u0000 nul \ud83d\ude00 😀 e\u0301 \u202e rtl \\ "q"'
    outputs = [big_output(), odd, big_output(1_000_000, "m")]
    history: list[dict[str, Any]] = []
    for i, output in enumerate(outputs):
        history += [
            *tool_turn(f"run {i}", output, f"call{i}"),
            {"role": "assistant", "content": f"done {i}"},
        ]
    engine.ingest_host(history)
    tools = [r for r in rows(engine) if r.role == "tool"]
    assert len(tools) == 3
    for row, output in zip(tools, outputs, strict=True):
        info = parse_stub(row.content)
        assert info is not None and info.ref == engine.core.guard.ref_for(output), row.content[:200]
        assert read_all(engine, info.ref) == output
        described = ok(engine, "lcm_describe", externalized_ref=info.ref)
        assert described["mime"] == "text/plain" and described["chars"] == len(output)
        assert described["lines"] == info.lines == output.count("\n") + 1
        listed = ok(engine, "lcm_expand", store_id=row.id)
        assert info.ref in listed["externalized_refs"]
    assert engine.core is not None and engine.core.guard.failures == 0
    store_module.close_all()


@pytest.mark.both_backends
def test_turning_the_feature_on_and_off_never_stores_a_message_twice(make_engine: Any) -> None:
    history = [*tool_turn("first", big_output(), "c1"), {"role": "assistant", "content": "ok 1"}]
    off = make_engine(threshold=10**6)
    off.ingest_host(history)
    store_module.close_all()
    on = make_engine(threshold=10**6, **ON)
    history += [
        *tool_turn("second", big_output(seed="z"), "c2"),
        {"role": "assistant", "content": "ok 2"},
    ]
    on.ingest_host(history)
    assert [r.role for r in rows(on)] == [m["role"] for m in history]
    assert not is_stub(rows(on)[2].content) and is_stub(rows(on)[6].content)
    store_module.close_all()
    again = make_engine(threshold=10**6)  # off again: the stub row is still recognised
    history += [{"role": "user", "content": "third"}]
    again.ingest_host(history)
    again.ingest_host(
        [*history[:6], {**history[6], "content": rows(again)[6].content}, *history[7:]]
    )
    assert len(rows(again)) == len(history)
    store_module.close_all()


@pytest.mark.both_backends
def test_compress_shows_an_unanswered_output_whole_and_an_answered_one_as_its_stub(
    make_engine: Any,
) -> None:
    engine = make_engine(threshold=60_000, **ON)
    first, second = big_output(), big_output(seed="q")
    history = [*tool_turn("first", first, "c1"), {"role": "assistant", "content": "seen"}]
    history += tool_turn("second", second, "c2")  # the model has not answered this one yet
    out = engine.compress(list(history), current_tokens=50_000, force=False)
    tool_messages = [m for m in out if m.get("role") == "tool"]
    assert is_stub(tool_messages[0]["content"]) and tool_messages[1]["content"] == second
    assert_valid_sequence(out)
    store_module.close_all()


@pytest.mark.both_backends
def test_an_unanswered_output_too_big_for_the_budget_is_its_stub(make_engine: Any) -> None:
    engine = make_engine(threshold=6000, **ON)
    history = tool_turn("run it", big_output(60_000), "c1")
    out = engine.compress(list(history), current_tokens=20_000)
    assert is_stub(out[-1]["content"]), out[-1]["content"][:100]
    store_module.close_all()


# -- active replay -------------------------------------------------------------------------------


@pytest.mark.both_backends
def test_active_replay_asks_for_one_compress_that_hands_the_host_the_stub(make_engine: Any) -> None:
    engine = make_engine(threshold=100_000, **REPLAY)
    history = tool_turn("run", big_output(40_000), "c1")
    engine.observe_request(history, None)  # the request that carried the result; its answer follows
    history.append({"role": "assistant", "content": "the tests fail at test_last"})
    assert engine.should_compress(5000)
    out = engine.compress(list(history), current_tokens=5000)
    assert is_stub(out[2]["content"]) and out[-1]["content"] == history[-1]["content"]
    out.append({"role": "user", "content": "fix it"})
    engine.observe_request(out, None)
    assert not engine.should_compress(5000)  # the host's list holds the stub now: no loop
    store_module.close_all()


@pytest.mark.both_backends
def test_without_the_flag_the_host_keeps_the_full_output(make_engine: Any) -> None:
    engine = make_engine(threshold=100_000, **ON)
    history = tool_turn("run", big_output(40_000), "c1")
    engine.observe_request(history, None)
    history.append({"role": "assistant", "content": "answer"})
    assert not engine.should_compress(5000)
    store_module.close_all()


@pytest.mark.both_backends
def test_active_replay_does_not_loop_when_the_file_cannot_be_written(
    tmp_path: Path, backend_env: dict[str, str]
) -> None:
    engine = new_engine(tmp_path, threshold=100_000, **REPLAY, **backend_env)
    refuse_payloads(engine.core.store)  # every payload write fails: the text stays inline
    history = tool_turn("run", big_output(40_000), "c1")
    engine.observe_request(history, None)
    history.append({"role": "assistant", "content": "answer"})
    assert not engine.should_compress(5000)
    store_module.close_all()


# -- attacks -------------------------------------------------------------------------------------


@pytest.mark.both_backends
def test_a_full_disk_keeps_the_output_inline_and_stores_it_once_when_space_returns(
    tmp_path: Path, backend_env: dict[str, str]
) -> None:
    engine = new_engine(tmp_path, threshold=10**6, **ON, **backend_env)
    refuse_payloads(
        engine.core.store
    )  # the payload directory, or the server's disk_full on the payloads table
    output = big_output()
    history = tool_turn("run", output, "c1")
    engine.ingest_host(history)
    assert rows(engine)[2].content == output  # nothing lost
    assert engine.get_status()["payload_write_failures"] >= 1
    allow_payloads(engine.core.store)
    history += [{"role": "assistant", "content": "ok"}]
    engine.ingest_host(list(history))
    assert stored_sequence(engine) == [(m["role"], m["content"]) for m in history]
    store_module.close_all()


def test_a_symlinked_payload_directory_is_refused_and_the_text_stays_inline(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    home = tmp_path / "home"
    engine = new_engine(home, threshold=10**6, **ON)
    directory = payload_dir(engine)
    directory.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(outside, directory)
    output = big_output()
    engine.ingest_host(tool_turn("run", output, "c1"))
    assert rows(engine)[2].content == output and os.listdir(outside) == []
    store_module.close_all()


@pytest.mark.both_backends
def test_forged_traversing_and_foreign_refs_are_refused(
    tmp_path: Path, backend_env: dict[str, str]
) -> None:
    home = tmp_path / "home"
    alice = engine_for(home, "alice", "alice-chat", **ON, **backend_env)
    secret = big_output(seed="alice-secret")
    alice.ingest_host(tool_turn("run", secret, "c1"))
    assert alice.core is not None
    ref = alice.core.guard.ref_for(secret)
    assert read_all(alice, ref) == secret
    mallory = engine_for(home, "mallory", "mallory-chat", **ON, **backend_env)
    # Mallory quotes Alice's stub (say she saw it over her shoulder): a quote is no reference.
    mallory.ingest_host([{"role": "user", "content": f"[lcm-output ref={ref} chars=1 lines=1]"}])
    for args in (
        {"externalized_ref": "../../etc/passwd"},
        {"externalized_ref": "0" * 24},
        {"externalized_ref": ref},
        {"externalized_ref": ref, "session_scope": "all"},
    ):
        assert "alice-secret" not in err(mallory, "lcm_expand", **args)
        assert "alice-secret" not in err(mallory, "lcm_describe", **args)
    store_module.close_all()
    store_module.close_all()


# -- properties ----------------------------------------------------------------------------------


def _conversation(data: Any, turns: int) -> list[list[dict[str, Any]]]:
    """Turns of user request, tool calls whose outputs are sometimes huge, and an answer."""
    out = []
    for t in range(turns):
        turn: list[dict[str, Any]] = [{"role": "user", "content": f"turn {t}: run the checks"}]
        for k in range(data.draw(st.integers(0, 2))):
            size = data.draw(st.sampled_from([50, 1500, 2500, 9000, 40_000]))
            unit = data.draw(st.sampled_from(["ok\r\n", "é𝔘 ", "x" * 7 + "\n"]))
            output = f"out {t}.{k} " + (unit * (size // len(unit) + 1))[:size]
            turn += tool_turn(f"step {k}", output, f"c{t}_{k}")[1:]
        turn.append({"role": "assistant", "content": f"turn {t} done"})
        out.append(turn)
    return out


@pytest.mark.both_backends
@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_random_sessions_with_big_outputs_stay_bounded_valid_lossless_and_unique(
    tmp_path_factory: Any, backend: str, data: Any
) -> None:
    home = tmp_path_factory.mktemp("prop")
    where = database_env(backend)  # one database per example; the engines of its restarts share it
    threshold = data.draw(st.sampled_from([4000, 9000, 30_000]))
    toggles = data.draw(st.lists(st.booleans(), min_size=1, max_size=3))
    history: list[dict[str, Any]] = []
    for turns, on in zip(_split(_conversation(data, 6), len(toggles)), toggles, strict=True):
        store_module.close_all()
        engine = new_engine(home, threshold=threshold, **(REPLAY if on else {}), **where)
        for turn in turns:
            history += turn
            engine.ingest_host(list(history))  # API style: the whole history every time
            tokens = count_messages(history) + 500
            engine.observe_request(history, None)
            if engine.should_compress(tokens):
                out = engine.compress(list(history), current_tokens=tokens)
                assert count_messages(out) + 500 <= threshold, (
                    count_messages(out),
                    threshold,
                    tokens,
                )
                assert_valid_sequence(out)
    stored = rows(engine)
    assert [r.role for r in stored] == [m["role"] for m in history], (
        "a message was stored twice or lost"
    )
    for row, message in zip(stored, history, strict=True):
        info = parse_stub(row.content)
        want = message["content"]
        if info is None:
            assert row.content == want
        else:
            assert read_all(engine, info.ref) == want
    store_module.close_all()


def _split(turns: list[list[dict[str, Any]]], parts: int) -> list[list[list[dict[str, Any]]]]:
    size = -(-len(turns) // parts)
    return [turns[i * size : (i + 1) * size] for i in range(parts)]


def test_our_own_answers_are_never_externalized_and_page_below_the_threshold(
    make_engine: Any,
) -> None:
    """lcm_expand of a stub pages the original back in answers below the threshold, and the host
    handing those answers back (named lcm_expand) stores them whole: no stub of a stub."""
    engine = make_engine(
        threshold=10**6, **{**ON, "LCM_LARGE_OUTPUT_EXTERNALIZATION_THRESHOLD_CHARS": "6000"}
    )
    output = big_output(40_000)
    history = [*tool_turn("run", output, "call0"), {"role": "assistant", "content": "done"}]
    engine.ingest_host(history)
    stub_row = next(r for r in rows(engine) if r.role == "tool")
    info = parse_stub(stub_row.content)
    assert info is not None
    pages, offset, answers = [], 0, []
    while offset is not None:
        text = engine.handle_tool_call(
            "lcm_expand", {"externalized_ref": info.ref, "content_offset": offset}
        )
        answers.append(text)
        answer = __import__("json").loads(text)
        pages.append(answer["content"])
        offset = answer["next_content_offset"]
    assert "".join(pages) == output and len(pages) >= 7
    assert all(len(a) < 6000 for a in answers), [len(a) for a in answers]
    for i, text in enumerate(answers):  # the host hands each answer back as the tool's result
        history += [
            {"role": "user", "content": f"page {i}"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": f"x{i}",
                        "type": "function",
                        "function": {"name": "lcm_expand", "arguments": "{}"},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": f"x{i}", "name": "lcm_expand", "content": text * 3},
        ]
    engine.ingest_host(history)
    own = [r for r in rows(engine) if r.role == "tool" and r.tool_name == "lcm_expand"]
    assert len(own) == len(answers) and not any(is_stub(r.content) for r in own)
    assert [r.content for r in own] == [a * 3 for a in answers]  # whole, even over the threshold
    assert len(list(payload_dir(engine).glob("*.payload"))) == 1
    # the same text from another tool is externalized as before
    history += tool_turn("again", answers[0] * 3, "call9")
    engine.ingest_host(history)
    assert is_stub(rows(engine)[-1].content)
    store_module.close_all()


def test_a_recovery_answer_without_the_tool_name_stays_whole(make_engine: Any) -> None:
    """A tool result in the OpenAI shape (``tool_call_id``, no ``name``) is known by its call:
    a 25,000-character lcm_expand or lcm_describe answer is stored whole, not as a stub the model
    would have to expand again, in the call that brings it and after a restart re-reads the list;
    another tool's result of the same size is externalized as before."""
    settings = {**ON, "LCM_LARGE_OUTPUT_EXTERNALIZATION_THRESHOLD_CHARS": "6000"}
    engine = make_engine(threshold=10**6, **settings)
    answer = big_output(25_000, "answer")
    history: list[dict[str, Any]] = []
    for i, tool in enumerate(("lcm_expand", "lcm_describe", "terminal")):
        call = {"id": f"r{i}", "type": "function", "function": {"name": tool, "arguments": "{}"}}
        history += [
            {"role": "user", "content": f"look {i}"},
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"r{i}", "content": f"{tool}: {answer}"},
            {"role": "assistant", "content": f"seen {i}"},
        ]
        engine.ingest_host(history)  # each turn in its own call, as the host sends them
    tools = [r for r in rows(engine) if r.role == "tool"]
    assert [is_stub(r.content) for r in tools] == [False, False, True]
    assert tools[0].content == f"lcm_expand: {answer}"
    stored = [(r.id, r.content) for r in rows(engine)]
    store_module.close_all()
    again = make_engine(threshold=10**6, **settings)  # another process, the whole list again
    again.ingest_host(history)
    assert [(r.id, r.content) for r in rows(again)] == stored
    store_module.close_all()


def test_answer_cap_is_the_smallest_limit_an_answer_would_hit() -> None:
    from hermes_lcm.config import LcmConfig
    from hermes_lcm.tools import MIN_ANSWER_CHARS, answer_cap

    plain = LcmConfig()
    assert answer_cap(plain, 0, 0, "lcm_expand") == plain.tool_response_max_chars
    on = LcmConfig(
        large_output_externalization_enabled=True, large_output_externalization_threshold_chars=9000
    )
    assert answer_cap(on, 0, 0, "lcm_grep") == 8999
    assert (
        answer_cap(plain, 0, 10_000, "lcm_expand") == 10_000
    )  # a quarter of the prompt's threshold
    assert (
        answer_cap(plain, 0, 10_000, "lcm_grep") == plain.tool_response_max_chars
    )  # recovery tools only
    assert answer_cap(plain, 0, 100, "lcm_expand") == MIN_ANSWER_CHARS


@pytest.mark.both_backends
def test_grep_finds_lines_inside_externalized_outputs(make_engine: Any) -> None:
    """lcm_grep content_scope=externalized | both (LCM-X's): the payload files of the
    conversation's outputs are scanned, each hit a line with the offset lcm_expand pages from;
    inline search alone sees only the stub; a ref another conversation holds is refused."""
    engine = make_engine(threshold=10**6, **ON)
    output = big_output(30_000) + "\nERROR quux-9 failed on shard 12\n" + big_output(5000, "z")
    history = [*tool_turn("run the suite", output, "call0"), {"role": "assistant", "content": "ok"}]
    engine.ingest_host(history)
    inline = ok(engine, "lcm_grep", query="quux-9 shard")
    assert inline["count"] == 0  # the line is in the payload, not in the stub
    found = ok(engine, "lcm_grep", query="quux-9 shard", content_scope="externalized")
    [hit] = found["externalized_hits"]
    assert hit["line"] == "ERROR quux-9 failed on shard 12"
    page = ok(
        engine,
        "lcm_expand",
        externalized_ref=hit["externalized_ref"],
        content_offset=hit["content_offset"],
    )
    assert page["content"].startswith("ERROR quux-9 failed on shard 12")
    both = ok(engine, "lcm_grep", query="quux-9", content_scope="both")
    assert "hits" in both and len(both["externalized_hits"]) == 1
    named = ok(
        engine,
        "lcm_grep",
        query="quux-9",
        content_scope="externalized",
        externalized_refs=[hit["externalized_ref"]],
    )
    assert named["externalized_hits"] == found["externalized_hits"]
    other = make_engine(threshold=10**6, session="s2", **ON)
    other.ingest_host([{"role": "user", "content": "hello"}])
    refused = err(
        other,
        "lcm_grep",
        query="quux-9",
        content_scope="externalized",
        externalized_refs=[hit["externalized_ref"]],
    )
    assert "not referenced in this conversation" in refused
    assert ok(other, "lcm_grep", query="quux-9", content_scope="externalized")["count"] == 0
    store_module.close_all()


@pytest.mark.both_backends
def test_the_shell_searches_and_reads_externalized_outputs(make_engine: Any) -> None:
    """``lcm grep --content-scope externalized|both`` finds the line inside the payload, and
    ``lcm expand --ref REF --content-offset N`` reads on from it; a ref no row was given, or a
    malformed one, is refused; another conversation's scope finds nothing."""
    import io
    import json

    from hermes_lcm.cli.main import main

    engine = make_engine(threshold=10**6, **ON)
    output = big_output(30_000) + "\nERROR quux-9 failed on shard 12\n" + big_output(5000, "z")
    engine.ingest_host(
        [*tool_turn("run the suite", output, "call0"), {"role": "assistant", "content": "ok"}]
    )
    other = make_engine(threshold=10**6, session="s2", **ON)
    other.ingest_host([{"role": "user", "content": "hello"}])
    assert engine.core is not None and other.core is not None
    where = engine.core.store.path
    mine, theirs = engine.core.binding.conversation_id, other.core.binding.conversation_id

    def lcm(*argv: str) -> tuple[int, Any]:
        out = io.StringIO()
        code = main(["--db", where, "--format", "json", *argv], out=out)
        return code, json.loads(out.getvalue())

    code, inline = lcm("grep", "quux-9 shard")
    assert code == 0 and not [h for h in inline["items"] if "shard 12" in str(h)]
    code, found = lcm("grep", "quux-9 shard", "--content-scope", "externalized")
    [hit] = found["items"]
    assert (hit["kind"], hit["snippet"]) == ("output", "ERROR quux-9 failed on shard 12")
    code, page = lcm("expand", "--ref", hit["ref"], "--content-offset", str(hit["content_offset"]))
    assert code == 0 and page["content"].startswith("ERROR quux-9 failed on shard 12")
    assert page["content"] == output[hit["content_offset"] : hit["content_offset"] + 20_000]
    assert page["conversation_id"] == mine and page["chars"] == len(output)
    code, both = lcm("grep", "quux-9", "--content-scope", "both", "--conversation", str(mine))
    assert code == 0 and [h["kind"] for h in both["items"]].count("output") == 1
    code, elsewhere = lcm(
        "grep", "quux-9", "--content-scope", "externalized", "--conversation", str(theirs)
    )
    assert code == 0 and elsewhere["items"] == []
    assert lcm("expand", "--ref", "0" * 24)[0] == 1
    assert lcm("expand", "--ref", "not-a-ref")[0] == 2
    assert lcm("expand", "--ref", hit["ref"], "--message", "1")[0] == 2

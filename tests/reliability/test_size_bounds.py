"""Host calls stay bounded whatever the input size, and nothing is lost.

Each case runs a large input through a real engine (real SQLite, the extractive summarizer) with
``LCM_COMPACTION_MAX_SECONDS`` set low, and checks what must hold whatever the time: the returned
prompt is a valid provider sequence within its budget, every message is stored byte for byte and
can be paged back with lcm_expand. Inputs are as small as still reaches each size path (a text
above ``EXACT_COUNT_MAX_CHARS``, a group of thousands of calls); the 50 MB and 100,000-call cases
with their timings are in ``bench/large_inputs.py`` and docs/benchmarks.md, not here.
"""

from __future__ import annotations

import base64
import json
import random
import re
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hermes_lcm.base.tokens import (
    EXACT_COUNT_MAX_CHARS,
    _ensure_encoder,
    count_message,
    count_messages,
    count_tokens,
)
from hermes_lcm.compaction import passes as compact
from hermes_lcm.compaction.sources import fit_sources
from hermes_lcm.compaction.summarize import SourceItem
from hermes_lcm.engine import LcmEngine
from hermes_lcm.host import hooks
from hermes_lcm.prompt.assemble import cut_message
from hermes_lcm.prompt.blocks import Item, group

from ..convo import assert_valid_sequence

LOW_BOUND = {"LCM_COMPACTION_MAX_SECONDS": "2"}
PLACEHOLDER = re.compile(r"\[lcm-payload ref=([0-9a-f]{24}) mime=[^\]\s]* chars=\d+\]")
MakeEngine = Callable[..., LcmEngine]


def _budget_total(
    engine: LcmEngine, messages: list[dict[str, Any]], current_tokens: int | None = None
) -> int:
    """The budget the engine's compress used (the overhead depends on the host's token count)."""
    core = engine.ensure_core()
    assert core is not None
    return core.budget(engine.threshold_tokens, engine.overhead(messages, current_tokens)).total


def _stored(engine: LcmEngine) -> list[dict[str, Any]]:
    core = engine.ensure_core()
    assert core is not None and core.binding.conversation_id is not None
    return [m.to_host() for m in core.store.messages_after(core.binding.conversation_id, 0)]


def _expand_payloads(text: str, engine: LcmEngine) -> str:
    core = engine.ensure_core()
    assert core is not None
    return PLACEHOLDER.sub(lambda m: core.guard.read(m.group(1), 0, 10**9)[0], text)


def _page_back(engine: LcmEngine, store_id: int) -> tuple[str, str]:
    """The stored content of ``store_id`` paged back through lcm_expand: (text, format)."""
    text, offset, fmt = "", 0, "text"
    while offset is not None:
        page = json.loads(
            engine.handle_tool_call("lcm_expand", {"store_id": store_id, "content_offset": offset})
        )
        assert "error" not in page, page
        if page.get("complete"):
            message = page["message"]
            return message["content"], "message"
        text += page["content"]
        fmt = page["content_format"]
        offset = page.get("next_content_offset")
    return text, fmt


def _wide_turn(calls: int, big_chars: int) -> list[dict[str, Any]]:
    tool_calls = [
        {
            "id": f"c{i}",
            "type": "function",
            "function": {"name": "read_file", "arguments": json.dumps({"path": f"src/f{i}.py"})},
        }
        for i in range(calls)
    ]
    big = "".join(
        f"row {i}: status=ok value={i * 7919 % 10007}\n" for i in range(big_chars // 30 + 1)
    )
    history: list[dict[str, Any]] = [
        {"role": "user", "content": "read every file under src and find the config loader bug"},
        {"role": "assistant", "content": "", "tool_calls": tool_calls},
    ]
    history += [
        {
            "role": "tool",
            "tool_call_id": f"c{i}",
            "name": "read_file",
            "content": big[:big_chars] if i == calls // 2 else f"f{i}.py: {i % 97} lines, ok",
        }
        for i in range(calls)
    ]
    return [
        *history,
        {"role": "assistant", "content": "done reading; the loader ignores YAML at start"},
        {"role": "user", "content": "WIDE-NEWEST-REQUEST: fix it in config.py"},
        {"role": "assistant", "content": "patched config.py"},
    ]


def test_a_wide_turn_with_a_huge_result_stays_bounded_valid_and_lossless(
    make_engine: MakeEngine,
) -> None:
    """3,000 calls in one assistant message, one result above the exact-count size: the group is
    compacted (not replayed), the prompt keeps the newest request, every row is stored exactly."""
    engine = make_engine(threshold=8000, **LOW_BOUND)
    history = _wide_turn(3000, EXACT_COUNT_MAX_CHARS + 100_000)
    hooks.post_llm_call(session_id="s1", conversation_history=history)
    out = engine.compress(history, current_tokens=2_000_000)
    assert_valid_sequence([m for m in out if not m.get("_lcm_synthetic")])
    assert count_messages(out) <= _budget_total(engine, history, 2_000_000)
    assert any(m.get("content") == history[-2]["content"] for m in out)
    assert _stored(engine) == history
    assert engine.errors == []


def test_compaction_stops_at_the_deadline_after_one_deterministic_pass(
    make_engine: MakeEngine,
) -> None:
    """With no time at all, a compress still makes one (extractive) pass and then stops for time,
    rather than running every pass the backlog needs; the prompt is still valid and bounded."""
    engine = make_engine(
        threshold=3000, LCM_COMPACTION_MAX_SECONDS="0", LCM_LEAF_CHUNK_TOKENS="500"
    )
    rng = random.Random(7)
    words = "config loader yaml threshold session window budget summary frontier tail".split()
    history: list[dict[str, Any]] = []
    for turn in range(80):
        history.append(
            {"role": "user", "content": f"turn {turn}: " + " ".join(rng.choices(words, k=60))}
        )
        history.append(
            {
                "role": "assistant",
                "content": f"answer {turn}: " + " ".join(rng.choices(words, k=60)),
            }
        )
    engine.ingest_host(history)
    out = engine.compress(history)
    core = engine.ensure_core()
    assert core is not None
    report = core.stats.last_compaction
    assert report["stop_reason"].startswith("time limit"), report
    assert report["leaf_passes"] + report["condense_passes"] + report["evicted"] == 1
    assert_valid_sequence([m for m in out if not m.get("_lcm_synthetic")])
    assert count_messages(out) <= _budget_total(engine, history)
    assert len(_stored(engine)) == len(history)


def test_a_block_cut_by_the_planning_window_is_left_whole_for_a_later_pass(
    make_engine: MakeEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A window of the oldest rows that ends inside a tool block, with a message before it: the
    plan offers only that message (the cut block is neither grouped nor summarized in part), and
    the next pass starts at the block and summarizes it with its calls and results."""
    monkeypatch.setattr(compact, "OLDEST_WINDOW", 40)
    engine = make_engine(threshold=3000, LCM_FRESH_TAIL_COUNT="2")
    history = _wide_turn(200, 100)
    engine.ingest_host(history)
    core = engine.ensure_core()
    assert core is not None and core.binding.conversation_id is not None
    budget = core.budget(engine.threshold_tokens, 0)
    plan = core.compactor._plan(core.binding.conversation_id, budget)
    assert [[item.role for item in g] for g in plan.compactable] == [["user"]]
    assert (
        compact._cut_block_start(plan.oldest[1:]) is None
    )  # a block alone in its window is planned
    engine.compress(history, current_tokens=2_000_000)
    assert core.stats.last_compaction["leaf_passes"] >= 2
    assert _stored(engine) == history


def test_calls_without_a_result_in_view_are_shown_as_text_together() -> None:
    """An assistant message whose results are out of view (a window's edge): the answered calls
    stay calls with their results, every other call is text on one line that names each of them."""
    calls = [
        {"id": f"c{i}", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        for i in range(50)
    ]
    call = Item("assistant", 10, {"role": "assistant", "content": "", "tool_calls": calls}, 1)
    results = [
        Item("tool", 5, {"role": "tool", "tool_call_id": f"c{i}", "content": "ok"}, 2 + i)
        for i in range(3)
    ]
    groups = group([call, *results])
    head = groups[0][0].message
    assert [c["id"] for c in head["tool_calls"]] == ["c0", "c1", "c2"]
    assert "47 tool calls without a result: " in head["content"]
    assert all(f'"c{i}"' in head["content"] for i in range(3, 50))
    assert_valid_sequence([m.message for g in groups for m in g])


def test_a_pass_is_not_started_when_one_as_long_as_the_longest_would_overrun(
    make_engine: MakeEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each pass takes one second of a fake clock and the deadline is 2.5 s away: the second pass
    fits (1 s + 1 s), the third would end after the deadline, so it is not started."""
    engine = make_engine(threshold=3000, LCM_LEAF_CHUNK_TOKENS="500", LCM_CONTEXT_THRESHOLD="0.5")
    rng = random.Random(5)
    words = "config loader yaml threshold session window budget summary frontier tail".split()
    history = [
        {
            "role": "user" if i % 2 == 0 else "assistant",
            "content": f"{i}: " + " ".join(rng.choices(words, k=80)),
        }
        for i in range(160)
    ]
    engine.ingest_host(history)
    core = engine.ensure_core()
    assert core is not None and core.binding.conversation_id is not None
    now = [1000.0]
    monkeypatch.setattr(compact, "time", SimpleNamespace(monotonic=lambda: now[0]))
    real = core.compactor.summarize

    def slow(*args: Any) -> Any:
        now[0] += 1.0
        return real(*args)

    core.compactor.summarize = slow
    budget = core.budget(engine.threshold_tokens, 0)
    report = core.compactor.run(core.binding.conversation_id, "s1", budget, deadline=now[0] + 2.5)
    assert report.stop_reason.startswith("time limit"), report
    assert report.passes == 2


ODD = [
    "e\u0301",
    "\u200d",
    "👩\u200d👩\u200d👧",
    "\u202eevil\u202c",
    "中文字符",
    "ﷺ",
    "\ufeff",
    "\x00",
    "𝔘𝔫𝔦",
    "\u0300" * 5,
    "한국어",
    " ",
    "\n",
    "a",
]


def test_a_huge_message_of_odd_unicode_is_stored_exactly_and_pages_back(
    make_engine: MakeEngine,
) -> None:
    """Combining marks, ZWJ sequences, bidi controls, NUL, astral letters and a lone surrogate in
    a text above the exact-count size: stored exactly, paged back exactly, cut to fit the prompt
    with its head kept (dense text used to be cut to nothing)."""
    engine = make_engine(threshold=6000, **LOW_BOUND)
    rng = random.Random(3)
    body = (
        "HEAD-MARK "
        + "".join(rng.choice(ODD) for _ in range(EXACT_COUNT_MAX_CHARS))
        + "\ud800 TAIL-MARK"
    )
    history = [{"role": "user", "content": "paste"}, {"role": "user", "content": body}]
    engine.ingest_host(history)
    out = engine.compress(history, current_tokens=2_000_000)
    assert count_messages(out) <= _budget_total(engine, history, 2_000_000)
    assert (
        out[-1]["content"].startswith("HEAD-MARK ") and "lcm_expand store_id=" in out[-1]["content"]
    )
    assert _stored(engine)[1]["content"] == body
    store_id = int(re.findall(r"store_id=(\d+)", out[-1]["content"])[-1])
    text, fmt = _page_back(engine, store_id)
    assert (json.loads(text) if fmt == "json" else text) == body
    assert engine.errors == []


def test_base64_and_data_uri_floods_are_externalized_exactly(make_engine: MakeEngine) -> None:
    """Hundreds of data: URIs plus alphanumeric runs just under the payload minimum (the shape that
    made the run regex quadratic): URIs go to payload files, the short runs stay, all exact."""
    engine = make_engine(threshold=6000, **LOW_BOUND)
    rng = random.Random(5)
    uri = "data:image/png;base64," + base64.b64encode(rng.randbytes(1500)).decode()
    near_miss = "Q" * 2000
    body = " ".join(
        [uri] * 150 + [near_miss] * 100 + ["data:a/" + "b" * 3000 + ";x=" + "c" * 3000] * 20
    )
    history = [
        {"role": "user", "content": "look"},
        {"role": "tool", "tool_call_id": "t1", "content": body},
    ]
    engine.ingest_host(history)
    out = engine.compress(history, current_tokens=2_000_000)
    assert count_messages(out) <= _budget_total(engine, history, 2_000_000)
    row = _stored(engine)[1]["content"]
    assert uri not in row and near_miss in row
    assert _expand_payloads(row, engine) == body
    assert engine.errors == []


def test_a_list_that_fits_only_as_stored_is_not_handed_back_with_its_payload(
    make_engine: MakeEngine,
) -> None:
    """A user pastes 300 KB of base64: the store keeps a placeholder naming the payload file, so the
    stored prompt fits, but the host's list carries the base64 itself. The identity of the two is the
    same (placeholder and payload are one message); compress must still return the stored form, not
    hand the host's 300 KB list back "unchanged" (its answer must fit)."""
    engine = make_engine(threshold=6000, **LOW_BOUND)
    blob = base64.b64encode(random.Random(9).randbytes(225_000)).decode()
    history = [
        {"role": "user", "content": "here it is"},
        {"role": "user", "content": f"the dump: {blob}"},
    ]
    engine.ingest_host(history)
    out = engine.compress(history, current_tokens=200_000)
    assert count_messages(out) <= _budget_total(engine, history, 200_000)
    assert blob not in out[-1]["content"] and "[lcm-payload ref=" in out[-1]["content"]
    assert _expand_payloads(_stored(engine)[1]["content"], engine) == history[1]["content"]
    assert engine.errors == []


def test_rows_of_one_ingest_go_in_as_a_few_statements(make_engine: MakeEngine) -> None:
    """One INSERT statement per row made FTS5 flush and merge per row (minutes after one huge row);
    rows go in as multi-row statements. (Kept small: the trace expands every bound parameter.)"""
    engine = make_engine(threshold=8000)
    core = engine.ensure_core()
    assert core is not None
    statements: list[str] = []
    core.store.conn.set_trace_callback(statements.append)
    try:
        engine.ingest_host(_wide_turn(300, 100))
    finally:
        core.store.conn.set_trace_callback(None)
    # The trace repeats a statement's text for each trigger it fires: count distinct statements.
    inserts = {s for s in statements if s.lstrip().upper().startswith("INSERT INTO MESSAGES(")}
    assert len(_stored(engine)) == 305
    assert len(inserts) == 1, len(inserts)


BLOCKS = {
    "prose": lambda r, n: " ".join(
        r.choice(["the", "config", "loader", "ignores", "yaml", "at", "start"])
        for _ in range(n // 5)
    )[:n],
    "base64": lambda r, n: base64.b64encode(r.randbytes(n))[:n].decode(),
    "digits": lambda r, n: "".join(r.choice("0123456789") for _ in range(n)),
    "cjk": lambda r, n: "".join(chr(r.randint(0x4E00, 0x9FFF)) for _ in range(n)),
    "letters": lambda r, n: ("a " * n)[:n],
    "json": lambda r, n: json.dumps([{"id": f"c{i}", "v": i} for i in range(n // 18 + 1)])[:n],
}


@settings(
    derandomize=True,
    database=None,
    deadline=None,
    max_examples=12,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    st.lists(
        st.tuples(st.sampled_from(sorted(BLOCKS)), st.integers(30_000, 120_000)),
        min_size=2,
        max_size=5,
    ),
    st.integers(0, 2**32),
)
def test_long_texts_are_counted_high_never_much_low(
    blocks: list[tuple[str, int]], seed: int
) -> None:
    """Above the exact size a text is counted from samples: mixed content (prose, base64, digits,
    CJK) must not be undercounted the way the character-class estimate did (base64 at 0.3x), and
    the count never passes the UTF-8 byte length."""
    rng = random.Random(seed)
    text = "".join(BLOCKS[kind](rng, n) for kind, n in blocks)
    if len(text) <= EXACT_COUNT_MAX_CHARS:
        text = text * (EXACT_COUNT_MAX_CHARS // len(text) + 1)
    exact = _ensure_encoder()(text)
    counted = count_tokens(text)
    assert exact * 0.97 <= counted <= len(text.encode("utf-8"))
    assert counted <= exact * 1.6


def test_a_cut_of_dense_text_keeps_a_head_within_its_share() -> None:
    """Base64 and CJK run 1-1.5 characters a token: the cut is sized by measured density, so it
    keeps text (not just the pointer) and stays within the share."""
    for text in (
        base64.b64encode(random.Random(1).randbytes(300_000)).decode(),
        "中文字符测试" * 50_000,
    ):
        message = cut_message(
            Item("tool", 0, {"role": "tool", "tool_call_id": "t", "content": text}, 42), 600
        )
        assert message["content"].startswith(text[:200])
        assert "lcm_expand store_id=42" in message["content"]
        assert count_message(message) <= 600 + 4


def test_summary_sources_are_cut_to_a_fair_share() -> None:
    sources = [SourceItem(f"#{i}", "x" * 50) for i in range(10)] + [
        SourceItem("#big", "y" * 1_000_000)
    ]
    fitted = fit_sources(sources, 10_000)
    assert [s.text for s in fitted[:10]] == ["x" * 50] * 10
    assert (
        len(fitted[-1].text) <= 10_000
        and fitted[-1].text.startswith("y")
        and "omitted" in fitted[-1].text
    )
    many = fit_sources([SourceItem(f"#{i}", "z" * 5000) for i in range(2000)], 400_000)
    assert sum(len(s.text) for s in many) <= 400_000 + 2000 * 40


@pytest.mark.parametrize("kind", ["wide-20k-calls", "2mb-odd-unicode"])
def test_large_inputs_complete_and_stay_lossless(make_engine: MakeEngine, kind: str) -> None:
    """The benchmark's shapes at a size that still runs in seconds: ingest through the hook, compress
    with a 2 s bound, a tool call with the history; all valid, bounded and stored exactly."""
    engine = make_engine(threshold=16000, **LOW_BOUND)
    if kind.startswith("wide"):
        history = _wide_turn(20_000, 1_000_000)
    else:
        rng = random.Random(11)
        history = [
            {"role": "user", "content": "paste"},
            {"role": "user", "content": "".join(rng.choice(ODD) for _ in range(1_000_000))},
        ]
    hooks.post_llm_call(session_id="s1", conversation_history=history)
    assert engine.should_compress(2_000_000)
    out = engine.compress(history, current_tokens=2_000_000)
    answer = json.loads(engine.handle_tool_call("lcm_grep", {"query": "config"}, messages=history))
    assert "error" not in answer, answer
    hooks.on_session_end(session_id="s1", messages=history)
    assert_valid_sequence([m for m in out if not m.get("_lcm_synthetic")])
    assert out and count_messages(out) <= _budget_total(engine, history, 2_000_000)
    assert _stored(engine) == history
    assert engine.errors == []


def test_a_large_message_edited_in_place_is_seen_as_changed(tmp_path: Any) -> None:
    """Large texts keep their fingerprint across host calls while the content is the same string
    object; the host replacing the content (or the role) of the same dict must still be seen."""
    from hermes_lcm.base.payloads import PayloadGuard
    from hermes_lcm.ingest.steps import LARGE_CHARS, Normalizer

    normalizer = Normalizer(PayloadGuard(tmp_path / "payloads"))
    message: dict[str, Any] = {"role": "user", "content": "a" * LARGE_CHARS + " first"}
    before = normalizer.fingerprint(message)
    normalizer.forget()
    assert normalizer.fingerprint(message) == before
    message["content"] = "a" * LARGE_CHARS + " other"
    normalizer.forget()
    edited = normalizer.fingerprint(message)
    assert edited != before
    message["role"] = "assistant"
    normalizer.forget()
    assert normalizer.fingerprint(message) not in (before, edited)
    assert normalizer.normalize(message).content.endswith(" other")

"""Every stored message pages to its end with lcm_expand, whatever its characters.

Text of quotes, backslashes, control characters or astral characters grows up to six times when
JSON-escaped; a page sized in characters would exceed the answer cap and the message could never
be read back. Property: for any such content (and tool-call JSON, and parts lists), paging by
``next_content_offset`` ends, every answer fits the cap, and the pages concatenate to exactly the
stored text. Listings that show the message (lcm_load_session, lcm_expand node_id) stay answers too.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hermes_lcm import store as store_module

CAP = 2000
ODD = [
    '"',
    "\\",
    "\x00",
    "\x01",
    "\x07",
    "\x1f",
    "\x7f",
    "\n",
    "\t",
    "\u2028",
    "\U0001f600",
    "\U00010348",
    "a",
    "é",
    "<",
    "&",
]
odd_text = st.text(alphabet=st.sampled_from(ODD), min_size=1, max_size=6000)


def answer(engine: Any, name: str, **args: Any) -> dict[str, Any]:
    raw = engine.handle_tool_call(name, args)
    assert len(raw) <= CAP, (name, len(raw))
    out = json.loads(raw)
    assert "error" not in out, out
    return out


def page_through(engine: Any, store_id: int, part: str) -> str:
    got, offset, pages = "", 0, 0
    while True:
        out = answer(engine, "lcm_expand", store_id=store_id, part=part, content_offset=offset)
        if out.get("complete"):
            message = out["message"]
            value = message.get("content") if part == "content" else None
            return value if isinstance(value, str) else json.dumps(value)
        got += out["content"]
        pages += 1
        assert pages < 20000
        if out["next_content_offset"] is None:
            return got
        assert out["next_content_offset"] == offset + len(out["content"]) > offset
        offset = out["next_content_offset"]


def store_turn(engine: Any, content: str) -> list[int]:
    calls = [
        {
            "id": "call_1",
            "type": "function",
            "function": {
                "name": "write_file",
                "arguments": json.dumps({"text": content, "q": '"\\'}),
            },
        }
    ]
    messages = [
        {
            "role": "user",
            "content": [{"type": "text", "text": content}, {"type": "text", "text": "ok"}],
        },
        {"role": "assistant", "content": "", "tool_calls": calls},
        {"role": "tool", "tool_call_id": "call_1", "content": content},
        {"role": "assistant", "content": content},
    ]
    engine.ingest_host(messages)
    core = engine.core
    return [m.id for m in core.store.messages_after(core.binding.conversation_id, 0)][-4:]


def check_all(engine: Any, ids: list[int]) -> None:
    store = engine.core.store
    for store_id in ids:
        stored = store.message(store_id)
        full = stored.parts if stored.parts is not None else stored.content
        content = page_through(engine, store_id, "content")
        if stored.parts is None:
            assert content == full
        else:  # parts come back as their exact stored JSON, or as the whole message
            assert content == full or json.loads(content) == json.loads(full)
        if stored.tool_calls:
            assert page_through(engine, store_id, "tool_calls") == stored.tool_calls
    answer(engine, "lcm_load_session", session_id=engine.core.binding.session_id, limit=100)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(content=odd_text)
@pytest.mark.both_backends
def test_odd_characters_page_to_the_end(make_engine, content: str) -> None:
    engine = make_engine(session=f"s{abs(hash(content))}", LCM_TOOL_RESPONSE_MAX_CHARS=str(CAP))
    try:
        check_all(engine, store_turn(engine, content))
    finally:
        store_module.close_all()


@pytest.mark.both_backends
def test_a_137k_json_tool_result_pages_to_the_end(make_engine) -> None:
    engine = make_engine(LCM_TOOL_RESPONSE_MAX_CHARS=str(CAP))
    big = json.dumps(
        [{"path": f"src/f{i}.py", "text": 'say "hi"\\n\t', "n": i} for i in range(2800)]
    )
    assert len(big) > 137_000
    ids = store_turn(engine, big)
    check_all(engine, ids)
    store_module.close_all()


@pytest.mark.both_backends
def test_many_payload_placeholders_do_not_overflow_a_page(make_engine) -> None:
    engine = make_engine(LCM_TOOL_RESPONSE_MAX_CHARS=str(CAP))
    text = "".join(f"[lcm-payload ref={i:024x} mime=text/plain chars=1]" for i in range(400))
    check_all(engine, store_turn(engine, text))
    store_module.close_all()

"""lcm_expand and lcm_load_session: exact original text back, in pages that always move forward."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from hermes_lcm.engine import LcmEngine

from .tooltest import compacted, err, ok, walk

pytestmark = pytest.mark.both_backends

UNICODE = (
    "naïve café — 東京 🙂 \u200b zero-width, RTL \u05e9\u05dc\u05d5\u05dd, combining e\u0301, "
    '\\n literal, "quotes"'
)
CALL_ARGS = '{"path": "src/é.py", "content": "line1\\nline2 🙂", "n": 3}'


def special_messages() -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": "please fix src/é.py — " + UNICODE},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "write_file", "arguments": CALL_ARGS},
                }
            ],
        },
        {
            "role": "tool",
            "tool_call_id": "call_1",
            "name": "write_file",
            "content": "wrote 2 lines 🙂",
        },
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "structured ask about the ocelot"},
                {"type": "text", "text": "second part ✓"},
            ],
        },
        {"role": "assistant", "content": "ocelot noted " + "long text " * 3000},
    ]


def find(engine: LcmEngine, query: str) -> int:
    hits = ok(engine, "lcm_grep", query=query)["hits"]
    return int(next(h["store_id"] for h in hits if "store_id" in h and not h.get("neighbour")))


def test_grep_expand_round_trip_is_byte_identical(make_engine):
    engine = make_engine()
    messages = special_messages()
    engine.ingest_host(messages)
    for original, query in zip(
        messages[:4], ["café 東京", "write_file", "wrote lines", "ocelot structured"], strict=True
    ):
        store_id = find(engine, query) if query != "write_file" else find(engine, "please fix") + 1
        expanded = ok(engine, "lcm_expand", store_id=store_id)
        assert expanded["complete"] is True
        assert expanded["message"] == original
        assert json.dumps(expanded["message"], ensure_ascii=False, sort_keys=True) == json.dumps(
            original, ensure_ascii=False, sort_keys=True
        )
    call = ok(engine, "lcm_expand", store_id=find(engine, "please fix") + 1)["message"][
        "tool_calls"
    ][0]
    assert call["function"]["arguments"] == CALL_ARGS, (
        "tool-call argument JSON is kept byte for byte"
    )


def test_long_content_pages_rebuild_the_exact_text(make_engine):
    engine = make_engine(LCM_TOOL_RESPONSE_MAX_CHARS="6000")
    original = special_messages()[4]["content"]
    engine.ingest_host(special_messages())
    store_id = find(engine, "ocelot noted")
    text, offset, calls = "", 0, 0
    while offset is not None:
        page = ok(engine, "lcm_expand", store_id=store_id, content_offset=offset)
        assert page["content_offset"] == offset and page["content_chars"] == len(original)
        text += page["content"]
        nxt = page["next_content_offset"]
        assert nxt is None or nxt > offset
        offset, calls = nxt, calls + 1
    assert text == original and calls > 1
    assert "past the end" in err(
        engine, "lcm_expand", store_id=store_id, content_offset=len(original) + 1
    )


def test_structured_content_and_tool_calls_page_as_exact_json(make_engine):
    engine = make_engine(LCM_TOOL_RESPONSE_MAX_CHARS="3500")
    big_args = json.dumps({"path": "big.txt", "content": "ünïcode " * 600})
    parts = [{"type": "text", "text": "part " * 400}, {"type": "text", "text": "tail ✓"}]
    messages = [
        {"role": "user", "content": parts},
        {
            "role": "assistant",
            "content": "writing it",
            "tool_calls": [
                {
                    "id": "c9",
                    "type": "function",
                    "function": {"name": "write_file", "arguments": big_args},
                }
            ],
        },
    ]
    engine.ingest_host(messages)
    first = ok(engine, "lcm_expand", store_id=1)
    assert first["content_format"] == "json"
    assert json.loads(_read_all(engine, 1, "content")) == parts
    assert ok(engine, "lcm_expand", store_id=2)["tool_calls_chars"] > 3500
    calls = json.loads(_read_all(engine, 2, "tool_calls"))
    assert calls[0]["function"]["arguments"] == big_args


def _read_all(engine: LcmEngine, store_id: int, part: str) -> str:
    text, offset = "", 0
    while offset is not None:
        page = ok(engine, "lcm_expand", store_id=store_id, part=part, content_offset=offset)
        text += page["content"]
        offset = page["next_content_offset"]
    return text


def test_payload_guard_placeholders_expand_to_the_original_bytes(make_engine):
    engine = make_engine(LCM_TOOL_RESPONSE_MAX_CHARS="4000")
    blob = base64.b64encode(bytes(range(256)) * 40).decode()
    uri = f"data:image/png;base64,{blob}"
    engine.ingest_host(
        [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "look at the platypus picture"},
                    {"type": "image_url", "image_url": {"url": uri}},
                ],
            }
        ]
    )
    expanded = ok(engine, "lcm_expand", store_id=find(engine, "platypus"))
    refs = expanded["externalized_refs"]
    assert len(refs) == 1
    described = ok(engine, "lcm_describe", externalized_ref=refs[0])
    assert (
        described["mime"] == "image/png"
        and described["chars"] == len(uri)
        and described["readable"]
    )
    text, offset = "", 0
    while offset is not None:
        page = ok(engine, "lcm_expand", externalized_ref=refs[0], content_offset=offset)
        text += page["content"]
        offset = page["next_content_offset"]
    assert text == uri
    assert "24 hex" in err(engine, "lcm_expand", externalized_ref="../../etc/passwd")
    assert "not referenced" in err(engine, "lcm_expand", externalized_ref="0" * 24)


def test_payload_of_another_conversation_needs_opt_in(make_engine):
    owner = make_engine(session="a")
    blob = base64.b64encode(b"\x00\x01secret" * 400).decode()
    owner.ingest_host([{"role": "user", "content": f"data:application/pdf;base64,{blob}"}])
    ref = ok(owner, "lcm_expand", store_id=1)["externalized_refs"][0]
    other = make_engine(session="b")
    other.ingest_host([{"role": "user", "content": "hello"}])
    assert "not referenced in this conversation" in err(other, "lcm_expand", externalized_ref=ref)
    assert ok(other, "lcm_expand", externalized_ref=ref, session_scope="all")["chars"] > 0


def test_node_sources_walk_visits_each_source_once(make_engine):
    engine = make_engine()
    history = compacted(engine, turns=40)
    describe = ok(engine, "lcm_describe")
    leaf = next(
        n for n in ok(engine, "lcm_grep", query="ask", limit=50)["hits"] if n.get("depth") == 0
    )
    node = leaf["node_id"]
    info = ok(engine, "lcm_describe", node_id=node)
    sources = walk(
        lambda c: ok(engine, "lcm_expand", node_id=node, source_offset=c or 0, source_limit=3),
        "sources",
        "next_source_offset",
    )
    ids = [s["store_id"] for s in sources]
    assert len(ids) == len(set(ids)) == info["descendant_messages"]["count"]
    assert ids == sorted(ids)
    by_id = {i + 1: m for i, m in enumerate(history)}
    for source in sources:
        if "more" not in source:
            assert source["content"] == (by_id[source["store_id"]].get("content") or "")
    assert describe["summaries_by_depth"]


def test_deeper_nodes_page_their_children(make_engine):
    engine = make_engine()
    compacted(engine, turns=80)
    depths = ok(engine, "lcm_describe")["summaries_by_depth"]
    assert "1" in depths, depths
    root = next(n for n in ok(engine, "lcm_describe")["roots"] if n["depth"] >= 1)
    children = walk(
        lambda c: ok(
            engine, "lcm_expand", node_id=root["node_id"], source_offset=c or 0, source_limit=1
        ),
        "sources",
        "next_source_offset",
    )
    # A condensed node is one level above its deepest child; a pass squeezed for time may join an
    # adjacent pair of different depths (``Compactor._condensable``), so only the deepest is one below.
    depths_below = [c["depth"] for c in children]
    assert max(depths_below) == root["depth"] - 1 and all(d < root["depth"] for d in depths_below)
    assert len({c["node_id"] for c in children}) == len(children) >= 2
    sub = ok(engine, "lcm_describe", node_id=root["node_id"])
    assert [c["node_id"] for c in sub["children"]] == [c["node_id"] for c in children]
    child = ok(engine, "lcm_describe", node_id=children[0]["node_id"])
    assert root["node_id"] in child["ancestors"]


def test_expand_errors_are_clear(make_engine):
    engine = make_engine()
    engine.ingest_host([{"role": "user", "content": "hello"}])
    assert "exactly one" in err(engine, "lcm_expand")
    assert "exactly one" in err(engine, "lcm_expand", node_id="S1", store_id=1)
    assert "no compaction has happened yet" in err(engine, "lcm_expand", node_id="S1")
    assert "must look like S12" in err(engine, "lcm_expand", node_id="banana")
    assert "no message with store_id 99" in err(engine, "lcm_expand", store_id=99)
    assert "store_id must be an integer" in err(engine, "lcm_expand", store_id="one")
    assert "part must be one of" in err(engine, "lcm_expand", store_id=1, part="body")
    clamp = ok(engine, "lcm_expand", store_id=1, content_offset=-5)
    assert clamp["clamped"] == {"content_offset": {"requested": -5, "used": 0}}


def test_load_session_walks_every_message_once_in_order(make_engine):
    engine = make_engine()
    history = compacted(engine, turns=30)
    rows = walk(
        lambda c: ok(
            engine,
            "lcm_load_session",
            session_id="s1",
            limit=7,
            **({"after_store_id": c} if c else {}),
        ),
        "messages",
    )
    assert [r["store_id"] for r in rows] == list(range(1, len(history) + 1))
    for row, original in zip(rows, history, strict=True):
        assert row["role"] == original["role"]
        if "more" not in row:
            assert row["content"] == (original.get("content") or "")
    first = ok(engine, "lcm_load_session", session_id="s1", limit=1000)
    assert first["clamped"]["limit"]["used"] == 100 and first["messages_total"] == len(history)


def test_load_session_reads_only_the_named_session(make_engine):
    first = make_engine(session="a")
    first.ingest_host([{"role": "user", "content": "from session a"}])
    second = make_engine(session="b")
    second.ingest_host([{"role": "user", "content": "from session b"}])
    page = ok(second, "lcm_load_session", session_id="a")
    assert [m["content"] for m in page["messages"]] == ["from session a"] and page[
        "next_cursor"
    ] is None
    assert "session_id is required" in err(second, "lcm_load_session")

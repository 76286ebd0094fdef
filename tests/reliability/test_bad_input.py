"""Whatever shape the host's messages take, the engine neither raises nor loses a storable message.

Random message lists (missing fields, nested parts, huge strings, lone surrogates, NUL bytes,
base64 blobs and data: URIs, FTS5 syntax, odd types where strings belong) are ingested; the
stored rows must be exactly the storable messages (a mapping with a string role that is not
``system`` and not one of our own summary messages), each one recoverable: its content byte for
byte once payload placeholders are expanded. Replaying the list stores nothing new. Random
queries, FTS syntax included, never make lcm_grep fail. Seeded (``derandomize``), bounded.
"""

from __future__ import annotations

import base64
import copy
import json
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hermes_lcm.base.tokens import count_messages
from hermes_lcm.engine import LcmEngine
from hermes_lcm.host import hooks
from hermes_lcm.store import close_all, is_url

from ..conftest import BACKENDS, database_env
from ..workcount import Work, measure

# On both backends through the module-scoped ``home`` fixture (one home, and one schema, per backend:
# the examples share them), not through ``backend``.
pytestmark = pytest.mark.both_backends

SETTINGS = settings(
    derandomize=True,
    database=None,
    deadline=None,
    max_examples=300,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,
    ],
)
PLACEHOLDER = re.compile(r"\[lcm-payload ref=([0-9a-f]{24}) mime=[^\]\s]* chars=\d+\]")
FTS_BITS = [
    '"',
    '""',
    " AND ",
    " OR ",
    " NOT ",
    "NEAR(a b, 3)",
    "*",
    "^start",
    "col:val",
    "(",
    ")",
    "{a b}",
    "+",
    "-",
    "'",
    ":",
    "content:",
    "messages_fts",
    "\\",
    "a*b",
    '"unterminated',
    "NEAR/2",
    "ÄÖÜ*",
    " & ",
    " | ",
    "!",
    "!!x",
    "<->",
    "<2>",
    ":*",
    "a:*",
    "x:AB",
    "''",
    "\\'",
    "E'\\x00'",
    "$$",
    "%s",
    "%",
]
B64 = base64.b64encode(bytes(range(256)) * 12).decode()  # 4 kB of real base64

_counter = iter(range(10**9))


# ---------------------------------------------------------------------------- strategies

any_chars = st.characters(exclude_categories=())  # includes lone surrogates and NUL
texts = st.one_of(
    st.text(any_chars, max_size=60),
    st.lists(st.sampled_from(FTS_BITS) | st.text(any_chars, max_size=8), max_size=8).map("".join),
    st.sampled_from(["", "\x00", "a\x00b", "\ud800", "x\udfffy", "🙂" * 3, "[lcm:contextual", " "]),
)
huge = st.integers(20_000, 400_000).map(
    lambda n: ("lorem ipsum dolor sit amet, " * (n // 28 + 1))[:n] + " END"
)
blobs = st.sampled_from(
    [
        f"see data:image/png;base64,{B64} here",
        f"raw {B64}{B64} tail",
        f"data:application/pdf;base64,{B64[:64]}",
    ]
)
json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**12), 10**12),
    st.floats(allow_nan=False, allow_infinity=False),
    texts,
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=12,
)
parts = st.lists(
    st.one_of(
        st.fixed_dictionaries({"type": st.just("text"), "text": texts | huge | blobs}),
        st.fixed_dictionaries(
            {
                "type": st.just("image_url"),
                "image_url": st.fixed_dictionaries({"url": blobs | texts}),
            }
        ),
        json_values,
    ),
    max_size=4,
)
contents = st.one_of(texts, texts, huge, blobs, parts, json_values, st.none())
tool_calls = st.one_of(
    st.none(),
    st.just([]),
    texts,
    json_values,
    st.lists(
        st.fixed_dictionaries(
            {
                "id": texts | st.integers(),
                "type": st.just("function"),
                "function": st.fixed_dictionaries(
                    {"name": texts, "arguments": texts | json_values}
                ),
            },
            optional={"_private": texts},
        ),
        max_size=3,
    ),
)
roles = st.one_of(
    st.sampled_from(["user", "assistant", "tool", "system", "developer", "function"]),
    texts,
    st.integers(),
    st.none(),
)


@st.composite
def messages(draw: st.DrawFn) -> Any:
    if draw(st.integers(0, 19)) == 0:  # not a message at all
        return draw(st.one_of(st.none(), texts, st.integers(), st.lists(texts, max_size=2)))
    message: dict[str, Any] = {}
    for key, strategy in (
        ("role", roles),
        ("content", contents),
        ("tool_calls", tool_calls),
        ("tool_call_id", texts | st.integers() | st.none()),
        ("name", texts | st.integers()),
        ("timestamp", st.floats(allow_nan=False) | texts | st.none()),
        ("_host_private", texts),
    ):
        if draw(st.integers(0, 9)) < (9 if key in ("role", "content") else 3):
            message[key] = draw(strategy)
    return message


# ---------------------------------------------------------------------------- oracle


def storable(message: Any) -> bool:
    if (
        not isinstance(message, Mapping)
        or not isinstance(message.get("role"), str)
        or message["role"] == "system"
    ):
        return False
    # Content that merely looks like our summary block ("[lcm:contextual", a typed "[lcm:context 1]")
    # is stored like any message; only our own keyed or sealed block is not.
    return not message.get("_lcm_synthetic")


def safe(text: str) -> str:
    """Identity fields (role, tool_call_id, tool name) are stored as valid UTF-8: lone surrogates become '?'."""
    return text.encode("utf-8", "replace").decode("utf-8")


def json_roundtrip(value: Any) -> Any:
    return json.loads(json.dumps(value, ensure_ascii=True, default=str))


def public(value: Any) -> Any:
    if isinstance(value, list):
        return [public(v) for v in value]
    if isinstance(value, dict):
        return {k: public(v) for k, v in value.items() if not str(k).startswith("_")}
    return value


def expand_payloads(value: Any, core: Any) -> Any:
    """The stored value with every payload placeholder replaced by its file's text."""
    if isinstance(value, str):
        return PLACEHOLDER.sub(lambda m: core.guard.read(m.group(1), 0, 10**9)[0], value)
    if isinstance(value, list):
        return [expand_payloads(v, core) for v in value]
    if isinstance(value, dict):
        return {k: expand_payloads(v, core) for k, v in value.items()}
    return value


# ---------------------------------------------------------------------------- tests


@pytest.fixture(scope="module", params=BACKENDS)
def home(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Path]:
    """A home per backend; on PostgreSQL its engines share one fresh schema (named in WHERE)."""
    WHERE.clear()
    WHERE.update(database_env(request.param))
    yield tmp_path_factory.mktemp(f"bad-input-{request.param}")
    close_all()
    WHERE.clear()


WHERE: dict[str, str] = {}


def fresh_engine(home: Path) -> LcmEngine:
    env = {"HERMES_HOME": str(home), "LCM_SUMMARY_PROVIDER": "extractive", **WHERE}
    engine = copy.deepcopy(LcmEngine(env=env))
    engine.update_model("fuzz-model", 64000)
    engine.threshold_tokens = 6000
    engine.on_session_start(f"fuzz-{next(_counter)}", hermes_home=str(home), platform="cli")
    return engine


def stored(engine: LcmEngine) -> list[dict[str, Any]]:
    core = engine.ensure_core()
    assert core is not None and core.binding.conversation_id is not None
    return [m.to_host() for m in core.store.messages_after(core.binding.conversation_id, 0)]


@SETTINGS
@given(history=st.lists(messages(), max_size=8), extra=messages())
def test_any_message_shape_is_stored_losslessly(home: Path, history: list[Any], extra: Any) -> None:
    engine = fresh_engine(home)
    hooks.post_llm_call(
        session_id=engine.session_id, conversation_history=history
    )  # the host's path
    expected = [m for m in history if storable(m)]
    rows = stored(engine)
    assert engine.errors == [], engine.errors
    assert len(rows) == len(expected), f"stored {len(rows)} of {len(expected)} storable messages"
    core = engine.ensure_core()
    for row, original in zip(rows, expected, strict=True):
        assert row["role"] == safe(original["role"])
        content = expand_payloads(row["content"], core)
        assert content == json_roundtrip(original.get("content")) or (
            original.get("content") is None and content in (None, "")
        )
        if original.get("tool_calls"):
            assert expand_payloads(row.get("tool_calls"), core) == json_roundtrip(
                public(original["tool_calls"])
            )
        if original.get("tool_call_id"):
            assert row.get("tool_call_id") == safe(str(original["tool_call_id"]))
    engine.ingest_host(history)  # a replay stores nothing
    assert len(stored(engine)) == len(expected)
    engine.ingest_host([*history, extra])  # one more message: stored iff storable
    assert len(stored(engine)) == len(expected) + storable(extra)
    out = engine.compress([*history, extra], current_tokens=10**6)
    assert isinstance(out, list) and count_messages(out) <= engine.threshold_tokens
    assert engine.errors == [], engine.errors


queries = st.one_of(
    texts,
    st.lists(
        st.sampled_from(FTS_BITS)
        | st.sampled_from(["file", "error", "src/a.py", "x_y", "Ünïcode"]),
        max_size=10,
    ).map(" ".join),
    st.none(),
    st.integers(),
    st.lists(texts, max_size=2),
)


@pytest.fixture(scope="module")
def search_engine(home: Path) -> LcmEngine:
    engine = fresh_engine(home)
    corpus: list[dict[str, Any]] = [
        {"role": "user", "content": f"note {i}: {bit} file error src/a.py x_y"}
        for i, bit in enumerate(FTS_BITS)
    ]
    engine.ingest_host(corpus)
    return engine


@SETTINGS
@given(query=queries, limit=st.one_of(st.none(), st.integers(-5, 10**9), texts))
def test_any_query_is_answered(search_engine: LcmEngine, query: Any, limit: Any) -> None:
    args: dict[str, Any] = {"query": query}
    if limit is not None:
        args["limit"] = limit
    answer = json.loads(search_engine.handle_tool_call("lcm_grep", args))
    error = str(answer.get("error", ""))
    # The error may quote the caller's own text back (a limit of 'failed'); the rest of it may not
    # be an internal failure's.
    ours = error.replace(repr(limit), "").replace(repr(query), "")
    assert not re.search(r"fts5|syntax|failed|Error:", ours), error
    assert search_engine.errors == [], search_engine.errors


def test_fts_syntax_in_content_is_found(search_engine: LcmEngine) -> None:
    for needle in ("NEAR(a b, 3)", "col:val", '"unterminated', "{a b}"):
        answer = json.loads(search_engine.handle_tool_call("lcm_grep", {"query": needle}))
        assert answer.get("hits"), (needle, answer)


def _log_lines(count: int) -> str:
    return "".join(f"line {i}: value={i * 7919 % 10007} status=ok\n" for i in range(count))


def _dump(body: str) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": "dump the log"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "cat", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "name": "cat", "content": body},
        {"role": "assistant", "content": "that was long"},
    ]


def _ingest_and_compress(
    engine: LcmEngine, history: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], Work]:
    core = engine.ensure_core()
    assert core is not None

    def run() -> list[dict[str, Any]]:
        engine.ingest_host(history)
        return engine.compress(history, current_tokens=2_000_000)

    # SQLite's VM steps count too; on PostgreSQL the server's work is not ours to count (lines are).
    return measure(run, None if is_url(core.store.path) else core.store.conn)  # type: ignore[attr-defined]


def test_five_megabyte_tool_result(home: Path) -> None:
    """A 5 MB tool result is stored whole, pages back exactly, and the prompt stays bounded."""
    body = _log_lines(140_000)[:5_000_000] + "FINAL-MARKER-5MB"
    engine = fresh_engine(home)
    history = _dump(body)
    out, work = _ingest_and_compress(engine, history)
    # The work does not follow the text's size: a tenth of the text costs about as much (counted in
    # lines of Python and SQLite steps, not timed: tests/workcount.py). A pass per line of the text
    # in Python would make the large one ~10x the small one.
    _, small = _ingest_and_compress(
        fresh_engine(home / "small"), _dump(_log_lines(14_000)[:500_000])
    )
    assert work.lines <= 1.5 * small.lines + 5000, f"5 MB: {work}; 500 kB: {small}"
    assert count_messages(out) <= engine.threshold_tokens
    rows = stored(engine)
    assert rows[2]["content"] == body
    hit = json.loads(engine.handle_tool_call("lcm_grep", {"query": "FINAL-MARKER-5MB"}))
    assert any(h.get("store_id") for h in hit.get("hits", [])), hit
    store_id = next(h["store_id"] for h in hit["hits"] if h.get("store_id"))
    text, offset = "", 0
    while offset is not None and len(text) < 6_000_000:
        page = json.loads(
            engine.handle_tool_call("lcm_expand", {"store_id": store_id, "content_offset": offset})
        )
        assert "error" not in page, page
        text += page["content"]
        offset = page.get("next_content_offset")
    assert text == body
    assert engine.errors == []


def test_five_megabyte_base64_blob_goes_to_a_payload_file(home: Path) -> None:
    engine = fresh_engine(home)
    blob = base64.b64encode(bytes(i % 251 for i in range(3_750_000))).decode()  # 5 MB of base64
    history = [
        {"role": "user", "content": "here is the image"},
        {"role": "tool", "tool_call_id": "c9", "content": f"data:image/png;base64,{blob}"},
    ]
    engine.ingest_host(history)
    rows = stored(engine)
    assert len(rows) == 2 and len(rows[1]["content"]) < 200, rows[1]["content"][:200]
    core = engine.ensure_core()
    assert expand_payloads(rows[1]["content"], core) == history[1]["content"]
    assert engine.errors == []

"""lcm_recall's vector arm and fusion: real SQLite, real engines, embeddings from a real HTTP
server on 127.0.0.1 (the stub of test_embed_http, answering with a small "concept" embedding),
and the offline MiniLM where it is installed.

What must hold: a paraphrase (no shared word) is found only with vectors on; the arm keeps to
the caller's reach (another owner's rows never come back), to the filters and to the snapshot;
pages and cursors stay stable and a hybrid cursor never continues a full-text walk; a provider
that fails or is too slow leaves a full-text answer that says why; lcm_grep stays keyword-only.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hermes_lcm import store as store_module
from hermes_lcm.engine import LcmEngine
from hermes_lcm.search.arms import Filters, Scope
from hermes_lcm.search.query import build_query
from hermes_lcm.search.searcher import Searcher, SearchRequest

from .conftest import database_env
from .embedstub import Stub, serve
from .test_embed_e5 import MISSING as E5_MISSING
from .test_embed_local import MISSING as LOCAL_MISSING
from .tooltest import walk

# The stub's embedding: one dimension per concept, so texts about the same thing in other words
# are near each other, and texts sharing words but not meaning are not.
CONCEPTS = [
    {"car", "automobile", "vehicle", "sedan"},
    {"doctor", "physician", "clinic", "medical"},
    {"bread", "baking", "loaf", "oven"},
    {"guitar", "music", "song", "melody", "tune"},
    {"money", "salary", "paycheck", "wages"},
    {"dog", "puppy", "hound", "canine"},
]
DIM = len(CONCEPTS) + 2


def concept_vector(text: str) -> list[float]:
    words = re.findall(r"[a-z]+", text.lower())
    row = [float(sum(w in c for w in words)) for c in CONCEPTS]
    return [*row, 0.05, 0.01 * (len(words) % 7)]


def concept_answer(request: dict[str, Any], path: str) -> tuple[int, Any, float]:
    data = [
        {"object": "embedding", "index": i, "embedding": concept_vector(t)}
        for i, t in enumerate(request["input"])
    ]
    return 200, {"object": "list", "data": data, "model": request["model"]}, 0.0


pytestmark = pytest.mark.both_backends
_DATABASE: dict[str, str] = {}  # the engines' database setting for the running test (one per test)


@pytest.fixture(autouse=True)
def _database(backend: str) -> Iterator[None]:
    """Every engine of a test shares one database: a file under its home, or a fresh schema."""
    _DATABASE.update(database_env(backend))
    yield
    _DATABASE.clear()


@pytest.fixture
def server() -> Iterator[Stub]:
    state, stop = serve(Stub(answer=concept_answer))
    try:
        yield state
    finally:
        stop()
        store_module.close_all()


def vector_env(stub: Stub, **more: str) -> dict[str, str]:
    return {
        "LCM_EMBEDDINGS_ENABLED": "true",
        "LCM_EMBEDDING_PROVIDER": "openai",
        "LCM_EMBEDDING_BASE_URL": stub.base_url + "/v1",
        "LCM_EMBEDDING_MODEL": "concept-test",
        "LCM_EMBEDDING_API_KEY": "sk-test-vectors-0123456789",
        "LCM_EMBEDDING_STORAGE_DTYPE": "float32",
        **more,
    }


def engine_for(home: Path, session: str, chat: str | None, env: dict[str, str]) -> LcmEngine:
    base = {"HERMES_HOME": str(home), "LCM_SUMMARY_PROVIDER": "extractive", **_DATABASE, **env}
    engine = copy.deepcopy(LcmEngine(env=base))
    engine.update_model("fake-model", 1_000_000)
    start: dict[str, Any] = {"hermes_home": str(home), "platform": "telegram" if chat else "cli"}
    if chat:
        start["conversation_id"] = f"agent:main:telegram:dm:{chat}"
    engine.on_session_start(session, **start)
    return engine


def embed_all(engine: LcmEngine) -> None:
    core = engine.core
    assert core is not None and core.semantic.embedder is not None
    if core.semantic.job is not None:
        core.semantic.job.stop()
    core.semantic.embedder.warmup()
    core.semantic.embedder.backfill()


def recall(engine: LcmEngine, **args: Any) -> dict[str, Any]:
    answer = json.loads(engine.handle_tool_call("lcm_recall", {"include_in_context": True, **args}))
    assert "error" not in answer, answer
    return answer


FILLER = [
    "we talked about the weather today",
    "the meeting moved to thursday afternoon",
    "please send the report before friday",
    "lunch was pasta again",
    "the train was late",
]
TALK = [
    {
        "role": "user",
        "content": "I finally bought a new sedan last week, a blue one",
        "timestamp": 1_700_000_000,
    },
    {
        "role": "assistant",
        "content": "Congratulations on the purchase!",
        "timestamp": 1_700_000_030,
    },
    {
        "role": "user",
        "content": "My physician said my blood pressure is fine",
        "timestamp": 1_700_000_060,
    },
    {"role": "assistant", "content": "Good news from the check-up.", "timestamp": 1_700_000_090},
    {
        "role": "user",
        "content": "I baked a sourdough loaf in the oven tonight",
        "timestamp": 1_700_000_120,
    },
] + [
    {
        "role": "user" if i % 2 == 0 else "assistant",
        "content": f"{text} number {i}",
        "timestamp": 1_700_000_200 + i * 30,
    }
    for i, text in enumerate(FILLER * 4)
]


def stored_ids(engine: LcmEngine) -> dict[str, int]:
    core = engine.core
    assert core is not None and core.binding.conversation_id is not None
    return {m.content: m.id for m in core.store.messages_after(core.binding.conversation_id, 0)}


def test_a_paraphrase_is_found_only_with_vectors(server: Stub, tmp_path: Path) -> None:
    plain = engine_for(tmp_path / "a", "s1", None, {})
    plain.ingest_host(TALK)
    hybrid = engine_for(tmp_path / "b", "s1", None, vector_env(server))
    hybrid.ingest_host(TALK)
    embed_all(hybrid)
    target = stored_ids(hybrid)[TALK[0]["content"]]
    question = "what automobile do they drive"  # no word of the evidence
    off = recall(plain, query=question)
    assert all(h.get("store_id") != target for h in off["hits"])
    assert off["arms"]["vectors"].startswith("off (embeddings not enabled")
    on = recall(hybrid, query=question)
    assert on["hits"][0]["store_id"] == target, on["hits"][:3]
    assert on["hits"][0].get("semantic") is True
    assert (
        on["arms"]["vectors"] == "on (openai:concept-test)"
    )  # counts only for a whole-store reach
    assert on["arms"]["fts"] == "on"
    # lcm_grep stays keyword-only by default; LCM-X's modes add meaning within grep's own scope
    grep = json.loads(
        hybrid.handle_tool_call("lcm_grep", {"query": question, "include_in_context": True})
    )
    assert all(h.get("store_id") != target for h in grep["hits"])
    assert "arms" not in grep
    for mode in ("hybrid", "semantic"):
        moded = json.loads(
            hybrid.handle_tool_call(
                "lcm_grep", {"query": question, "include_in_context": True, "mode": mode}
            )
        )
        assert moded["mode"] == mode and moded["arms"]["vectors"].startswith("on"), moded
        assert moded["hits"][0]["store_id"] == target, (mode, moded["hits"][:3])
    # without embeddings a mode answers full text and says why
    fallback = json.loads(
        plain.handle_tool_call("lcm_grep", {"query": question, "mode": "semantic"})
    )
    assert fallback["arms"]["vectors"].startswith("off (embeddings not enabled")
    assert all(h.get("store_id") != target for h in fallback["hits"])
    bad = json.loads(plain.handle_tool_call("lcm_grep", {"query": question, "mode": "vector"}))
    assert "mode must be one of" in json.dumps(bad)


def test_grep_modes_keep_to_the_conversation(two_owners: tuple[LcmEngine, LcmEngine]) -> None:
    """lcm_grep's hybrid/semantic modes search grep's scope only: the current conversation, and
    never another owner's rows even with session_scope=all."""
    alice, bob = two_owners
    victim_ids = set(stored_ids(alice).values())
    for scope in ("current", "all"):
        for mode in ("hybrid", "semantic"):
            answer = json.loads(
                bob.handle_tool_call(
                    "lcm_grep",
                    {
                        "query": "instrument music melody song guitar",
                        "mode": mode,
                        "session_scope": scope,
                        "include_in_context": True,
                        "limit": 50,
                    },
                )
            )
            assert answer["arms"]["vectors"].startswith("on"), answer
            assert not {h.get("store_id") for h in answer["hits"]} & victim_ids


def test_a_keyword_hit_keeps_its_place(server: Stub, tmp_path: Path) -> None:
    """Fusion never buries an exact keyword match under the dense arm's neighbours."""
    engine = engine_for(tmp_path, "s1", None, vector_env(server))
    engine.ingest_host(TALK)
    embed_all(engine)
    ids = stored_ids(engine)
    hits = recall(engine, query="sourdough")["hits"]
    assert hits[0]["store_id"] == ids[TALK[4]["content"]]


def test_rows_not_embedded_yet_say_partial(server: Stub, tmp_path: Path) -> None:
    engine = engine_for(tmp_path, "s1", None, vector_env(server))
    engine.ingest_host(TALK[:10])
    embed_all(engine)
    engine_for(tmp_path, "s1", None, {}).ingest_host(
        TALK
    )  # stored by an engine with embeddings off: they wait
    answer = recall(engine, query="automobile")
    assert (
        answer["arms"]["vectors"]
        == "partial (openai:concept-test; newer messages not embedded yet)"
    )
    shared = engine_for(tmp_path, "s1", None, vector_env(server, LCM_SHARED_MEMORY="true"))
    embed_all(shared)
    assert (
        recall(shared, query="automobile")["arms"]["vectors"]
        == "on (openai:concept-test, 25 messages)"
    )


@pytest.mark.parametrize("failure", ["http500", "timeout"])
def test_provider_down_falls_back_to_full_text_and_says_why(
    server: Stub, tmp_path: Path, failure: str
) -> None:
    engine = engine_for(
        tmp_path / "b", "s1", None, vector_env(server, LCM_EMBEDDING_QUERY_TIMEOUT_S="0.3")
    )
    engine.ingest_host(TALK)
    embed_all(engine)
    plain = engine_for(tmp_path / "a", "s1", None, {})
    plain.ingest_host(TALK)
    if failure == "http500":
        server.answer = lambda request, path: (500, {"error": "down"}, 0.0)
    else:
        server.answer = lambda request, path: (*concept_answer(request, path)[:2], 2.0)
    answer = recall(engine, query="sourdough automobile")
    assert answer["arms"]["vectors"].startswith("unavailable (query embedding failed: ")
    assert "sk-test" not in json.dumps(answer)
    assert answer["hits"] == recall(plain, query="sourdough automobile")["hits"]  # full text alone
    assert all("semantic" not in h for h in answer["hits"])


# ------------------------------------------------------------------------- scope (attack)

VICTIM = "The vault combination is hidden inside my guitar case, under the song sheets"
VICTIM_MORE = [
    "my puppy chewed the melody notebook",
    "salary arrives on the first, paycheck in the music box",
]


@pytest.fixture
def two_owners(server: Stub, tmp_path: Path) -> Iterator[tuple[LcmEngine, LcmEngine]]:
    alice = engine_for(tmp_path, "tg-alice", "111", vector_env(server))
    alice.ingest_host(
        [
            {"role": "user", "content": t, "timestamp": 1_700_000_000 + i}
            for i, t in enumerate([VICTIM, *VICTIM_MORE])
        ]
    )
    bob = engine_for(tmp_path, "tg-bob", "222", vector_env(server))
    bob.ingest_host(TALK)
    embed_all(alice)
    embed_all(bob)
    assert alice.database_path() == bob.database_path()
    yield alice, bob


def test_another_owners_rows_never_come_back_through_vectors(
    two_owners: tuple[LcmEngine, LcmEngine],
) -> None:
    alice, bob = two_owners
    victim_ids = set(stored_ids(alice).values())
    for query in (
        "where is the musical instrument kept",
        "guitar song melody music",
        "canine",
        "wages",
        "vault combination hidden",
        "instrument music melody song guitar",
    ):
        for limit in (1, 5, 30):
            answer = recall(bob, query=query, limit=limit, scope_bias=0)
            assert answer["arms"]["vectors"].startswith("on"), answer["arms"]
            raw = json.dumps(answer["hits"])
            assert "vault" not in raw and "puppy" not in raw and "paycheck" not in raw
            assert not {h.get("store_id") for h in answer["hits"]} & victim_ids
    # the victim, asking by meaning, finds its own row
    mine = recall(alice, query="which tune was played")
    assert mine["arms"]["vectors"].startswith("on")
    assert stored_ids(alice)[VICTIM] in [h["store_id"] for h in mine["hits"]]


def test_the_arm_searches_inside_a_small_scope(two_owners: tuple[LcmEngine, LcmEngine]) -> None:
    """Bob's store share is small next to many nearer rows of Alice: the arm still fills its
    pool from Bob's rows (the in-scope ids go to the index), never from Alice's."""
    alice, bob = two_owners
    alice.ingest_host(
        [
            {
                "role": "user",
                "content": f"automobile sedan vehicle car talk {i}",
                "timestamp": 1_700_100_000 + i,
            }
            for i in range(500)
        ]
    )
    embed_all(alice)
    hits = recall(bob, query="automobile", limit=5, scope_bias=0)["hits"]
    assert hits and hits[0]["store_id"] == stored_ids(bob)[TALK[0]["content"]]
    alice_ids = set(stored_ids(alice).values())
    assert not {h["store_id"] for h in hits} & alice_ids


def _request(engine: LcmEngine, query: str, **fields: Any) -> SearchRequest:
    core = engine.core
    assert core is not None
    scope = fields.pop("scope", Scope("all", conversations=core.reach(False)))
    return SearchRequest(
        build_query(query),
        scope,
        fields.pop("filters", Filters()),
        "relevance",
        fields.pop("limit", 10),
        fields.pop("cursor", None),
        vectors=core.semantic,
        text=query,
        **fields,
    )


def test_filters_and_snapshot_bound_the_vector_arm(server: Stub, tmp_path: Path) -> None:
    engine = engine_for(tmp_path, "s1", None, vector_env(server))
    engine.ingest_host(TALK)
    embed_all(engine)
    core = engine.core
    assert core is not None
    ids = stored_ids(engine)
    searcher = Searcher(
        core.store,
        core.dag,
        _request(engine, "automobile physician", filters=Filters(role="assistant")),
    )
    page = searcher.page()
    assert page.hits and all(h.role == "assistant" for h in page.hits)
    late = Searcher(
        core.store, core.dag, _request(engine, "automobile", filters=Filters(since=1_700_000_100))
    )
    assert ids[TALK[0]["content"]] not in {h.id for h in late.page().hits}
    # ids above the snapshot stay out of a pool ranked at an older bound
    pool = Searcher(core.store, core.dag, _request(engine, "automobile")).ranked_pool(
        ids[TALK[0]["content"]] - 1, 10**9
    )
    assert all(h.id < ids[TALK[0]["content"]] for h in pool if h.kind == "message")


def test_a_hybrid_cursor_never_continues_a_full_text_walk(server: Stub, tmp_path: Path) -> None:
    engine = engine_for(tmp_path, "s1", None, vector_env(server))
    engine.ingest_host(TALK)
    embed_all(engine)
    first = recall(engine, query="number automobile", limit=2)
    assert first["next_cursor"]
    core = engine.core
    assert core is not None
    plain = SearchRequest(
        build_query("number automobile"),
        Scope("all", conversations=core.reach(False)),
        limit=2,
        cursor=first["next_cursor"],
    )
    with pytest.raises(ValueError, match="another query, scope or filter"):
        Searcher(core.store, core.dag, plain).page()


def test_pages_are_stable_and_visit_each_row_once(server: Stub, tmp_path: Path) -> None:
    engine = engine_for(tmp_path, "s1", None, vector_env(server))
    engine.ingest_host(TALK)
    embed_all(engine)
    query = "number automobile physician"
    whole = recall(engine, query=query, limit=30)["hits"]
    pages = walk(
        lambda c: recall(engine, query=query, limit=3, **({"cursor": c} if c else {})), "hits"
    )
    keys = [h["store_id"] for h in pages]
    assert len(keys) == len(set(keys))
    assert keys[: len(whole)] == [h["store_id"] for h in whole][: len(keys)]
    engine.ingest_host(
        [
            *TALK,
            {"role": "user", "content": "another automobile arrived", "timestamp": 1_700_009_000},
        ]
    )
    again = walk(
        lambda c: recall(engine, query=query, limit=3, **({"cursor": c} if c else {})), "hits"
    )
    assert len({h["store_id"] for h in again}) == len(again)


WORDS = [
    "automobile",
    "physician",
    "loaf",
    "song",
    "wages",
    "puppy",
    "number",
    "weather",
    "vault",
    "report",
]


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    words=st.lists(st.sampled_from(WORDS), min_size=1, max_size=3),
    limit=st.integers(1, 6),
    bias=st.sampled_from([0.0, 0.25, 1.0]),
)
def test_hybrid_stays_in_scope_and_pages_once(
    two_owners: tuple[LcmEngine, LcmEngine], words: list[str], limit: int, bias: float
) -> None:
    alice, bob = two_owners
    victim_ids = set(stored_ids(alice).values())
    query = " ".join(words)
    hits = walk(
        lambda c: recall(
            bob, query=query, limit=limit, scope_bias=bias, **({"cursor": c} if c else {})
        ),
        "hits",
    )
    ids = [h.get("store_id") for h in hits if "store_id" in h]
    assert len(ids) == len(set(ids))
    assert not set(ids) & victim_ids


@pytest.mark.parametrize(
    "model, missing",
    [("", LOCAL_MISSING), ("multilingual-e5-small-q4", E5_MISSING)],
    ids=["minilm", "e5"],
)
def test_a_local_model_finds_a_paraphrase(tmp_path: Path, model: str, missing: str | None) -> None:
    if missing:
        pytest.skip(missing)
    env = {"LCM_EMBEDDINGS_ENABLED": "true", "LCM_EMBEDDING_PROVIDER": "local"}
    if model:
        env["LCM_EMBEDDING_MODEL"] = model
    plain = engine_for(tmp_path / "a", "s1", None, {})
    plain.ingest_host(TALK)
    engine = engine_for(tmp_path / "b", "s1", None, env)
    engine.ingest_host(TALK)
    embed_all(engine)
    target = stored_ids(engine)[TALK[2]["content"]]
    question = "what did the doctor tell them about their health"
    assert target not in [h.get("store_id") for h in recall(plain, query=question, limit=5)["hits"]]
    answer = recall(engine, query=question, limit=5)
    name = model or "all-minilm-l6-v2-int8"
    assert answer["arms"]["vectors"].startswith(f"on (local:{name}"), answer["arms"]
    assert target in [h.get("store_id") for h in answer["hits"]]
    assert np.isfinite(answer["hits"][0]["score"])


def test_a_fresh_engine_uses_vectors_another_process_stored(server: Stub, tmp_path: Path) -> None:
    """The engine that embedded is not the one that asks (a new process): its first query warms
    the provider up, then searches what is stored."""
    first = engine_for(tmp_path, "s1", None, vector_env(server))
    first.ingest_host(TALK)
    embed_all(first)
    store_module.close_all()
    fresh = engine_for(tmp_path, "s1", None, vector_env(server))
    answer = recall(fresh, query="what automobile do they drive")
    assert answer["arms"]["vectors"].startswith("on"), answer["arms"]
    assert answer["hits"][0]["store_id"] == stored_ids(fresh)[TALK[0]["content"]]


def test_the_vector_arm_brings_as_many_rows_as_full_text(server: Stub, tmp_path: Path) -> None:
    """The dense arm's pool is as deep as the full-text one (search.POOL): a question in other
    words whose answers are many rows finds them all by meaning, not only the first 40
    (bench/fusion_lab.py: a pool of 100 lifted LoCoMo and the paraphrase set, lowered neither)."""
    rows = [
        {
            "role": "user",
            "content": f"automobile parked at spot {i}",
            "timestamp": 1_700_000_000 + 30 * i,
        }
        for i in range(70)
    ]
    engine = engine_for(tmp_path, "s1", None, vector_env(server))
    engine.ingest_host(rows)
    embed_all(engine)
    found, cursor = set(), None
    for _ in range(5):
        page = recall(
            engine,
            query="which sedan do they drive",
            limit=30,
            **({"cursor": cursor} if cursor else {}),
        )
        found |= {h["store_id"] for h in page["hits"] if h.get("semantic")}
        cursor = page.get("next_cursor")
        if not cursor:
            break
    assert len(found) == 70


def test_the_nearest_row_by_meaning_keeps_a_place_on_the_first_page(
    server: Stub, tmp_path: Path
) -> None:
    """Twelve rows share the question's word but not its meaning; the one row about it shares no
    word. Full text fills the first page with the word's rows (and the gated fusion keeps them
    ahead); the reserved place (search/fusion.py, DENSE_SLOTS) still shows the meaning's row among the ten."""
    strays = [
        {
            "role": "user",
            "content": f"groceries from the market stall {i}",
            "timestamp": 1_700_000_000 + 600 * i,
        }
        for i in range(12)
    ]
    filler = [
        {"role": "user", "content": f"{text} ({i})", "timestamp": 1_700_010_000 + 600 * i}
        for i, text in enumerate(FILLER * 8)
    ]
    target = {"role": "user", "content": "I finally got a blue sedan", "timestamp": 1_700_100_000}
    engine = engine_for(tmp_path, "s1", None, vector_env(server))
    engine.ingest_host([*strays, *filler, target])
    embed_all(engine)
    wanted = stored_ids(engine)[target["content"]]
    hits = recall(engine, query="market stall groceries automobile", limit=10)["hits"]
    assert wanted in [h["store_id"] for h in hits]
    assert hits[0]["store_id"] != wanted  # the keyword rows keep the head of the page


def test_the_prescreen_keeps_the_multiplier_the_setting_asks_for(
    server: Stub, tmp_path: Path
) -> None:
    """LCM_KNN_PRESCREEN_MULTIPLIER reaches the index the vector arm searches: each search asks
    for the shortlist the setting names, not a constant of the arm."""
    engine = engine_for(tmp_path, "s1", None, vector_env(server, LCM_KNN_PRESCREEN_MULTIPLIER="50"))
    engine.ingest_host(TALK)
    embed_all(engine)
    core = engine.core
    assert core is not None
    asked: list[int] = []
    real = core.semantic.index

    class Recording:
        """The real index, with the multiplier each search was given written down."""

        def __init__(self, index: Any) -> None:
            self.index, self.dim = index, index.dim

        def __len__(self) -> int:
            return len(self.index)

        def search(self, query: Any, k: int, multiplier: int = 8, allowed: Any = None) -> Any:
            asked.append(multiplier)
            return self.index.search(query, k, multiplier, allowed=allowed)

    core.semantic.index = lambda kind: None if (i := real(kind)) is None else Recording(i)  # type: ignore[method-assign]
    on = recall(engine, query="what automobile do they drive")
    assert on["arms"]["vectors"].startswith("on"), on["arms"]
    assert asked and asked[0] == 50, asked  # the arm's search (a rescore of given ids follows)


def _scaled_answer(common: float) -> Any:
    """The concept embedding as a unit vector with one shared dimension of ``common`` appended:
    every cosine becomes (cos + common^2) / (1 + common^2), so the ranking by meaning is the same
    but on another scale (e5's unrelated rows sit near 0.75, MiniLM's near 0.15)."""

    def answer(request: dict[str, Any], path: str) -> tuple[int, Any, float]:
        data = []
        for i, text in enumerate(request["input"]):
            row = np.asarray(concept_vector(text))
            unit = row / np.linalg.norm(row)
            data.append({"object": "embedding", "index": i, "embedding": [*unit, common]})
        return 200, {"object": "list", "data": data, "model": request["model"]}, 0.0

    return answer


def test_the_fused_ranking_does_not_depend_on_the_models_cosine_scale(tmp_path: Path) -> None:
    """Two models that rank every row alike by meaning, one with its cosines squeezed near 1,
    give the same fused ranking: the cosine is read between the pool's lowest and best."""
    rows = [
        {"role": "user", "content": text, "timestamp": 1_700_000_000 + 60 * i}
        for i, text in enumerate(
            [
                "the physician said the heart sounds fine",
                "tell me about the train schedule",
                "the clinic moved to the high street",
                "tell the puppy to sit",
                "my salary came in on friday",
                "the oven is broken again, tell the landlord",
                "the sedan needs new tyres",
                "a melody stuck in my head",
                *FILLER,
            ]
        )
    ]
    rankings = []
    for common in (0.0, 2.0):
        stub, stop = serve(Stub(answer=_scaled_answer(common)))
        try:
            env = vector_env(stub, LCM_RECALL_VECTOR_WEIGHT="0.6")  # meaning weighs enough to show
            engine = engine_for(tmp_path / f"c{common}", "s1", None, env)
            engine.ingest_host(rows)
            embed_all(engine)
            ranks = []
            for question in ("what did the doctor tell them", "the train or the car", "wages"):
                hits = recall(engine, query=question, limit=12)["hits"]
                ranks.append([h.get("content") or h.get("snippet") for h in hits])
            rankings.append(ranks)
        finally:
            stop()
            store_module.close_all()
    assert rankings[0] == rankings[1]
    # and meaning does rank: the sedan row, sharing no word with the question, comes first
    assert rankings[0][1][0] == "the sedan needs new tyres"

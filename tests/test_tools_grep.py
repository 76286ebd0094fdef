"""lcm_grep and lcm_recall contracts: scope, filters in SQL, ranking, pages that visit every match once."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from hermes_lcm.engine import LcmEngine

from . import backends
from .tooltest import compacted, err, hit_key, ok, walk

pytestmark = pytest.mark.both_backends


def matching_ids(engine: LcmEngine, match: str, conversation_id: int | None) -> set[int]:
    """Raw messages matching an FTS expression, straight from the database."""
    return backends.matching_ids(engine.core.store.path, match, conversation_id)


def test_defaults_and_clamps(make_engine):
    engine = make_engine()
    compacted(engine, turns=30)
    answer = ok(engine, "lcm_grep", query="turn ask")
    assert answer["count"] == 10 and answer["sort"] == "relevance"
    assert answer["scope"] == {"session_scope": "current"}
    assert "clamped" not in answer
    big = ok(engine, "lcm_grep", query="turn ask", limit=500)
    assert big["clamped"] == {"limit": {"requested": 500, "used": 50}} and big["count"] == 50
    small = ok(engine, "lcm_grep", query="turn ask", limit=0)
    assert small["clamped"]["limit"]["used"] == 1 and small["count"] == 1


def test_hits_carry_ids_for_the_next_tool(make_engine):
    engine = make_engine()
    compacted(engine, turns=30)
    summary = engine.core.dag.node(1)
    assert summary is not None
    call_id = re.findall(r"call_\d+_\d+_\d+", summary.content)[0]  # a tool-call id the summary kept
    # The summary is in the prompt (so listed last by default): rank it in place to see both kinds.
    hits = ok(engine, "lcm_grep", query=f"{call_id} ask", limit=20, include_in_context=True)["hits"]
    kinds = {"node_id" in h for h in hits}
    assert kinds == {True, False}, "raw messages and summaries are both searched"
    for hit in hits:
        if "store_id" in hit:
            assert ok(engine, "lcm_expand", store_id=hit["store_id"])["store_id"] == hit["store_id"]
        else:
            assert ok(engine, "lcm_expand", node_id=hit["node_id"])["node_id"] == hit["node_id"]


def _walk_grep(engine: LcmEngine, **args: Any) -> list[dict[str, Any]]:
    return walk(
        lambda cursor: ok(engine, "lcm_grep", **args, **({"cursor": cursor} if cursor else {})),
        "hits",
    )


def test_relevance_walk_visits_every_match_exactly_once(make_engine):
    engine = make_engine()
    compacted(
        engine, turns=60
    )  # > 100 matching rows: the walk crosses from the ranked pool to the tail
    conv = engine.core.binding.conversation_id
    expected = matching_ids(engine, '"ask" OR "answer"', conv)
    assert len(expected) > 100  # more than the ranked pool holds
    hits = _walk_grep(engine, query="ask answer", limit=37)
    keys = [hit_key(h) for h in hits]
    assert len(keys) == len(set(keys)), "no hit twice"
    matched = {h["store_id"] for h in hits if "store_id" in h and not h.get("neighbour")}
    assert matched == expected
    nodes = {h["node_id"] for h in hits if "node_id" in h}
    assert nodes, "summaries are part of the walk"


def test_recency_walk_is_newest_first_and_complete(make_engine):
    engine = make_engine()
    compacted(engine, turns=40)
    conv = engine.core.binding.conversation_id
    hits = _walk_grep(engine, query="answer", sort="recency", limit=25)
    ids = [h["store_id"] for h in hits if "store_id" in h]
    assert ids == sorted(ids, reverse=True)
    assert set(ids) == matching_ids(engine, '"answer"', conv)
    assert len(ids) == len(set(ids))


def test_cursor_belongs_to_its_query(make_engine):
    engine = make_engine()
    compacted(engine, turns=30)
    cursor = ok(engine, "lcm_grep", query="ask", limit=3)["next_cursor"]
    assert cursor
    assert "another query" in err(engine, "lcm_grep", query="answer", limit=3, cursor=cursor)
    assert "another query" in err(
        engine, "lcm_grep", query="ask", limit=3, cursor=cursor, role="user"
    )


def test_role_filter_is_applied_before_the_limit(make_engine):
    engine = make_engine()
    history = [{"role": "assistant", "content": f"zebra zebra zebra note {i}"} for i in range(30)]
    history.append({"role": "user", "content": "one zebra mention from the user"})
    engine.ingest_host(history)
    answer = ok(engine, "lcm_grep", query="zebra", role="user", limit=1)
    assert [h["role"] for h in answer["hits"]] == ["user"]
    assert answer["summary_results_omitted"] is True
    assert all(
        h["role"] == "tool" for h in ok(engine, "lcm_grep", query="zebra", role="tool")["hits"]
    )


def test_time_filters_use_host_timestamps(make_engine):
    engine = make_engine()
    day = 86400
    base = 1714521600  # 2024-05-01T00:00:00Z
    engine.ingest_host(
        [
            {"role": "user", "content": f"kiwi day {d}", "timestamp": base + d * day}
            for d in range(5)
        ]
    )
    hits = ok(
        engine, "lcm_grep", query="kiwi", time_from="2024-05-02", time_to="2024-05-03", limit=10
    )["hits"]
    assert sorted(h["snippet"] for h in hits) == ["«kiwi» day 1", "«kiwi» day 2"]
    assert {h["at"][:10] for h in hits} == {"2024-05-02", "2024-05-03"}
    epoch = ok(engine, "lcm_grep", query="kiwi", time_from=base + 4 * day)["hits"]
    assert [h["snippet"] for h in epoch] == ["«kiwi» day 4"]


def test_source_filter_covers_raw_rows_and_summary_lineage(make_engine):
    engine = make_engine()
    history = compacted(engine, turns=30)
    engine.platform = "telegram"
    late = [{"role": "user", "content": "walrus from telegram"}]
    engine.ingest_host(history + late)
    hits = ok(engine, "lcm_grep", query="walrus ask", source="telegram", limit=50)["hits"]
    assert [h.get("store_id") for h in hits if "store_id" in h] and all(
        "node_id" not in h for h in hits
    )
    assert all("walrus" in h["snippet"] for h in hits if not h.get("neighbour"))
    cli_hits = ok(engine, "lcm_grep", query="ask", source="cli", limit=50)["hits"]
    assert any("node_id" in h for h in cli_hits), "summaries whose sources came from cli stay"
    assert not ok(engine, "lcm_grep", query="walrus", source="unknown")["hits"]


def test_scope_current_never_reads_another_conversation(make_engine):
    first = make_engine(session="a")
    first.ingest_host([{"role": "user", "content": "the narwhal password is tusk"}])
    second = make_engine(session="b")
    second.ingest_host([{"role": "user", "content": "what about the narwhal?"}])
    current = ok(second, "lcm_grep", query="narwhal")["hits"]
    assert len(current) == 1 and "conversation_id" not in current[0]
    everywhere = ok(second, "lcm_grep", query="narwhal", session_scope="all")["hits"]
    assert len(everywhere) == 2
    other = [h for h in everywhere if "conversation_id" in h]
    assert len(other) == 1 and "tusk" in other[0]["snippet"]
    named = ok(second, "lcm_grep", query="narwhal", session_scope="session", session_id="a")
    assert [h["session_id"] for h in named["hits"]] == ["a"]
    assert named["scope"] == {"session_scope": "session", "session_id": "a"}
    assert "another conversation" in err(second, "lcm_expand", store_id=other[0]["store_id"])
    assert ok(second, "lcm_expand", store_id=other[0]["store_id"], session_scope="all")["complete"]


def test_natural_language_identifiers_phrases_prefixes(make_engine):
    engine = make_engine()
    engine.ingest_host(
        [
            {
                "role": "user",
                "content": "Please refactor src/billing/invoice_render.py before Friday.",
            },
            {
                "role": "assistant",
                "content": "Done. The rollback plan is documented in RUNBOOK.md.",
            },
            {"role": "user", "content": "Which database did we pick for the ledger service?"},
            {
                "role": "assistant",
                "content": "We picked PostgreSQL 16 for the ledger because of logical replication.",
            },
            {"role": "user", "content": "unrelated chatter about lunch and coffee"},
        ]
        * 1
    )

    def top(query: str) -> str:
        return ok(engine, "lcm_grep", query=query)["hits"][0]["snippet"]

    top2 = [
        h["snippet"]
        for h in ok(engine, "lcm_grep", query="what database did we choose for the ledger?")["hits"]
    ]
    assert any("PostgreSQL 16" in s for s in top2[:2])
    assert "invoice_render.py" in top("src/billing/invoice_render.py")
    assert "rollback plan" in top('"rollback plan"')
    assert "PostgreSQL" in top("Postgre*")
    assert ok(engine, "lcm_grep", query='col:"x" OR NEAR(a b) AND ^')["count"] >= 0


def test_unicode_queries_and_snippets(make_engine):
    engine = make_engine()
    engine.ingest_host([{"role": "user", "content": "Le café de Zoë était fermé 🙂 — 東京 trip"}])
    hit = ok(engine, "lcm_grep", query="café Zoë")["hits"][0]
    assert "«café»" in hit["snippet"] and "🙂" in hit["snippet"]
    assert ok(engine, "lcm_grep", query="cafe")["count"] == 1, "diacritics fold like the index"


def test_small_size_cap_clamps_limit_and_still_walks_everything(make_engine):
    engine = make_engine(LCM_TOOL_RESPONSE_MAX_CHARS="2500")
    compacted(engine, turns=20)
    first = ok(engine, "lcm_grep", query="answer", limit=50)
    assert first["clamped"]["limit"]["used"] < 50 and not first.get("truncated_by_size_cap")
    hits = _walk_grep(engine, query="answer", sort="recency", limit=50)
    conv = engine.core.binding.conversation_id
    assert {h["store_id"] for h in hits if "store_id" in h} == matching_ids(
        engine, '"answer"', conv
    )


def test_no_match_says_what_to_try(make_engine):
    engine = make_engine()
    engine.ingest_host([{"role": "user", "content": "hello"}])
    answer = ok(engine, "lcm_grep", query="xylophone")
    assert answer["count"] == 0 and answer["next_cursor"] is None and "lcm_recall" in answer["hint"]


def test_grep_sees_messages_passed_with_the_call(make_engine):
    engine = make_engine()
    messages = [{"role": "user", "content": "the quokka arrived"}]
    assert ok(engine, "lcm_grep", query="quokka", messages=messages)["count"] == 1


def test_recall_searches_every_conversation_with_a_soft_bias(make_engine):
    filler = [{"role": "user", "content": f"filler line {i} about nothing"} for i in range(20)]
    other = make_engine(session="old")
    other.ingest_host([*filler, {"role": "user", "content": "the heron nest is by the lake"}])
    current = make_engine(session="new")
    current.ingest_host([*filler, {"role": "user", "content": "the heron nest is by the lake"}])
    # Nothing is compacted, so the current conversation's hit is in the prompt: ranked in place here.
    answer = ok(current, "lcm_recall", query="heron nest", include_in_context=True)
    assert answer["arms"]["fts"] == "on" and "off" in answer["arms"]["summary_vectors"]
    hits = [h for h in answer["hits"] if not h.get("neighbour")]
    assert len(hits) == 2 and "conversation_id" not in hits[0] and "conversation_id" in hits[1]
    assert hits[0]["score"] > hits[1]["score"]
    flat = [
        h
        for h in ok(
            current, "lcm_recall", query="heron nest", scope_bias=0, include_in_context=True
        )["hits"]
        if not h.get("neighbour")
    ]
    assert flat[0]["score"] == flat[1]["score"]
    clamp = ok(current, "lcm_recall", query="heron", scope_bias=5, limit=100)["clamped"]
    assert clamp == {
        "scope_bias": {"requested": 5.0, "used": 1.0},
        "limit": {"requested": 100, "used": 30},
    }


def test_recall_walk_visits_every_match_once(make_engine):
    first = make_engine(session="a")
    compacted(first, turns=25, seed=5)
    second = make_engine(session="b")
    compacted(second, turns=25, seed=6)
    hits = walk(
        lambda c: ok(second, "lcm_recall", query="ask", limit=30, **({"cursor": c} if c else {})),
        "hits",
    )
    keys = [hit_key(h) for h in hits]
    assert len(keys) == len(set(keys))
    assert {h["store_id"] for h in hits if "store_id" in h} == matching_ids(second, '"ask"', None)


def test_a_walk_keeps_its_snapshot_while_new_messages_arrive(make_engine):
    engine = make_engine()
    history = compacted(engine, turns=40)
    conv = engine.core.binding.conversation_id
    before = matching_ids(engine, '"ask" OR "answer"', conv)
    seen: list[tuple[str, Any]] = []
    cursor = None
    for page_number in range(200):
        answer = ok(
            engine,
            "lcm_grep",
            query="ask answer",
            limit=30,
            **({"cursor": cursor} if cursor else {}),
        )
        seen += [hit_key(h) for h in answer["hits"]]
        if page_number == 0:
            history += [{"role": "user", "content": f"late ask {i}"} for i in range(5)]
            engine.ingest_host(history)
        cursor = answer["next_cursor"]
        if cursor is None:
            break
    assert len(seen) == len(set(seen))
    matched = {key[1] for key in seen if key[0] == "m"}
    assert before <= matched and not matched & (matching_ids(engine, '"late"', conv))


def test_tool_call_arguments_are_searchable(make_engine):
    engine = make_engine()
    engine.ingest_host(
        [
            {"role": "user", "content": "open the config"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {
                            "name": "read_file",
                            "arguments": json.dumps({"path": "deploy/helm/values-prod.yaml"}),
                        },
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "replicas: 3"},
        ]
    )
    hit = ok(engine, "lcm_grep", query="deploy/helm/values-prod.yaml")["hits"][0]
    assert hit["store_id"] == 2 and "«deploy/helm/values-prod.yaml»" in hit["snippet"].replace(
        "\\", ""
    )


def test_lcm_tool_traffic_is_not_searched_but_stays_readable(make_engine):
    engine = make_engine()
    history = [
        {"role": "user", "content": "the deployment passphrase is QUOKKA-7731"},
        {"role": "assistant", "content": "noted"},
        {"role": "user", "content": "what was the deployment passphrase?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "g1",
                    "type": "function",
                    "function": {
                        "name": "lcm_grep",
                        "arguments": json.dumps({"query": "deployment passphrase"}),
                    },
                }
            ],
        },
    ]
    result = engine.handle_tool_call(
        "lcm_grep", {"query": "deployment passphrase"}, messages=history
    )
    history.append({"role": "tool", "tool_call_id": "g1", "name": "lcm_grep", "content": result})
    engine.ingest_host(history)
    answer = ok(engine, "lcm_grep", query="deployment passphrase")
    assert "QUOKKA-7731" in json.dumps(answer)[:400], "the fact comes first in the answer"
    ids = {h["store_id"] for h in answer["hits"]}
    assert ids and 4 not in ids and 5 not in ids
    assert ok(engine, "lcm_expand", store_id=5)["message"]["name"] == "lcm_grep"
    recency = _walk_grep(engine, query="passphrase", sort="recency")
    assert {h["store_id"] for h in recency} == {1, 3}


def test_not_and_minus_exclude_rows_and_the_answer_says_so(make_engine):
    engine = make_engine()
    texts = [
        "the webhook relay failed at 3am",
        "the webhook was delivered fine",
        "webhook relay retried twice",
        "it's the webhook again, it's fine",
    ]
    engine.ingest_host(
        [
            m
            for i, t in enumerate(texts)
            for m in (
                {"role": "user", "content": t},
                {"role": "assistant", "content": f"noted {i}"},
            )
        ]
    )
    for query in ("webhook NOT relay", "webhook -relay"):
        answer = ok(engine, "lcm_grep", query=query, include_in_context=True, limit=20)
        snippets = [h["snippet"] for h in answer["hits"]]
        assert snippets and not any("relay" in s for s in snippets), snippets
        assert any("delivered fine" in s for s in snippets) and answer["excluded_terms"] == [
            "relay"
        ]
    long = "webhook log " + " ".join(f"line{i}" for i in range(600)) + " relay"
    assert len(long) > 2000  # the excluded word lies past the text a hit carries
    engine.ingest_host([{"role": "user", "content": long}, {"role": "assistant", "content": "ok"}])
    answer = ok(engine, "lcm_grep", query="webhook -relay", include_in_context=True, limit=20)
    assert not any("line1" in h["snippet"] for h in answer["hits"]), answer
    its = ok(engine, "lcm_grep", query="it's webhook", include_in_context=True, limit=20)
    assert its["terms"] == ["webhook"] and its["dropped_words"] == ["it's"]


def test_neighbour_rows_come_after_every_real_match(make_engine):
    engine = make_engine()
    weak = (
        "a long status note about many other things: "
        + " ".join(f"item{i}" for i in range(120))
        + " ledger"
    )
    turns = [
        (weak, "noted"),
        *[(f"more filler {i}", f"fine {i}") for i in range(6)],
        ("quetzal ledger: the quetzal ledger schema", "quetzal ledger it is"),
        ("what about retention?", "ninety days"),
        ("and backups?", "nightly"),
    ]
    filler = [(f"unrelated chat {i}", f"reply {i}") for i in range(30)]
    engine.ingest_host(
        [
            m
            for u, a in [*turns, *filler]
            for m in ({"role": "user", "content": u}, {"role": "assistant", "content": a})
        ]
    )
    hits = ok(engine, "lcm_grep", query="quetzal ledger", include_in_context=True, limit=50)["hits"]
    flags = [bool(h.get("neighbour")) for h in hits]
    assert any(flags) and not all(flags), hits  # there are neighbours to place
    assert flags == sorted(flags), [(h.get("neighbour"), h["snippet"][:30]) for h in hits]
    assert all(
        ("quetzal" in h["snippet"].lower() or "ledger" in h["snippet"].lower())
        != bool(h.get("neighbour"))
        for h in hits
    )


def test_numbers_that_are_not_finite_are_refused_and_no_answer_holds_infinity(make_engine):
    engine = make_engine()
    engine.ingest_host([{"role": "user", "content": "the heron nest is by the lake"}])
    for value in ("1e309", float("inf"), "-inf", "nan"):
        raw = engine.handle_tool_call("lcm_recall", {"query": "heron", "scope_bias": value})
        assert "Infinity" not in raw and "NaN" not in raw, raw
        assert "scope_bias must be a" in json.loads(raw)["error"]


def test_answers_are_strict_json_whatever_a_body_computes():
    from hermes_lcm.handlers.toolkit import dumps

    assert (
        dumps({"a": float("inf"), "b": [1.5, float("nan")], "c": "Infinity"})
        == '{"a": null, "b": [1.5, null], "c": "Infinity"}'
    )


def test_a_neighbour_outside_the_pool_that_holds_a_query_word_is_a_match(make_engine):
    """Turns next to a strong match are fetched beside the ranked pool; one that holds a query word
    all the same is a match, found in its whole text (short) or in the index (cut past the part
    a hit carries), and only a turn with no query word is marked a neighbour."""
    engine = make_engine()
    crowd = [f"ledger ledger now {i}" for i in range(130)]  # outrank any single mention
    short = "a note on many things " + " ".join(f"w{i}" for i in range(40)) + " ledger"
    cut = "a very long status dump " + " ".join(f"item{i}" for i in range(900)) + " ledger"
    assert len(cut) > 2000  # past the text a hit carries
    turns = [*crowd, short, "the quetzal plan is final", cut, "nothing relevant said", "ok", "bye"]
    engine.ingest_host(
        [{"role": "user" if i % 2 == 0 else "assistant", "content": t} for i, t in enumerate(turns)]
    )
    hits = _walk_grep(engine, query="quetzal ledger", include_in_context=True, limit=50)
    marks = {
        word: [bool(h.get("neighbour")) for h in hits if word in h["snippet"]]
        for word in ("w39", "item0", "nothing relevant", "quetzal")
    }
    assert marks == {
        "w39": [False],
        "item0": [False],
        "nothing relevant": [True],
        "quetzal": [False],
    }, marks

"""evidence.refs and evidence.pack on real SQLite and PostgreSQL: ref forms, reach, dedup, budget, sufficiency."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hermes_lcm import store as store_module
from hermes_lcm.base.tokens import count_tokens
from hermes_lcm.evidence import Ref, RefError, build_pack, hydrate, parse_refs

from .conftest import fresh_database
from .evidencetest import at, engine_for, place, reach, said

pytestmark = pytest.mark.both_backends


@pytest.fixture
def home(tmp_path: Path, backend_env: dict[str, str]):
    place(tmp_path, backend_env)
    yield tmp_path
    place(tmp_path, None)
    store_module.close_all()


def test_ref_forms_and_clear_errors():
    assert parse_refs(
        ["812", 812, "812:10-80", "m812", {"store_id": 812, "start": 10, "end": 80}]
    ) == [Ref(812), Ref(812, 10, 80)]
    assert parse_refs("5, 6 m7") == [Ref(5), Ref(6), Ref(7)]
    for bad, word in (
        ("abc", "not a store id"),
        ("812:80-10", "start < end"),
        (True, "not a store id"),
        ({"start": 1}, "no store_id"),
        (-4, "positive"),
        ([1.5], "float"),
        ({"store_id": 3, "start": "x", "end": 4}, "integers"),
    ):
        with pytest.raises(RefError, match=word) as info:
            parse_refs(bad if isinstance(bad, list) else [bad])
        assert "812:10-80" in str(info.value)  # the message shows the forms that work
    with pytest.raises(RefError, match="at most"):
        parse_refs(list(range(1, 200)))


def test_hydrate_spans_times_and_dates(home):
    engine = engine_for(home, "s1")
    ids = said(
        engine,
        ("I adopted a cat last Friday.", at(2023, 5, 12, 15)),
        ("Lovely! What is her name?", at(2023, 5, 12, 15, 1)),
    )
    lines = hydrate(engine.core.store, parse_refs([f"{ids[0]}:2-17", ids[1]]), reach(engine))
    assert [line.text for line in lines] == ["adopted a cat l", "Lovely! What is her name?"]
    whole = hydrate(engine.core.store, [Ref(ids[0])], reach(engine))[0]
    assert whole.at == at(2023, 5, 12, 15)
    assert [(m.phrase, m.first.isoformat()) for m in whole.dates] == [("last Friday", "2023-05-05")]


def test_another_owners_row_is_missing_never_read(home):
    victim = engine_for(home, "v1", chat="alice")
    secret = said(victim, ("alice's PIN is 4417, set on May 7, 2023", at(2023, 5, 8)))[0]
    attacker = engine_for(home, "a1", chat="bob")
    mine = said(attacker, ("bob here", at(2023, 5, 9)))[0]
    assert hydrate(attacker.core.store, [Ref(secret)], reach(attacker)) == []
    pack = build_pack(
        attacker.core.store,
        [secret, f"{secret}:0-5", mine, 99999],
        reach(attacker),
        question="What is alice's PIN?",
    ).as_dict()
    text = str(pack)
    assert "4417" not in text and "PIN is" not in text
    reasons = {m["ref"]: m["reason"] for m in pack["missing"]}
    assert reasons[str(secret)] == reasons["99999"]  # out of reach reads exactly like absent
    assert [line["store_id"] for line in pack["lines"]] == [mine]
    assert pack["sufficiency"]["sufficient"] is False


def test_pack_dedups_orders_reports_missing_and_sufficiency(home):
    engine = engine_for(home, "s1")
    ids = said(
        engine,
        ("Melanie ran a charity race on 20 May 2023.", at(2023, 5, 25, 10)),
        ("That's great, how far was it?", at(2023, 5, 25, 10, 1)),
        ("It was 5 km, yesterday I ran 3 more.", at(2023, 5, 26, 9)),
    )
    pack = build_pack(
        engine.core.store,
        [ids[2], ids[0], f"{ids[0]}:0-7", "nonsense", ids[0]],
        reach(engine),
        question="When did Melanie run the charity race?",
    ).as_dict()
    assert [line["store_id"] for line in pack["lines"]] == [
        ids[0],
        ids[2],
    ]  # by time, span inside whole dropped
    assert pack["lines"][0]["at"] == "2023-05-25T10:00:00Z"
    assert pack["lines"][0]["dates"][0]["first"] == "2023-05-20"
    assert pack["lines"][1]["dates"][0]["first"] == "2023-05-25"  # "yesterday" said on the 26th
    assert [m["ref"] for m in pack["missing"]] == ["'nonsense'"]
    assert pack["sufficiency"]["needs"] == {"date": True, "entity:Melanie": True}
    assert pack["sufficiency"]["sufficient"] is True
    lacking = build_pack(
        engine.core.store, [ids[1]], reach(engine), question="When did Melanie run?"
    ).as_dict()["sufficiency"]
    assert set(lacking["lacking"]) == {"date", "entity:Melanie"}


def test_a_run_of_one_sessions_lines_names_it_once(home):
    """Lines are in time order; each names its session only when the line before is of another
    one, so carrying the last named session forward gives every line's own, in fewer tokens."""
    first, second = engine_for(home, "s1"), engine_for(home, "s2")
    a = said(first, ("alpha one", at(2023, 1, 1)), ("alpha two", at(2023, 1, 1, 0, 1)))
    b = said(second, ("beta one", at(2023, 1, 2)), ("beta two", at(2023, 1, 2, 0, 1)))
    c = said(first, ("alpha three", at(2023, 1, 3)))
    store = first.core.store
    pack = build_pack(store, [*c, *b, *a], None).as_dict()
    assert [line["store_id"] for line in pack["lines"]] == [*a, *b, *c]
    named = [line.get("session_id") for line in pack["lines"]]
    assert named == ["s1", None, "s2", None, "s1"]
    carried, current = [], None
    for line in pack["lines"]:
        current = line.get("session_id", current)
        carried.append(current)
    rows = {r.id: r.session_id for r in store.messages_by_ids([*a, *b, *c])}
    assert carried == [rows[line["store_id"]] for line in pack["lines"]]
    alone = build_pack(store, b[1:], None).as_dict()["lines"]
    assert alone[0]["session_id"] == "s2"  # a pack's first line always names its session


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.text(min_size=0, max_size=3000), min_size=1, max_size=6), st.integers(100, 2500))
def test_budget_holds_for_random_lines(tmp_path_factory, backend, texts, budget):
    home = tmp_path_factory.mktemp("budget")
    with fresh_database(backend) as where:
        place(home, where)
        engine = engine_for(home, "s1")
        turns = [((t or "-") + f" #{i}", at(2023, 1, 1) + i) for i, t in enumerate(texts)]
        ids = said(engine, *turns)
        pack = build_pack(engine.core.store, ids, reach(engine), budget_tokens=budget).as_dict()
        import json

        used = sum(count_tokens(json.dumps(line, ensure_ascii=False)) + 1 for line in pack["lines"])
        assert used == pack["used_tokens"] <= budget
        rows = {r.id: r.content for r in engine.core.store.messages_by_ids(ids)}
        for line in pack["lines"]:
            start, end = line.get("span", [0, len(line["text"])])
            assert rows[line["store_id"]][start:end] == line["text"]  # exact text, exact span
        assert len(pack["lines"]) + len(pack.get("omitted", [])) == len(ids)
        place(home, None)

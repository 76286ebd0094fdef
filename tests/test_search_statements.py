"""A rare-term lcm_grep runs a small, fixed number of SQL statements .

A rare word's cost used to be a fixed ~20 statements whatever it found (scope lookups, one count
probe per kind, walks that could find nothing more, a scratch FTS table for the snippets). The
fast path takes what the count probes already say; this pins its statement count, counted with a
trace callback on the store's connections, so it cannot silently grow back. No timing asserts.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from hermes_lcm.engine import LcmEngine

from .test_search_pinned import PINNED, _build, ranked
from .tooltest import ok

RARE_STATEMENTS = 7  # the prompt's rows (3), the scope (1), the counts (1), the rows (1), one spare


@contextmanager
def traced(engine: LcmEngine) -> Iterator[list[str]]:
    """Top-level statements run on the store's connection and its scratch FTS connection."""
    store = engine.core.store
    seen: list[str] = []

    def record(sql: str) -> None:
        if not sql.startswith("--"):  # FTS5's own internal statements are traced with a "--" prefix
            seen.append(sql)

    scratch = getattr(store, "_scratch", None)
    store.conn.set_trace_callback(record)
    if scratch is not None:
        scratch.set_trace_callback(record)
    try:
        yield seen
    finally:
        store.conn.set_trace_callback(None)
        if scratch is not None:
            scratch.set_trace_callback(None)


def test_a_rare_term_runs_few_statements(make_engine):
    engine = make_engine()
    _build(engine)
    ok(engine, "lcm_grep", query="AUTH_INVOICE_LIMIT")  # the scratch connection exists from here on
    with traced(engine) as seen:
        answer = ok(engine, "lcm_grep", query="zqvortexrare")
    assert [("m", h["store_id"]) for h in answer["hits"]] == PINNED["zqvortexrare"]
    assert all("«zqvortexrare»" in h["snippet"] for h in answer["hits"]), answer
    assert answer["next_cursor"] is None
    assert len(seen) <= RARE_STATEMENTS, "\n".join(seen)


def test_the_fast_path_keeps_hits_and_snippets(make_engine):
    """The same answer (hits, order, snippets) for rare and few-hit queries as a walk that pages
    one hit at a time (which cannot take the fast path's shortcuts on its later pages)."""
    engine = make_engine()
    _build(engine)
    for query in ("zqvortexrare", "AUTH_INVOICE_LIMIT", "call_12_0_0"):
        whole = ok(engine, "lcm_grep", query=query, limit=15)
        assert [
            ("s", h["node_id"]) if "node_id" in h else ("m", h["store_id"]) for h in whole["hits"]
        ] == ranked(engine, query)
        paged, cursor = [], None
        while True:
            args = {"query": query, "limit": 1, **({"cursor": cursor} if cursor else {})}
            page = ok(engine, "lcm_grep", **args)
            paged += page["hits"]
            cursor = page.get("next_cursor")
            if not cursor:
                break
        assert [h["snippet"] for h in paged] == [h["snippet"] for h in whole["hits"]], query
        assert [h.get("store_id", h.get("node_id")) for h in paged] == [
            h.get("store_id", h.get("node_id")) for h in whole["hits"]
        ], query


def test_probe_counts_in_one_statement(make_engine):
    """Several probes, both indexes, one statement; exact counts up to the cap, or (not exact)
    only whether the cap is reached."""
    engine = make_engine()
    _build(engine)
    store = engine.core.store
    m_bounds, s_bounds = store.message_id_bounds(), engine.core.dag.summary_id_bounds(None)
    probes = [
        ("messages", '"ledger"', m_bounds, 10_000),
        ("messages", '"ledger"', m_bounds, 3),
        ("messages", '"zqvortexrare"', m_bounds, 10),
        ("summaries", '"nosuchwordzz"', s_bounds, 5),
    ]
    with traced(engine) as seen:
        exact = store.fts_probe_counts(probes)
        over = store.fts_probe_counts(probes, exact=False)
    assert len(seen) == 2
    ledger = store.fts_term_counts("messages", ['"ledger"'], m_bounds, 10_000)[0]
    assert ledger > 3
    assert exact == [ledger, 3, 2, 0]
    assert over == [0, 3, 0, 0]

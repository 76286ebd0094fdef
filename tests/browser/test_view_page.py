"""The `lcm view` page in a real browser (headless Chromium): it loads from file:// alone, a click on a
summary shows its stored sources word for word, sources page, search finds a planted detail, the
timeline and growth are drawn, and nothing on the page reaches the network or logs an error.
"""

from __future__ import annotations

from typing import Any

import pytest

from hermes_lcm.base.records import node_label

from .harness import artifacts_dir, open_page

SOURCE_TEXT = "el => el.textContent"


def _sources(page: Any) -> list[dict[str, Any]]:
    return page.eval_on_selector_all(
        "#sources .source",
        "els => els.map(e => ({seq: e.dataset.seq, id: e.dataset.storeId,"
        " text: e.querySelector('.source-text').textContent}))",
    )


def _stored_text(store: Any, message_id: int) -> str:
    message = store.message(message_id)
    assert message is not None, (
        f"the page shows message {message_id}, which the store does not hold"
    )
    return str(message.content)


def _check_sources(page: Any, store: Any, conversation_id: int) -> list[dict[str, Any]]:
    shown = _sources(page)
    assert shown, "a click on a summary shows no source"
    for source in shown:
        message = store.message(int(source["id"]))
        assert message is not None and message.conversation_id == conversation_id
        assert int(source["seq"]) == message.seq
        if message.content and not message.tool_calls:
            assert source["text"] == message.content, f"message {message.id} is not shown as stored"
        else:
            assert message.content in source["text"]
    return shown


def _show_tab(page: Any, name: str) -> None:
    """Sections in tabs are drawn when first shown (so charts take the pane's width): show it."""
    tab = page.locator(f'.tabs button[data-tab="{name}"]')
    if tab.count():
        tab.click()


def _click_node(page: Any, label: str) -> None:
    page.locator(f'#dag .node[data-node="{label}"]').click()
    page.wait_for_selector("#sources .source", state="attached")


def _node_with_most_sources(store: Any, conversation_id: int) -> Any:
    leaves = [s for s in store.summaries(conversation_id, limit=100000) if s.depth == 0]
    return max(leaves, key=lambda s: (store.edge_count(s.id), -s.id))


def test_page_loads_from_file_alone_and_draws_every_section(
    browser: Any, demo: dict[str, Any]
) -> None:
    page, watch = open_page(browser, demo["page"])
    try:
        store, cid = demo["store"], demo["conversation_id"]
        labels = page.eval_on_selector_all(
            "#dag .node", "els => els.map(e => [e.dataset.node, e.dataset.depth])"
        )
        expected = {node_label(s.id): s.depth for s in store.summaries(cid, limit=100000)}
        summaries = {
            label: int(depth) for label, depth in labels if label != "tail"
        }  # tail: raw, unsummarized
        assert summaries == expected
        page.locator(f'#dag .node[data-node="{next(iter(expected))}"]').click()
        page.locator("#search").fill("8731")
        page.locator("#search").press("Enter")
        page.wait_for_selector("#results .hit", state="attached")
        _show_tab(page, "timeline")
        assert page.locator("#timeline svg .compaction").count() >= 1
        _show_tab(page, "growth")
        assert page.locator("#growth .month").count() >= 1
        assert watch.remote() == [], f"the page reached out: {watch.remote()}"
        assert all(u.startswith(("file:", "data:", "blob:", "about:")) for u in watch.requests)
        assert watch.errors == []
    finally:
        page.close()


def test_click_shows_the_summary_and_its_sources_as_stored(
    browser: Any, demo: dict[str, Any]
) -> None:
    store, cid = demo["store"], demo["conversation_id"]
    node = _node_with_most_sources(store, cid)
    page, watch = open_page(browser, demo["page"])
    try:
        _click_node(page, node.node_id)
        assert page.eval_on_selector("#detail-text", SOURCE_TEXT).strip() == node.content.strip()
        shown = _check_sources(page, store, cid)
        first = [m.id for m in store.summary_sources(node.id, 0, len(shown))]
        assert [int(s["id"]) for s in shown] == first, (
            "the first page is the summary's first sources, in order"
        )
        page.screenshot(path=str(artifacts_dir() / "lcm-view-click.png"))
        parent = next(
            (
                p
                for p in store.summaries(cid, limit=100000)
                if p.depth > 0 and store.child_summaries(p.id)
            ),
            None,
        )
        if parent is not None:
            page.locator(f'#dag .node[data-node="{parent.node_id}"]').click()
            links = page.eval_on_selector_all(
                "#detail .node-link", "els => els.map(e => e.textContent)"
            )
            assert {c.node_id for c in store.child_summaries(parent.id)} <= {
                t.strip() for t in links
            }
        assert watch.errors == []
    finally:
        page.close()


def test_sources_page_forward_and_back(browser: Any, demo: dict[str, Any]) -> None:
    store, cid = demo["store"], demo["conversation_id"]
    node = _node_with_most_sources(store, cid)
    page, watch = open_page(browser, demo["page"])
    try:
        _click_node(page, node.node_id)
        first = _check_sources(page, store, cid)
        assert store.edge_count(node.id) > len(first), (
            "the demo's largest leaf fills more than one page"
        )
        page.locator("#sources-next").click()
        page.wait_for_function(
            "seq => document.querySelector('#sources .source').dataset.seq !== seq",
            arg=first[0]["seq"],
        )
        second = _check_sources(page, store, cid)
        assert min(int(s["seq"]) for s in second) > max(int(s["seq"]) for s in first)
        expected = [m.id for m in store.summary_sources(node.id, len(first), len(second))]
        assert [int(s["id"]) for s in second] == expected
        page.locator("#sources-prev").click()
        page.wait_for_function(
            "seq => document.querySelector('#sources .source').dataset.seq === seq",
            arg=first[0]["seq"],
        )
        assert _sources(page) == first
        assert watch.errors == []
    finally:
        page.close()


def test_search_finds_a_planted_detail(browser: Any, demo: dict[str, Any]) -> None:
    store, cid = demo["store"], demo["conversation_id"]
    holding = {m.id: m for m in store.messages_after(cid, 0) if "8731" in (m.content or "")}
    assert holding
    page, watch = open_page(browser, demo["page"])
    try:
        page.locator("#search").fill("8731")
        page.locator("#search").press("Enter")
        page.wait_for_selector('#results .hit[data-kind="message"]', state="attached")
        hits = page.eval_on_selector_all(
            '#results .hit[data-kind="message"]', "els => els.map(e => e.dataset.id)"
        )
        found = {int(h) for h in hits if h.isdigit()}
        assert found & set(holding), f"no hit names a message holding the detail: {hits}"
        assert found <= {m.id for m in store.messages_after(cid, 0)}
        page.locator("#search").fill("zzqx-nothing-matches-this")
        page.locator("#search").press("Enter")
        page.wait_for_function("() => !document.querySelector('#results .hit')")
        assert watch.errors == []
    finally:
        page.close()


def test_the_watch_catches_a_page_that_reaches_out(browser: Any, tmp_path: Any) -> None:
    """The no-network check above could pass by seeing nothing: a page that does reach out is caught
    (and stopped: the request is aborted before it leaves, to a closed port on this machine anyway)."""
    hostile = tmp_path / "reaches-out.html"
    hostile.write_text(
        "<img src='http://127.0.0.1:9/x.png'><script>console.error('boom');"
        "document.documentElement.dataset.ready = '1'</script>",
        encoding="utf-8",
    )
    page, watch = open_page(browser, hostile)
    try:
        page.wait_for_timeout(200)
        assert watch.remote() and "127.0.0.1:9" in watch.remote()[0]
        assert any("boom" in e for e in watch.errors)
    finally:
        page.close()


@pytest.mark.parametrize("width", [1000, 1400])
def test_the_compactions_tab_and_header_show_everything_a_person_reads(
    browser: Any, demo: dict[str, Any], width: int
) -> None:
    """Nothing the page says is cut or hidden: the chart's top label clears the legend, the budget
    line is in the legend, the table scrolls rather than clips, the header keeps the time range,
    and every depth-0 box wide enough for a number carries one."""
    page, watch = open_page(browser, demo["page"], width=width)
    try:
        facts = page.locator("#facts")
        assert "→" in facts.inner_text() and facts.get_attribute("title") == facts.text_content()
        box = page.evaluate(
            "() => { const f = document.getElementById('facts'); "
            "return [f.scrollHeight, f.clientHeight, f.scrollWidth, f.clientWidth]; }"
        )
        assert box[0] <= box[1] + 1 and box[2] <= box[3] + 1, box  # the whole line is on screen
        narrow = page.eval_on_selector_all(
            "#dag .node.depth-0",
            # the box's content width (its padding and border hold no text)
            "els => els.filter(e => parseFloat(getComputedStyle(e).width) >= 16"
            " && !e.textContent).length",
        )
        assert narrow == 0
        _show_tab(page, "timeline")
        legend = page.locator("#timeline .legend").inner_text()
        assert "budget" in legend and "threshold" in legend
        svg_top = page.evaluate(
            "() => document.querySelector('#timeline svg').getBoundingClientRect().top"
        )
        label_tops = page.eval_on_selector_all(
            "#timeline svg text", "els => els.map(e => e.getBoundingClientRect().top)"
        )
        assert min(label_tops) >= svg_top, (
            min(label_tops),
            svg_top,
        )  # the top label is inside the chart
        wrap = page.evaluate(
            "() => { const w = document.querySelector('#timeline .table-wrap'); "
            "return [getComputedStyle(w).overflowX, w.scrollWidth, w.clientWidth]; }"
        )
        assert wrap[0] == "auto"  # a narrow pane scrolls the table; nothing is clipped for good
        count = page.locator("#timeline p.muted").first.inner_text()
        assert "compactions, each a compress that changed the prompt" in count
        prepared = page.locator("#timeline #prepared").inner_text()
        assert prepared.startswith(("Prepared for the next compaction", "Nothing prepared"))
        assert watch.errors == []
    finally:
        page.close()

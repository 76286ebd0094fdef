"""Hostile message text on the `lcm view` page: markup that would run script if it were parsed as HTML
(a closing script tag, an onerror handler), RTL overrides, control characters, emoji and a lone
surrogate. The page must show each as text, exactly as the store keeps it, and run none of it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hermes_lcm import store as store_module
from hermes_lcm.demo.replay import make_engine

from .harness import open_page, write_page

HOSTILE = [
    "</script><script>window.pwned=1</script>",
    "<img src=x onerror=window.pwned=1>",
    "\u202eevil.exe\u202c reversed \u200f\u05e9\u05dc\u05d5\u05dd\u200f",
    "bell \x07 escape \x1b[31m vertical tab \x0b form feed \x0c del \x7f",
    "emoji \U0001f600 family \U0001f468\u200d\U0001f469\u200d\U0001f467 flag \U0001f1e9\U0001f1ea",
    "lone \ud800 surrogate",
    "<!-- comment --> ]]> <![CDATA[ x ]]> &amp; &lt;b&gt; \\u003c/script\\u003e",
]


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    home = tmp_path_factory.mktemp("hostile")
    engine = make_engine(home, context_length=8000)
    engine.on_session_start("hostile", hermes_home=str(home), platform="cli")
    core = engine.ensure_core()
    assert core is not None and core.binding.conversation_id is not None
    messages: list[dict[str, Any]] = []
    for i in range(60):
        text = (
            HOSTILE[i % len(HOSTILE)] + f" (message {i}) " + "filler words about the pantry " * 20
        )
        messages.append({"role": "user" if i % 2 == 0 else "assistant", "content": text})
    assert core.ingest(messages, source="attack") == len(messages)
    core.compact(core.budget(engine.threshold_tokens, 0), force=True)
    cid = core.binding.conversation_id
    assert core.store.depth_counts(cid).get(0, 0) >= 1, "the hostile messages are in a summary"
    page = Path(home) / "hostile.html"
    write_page(core.store, page, conversation_id=cid)
    yield {"store": core.store, "conversation_id": cid, "page": page}
    store_module.close_all()


def test_the_store_keeps_what_json_can_hold(hostile: dict[str, Any]) -> None:
    """A lone surrogate cannot be written as UTF-8: the store keeps '?' in its place; the rest verbatim."""
    stored = [m.content for m in hostile["store"].messages_after(hostile["conversation_id"], 0)]
    assert stored[5].startswith("lone ? surrogate")
    assert (
        stored[3].startswith(HOSTILE[3])
        and stored[2].startswith(HOSTILE[2])
        and stored[4].startswith(HOSTILE[4])
    )


def test_hostile_text_is_shown_as_text_and_never_runs(
    browser: Any, hostile: dict[str, Any]
) -> None:
    store, cid = hostile["store"], hostile["conversation_id"]
    page, watch = open_page(browser, hostile["page"])
    try:
        assert page.evaluate("typeof window.pwned") == "undefined"
        assert page.locator("#dag img, #detail img, #results img").count() == 0
        shown: dict[int, str] = {}
        for node in [s for s in store.summaries(cid, limit=1000) if s.depth == 0]:
            page.locator(f'#dag .node[data-node="{node.node_id}"]').click()
            page.wait_for_selector("#sources .source", state="attached")
            assert (
                page.eval_on_selector("#detail-text", "e => e.textContent").strip()
                == node.content.strip()
            )
            mine: set[int] = set()
            while True:
                batch = page.eval_on_selector_all(
                    "#sources .source",
                    "els => els.map(e => [e.dataset.storeId, "
                    "e.querySelector('.source-text').textContent])",
                )
                shown.update((int(i), t) for i, t in batch)
                mine.update(int(i) for i, _ in batch)
                if len(mine) >= store.edge_count(node.id):
                    break
                page.locator("#sources-next").click()
                page.wait_for_function(
                    "id => document.querySelector('#sources .source').dataset.storeId !== id",
                    arg=batch[0][0],
                    timeout=5000,
                )
        assert len(shown) >= len(HOSTILE), "every kind of hostile text was shown"
        for message_id, text in shown.items():
            message = store.message(message_id)
            assert message is not None and text == message.content
        page.locator("#search").fill("pwned")
        page.locator("#search").press("Enter")
        page.wait_for_selector("#results .hit", state="attached")
        assert page.evaluate("typeof window.pwned") == "undefined"
        assert page.locator("#results img, #results script").count() == 0
        assert watch.remote() == [] and watch.errors == []
    finally:
        page.close()

"""Fixtures for the viewer's browser tests: one headless Chromium per module, demo databases, pages.

Where Chromium or playwright is missing every test here skips with the reason (shown by ``-ra`` in the
summary and written to stderr), never silently.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import pytest

from hermes_lcm import store as store_module
from hermes_lcm.demo.replay import load_fixture, make_engine, replay

from .harness import launch, unavailable, write_page


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    reason = unavailable()
    if reason:
        print(f"tests/browser skipped: {reason}", file=sys.stderr)
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = launch(playwright)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The demo's coding session replayed through the engine (about a second) and its page."""
    home = tmp_path_factory.mktemp("demo")
    engine = make_engine(home)
    replay(engine, load_fixture(), session_id="browser-demo")
    core = engine.core
    assert core is not None and core.binding.conversation_id is not None
    page = home / "lcm-view.html"
    info = write_page(core.store, page, conversation_id=core.binding.conversation_id)
    yield {
        "store": core.store,
        "conversation_id": core.binding.conversation_id,
        "page": page,
        "info": info,
    }
    store_module.close_all()

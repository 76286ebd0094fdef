"""Fixtures for the viewer's browser tests: one headless Chromium per module, demo databases, pages.

Where Chromium or playwright is missing every test here skips with the reason (shown by ``-ra`` in the
summary and written to stderr), never silently.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hermes_lcm import store as store_module
from hermes_lcm.replay import load_fixture, make_engine, replay

from .harness import launch, unavailable


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


def write_page(store: Any, path: Path, conversation_id: int | None = None) -> dict[str, Any]:
    """The viewer's page writer (the stand-in following the same contract until the viewer exists)."""
    import hermes_lcm

    if (Path(hermes_lcm.__file__).parent / "viewer").is_dir():
        from hermes_lcm.viewer import write_page as real
    else:  # an editable install elsewhere could otherwise lend its own viewer package
        from .standin import write_page as real
    result: dict[str, Any] = real(store, path, conversation_id=conversation_id)
    return result


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
    yield {"store": core.store, "conversation_id": core.binding.conversation_id, "page": page, "info": info}
    store_module.close_all()

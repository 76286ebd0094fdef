#!/usr/bin/env python3
"""docs/images/lcm-view.png: the `lcm view` page of the demo's session, after a click on a mid-depth node
(and docs/images/lcm-view-compactions.png: its Compactions tab).

Replays the demo's shipped coding session through the engine (offline summarizer, about a second),
writes the page with ``hermes_lcm.viewer.write_page``, opens it in headless Chromium (Debian's
/usr/bin/chromium, as the browser tests do) and saves a 1400x900 screenshot. Run from the repo:
``.venv/bin/python scripts/screenshot_view.py [--output PATH]``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from hermes_lcm.demo.replay import load_fixture, make_engine, replay  # noqa: E402
from hermes_lcm.store import close_all  # noqa: E402
from tests.browser.harness import launch, open_page, unavailable, write_page  # noqa: E402


def mid_depth_node(store: Any, conversation_id: int) -> Any:
    """The middle node of the middle depth: a summary with children or sources worth showing."""
    nodes = store.summaries(conversation_id, limit=100000)
    top = max(n.depth for n in nodes)
    depth = (top + 1) // 2
    level = [n for n in nodes if n.depth == depth]
    return level[len(level) // 2]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, default=ROOT / "docs" / "images" / "lcm-view.png")
    args = parser.parse_args(argv)
    reason = unavailable()
    if reason:
        print(f"cannot take the screenshot: {reason}", file=sys.stderr)
        return 1
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="lcm-view-shot-") as home:
        engine = make_engine(home)
        replay(engine, load_fixture(), session_id="lcm-view-screenshot")
        core = engine.core
        assert core is not None and core.binding.conversation_id is not None
        page_path = Path(home) / "lcm-view.html"
        info = write_page(core.store, page_path, conversation_id=core.binding.conversation_id)
        node = mid_depth_node(core.store, core.binding.conversation_id)
        with sync_playwright() as playwright:
            browser = launch(playwright)
            try:
                page, watch = open_page(browser, page_path, width=1400, height=900)
                page.locator(f'#dag .node[data-node="{node.node_id}"]').click()
                page.wait_for_selector("#detail-text", state="attached")
                page.wait_for_timeout(300)
                args.output.parent.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(args.output))
                page.locator('.tabs button[data-tab="timeline"]').click()
                page.wait_for_selector("#timeline svg", state="attached")
                page.wait_for_timeout(300)
                page.screenshot(
                    path=str(args.output.with_name(args.output.stem + "-compactions.png"))
                )
                if watch.errors or watch.remote():
                    print(f"the page complained: {watch.errors} {watch.remote()}", file=sys.stderr)
                    return 1
            finally:
                browser.close()
        close_all()
    print(
        f"{args.output}: node {node.node_id} (depth {node.depth}) of {info['summaries']} summaries, "
        f"{info['messages']} messages, page {info['bytes']:,} bytes"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""`lcm view` on a large conversation: page size and write time, and in headless Chromium the load,
first-click and first-search times.

One command: ``.venv/bin/python bench/view_load.py [--sizes 100000,10000] [--loads 5]``
(``--sizes 2000 --loads 2`` for a quick run). Each conversation is built through the engine's own
ingest in 1,000-message batches and compacted every 1,000 messages with the offline summarizer (as
bench/search.py builds its), so the page has a real DAG. The page is written with
``hermes_lcm.viewer.write_page`` and opened from a file:// URL in Debian's /usr/bin/chromium, each load
in a fresh page. Measured in the page itself, from performance.timeOrigin (navigation start):
- load: until ``document.documentElement.dataset.ready`` becomes "1" (target: under 2 s at 100k);
- click: a click on the first depth-0 node until its first source is in the DOM and a frame is drawn
  (sources are decompressed lazily, so this includes the first decompression);
- search: the first query (a rare planted term) until the first hit is in the DOM and drawn.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from common import History, bulk_ingest, core_of, make_engine, print_table, save_result, temp_dir

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.browser.harness import launch, unavailable, wait_ready, write_page

TARGET_MS = 2000.0
# Records when the page first declares itself ready, relative to navigation start.
READY_PROBE = """
new MutationObserver((_, obs) => {
  if (document.documentElement.dataset.ready === '1' && window.__lcmReadyAt === undefined) {
    window.__lcmReadyAt = performance.now(); obs.disconnect();
  }
}).observe(document, {attributes: true, subtree: true, attributeFilter: ['data-ready']});
"""
# Runs an action, then resolves with the ms until ``selector`` matches and one more frame is drawn.
UNTIL = """
async ([action, selector, arg]) => {
  const t0 = performance.now();
  if (action === 'click') document.querySelector(arg).click();
  else { const box = document.querySelector('#search'); box.value = arg;
         box.dispatchEvent(new Event('input', {bubbles: true}));
         box.dispatchEvent(new KeyboardEvent('keydown', {key: 'Enter', bubbles: true})); }
  const deadline = t0 + 30000;
  while (!document.querySelector(selector)) {
    if (performance.now() > deadline) return -1;
    await new Promise(r => setTimeout(r, 0));
  }
  await new Promise(r => requestAnimationFrame(() => r()));
  return performance.now() - t0;
}
"""


def build(size: int, history: History) -> tuple[Any, float]:
    engine = make_engine(temp_dir(f"view-{size}"), session=f"view-{size}")
    core = core_of(engine)
    budget = core.budget(engine.threshold_tokens, 3000)
    return engine, bulk_ingest(
        core, history, 0, size, batch=1000, compact_every=1000, budget=budget
    )


def measure(browser: Any, page_path: Path, query: str, loads: int) -> dict[str, Any]:
    ready, click, search = [], [], []
    for _ in range(loads):
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        errors: list[str] = []
        page.on("pageerror", lambda e, errors=errors: errors.append(str(e)))
        page.add_init_script(READY_PROBE)
        page.goto(page_path.resolve().as_uri(), timeout=120_000)
        wait_ready(page, timeout_ms=120_000)
        ready.append(float(page.evaluate("window.__lcmReadyAt")))
        click.append(
            float(page.evaluate(UNTIL, ["click", "#sources .source", '#dag .node[data-depth="0"]']))
        )
        search.append(float(page.evaluate(UNTIL, ["search", "#results .hit", query])))
        page.close()
        if errors or min(click) < 0 or min(search) < 0:
            raise SystemExit(f"the page failed: errors={errors} click={click} search={search}")
    return {
        "ready_ms": _ms(ready),
        "click_ms": _ms(click),
        "search_ms": _ms(search),
        "loads": loads,
    }


def _ms(samples: list[float]) -> dict[str, Any]:
    return {
        "median_ms": round(statistics.median(samples), 1),
        "max_ms": round(max(samples), 1),
        "samples": [round(s, 1) for s in samples],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100000,10000", help="comma-separated message counts")
    parser.add_argument(
        "--loads", type=int, default=5, help="page loads per size (median reported)"
    )
    parser.add_argument(
        "--no-save", action="store_true", help="print only; keep bench/results as is"
    )
    args = parser.parse_args()
    reason = unavailable()
    if reason:
        raise SystemExit(f"cannot run: {reason}")
    from playwright.sync_api import sync_playwright

    history = History()
    sizes = [int(s) for s in args.sizes.split(",")]
    details: dict[str, Any] = {"sizes": {}, "loads": args.loads}
    rows: list[dict[str, Any]] = []
    with sync_playwright() as playwright:
        browser = launch(playwright)
        details["browser"] = f"Chromium {browser.version} (headless)"
        try:
            for size in sizes:
                engine, build_seconds = build(size, history)
                core = core_of(engine)
                page_path = temp_dir(f"view-page-{size}") / "lcm-view.html"
                t0 = time.perf_counter()
                info = write_page(
                    core.store, page_path, conversation_id=core.binding.conversation_id
                )
                write_seconds = time.perf_counter() - t0
                query = history.rare_terms[0]
                entry = {
                    "build_seconds": round(build_seconds, 1),
                    "write_seconds": round(write_seconds, 2),
                    "page_bytes": info["bytes"],
                    "messages": info["messages"],
                    "summaries": info["summaries"],
                    "query": query,
                    **measure(browser, page_path, query, args.loads),
                }
                details["sizes"][str(size)] = entry
                print(
                    f"{size:>8,} messages: page {info['bytes']:,} B written in {write_seconds:.2f} s; "
                    f"ready {entry['ready_ms']['median_ms']} ms, click {entry['click_ms']['median_ms']} ms, "
                    f"search {entry['search_ms']['median_ms']} ms",
                    flush=True,
                )
        finally:
            browser.close()
    for size, entry in details["sizes"].items():
        ready = entry["ready_ms"]["median_ms"]
        rows.append(
            {
                "target": f"lcm view page load at {int(size):,} messages (navigation start -> ready) < 2 s",
                "ours": f"{ready:,.0f} ms (page {entry['page_bytes'] / 1e6:.1f} MB; click "
                f"{entry['click_ms']['median_ms']:.0f} ms, "
                f"search {entry['search_ms']['median_ms']:.0f} ms)",
                "reference": "-",
                "verdict": "met" if ready < TARGET_MS else "missed",
            }
        )
    print_table(rows)
    if not args.no_save:
        print(save_result("view_load", rows, details))


if __name__ == "__main__":
    main()

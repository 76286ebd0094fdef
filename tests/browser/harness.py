"""Headless Chromium for the viewer's browser tests, its benchmark and its screenshot script.

One place says how the browser is started: Debian's ``/usr/bin/chromium`` (never a browser build
downloaded by ``playwright install``: the machines reach no download site), headless, no sandbox
(CI runs as root), and nothing that would phone home. Playwright's ``launch`` gives every browser a
fresh temporary profile (user-data-dir) of its own and removes it on close.
``Watch`` records what a page asked for and what it complained about, so a test can prove the page
works from file:// alone and raised no error.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CHROMIUM = os.environ.get("LCM_CHROMIUM", "/usr/bin/chromium")
ARGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
ROOT = Path(__file__).resolve().parents[2]
LOCAL_SCHEMES = ("file:", "data:", "blob:", "about:")


def unavailable() -> str | None:
    """Why the browser cannot be started here, or None when it can."""
    if not (Path(CHROMIUM).is_file() and os.access(CHROMIUM, os.X_OK)):
        how = "scripts/test.sh installs Debian's chromium package when it runs as root with apt-get"
        return f"no Chromium at {CHROMIUM} ({how})"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright Python package is not installed (pip install -e '.[dev]')"
    return None


def launch(playwright: Any) -> Any:
    """A headless Chromium from Debian's package, with a fresh profile."""
    return playwright.chromium.launch(executable_path=CHROMIUM, args=list(ARGS), headless=True)


def artifacts_dir() -> Path:
    """Where screenshots go: $LCM_TEST_ARTIFACTS, else tests/artifacts/ (gitignored)."""
    path = Path(os.environ.get("LCM_TEST_ARTIFACTS") or ROOT / "tests" / "artifacts")
    path.mkdir(parents=True, exist_ok=True)
    return path


@dataclass
class Watch:
    """Every request, console error and uncaught exception of one page."""

    requests: list[str] = field(default_factory=list)
    blocked: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def attach(self, page: Any) -> Watch:
        page.on("request", lambda r: self.requests.append(r.url))
        page.on(
            "console",
            lambda m: (
                self.errors.append(f"console.{m.type}: {m.text}")
                if m.type in ("error", "assert")
                else None
            ),
        )
        page.on("pageerror", lambda e: self.errors.append(f"pageerror: {e}"))

        def route(r: Any) -> None:
            url = r.request.url
            if url.startswith(LOCAL_SCHEMES):
                r.continue_()
            else:  # a page that reaches out is a failure; never let it through
                self.blocked.append(url)
                r.abort()

        page.route("**/*", route)
        return self

    def remote(self) -> list[str]:
        return self.blocked + [u for u in self.requests if not u.startswith(LOCAL_SCHEMES)]


def open_page(
    browser: Any, path: Path, *, width: int = 1400, height: int = 900
) -> tuple[Any, Watch]:
    """A new page showing ``path`` from a file:// URL, once its first render is done."""
    page = browser.new_page(viewport={"width": width, "height": height})
    watch = Watch().attach(page)
    page.goto(path.resolve().as_uri())
    wait_ready(page)
    return page, watch


def wait_ready(page: Any, timeout_ms: float = 30_000) -> None:
    page.wait_for_function("document.documentElement.dataset.ready === '1'", timeout=timeout_ms)


def write_page(store: Any, path: Path, conversation_id: int | None = None) -> dict[str, Any]:
    """The viewer's page writer (imported here, so a run without the viewer fails loudly at use)."""
    from hermes_lcm.viewer import write_page as real

    result: dict[str, Any] = real(store, path, conversation_id=conversation_id)
    return result

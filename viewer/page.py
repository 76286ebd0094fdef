"""The page as one HTML string: the template, its stylesheet and script inlined, the data embedded inert.

Nothing the page shows is ever parsed as markup: the metadata is JSON inside a
``<script type="application/json">`` with every ``<``, ``>`` and ``&`` escaped, and the texts are
base64 of zlib inside ``<script type="application/octet-stream">`` elements the browser never runs.
The script writes text with ``textContent`` only, so a message holding ``</script>`` or an
``onerror=`` attribute stays text. A Content-Security-Policy forbids every network request.
"""

from __future__ import annotations

import base64
import html
import json
import re
from importlib import resources
from typing import Any

from .data import Chunk, PageData

CSP = (
    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:; "
    "connect-src 'none'; base-uri 'none'; form-action 'none'"
)


def asset(name: str) -> str:
    return resources.files(__package__).joinpath("assets", name).read_text(encoding="utf-8")


def inert_json(value: Any) -> str:
    """JSON safe inside a script element: no character that could end it or open markup."""
    text = json.dumps(value, ensure_ascii=True, separators=(",", ":"), allow_nan=False, default=str)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _chunks(prefix: str, chunks: list[Chunk]) -> str:
    return "\n".join(
        f'<script type="application/octet-stream" id="{prefix}{i}">'
        f"{base64.b64encode(c.data).decode('ascii')}</script>"
        for i, c in enumerate(chunks)
    )


def render(data: PageData, title: str) -> str:
    template = asset("page.html")
    parts = {
        "{{CSP}}": CSP,
        "{{TITLE}}": html.escape(title),
        "{{STYLE}}": asset("view.css"),
        "{{META}}": inert_json(data.meta),
        "{{MESSAGES}}": _chunks("m", data.message_chunks),
        "{{SUMMARIES}}": _chunks("s", data.summary_chunks),
        "{{SCRIPT}}": asset("view.js"),
    }
    # one pass over the template: a placeholder's text inside the data is never substituted again
    return re.sub(r"\{\{[A-Z]+\}\}", lambda m: parts.get(m.group(0), m.group(0)), template)

"""Large outputs: a tool result over the threshold is kept whole in a payload file, and its row
(and so the prompt, the index and the summarizer's input) keeps a stub: the head, the tail, the
counts and the ref that ``lcm_expand externalized_ref=...`` pages back byte for byte.

The stub is a pure function of the text and the preview size, so a message is the same message
(the same fingerprint) whether it arrives whole or as the stub we handed out, and a stub is never
externalized again. The file is the payload guard's (payloads.py): content-addressed by the same
ref scheme, 0600, written once through an exclusive temp file, never through a symlink.

A ref is keyed: an HMAC-SHA256 of the text under the database's own ``payload_refs`` secret, cut to
24 hex digits. The same text is the same ref within one database (one file however often it is
stored), but a ref can neither be computed from a guessed content nor carried to another database.
Naming a ref grants nothing either way: who may read a payload is recorded apart (payloads.py).
"""

from __future__ import annotations

import hashlib
import hmac
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # a type only: the store imports this module, and config is not cheap
    from ..config import LcmConfig

PREFIX = "[lcm-output ref="
_STUB = re.compile(r"^\[lcm-output ref=([0-9a-f]{24}) chars=(\d+) lines=(\d+)[^\]\n]*\]")
# The share of the preview given to the head; the rest shows the tail (where errors usually are).
HEAD_SHARE = 2 / 3


REF_CHARS = 24


def ref_for(text: str, key: bytes) -> str:
    """The content address of ``text`` in the database whose ref key is ``key`` (the payload guard's
    scheme: its file is ``<ref>.payload``). Keyed, so knowing a content tells nobody its ref."""
    return hmac.new(key, text.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()[
        :REF_CHARS
    ]


def line_count(text: str) -> int:
    return text.count("\n") + (1 if text and not text.endswith("\n") else 0)


def stub(text: str, ref: str, preview_chars: int) -> str:
    """The row's text for an output kept in a file: a header line, the head, a marker, the tail."""
    head_chars = int(preview_chars * HEAD_SHARE)
    tail_chars = max(0, preview_chars - head_chars)
    omitted = max(0, len(text) - head_chars - tail_chars)
    header = (
        f"{PREFIX}{ref} chars={len(text)} lines={line_count(text)}: the whole output is in a file; "
        f"lcm_expand externalized_ref={ref} pages it]"
    )
    if omitted == 0:
        return f"{header}\n{text}"
    tail = text[len(text) - tail_chars :] if tail_chars else ""
    return f"{header}\n{text[:head_chars]}\n[... {omitted} chars not shown ...]\n{tail}"


@dataclass(frozen=True)
class StubInfo:
    ref: str
    chars: int
    lines: int


def parse_stub(text: str) -> StubInfo | None:
    """The ref and counts of a stub, or None when ``text`` is not one."""
    if not isinstance(text, str) or not text.startswith(PREFIX):
        return None
    found = _STUB.match(text)
    return StubInfo(found.group(1), int(found.group(2)), int(found.group(3))) if found else None


def is_stub(text: object) -> bool:
    return isinstance(text, str) and text.startswith(PREFIX) and _STUB.match(text) is not None


def settings_view(config: LcmConfig) -> dict[str, Any]:
    """The large-output settings as status shows them."""
    return {
        "externalization": config.large_output_externalization_enabled,
        "threshold_chars": config.large_output_externalization_threshold_chars,
        "preview_chars": config.large_output_preview_chars,
        "active_replay": config.large_output_active_replay_stubbing_enabled,
        "active_replay_threshold_tokens": config.large_output_active_replay_stub_threshold_tokens,
    }

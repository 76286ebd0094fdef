"""Messages nobody typed: the host's scaffolding and our own summary blocks.

Two questions are answered here, both without touching the database:

* Which host messages are scaffolding (a todo snapshot after a compaction, an
  empty-response nudge, a verification nudge, a truncation continuation, a
  background-process notice, the built-in compressor's handoff summary, ...)?
  They are stored like every other message (nothing is lost, they stay
  searchable) but carry a label, and the label keeps them from being taken
  for the user's request. The host marks them with private ``_*_synthetic``
  flags, which it drops when it persists a message, and with fixed text
  prefixes, which survive; :func:`classify` knows both. The lists mirror
  hermes-agent 0.19.0 (``agent/conversation_compression.py``
  ``_SYNTHETIC_USER_FLAGS``/``_SYNTHETIC_USER_PREFIXES``, ``run_agent.py``
  ``_EPHEMERAL_SCAFFOLDING_FLAGS``, ``agent/conversation_loop.py`` nudges,
  ``agent/context_compressor.py`` summary prefixes, the MCP-reload notice of
  ``cli.py``/``gateway/run.py``); a test compares them with the installed host.

* Which messages are our own summary block coming back? Content cannot say:
  a user may type ``[lcm:context 1234] ...`` and a tool may return it. The
  block's header carries a seal, a random nonce and a keyed hash of it under a
  secret kept in the database (:class:`BlockSeal`), so the host's copy of a
  block is recognised in this process, after a restart or resume from the
  host's session database and in a re-sent history, while a look-alike is
  stored like any message.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from collections.abc import Mapping
from typing import Any

# The start of every summary block the assembler emits; the seal follows it.
BLOCK_MARKER = "[lcm:context"
# Set on the block dict we return; the host keeps private keys in its live list.
BLOCK_KEY = "_lcm_synthetic"

# Private flags the host sets on messages it makes itself (any role).
HOST_FLAGS = (
    "_todo_snapshot_synthetic",
    "_empty_recovery_synthetic",
    "_verification_stop_synthetic",
    "_pre_verify_synthetic",
    "_kanban_stop_synthetic",
    "_empty_terminal_sentinel",
    "_thinking_prefill",
    "_compressed_summary",
)

# Text the host starts a user-role message with when it wrote the message itself.
HOST_USER_PREFIXES = (
    # agent/conversation_compression.py _SYNTHETIC_USER_PREFIXES
    "[System: Your previous response was truncated",
    "[System: The previous response was cut off",
    "[System: Your previous tool call",
    "[Your active task list was preserved across context compression]",
    "[IMPORTANT: Background process ",
    # agent/conversation_loop.py: Codex reasoning-only and intermediate-ack continuations
    "[System: Your previous response contained only internal reasoning",
    "[System: Continue now. Execute the required tool calls",
    # agent/verification_stop.py, agent/kanban_stop.py nudges (their flags are dropped on persist)
    "[System: You edited code in this turn",
    "[System: You are a Hermes kanban worker.",
    # tools/process_registry.py: a background delegate_task's result, handed back as an internal turn
    "[ASYNC DELEGATION COMPLETE",
    "[ASYNC DELEGATION BATCH COMPLETE",
    # cli.py / gateway/run.py after /reload-mcp
    "[IMPORTANT: MCP servers have been reloaded.",
    # agent/conversation_compression.py _ensure_compressed_has_user_turn
    "Continue from the compressed conversation context above. This marker exists because no human "
    "user turn was available.",
    # agent/context_compressor.py handoff summaries (current, historical, legacy, merged into the tail)
    "[CONTEXT COMPACTION",
    "[CONTEXT SUMMARY]:",
    "[PRIOR CONTEXT — for reference only; not a new message]",
)

_LABEL_CHARS = 48
# How much of a message's start is looked at (past leading whitespace) to recognise it.
_PEEK = 256


def message_text(content: Any) -> str:
    """The visible text of a content value (string or parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(p.get("text") or p.get("content") or "") for p in content if isinstance(p, dict)
        )
    return ""


def classify(message: Mapping[str, Any]) -> str | None:
    """Why ``message`` is host scaffolding (a short label), or None for a real message.

    Flags decide for any role; prefixes only for user-role messages, since an
    assistant or tool may quote them.
    """
    for flag in HOST_FLAGS:
        if message.get(flag):
            return flag.strip("_")
    if message.get("role") != "user":
        return None
    content = message.get("content")
    text = (content if isinstance(content, str) else message_text(content))[:_PEEK].lstrip()
    for prefix in HOST_USER_PREFIXES:
        if text.startswith(prefix):
            return prefix_label(prefix)
    return None


def prefix_label(prefix: str) -> str:
    """The label of a message recognised by its text prefix (also used by the store's backfill)."""
    return "host:" + prefix[:_LABEL_CHARS]


class BlockSeal:
    """Makes and checks the header of our summary blocks.

    The header is ``[lcm:context <nonce><tag>]``: a fresh random nonce per
    block and a keyed BLAKE2b of it under a per-database secret. Only the
    header is sealed, so the host may rewrite the body (it merges a following
    user message into it, its session database strips whitespace on reload)
    and the block is still known as ours.
    """

    NONCE_HEX = 8
    TAG_HEX = 16
    _HEADER = re.compile(r"\[lcm:context ([0-9a-f]{8})([0-9a-f]{16})\]")

    def __init__(self, key: bytes) -> None:
        self._key = key

    def _tag(self, nonce: str) -> str:
        digest = hashlib.blake2b(
            nonce.encode("ascii"), key=self._key, digest_size=self.TAG_HEX // 2
        )
        return digest.hexdigest()

    def header(self, stable: str | None = None) -> str:
        """A header with a fresh nonce, or with the one ``stable`` (a conversation) always gets:
        the summary block of a conversation then stays byte for byte the same until its summaries
        change, and a compaction that appends a leaf keeps the block's start, so the provider's
        prompt cache keeps it. The tags need no fresh nonce to stay unforgeable: every look-alike
        of them inside a summary is defused (prompt.assemble.defused)."""
        nonce = (
            secrets.token_hex(self.NONCE_HEX // 2)
            if stable is None
            else hashlib.blake2b(
                b"block:" + stable.encode("utf-8", "surrogatepass"),
                key=self._key,
                digest_size=self.NONCE_HEX // 2,
            ).hexdigest()
        )
        return f"{BLOCK_MARKER} {nonce}{self._tag(nonce)}]"

    def recall(self) -> RecallSeal:
        """The seal of our proactive-recall blocks, keyed from this one's secret."""
        return RecallSeal(self._key)

    def sealed(self, text: str) -> bool:
        """Does ``text`` start with a header this seal made?"""
        found = self._HEADER.match(text)
        return found is not None and hmac.compare_digest(found.group(2), self._tag(found.group(1)))


_ANY_HEADER = re.compile(r"\[lcm:context ([0-9a-f]+)\]")


def closer(header: str) -> str:
    """The line that ends a block opened by ``header``: text after it is not ours."""
    return "[/" + header[1:]


def own_block_rest(message: Mapping[str, Any], seal: BlockSeal | None) -> str | None:
    """None when ``message`` is not our summary block; else the text the host appended to it.

    The dict we returned carries :data:`BLOCK_KEY` (content cannot set a key); a copy the
    host rebuilt from text carries our sealed header. The host merges a user message that
    follows the block into it (``repair_message_sequence``: block, blank line, text); that
    text, after our closing line, is the host's and is returned ("" for a block alone).
    The cheap prefix check comes first, so other messages cost one ``startswith``.
    """
    keyed = bool(message.get(BLOCK_KEY))
    content = message.get("content")
    if not isinstance(content, str) or not (
        content.startswith(BLOCK_MARKER)
        or (content[:1].isspace() and content[:_PEEK].lstrip().startswith(BLOCK_MARKER))
    ):
        return "" if keyed else None
    text = content.lstrip()
    if not keyed and (message.get("role") != "user" or seal is None or not seal.sealed(text)):
        return None
    header = _ANY_HEADER.match(text)
    end_line = closer(header.group(0)) if header else ""
    # The first closer after the header is the block's end: the assembler defuses look-alikes in
    # the summaries (assemble.defused), so only text the host merged after it may hold another.
    end = text.find(end_line, header.end()) if header else -1
    if end < 0:
        return ""
    rest = text[end + len(end_line) :]
    rest = rest[2:] if rest.startswith("\n\n") else rest
    return rest if rest.strip() else ""


def is_own_block(message: Mapping[str, Any], seal: BlockSeal | None) -> bool:
    """Our summary block as the host hands it back, alone or with text merged after it."""
    return own_block_rest(message, seal) is not None


# The start of every proactive-recall block (proactive.py); its seal follows it.
RECALL_MARKER = "[lcm:recall"
_RECALL_HEADER = re.compile(r"\[lcm:recall ([0-9a-f]{8})([0-9a-f]{16})\]")


class RecallSeal:
    """Makes and checks the header of our proactive-recall blocks: ``[lcm:recall <nonce><tag>]``.

    The host appends the block to the API copy of the user's message (its ``api_content``) and
    keeps that copy with the message; ingest cuts a block this seal made back out
    (:func:`without_recall`), so recalled text is never stored as the user's words. The tag is
    keyed with the summary seal's secret under its own label, so neither seal vouches for the
    other's header, and nobody without the database's secret can forge one.
    """

    def __init__(self, key: bytes) -> None:
        self._key = hashlib.blake2b(b"lcm-recall-seal", key=key, digest_size=32).digest()

    def _tag(self, nonce: str) -> str:
        digest = hashlib.blake2b(
            nonce.encode("ascii"), key=self._key, digest_size=BlockSeal.TAG_HEX // 2
        )
        return digest.hexdigest()

    def header(self) -> str:
        nonce = secrets.token_hex(BlockSeal.NONCE_HEX // 2)
        return f"{RECALL_MARKER} {nonce}{self._tag(nonce)}]"

    def sealed_at(self, text: str, start: int) -> re.Match[str] | None:
        """The header this seal made at ``start`` in ``text``, else None."""
        found = _RECALL_HEADER.match(text, start)
        if found is None or not hmac.compare_digest(found.group(2), self._tag(found.group(1))):
            return None
        return found


def without_recall(text: str, seal: RecallSeal | None) -> str:
    """``text`` with every sealed recall block (header through its closing line, and the blank
    line the host put before it) cut out; an unsealed look-alike is the user's own text and stays."""
    if seal is None or RECALL_MARKER not in text:
        return text
    out, pos = [], 0
    start = text.find(RECALL_MARKER)
    while start >= 0:
        header = seal.sealed_at(text, start)
        end = text.find(closer(header.group(0)), header.end()) if header else -1
        if header is None or end < 0:
            start = text.find(RECALL_MARKER, start + 1)
            continue
        cut = start - 2 if text[max(0, start - 2) : start] == "\n\n" else start
        out.append(text[pos:cut])
        pos = end + len(closer(header.group(0)))
        start = text.find(RECALL_MARKER, pos)
    out.append(text[pos:])
    return "".join(out)

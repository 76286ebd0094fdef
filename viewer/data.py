"""What the page shows, read from the store once: the DAG, the messages in chunks, compactions, growth.

The page must open fast for 100k messages, so only what the first screen needs is plain JSON
(the nodes' numbers, the compactions, the months); texts travel in zlib-compressed chunks that the
page inflates when a node, a source page or a search first needs them.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..base.progress import Tick, quiet_tick
from ..base.records import SummaryNode
from ..base.stats import cache_view
from ..store import Store

MESSAGE_CHUNK = 500  # messages per compressed chunk: a source page needs one or two
SUMMARY_CHUNK = 200  # summary texts per chunk
MAX_TEXT_CHARS = 20_000  # a longer text is cut in the page (the store keeps it whole: `lcm expand`)
READ_PAGE = 5_000
ZLIB_LEVEL = (
    1  # 2.5x faster to write than level 6 for a page 20% larger, and inflating costs the same
)


@dataclass(frozen=True)
class Chunk:
    """One compressed run of rows: ``first``/``last`` are seqs (messages) or node ids (summaries)."""

    first: int
    last: int
    count: int
    data: bytes  # zlib of a JSON array


@dataclass
class PageData:
    meta: dict[str, Any]
    message_chunks: list[Chunk] = field(default_factory=list)
    summary_chunks: list[Chunk] = field(default_factory=list)


def cut(text: str) -> str:
    if len(text) <= MAX_TEXT_CHARS:
        return text
    return (
        f"{text[:MAX_TEXT_CHARS]}\n[… {len(text) - MAX_TEXT_CHARS:,} more characters: lcm expand]"
    )


def _pack(rows: list[Any]) -> bytes:
    text = json.dumps(rows, ensure_ascii=False, separators=(",", ":"))
    return zlib.compress(text.encode("utf-8", "replace"), ZLIB_LEVEL)


def _message_text(content: str, tool_calls: str | None) -> str:
    if tool_calls:
        content = (
            f"{content}\n[tool calls] {tool_calls}" if content else f"[tool calls] {tool_calls}"
        )
    return cut(content)


def _message_rows(store: Store, conversation_id: int) -> Iterator[tuple[Any, ...]]:
    seq = -1
    while True:
        page = store.view_message_rows(conversation_id, seq, READ_PAGE)
        yield from page
        if len(page) < READ_PAGE:
            return
        seq = page[-1][0]


def _summaries(store: Store, conversation_id: int) -> Iterator[SummaryNode]:
    after = 0
    while True:
        page = store.summaries(conversation_id, limit=READ_PAGE, after_id=after)
        yield from page
        if len(page) < READ_PAGE:
            return
        after = page[-1].id


def message_chunks(
    store: Store, conversation_id: int, tick: Tick = quiet_tick
) -> tuple[list[Chunk], dict[int, int], dict[str, Any]]:
    """The messages as chunks, plus id -> seq (edges name message ids) and totals; ``tick``: messages read."""
    total = store.message_count(conversation_id)
    chunks: list[Chunk] = []
    seq_of: dict[int, int] = {}
    rows: list[list[Any]] = []
    roles: dict[str, int] = {}
    tokens, first_at, last_at = 0, None, None
    for seq, mid, role, at, count, tool, session, content, tool_calls in _message_rows(
        store, conversation_id
    ):
        seq_of[mid] = seq
        rows.append(
            [seq, mid, role, round(at, 3), count, tool, session, _message_text(content, tool_calls)]
        )
        tokens += count
        first_at = first_at or at
        last_at = at
        roles[role] = roles.get(role, 0) + 1
        if len(rows) >= MESSAGE_CHUNK:
            chunks.append(Chunk(rows[0][0], rows[-1][0], len(rows), _pack(rows)))
            rows = []
            tick(len(seq_of), total)
    if rows:
        chunks.append(Chunk(rows[0][0], rows[-1][0], len(rows), _pack(rows)))
    tick(len(seq_of), total)
    totals = {
        "messages": len(seq_of),
        "tokens": tokens,
        "first_at": first_at,
        "last_at": last_at,
        "roles": roles,
    }
    return chunks, seq_of, totals


NODE_FIELDS = (
    "id",
    "depth",
    "first_seq",
    "last_seq",
    "earliest_at",
    "latest_at",
    "tokens",
    "source_tokens",
    "level",
    "route",
    "created_at",
    "session_id",
)


def node_table(
    store: Store, conversation_id: int, seq_of: dict[int, int]
) -> tuple[list[list[Any]], dict[str, Any], list[Chunk]]:
    """Each node as a row of NODE_FIELDS, its children (summary ids, message seqs), and its text in chunks."""
    rows: list[list[Any]] = []
    texts: list[str] = []
    chunks: list[Chunk] = []
    for n in _summaries(store, conversation_id):
        rows.append(
            [
                n.id,
                n.depth,
                n.first_seq,
                n.last_seq,
                round(n.earliest_at, 3),
                round(n.latest_at, 3),
                n.tokens,
                n.source_tokens,
                n.level,
                n.route,
                round(n.created_at, 3),
                n.session_id,
            ]
        )
        texts.append(cut(n.content))
        if len(texts) >= SUMMARY_CHUNK:
            chunks.append(Chunk(rows[-len(texts)][0], n.id, len(texts), _pack(texts)))
            texts = []
    if texts:
        chunks.append(Chunk(rows[-len(texts)][0], rows[-1][0], len(texts), _pack(texts)))
    children: dict[str, dict[str, list[int]]] = {}
    for parent, kind, child in store.conversation_edges(conversation_id):
        entry = children.setdefault(str(parent), {"s": [], "m": []})
        if kind == "summary":
            entry["s"].append(child)
        elif child in seq_of:
            entry["m"].append(seq_of[child])
    return rows, children, chunks


def derived_compactions(nodes: Sequence[Sequence[Any]]) -> list[dict[str, Any]]:
    """Compactions the engine did not record (older databases, imports): nodes grouped by the second
    they were made, with the tokens they summarized and the tokens they came out at."""
    groups: dict[int, dict[str, Any]] = {}
    for row in nodes:
        key = int(row[10])
        g = groups.setdefault(
            key, {"at": row[10], "nodes": [], "source_tokens": 0, "summary_tokens": 0}
        )
        g["nodes"].append(row[0])
        g["source_tokens"] += row[7]
        g["summary_tokens"] += row[6]
    return [groups[k] for k in sorted(groups)]


def prepared_view(store: Store, conversation_id: int) -> dict[str, Any]:
    """What deferred compaction prepared and the next compaction will publish without a model
    call (depth, first and last seq, tokens, when made), and the last preparation that failed."""
    failed = store.events_of("prepare", conversation_id, limit=1)
    return {
        "fields": ["depth", "first_seq", "last_seq", "tokens", "created_at"],
        "waiting": [
            [p.depth, p.first_seq, p.last_seq, p.tokens, round(p.created_at, 3)]
            for p in store.prepared_summaries(conversation_id)
        ],
        "last_error": failed[-1] if failed else None,
    }


def collect(
    store: Store,
    conversation_id: int,
    *,
    growth_of: Sequence[int] | None = None,
    generated_at: float,
    database_path: str,
    tick: Tick = quiet_tick,
) -> PageData:
    """Everything the page needs for one conversation (``growth_of``: whose months to count; None: all)."""
    state = store.conversation(conversation_id)
    message_chunks_, seq_of, totals = message_chunks(store, conversation_id, tick)
    nodes, children, summary_chunks = node_table(store, conversation_id, seq_of)
    compactions = store.events_of("compaction", conversation_id)
    facts = store.database_sizes()
    meta = {
        "format": 1,
        "generated_at": generated_at,
        "database": {
            "path": database_path,
            "bytes": int(facts["page_size"]) * int(facts["page_count"]),
            "free_bytes": int(facts["page_size"]) * int(facts["freelist_count"]),
            "bytes_by_table": facts.get("bytes_by_table"),
            "schema_version": facts.get("schema_version"),
        },
        "conversation": {
            "id": state.id,
            "key": state.key,
            "frontier_seq": state.frontier_seq,
            "last_seq": state.last_seq,
            **totals,
            "summaries": len(nodes),
        },
        "node_fields": list(NODE_FIELDS),
        "nodes": nodes,
        "children": children,
        "context": [n.id for n in store.context_nodes(conversation_id)],
        "message_chunks": [[c.first, c.last, c.count] for c in message_chunks_],
        "summary_chunks": [[c.first, c.last, c.count] for c in summary_chunks],
        "compactions": [
            {"at": e["at"], **e["detail"]} for e in compactions if isinstance(e["detail"], dict)
        ],
        "derived_compactions": [] if compactions else derived_compactions(nodes),
        "prepared": prepared_view(store, conversation_id),
        "prompt_cache": cache_view(store.cache_usage(conversation_id)),
        "growth": store.monthly_growth(growth_of),
    }
    return PageData(meta, message_chunks_, summary_chunks)

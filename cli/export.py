"""`lcm export`: one conversation as JSONL (the exact messages, and optionally the summary DAG)
or as readable Markdown, to stdout or to a file written whole or not at all."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

from ..base import private
from ..base.display import iso
from ..base.records import StoredMessage, SummaryNode
from ..dag import Dag
from ..store import Store
from . import common
from .common import PAGE_MAX, Subparsers
from .output import EXIT_WRITE, CliError
from .rows import node_row


def register(subparsers: Subparsers) -> None:
    x = common.verb(
        subparsers, "export", export, "a conversation as JSONL (exact messages) or Markdown"
    )
    common.conversation(x, "the conversation to export", required=True)
    x.add_argument(
        "--as",
        dest="as_",
        choices=("jsonl", "markdown"),
        default="jsonl",
        help="jsonl: the exact messages, one per line; markdown: to read",
    )
    x.add_argument("--output", help="file to write (default stdout)")
    x.add_argument("--include-summaries", action="store_true", help="also write the summary nodes")


def export(store: Store, args: argparse.Namespace) -> dict[str, Any] | None:
    try:
        state = store.conversation(args.conversation)
    except KeyError as exc:
        raise CliError(f"no conversation {args.conversation}") from exc
    writer = _export_jsonl if args.as_ == "jsonl" else _export_markdown
    if not args.output:
        writer(store, state.id, state.key, args.out, args.include_summaries)
        return None
    with _written(Path(args.output)) as out:
        count = writer(store, state.id, state.key, out, args.include_summaries)
    return {
        "status": "ok",
        "conversation_id": state.id,
        "messages": count,
        "output": args.output,
        "format": args.as_,
    }


@contextlib.contextmanager
def _written(target: Path) -> Iterator[TextIO]:
    """A file written whole or not at all: a temp file beside it, renamed over it when complete.

    A target that exists must be a regular file (a directory or device is refused before
    anything is written); a failed export leaves the target as it was.
    """
    if target.exists() and not target.is_file():
        raise CliError(f"cannot write: {target} is not a regular file", EXIT_WRITE)
    if not target.parent.is_dir():
        raise CliError(f"cannot write: {target.parent} is not a directory", EXIT_WRITE)
    if target.is_symlink():
        raise CliError(f"cannot write: {target} is a symlink", EXIT_WRITE)
    fd, temp = private.temp_file(
        target.parent, f".{target.name}."
    )  # 0600, unpredictable, exclusive
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, target)
    finally:
        temp.unlink(missing_ok=True)


def _all_messages(store: Store, conversation_id: int) -> Iterator[StoredMessage]:
    after = 0
    while True:
        page = store.messages_after(conversation_id, after, PAGE_MAX)
        yield from page
        if len(page) < PAGE_MAX:
            return
        after = page[-1].seq


def _all_nodes(store: Store, conversation_id: int) -> Iterator[SummaryNode]:
    dag, after = Dag(store), 0
    while True:
        page = dag.nodes_page(conversation_id, None, after, PAGE_MAX)
        yield from page
        if len(page) < PAGE_MAX:
            return
        after = page[-1].id


def _export_jsonl(
    store: Store, conversation_id: int, key: str, out: TextIO, summaries: bool
) -> int:
    count = 0
    for m in _all_messages(store, conversation_id):
        out.write(
            json.dumps(
                {
                    "type": "message",
                    "store_id": m.id,
                    "seq": m.seq,
                    "session_id": m.session_id,
                    "created_at": iso(m.created_at),
                    "source": m.source,
                    "message": m.to_host(),
                },
                ensure_ascii=False,
            )
            + "\n"
        )
        count += 1
    if summaries:
        dag = Dag(store)
        for n in _all_nodes(store, conversation_id):
            kind = "message" if n.depth == 0 else "summary"
            children = (
                dag.descendant_message_ids(n.id)
                if n.depth == 0
                else [c.id for c in dag.children(n.id)]
            )
            out.write(
                json.dumps(
                    {
                        "type": "summary",
                        **node_row(n, 0),
                        "children_kind": kind,
                        "children": children,
                    },
                    ensure_ascii=False,
                )
                + "\n"
            )
    return count


def _export_markdown(
    store: Store, conversation_id: int, key: str, out: TextIO, summaries: bool
) -> int:
    out.write(f"# Conversation {conversation_id}: {key}\n\n")
    count = 0
    for m in _all_messages(store, conversation_id):
        count += 1
        out.write(f"## {m.seq}. {m.role}{' (' + m.tool_name + ')' if m.tool_name else ''}\n\n")
        out.write(f"_{iso(m.created_at)} · session {m.session_id} · store_id {m.id}_\n\n")
        if m.content:
            out.write(m.content.rstrip() + "\n\n")
        if m.tool_calls:
            out.write(
                "```json\n"
                + json.dumps(json.loads(m.tool_calls), indent=2, ensure_ascii=False)
                + "\n```\n\n"
            )
    if summaries:
        out.write("# Summaries\n\n")
        for n in _all_nodes(store, conversation_id):
            out.write(
                f"## {n.node_id} (depth {n.depth}, seq {n.first_seq}-{n.last_seq})\n\n{n.content.rstrip()}\n\n"
            )
    return count

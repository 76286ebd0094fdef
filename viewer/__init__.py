"""``lcm view``: one self-contained HTML page to look at a conversation's memory.

The page shows the summary DAG by depth (a node's text, time range, tokens, children and its
source messages, paged), the compactions (the prompt's make-up before and after each), a search
over the conversation, and the database's size and growth by month. It needs no network and no
server: it opens from ``file://``, and every text in it is inert data the script writes as text.

The file holds the conversation's history, so it is written like a secret: mode 0600, through a
temporary file renamed into place (a reader never sees half a page).
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..base.progress import Tick, quiet_tick
from ..base.startup import local_home
from ..store import Store, database_tag, is_url
from .data import collect
from .page import render

__all__ = ["ViewError", "build_page", "default_path", "write_page"]


class ViewError(ValueError):
    """Nothing to show (no such conversation, an empty database)."""


def _conversation(store: Store, conversation_id: int | None) -> int:
    if conversation_id is None:
        found = store.latest_conversation()
        if found is None:
            raise ViewError("the database holds no conversation yet")
        return found
    try:
        store.conversation(conversation_id)
    except KeyError as exc:
        raise ViewError(f"no conversation {conversation_id}") from exc
    return conversation_id


def build_page(
    store: Store,
    conversation_id: int | None = None,
    *,
    growth_of: Sequence[int] | None = None,
    tick: Tick = quiet_tick,
) -> tuple[str, dict[str, Any]]:
    """The HTML and what it holds (``growth_of``: the conversations whose months the page counts)."""
    conversation_id = _conversation(store, conversation_id)
    data = collect(
        store,
        conversation_id,
        growth_of=growth_of,
        generated_at=time.time(),
        database_path=str(store.path),
        tick=tick,
    )
    conv = data.meta["conversation"]
    html = render(data, f"hermes-lcm · conversation {conversation_id}")
    return html, {
        "conversation_id": conversation_id,
        "messages": conv["messages"],
        "summaries": conv["summaries"],
        "compactions": len(data.meta["compactions"]) or len(data.meta["derived_compactions"]),
        "prepared_waiting": len(data.meta["prepared"]["waiting"]),
    }


def default_path(database_path: str | os.PathLike[str], conversation_id: int | None) -> Path:
    """``lcm-views/`` beside a database file; for a PostgreSQL URL (no directory of its own) under
    this machine's Hermes home, one directory per database (a URL taken as a path made a
    ``postgresql:/user@host/`` tree under the working directory)."""
    name = f"lcm-view-{conversation_id}.html" if conversation_id is not None else "lcm-view.html"
    if is_url(database_path):
        return local_home() / "lcm-views" / f"pg-{database_tag(str(database_path))}" / name
    return Path(database_path).expanduser().resolve().parent / "lcm-views" / name


def write_page(
    store: Store,
    path: str | os.PathLike[str] | None = None,
    conversation_id: int | None = None,
    *,
    growth_of: Sequence[int] | None = None,
    tick: Tick = quiet_tick,
) -> dict[str, Any]:
    """Write the page for ``conversation_id`` (default: the one with the newest message) to ``path``;
    ``tick(done, total)`` follows the messages read (a 100k conversation takes seconds)."""
    started = time.perf_counter()
    html, facts = build_page(store, conversation_id, growth_of=growth_of, tick=tick)
    target = (
        Path(path).expanduser()
        if path is not None
        else default_path(store.path, facts["conversation_id"])
    )
    data = html.encode("utf-8")
    _write_private(target, data)
    return {
        "path": str(target.resolve()),
        "bytes": len(data),
        **facts,
        "seconds": round(time.perf_counter() - started, 3),
    }


def _write_private(target: Path, data: bytes) -> None:
    target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, tmp = tempfile.mkstemp(prefix=".lcm-view-", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, 0o600)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise

"""What one assembly reads of a conversation, asked in one call.

Every turn assembles the prompt from the conversation's row, the ids of its newest raw rows, the
rows among them the caller has not built items for yet, the context summaries and the pinned
request: five statements, in-process calls on SQLite. PostgreSQL, where each would be a round
trip, asks them as one statement (``pg.prompt_reads``); the SQL pieces here are shared with it.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from ..base.records import ConversationState, PromptReads
from .connection import SqliteConnection
from .messages import REQUEST_WHERE
from .rows import NODE_COLUMNS_S, REWRITES_KEY, row_to_message, row_to_node, seq_bound

# The conversation's row, with the database's rewrite counter (rows.REWRITES_KEY; 0 before any).
CONVERSATION_COLUMNS = (
    f"id, key, frontier_seq, last_seq, (SELECT value FROM meta WHERE key='{REWRITES_KEY}')"
)
CONVERSATION_FROM = "FROM conversations WHERE id=?"
CONTEXT_FROM = (
    "FROM context_items c JOIN summaries s ON s.id=c.summary_id WHERE c.conversation_id=?"
)
CONTEXT_SQL = f"SELECT {NODE_COLUMNS_S} {CONTEXT_FROM} ORDER BY c.ord"
# The raw window: rows after the frontier, read in the same statement (no earlier read to trust).
# Its arguments: the conversation twice, the seq bound, the window.
WINDOW_WHERE = (
    "conversation_id=? AND seq>(SELECT frontier_seq FROM conversations WHERE id=?) AND seq<=? "
    "ORDER BY seq DESC LIMIT ?"
)


class PromptReadQueries(SqliteConnection):
    """``prompt_reads``: the five reads of an assembly, one after the other on one connection."""

    def prompt_reads(
        self,
        conversation_id: int,
        window: int,
        upto: int | None,
        newer_than: int,
        held_nodes: Collection[int] = (),
    ) -> PromptReads:
        """The prompt's reads for ``conversation_id``: the newest ``window`` raw rows' ids (none
        stored after ``upto``), whole only those stored after seq ``newer_than`` (the caller
        holds the older ones, and reads any it lacks by id). In process the context summaries
        come whole, held or not (``held_nodes`` saves a server's transfer).

        Raises ``KeyError`` for a conversation that does not exist, as ``conversation`` does."""
        cid, bound = conversation_id, seq_bound(upto)
        raw: list[tuple[str, tuple[int, ...]]] = [
            (f"SELECT id FROM messages WHERE {WINDOW_WHERE}", (cid, cid, bound, window)),
            (
                f"SELECT {self.message_columns} FROM messages WHERE seq>? AND {WINDOW_WHERE}",
                (newer_than, cid, cid, bound, window),
            ),
        ]
        state, *answers = self.read_many(
            [
                (f"SELECT {CONVERSATION_COLUMNS} {CONVERSATION_FROM}", (cid,)),
                *(raw if window > 0 else []),  # no window: what the prompt shows, not its rows
                (CONTEXT_SQL, (cid,)),
                (
                    f"SELECT {self.message_columns} FROM messages WHERE {REQUEST_WHERE}",
                    (cid, bound),
                ),
            ]
        )
        ids, rows, nodes, request = answers if window > 0 else [[], [], *answers]
        return prompt_reads_of(
            conversation_id,
            state[0] if state else None,
            [r[0] for r in ids],
            rows,
            nodes,
            request[0] if request else None,
        )


def prompt_reads_of(
    conversation_id: int,
    state: Sequence[Any] | None,
    ids: Sequence[Any],
    rows: Sequence[Sequence[Any]],
    nodes: Sequence[Sequence[Any]],
    request: Sequence[Any] | None,
    node_ids: Sequence[Any] | None = None,
) -> PromptReads:
    """The record of an assembly's reads, from their rows as a backend got them (the window's
    ids and rows newest first, as the statements order them; ``node_ids`` None: every context
    summary is among ``nodes``)."""
    if not state:
        raise KeyError(conversation_id)
    return PromptReads(
        ConversationState(*state[:4]),
        [int(i) for i in reversed(ids)],
        [row_to_message(r) for r in reversed(rows)],
        [int(r[0]) for r in nodes] if node_ids is None else [int(i) for i in node_ids],
        [row_to_node(r) for r in nodes],
        row_to_message(request) if request else None,
        int(state[4] or 0),
    )

"""An assembly's five reads as one PostgreSQL statement.

Sent as a pipeline (BEGIN, five reads, COMMIT) they still cost the client seven statements of
psycopg's work and the server five plans per turn, since nothing in a pipeline is prepared
(an aborted one leaves psycopg naming a statement the server never kept). As one statement
whose answer is one JSON value, they see one snapshot without a transaction of their own, and
the statement is prepared on each connection (``PgDb.run_prepared``), so the server parses it once
per connection.

Planned for its values, as the session plans every statement (for the searches), it cost ~0.4 ms
of planning a turn, more than its execution; its plan does not depend on its values (one
conversation, a window, a few ids), so it runs under a generic plan, planned once.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from typing import Any, cast

from ...base.records import PromptReads
from ..messages import REQUEST_WHERE
from ..prompt_reads import (
    CONTEXT_FROM,
    CONVERSATION_COLUMNS,
    CONVERSATION_FROM,
    WINDOW_WHERE,
    PromptReadQueries,
    prompt_reads_of,
)
from ..rows import NODE_COLUMNS_S, seq_bound
from .codec import decode
from .connection import PgDb


class PgPromptReadQueries(PromptReadQueries):
    """``prompt_reads`` in one statement and one round trip."""

    def prompt_reads(
        self,
        conversation_id: int,
        window: int,
        upto: int | None,
        newer_than: int,
        held_nodes: Collection[int] = (),
    ) -> PromptReads:
        cid, bound = conversation_id, seq_bound(upto)
        columns = self.message_columns  # they name their table ``messages``: each subquery's alias
        parts = [f"(SELECT json_build_array({CONVERSATION_COLUMNS}) {CONVERSATION_FROM})"]
        args: list[Any] = [cid]
        if window > 0:
            parts += [
                "(SELECT coalesce(json_agg(id ORDER BY seq DESC), '[]') "
                f"FROM (SELECT id, seq FROM messages WHERE {WINDOW_WHERE}) AS w)",
                f"(SELECT coalesce(json_agg(json_build_array({columns}) ORDER BY seq DESC), '[]') "
                f"FROM (SELECT * FROM messages WHERE seq>? AND {WINDOW_WHERE}) AS messages)",
            ]
            args += [cid, cid, bound, window, newer_than, cid, cid, bound, window]
        else:
            parts += ["'[]'::json", "'[]'::json"]
        parts += [
            # a summary the caller holds comes as its id alone
            "(SELECT coalesce(json_agg(CASE WHEN s.id = ANY(?::bigint[]) THEN json_build_array(s.id) "
            f"ELSE json_build_array({NODE_COLUMNS_S}) END ORDER BY c.ord), '[]') {CONTEXT_FROM})",
            f"(SELECT json_build_array({columns}) "
            f"FROM (SELECT * FROM messages WHERE {REQUEST_WHERE}) AS messages)",
        ]
        args += [list(held_nodes), cid, cid, bound]
        with self.read() as db:  # planned once per connection (PgDb.fetchone_generic)
            row = cast(PgDb, db).fetchone_generic(
                f"SELECT json_build_array({', '.join(parts)})::text", args
            )
        state, ids, rows, nodes, request = json.loads(row[0])
        return prompt_reads_of(
            conversation_id,
            state,
            ids,
            [_decoded(r) for r in rows],
            [_decoded(r) for r in nodes if len(r) > 1],
            _decoded(request) if request else None,
            [r[0] for r in nodes],
        )


def _decoded(row: Sequence[Any]) -> list[Any]:
    """A row's strings as the text loader gives them (``codec``: stored NULs come back)."""
    return [decode(v) if isinstance(v, str) else v for v in row]

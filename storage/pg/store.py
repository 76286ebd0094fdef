"""The PostgreSQL store: the shared query mixins over a :class:`PgConnection`, with the methods
whose SQL is SQLite's alone (FTS5, PRAGMAs, ``sqlite_master``, the file itself) overridden.

It implements ``store.Store``; ``store.open_store`` opens it for a ``postgresql://`` URL.
"""

from __future__ import annotations

from ..message_search import MessageSearch
from ..payload_refs import PayloadRefQueries
from ..summaries import SummaryQueries
from ..views import ViewQueries
from .connection import PgConnection
from .families import PgAssertionQueries, PgPreparedQueries, PgRollupQueries, PgVectorQueries
from .messages import PgConversationQueries, PgMessageQueries
from .operator import PgOperatorQueries
from .payloads import PgPayloadQueries
from .prompt_reads import PgPromptReadQueries
from .rewrite import PgRewriteQueries
from .search import PgMessageSearch, PgSummarySearch


def _as_text(fingerprint: str) -> str | bytes:
    """Fingerprints are text here: the column is ``text`` (compactness is SQLite's concern)."""
    return fingerprint


class PgStore(
    PgConnection,
    PgMessageSearch,
    PgSummarySearch,
    PgMessageQueries,
    MessageSearch,
    PgConversationQueries,
    SummaryQueries,
    PgOperatorQueries,
    PgRewriteQueries,
    PgVectorQueries,
    PgRollupQueries,
    PgAssertionQueries,
    ViewQueries,
    PgPayloadQueries,
    PayloadRefQueries,
    PgPreparedQueries,
    PgPromptReadQueries,
):
    """A PostgreSQL database opened for this process. Use ``store.open_store`` with a URL."""

    pack_fingerprint = staticmethod(_as_text)
    _MONTH = "to_char(to_timestamp(created_at) AT TIME ZONE 'UTC', 'YYYY-MM')"  # ViewQueries.monthly_growth
    _scratch = None  # the in-memory SQLite FTS5 table reranking and snippets use (MessageSearch.scratch_fts)

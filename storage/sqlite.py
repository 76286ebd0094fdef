"""The SQLite store: one class made of the per-job query mixins over one connection.

It implements ``store.Store``, the interface the services use; ``store.open_store``
opens it (one per database file and process).
"""

from __future__ import annotations

from .assertions import AssertionQueries
from .conversations import ConversationQueries
from .message_search import MessageSearch
from .messages import MessageQueries
from .operator import OperatorQueries
from .payload_refs import PayloadRefQueries
from .prepared import PreparedQueries
from .prompt_reads import PromptReadQueries
from .rewrite import RewriteQueries
from .rollups import RollupQueries
from .summaries import SummaryQueries
from .vectors import VectorQueries
from .views import ViewQueries


class SqliteStore(
    MessageQueries,
    MessageSearch,
    ConversationQueries,
    SummaryQueries,
    OperatorQueries,
    RewriteQueries,
    VectorQueries,
    RollupQueries,
    AssertionQueries,
    ViewQueries,
    PayloadRefQueries,
    PreparedQueries,
    PromptReadQueries,
):
    """A database file opened for this process. Use ``store.open_store`` / ``store.open_readonly``."""

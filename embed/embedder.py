"""Vectors for what is stored: the backfill (``lcm embed``) and the bounded step after each reply.

Nothing here runs on a host turn. A turn only *requests* the :class:`EmbedJob` (jobs.py: setting an
event); its thread embeds a bounded batch of rows that have no vector yet for the current model,
so per-turn overhead stays what it was, and a slow or failing provider costs recall freshness, not
a turn. The backfill walks the same query to the end, in batches, with progress; it is resumable
because "what has no vector yet" is the state itself: a killed run loses at most one batch.

What is sent: a message's searchable text (content, and each tool call's name and arguments) or a
summary's text, cut to the provider's limit. Redaction applies first when it is on (rows stored
before it was turned on may hold secrets), and for a provider off this machine always, unless
``LCM_EMBEDDING_PRIVACY_ENABLED`` is false: only the provider's copy is redacted, the store is
unchanged.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..base.jobs import BackgroundJob
from ..base.sensitive import Policy, Redactor
from ..base.vectors import encode, prepared
from ..config import LcmConfig
from ..store import Store
from .base import Provider, QueryProvider

MAX_TEXT_CHARS = 4000  # what one row sends at most (MiniLM reads 256 word pieces; API models more)
KINDS = ("m", "s")  # messages, then summaries
WARMUP_TEXT = "hermes-lcm warmup"
CHARS_PER_TOKEN = 4  # the dry run's token estimate
# List prices per million input tokens (USD), for the dry run's estimate; an unknown model shows none.
PRICE_PER_MTOK = {
    "text-embedding-3-small": 0.02,
    "text-embedding-3-large": 0.13,
    "text-embedding-ada-002": 0.10,
    "voyage-3.5-lite": 0.02,
    "voyage-3.5": 0.06,
    "voyage-3-lite": 0.02,
    "voyage-3": 0.06,
}


@dataclass(frozen=True)
class Backlog:
    """What a backfill would embed: rows and an estimate of tokens and cost (never any text)."""

    rows: int
    chars: int
    model: str
    local: bool

    @property
    def tokens(self) -> int:
        return -(-self.chars // CHARS_PER_TOKEN)

    @property
    def cost_usd(self) -> float | None:
        """The estimated price; 0 for a local model, None when the model's price is unknown."""
        if self.local:
            return 0.0
        price = PRICE_PER_MTOK.get(self.model.split(":", 1)[-1])
        return None if price is None else round(self.tokens / 1e6 * price, 4)

    def as_dict(self) -> dict[str, Any]:
        return {
            "rows": self.rows,
            "estimated_tokens": self.tokens,
            "model": self.model,
            "local": self.local,
            "estimated_cost_usd": self.cost_usd,
            "sent_off_this_machine": not self.local,
        }


WINDOW = 256  # rows read, sorted by length and sent in provider batches, per backfill step


@dataclass(frozen=True)
class Progress:
    """Where a backfill is: rows done of the backlog, and how fast."""

    done: int
    total: int
    seconds: float

    @property
    def rate(self) -> float:
        return self.done / self.seconds if self.seconds > 0 else 0.0

    @property
    def eta_seconds(self) -> float | None:
        return max(0.0, self.total - self.done) / self.rate if self.rate > 0 else None

    def line(self) -> str:
        """The one line ``lcm embed`` and ``/lcm embed`` show for it."""
        eta = "?" if self.eta_seconds is None else f"{self.eta_seconds:.0f}s"
        return f"embedded {self.done}/{self.total} rows, {self.rate:.1f} rows/s, ETA {eta}"


class Embedder:
    """Embeds the rows without a vector of one provider's model, a batch at a time.

    It keeps a cursor per kind, so the step after each reply reads only rows newer than the last
    it saw; a fresh Embedder (a new process, ``lcm embed``) starts from the first row and so also
    finds rows whose vector a trigger dropped (their text changed).
    """

    def __init__(
        self, store: Store, provider: Provider, config: LcmConfig, key: bytes = b""
    ) -> None:
        self.store, self.provider, self.config = store, provider, config
        self.redactor = provider_copy_redactor(provider.local, config, key)
        self.max_chars = min(MAX_TEXT_CHARS, int(getattr(provider, "max_chars", MAX_TEXT_CHARS)))
        self.batch_timeout = max(
            30.0, config.embedding_query_timeout_s
        )  # one backfill batch, all its requests
        self.model_id: int | None = None
        self.dim: int | None = None
        self.after = dict.fromkeys(KINDS, 0)
        self.embedded = 0

    @property
    def model(self) -> str:
        return self.provider.name

    def warmup(self) -> dict[str, Any]:
        """One call to learn the model's dimension, then its tables and model id (created only now)."""
        probe = self.provider.embed([WARMUP_TEXT], timeout=self.config.embedding_query_timeout_s)
        vector = prepared(
            probe, self.config.embedding_storage_dtype, self.config.embedding_store_dim
        )
        self.dim = int(vector.shape[1])
        self.store.ensure_vector_tables()
        self.model_id = self.store.vector_model(
            self.provider.name, self.dim, self.config.embedding_storage_dtype
        )
        return {
            "model": self.provider.name,
            "model_id": self.model_id,
            "dim": self.dim,
            "dtype": self.config.embedding_storage_dtype,
            "local": self.provider.local,
        }

    def adopt_known_model(self) -> bool:
        """Take the model id of an earlier warmup of this provider and dtype from the store, without
        calling the provider (the dry run's backlog must not cost a request); False when none."""
        stats = self.store.vector_stats() if self.store.has_vector_tables() else {}
        dtype, want = self.config.embedding_storage_dtype, self.config.embedding_store_dim
        known = [
            m
            for m in stats.get("models", [])
            if m["name"] == self.provider.name
            and m["dtype"] == dtype
            and (want <= 0 or m["dim"] == want)
        ]
        if not known:
            return False
        self.model_id, self.dim = int(known[-1]["id"]), int(known[-1]["dim"])
        return True

    def step(
        self,
        max_rows: int,
        deadline: float | None = None,
        on_part: Callable[[int], None] | None = None,
        should_stop: Callable[[], bool] = lambda: False,
    ) -> int:
        """Embed up to ``max_rows`` rows without a vector (messages first) until ``deadline``
        (monotonic) or ``should_stop()``, both asked between provider calls, ``on_part(n)`` after
        each; returns how many were stored.

        Rows are read a window at a time (``WINDOW`` or the batch size, whichever is larger) and
        sent shortest first: a batch is padded to its longest text, so one long message among
        short ones made the whole batch cost as much as long ones (measured: 4x slower)."""
        if self.model_id is None:
            self.warmup()
        done = 0
        window = max(WINDOW, self.config.embedding_backfill_batch_size)

        def stop() -> bool:
            return should_stop() or (deadline is not None and time.monotonic() >= deadline)

        for kind in KINDS:
            while done < max_rows and not stop():
                rows = self.store.unembedded(
                    self._model_id(), kind, self.after[kind], min(window, max_rows - done)
                )
                if not rows:
                    break
                stored = self._embed(kind, rows, stop, on_part)
                done += len(stored)
                if len(stored) < len(rows):  # stopped between batches: the rest is the next step's
                    self.after[kind] = min(i for i, _ in rows if i not in stored) - 1
                    break
                self.after[kind] = rows[-1][0]
        self.embedded += done
        return done

    def _model_id(self) -> int:
        if self.model_id is None:
            raise RuntimeError("warmup() first")
        return self.model_id

    def _embed(
        self,
        kind: str,
        rows: Sequence[tuple[int, str]],
        stop: Callable[[], bool] = lambda: False,
        on_part: Callable[[int], None] | None = None,
    ) -> set[int]:
        """Embed and store ``rows`` shortest first, one provider batch at a time (each stored at
        once: a killed run loses one batch), stopping between batches when ``stop()``; the ids stored."""
        dtype = self.config.embedding_storage_dtype
        size = max(
            1,
            int(
                getattr(self.provider, "batch_size", 0) or self.config.embedding_backfill_batch_size
            ),
        )
        ordered = sorted(rows, key=lambda row: len(row[1] or ""))
        stored: set[int] = set()
        for start in range(0, len(ordered), size):
            if start and stop():
                break
            part = ordered[start : start + size]
            matrix = self.provider.embed(
                [self.text(text) for _, text in part], timeout=self.batch_timeout
            )
            vectors = prepared(matrix, dtype, self.config.embedding_store_dim)
            self.store.put_vectors(
                self._model_id(),
                kind,
                [(item, *encode(row, dtype)) for (item, _), row in zip(part, vectors, strict=True)],
            )
            stored.update(item for item, _ in part)
            if on_part is not None:
                on_part(len(part))
        return stored

    def text(self, text: str) -> str:
        """What the provider gets for a text: cut to its limit, and redacted when it must be."""
        text = (text or "")[: self.max_chars].strip() or "."
        return self.redactor.redact(text) if self.redactor is not None else text

    def query(self, text: str, timeout: float | None = None) -> np.ndarray:
        """A search query's vector, prepared like the stored ones; raises ProviderError."""
        wait = self.config.embedding_query_timeout_s if timeout is None else timeout
        embed = (
            self.provider.embed_query
            if isinstance(self.provider, QueryProvider)
            else self.provider.embed
        )
        matrix = embed([self.text(text)], timeout=wait)
        return prepared(
            matrix, self.config.embedding_storage_dtype, self.config.embedding_store_dim
        )[0]

    def backlog(self) -> Backlog:
        """Rows without a vector of this model (every row before the first warmup) and their size."""
        rows, chars = self.store.embedding_backlog(self.model_id, self.max_chars)
        return Backlog(rows, chars, self.provider.name, self.provider.local)

    def backfill(
        self,
        on_progress: Callable[[Progress], None] | None = None,
        should_stop: Callable[[], bool] = lambda: False,
        limit: int | None = None,
    ) -> Progress:
        """Embed every row without a vector (or ``limit`` of them), batch by batch; a killed run
        resumes where it stopped, since the rows still without a vector are the state."""
        if self.model_id is None:
            self.warmup()
        total = self.backlog().rows if limit is None else min(limit, self.backlog().rows)
        started, done = time.monotonic(), 0
        progress = Progress(0, total, 0.0)
        if on_progress is not None:
            on_progress(
                progress
            )  # the line shows the backlog at once, before the first batch is back
        partial = [0]

        def on_part(count: int) -> None:
            partial[0] += count
            if on_progress is not None:
                on_progress(
                    Progress(
                        done + partial[0], max(total, done + partial[0]), time.monotonic() - started
                    )
                )

        while not should_stop() and (limit is None or done < limit):
            want = WINDOW if limit is None else min(WINDOW, limit - done)
            partial[0] = 0
            count = self.step(want, on_part=on_part, should_stop=should_stop)
            if count == 0:
                break
            done += count
            progress = Progress(done, max(total, done), time.monotonic() - started)
        return progress


def provider_copy_redactor(local: bool, config: LcmConfig, key: bytes) -> Redactor | None:
    """The redactor for what a provider gets: the store's policy when redaction is on; for a
    provider off this machine the whole catalog too, unless LCM_EMBEDDING_PRIVACY_ENABLED is off."""
    if not local and config.embedding_privacy_enabled:
        names = (
            "all" if not config.sensitive_patterns_enabled else f"all,{config.sensitive_patterns}"
        )
        return Redactor(Policy.parse(names), key)
    if config.sensitive_patterns_enabled:
        return Redactor(Policy.parse(config.sensitive_patterns), key)
    return None


class EmbedJob(BackgroundJob):
    """The bounded step after each reply, on a thread of its own (jobs.py): a turn requests it.

    ``/lcm embed apply`` asks for a backfill (:meth:`request_backfill`): the job then requests
    itself again after each bounded run until a run finds nothing, so the backlog is worked
    through on this thread, one bounded run at a time, while the chat goes on.
    """

    name = "hermes-lcm-embed"
    ROWS_PER_RUN = 256
    SECONDS_PER_RUN = 5.0

    def __init__(self, embedder: Embedder) -> None:
        super().__init__()
        self.embedder = embedder
        self.backfilling = False
        self.backfill_done = 0
        self.backfill_total = 0
        self.backfill_started = 0.0

    def request_backfill(self) -> None:
        """Work through the whole backlog in bounded runs; never blocks the caller."""
        if not self.backfilling:
            self.embedder.after = dict.fromkeys(
                KINDS, 0
            )  # from the first row: also what a trigger dropped
            self.backfill_done, self.backfill_started = 0, time.monotonic()
            try:
                self.backfill_total = self.embedder.backlog().rows
            except Exception:  # noqa: BLE001 - the total is for the progress line only
                self.backfill_total = 0
        self.backfilling = True
        self.request()

    def progress(self) -> Progress | None:
        """Where a requested backfill is (None when none was asked for since the start)."""
        if not self.backfill_started:
            return None
        return Progress(
            self.backfill_done,
            max(self.backfill_total, self.backfill_done),
            time.monotonic() - self.backfill_started,
        )

    def step(self) -> None:
        try:
            if self.embedder.model_id is None:
                self.embedder.warmup()  # before the run's clock starts: a slow first load is not a finished backlog
            deadline = time.monotonic() + self.SECONDS_PER_RUN
            done = self.embedder.step(self.ROWS_PER_RUN, deadline)
        except Exception:
            self.backfilling = (
                False  # a failing provider ends the backfill; its error is in ``errors``
            )
            raise
        if self.backfilling:
            self.backfill_done += done
            ran_out = (
                done < self.ROWS_PER_RUN and time.monotonic() < deadline
            )  # no row left, not out of time
            if ran_out or self._stopping:
                self.backfilling = False
            else:
                self._wake.set()  # one more bounded run

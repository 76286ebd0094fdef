"""Semantic recall for one store: the provider the settings name, the background embedding after
each reply, and the query side (a query's vector, the cached in-memory index of each kind).

Everything degrades instead of failing: embeddings off, a provider that cannot be built (its
reason is ``problem``), a read-only store, a query the provider does not answer within
``LCM_EMBEDDING_QUERY_TIMEOUT_S``: search then runs on full text alone and says so, and status
and doctor show why. No method here raises into a caller.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..base.jobs import JobOwner, read_stats
from ..base.redact import clip
from ..base.vectors import VectorIndex, decode
from ..config import LcmConfig
from ..store import Store, StoreError, StoreFault
from .base import ProviderError
from .embedder import WARMUP_TEXT, Embedder, EmbedJob
from .providers import provider_for

REDACTION_SECRET = "redaction"  # the store's redaction key: equal secrets get equal placeholders


class StoredIndex:
    """A kind's vectors searched where they are stored (PostgreSQL with pgvector: ``<=>`` in SQL):
    what the vector arm uses of a :class:`VectorIndex`, without loading the rows into memory."""

    def __init__(self, store: Store, model_id: int, kind: str, dim: int, size: int) -> None:
        self.store, self.model_id, self.kind, self.dim, self.size = store, model_id, kind, dim, size
        self.failures = 0
        self.last_error: str | None = None

    def __len__(self) -> int:
        return self.size

    def search(
        self, query: np.ndarray, k: int, multiplier: int = 8, allowed: np.ndarray | None = None
    ) -> list[tuple[int, float]]:
        """The ``k`` nearest ids as ``(id, cosine)``, best first (exact: ``multiplier`` is unused).
        A database that fails here gives nothing (recorded): the search goes on with full text."""
        if allowed is not None and len(allowed) == 0:
            return []
        ids = None if allowed is None else [int(i) for i in np.asarray(allowed).reshape(-1)]
        try:
            return self.store.nearest_vectors(self.model_id, self.kind, query, k, ids)
        except (StoreFault, StoreError) as exc:
            self.failures += 1
            self.last_error = clip(f"{type(exc).__name__}: {exc}", 300)
            return []


@dataclass
class _Cached:
    """One kind's index and the store version it reflects (the index is the only copy of the rows)."""

    version: tuple[int, int, int]
    index: VectorIndex


class Semantic(JobOwner):
    """The vector side of one store. ``embedder`` is None when embeddings are off or broken."""

    def __init__(self, config: LcmConfig, store: Store, env: Mapping[str, str]) -> None:
        self.config, self.store = config, store
        self.problem: str | None = None
        self.embedder: Embedder | None = None
        self.job: EmbedJob | None = None
        self.query_failures = 0
        self.last_query_error: str | None = None
        self._cache: dict[str, _Cached] = {}
        self._lock = threading.Lock()
        try:
            provider = provider_for(config, env)
            if provider is not None:
                key = b"" if store.readonly else store.secret(REDACTION_SECRET)
                self.embedder = Embedder(store, provider, config, key)
                self.job = None if store.readonly else EmbedJob(self.embedder)
        except Exception as exc:  # noqa: BLE001 - a provider that cannot be built is a status line, not a crash
            self.problem = clip(str(exc), 300)

    @property
    def enabled(self) -> bool:
        return self.embedder is not None

    @property
    def model(self) -> str | None:
        return self.embedder.model if self.embedder is not None else None

    @property
    def prescreen_multiplier(self) -> int:
        return self.config.knn_prescreen_multiplier

    # -- the query side ---------------------------------------------------------------------------

    def query_vector(self, text: str) -> np.ndarray | None:
        """The query's vector, or None (recorded) when the provider fails or is too slow."""
        embedder = self.embedder
        if embedder is None:
            return None
        try:
            if embedder.model_id is None:
                embedder.warmup()
            return embedder.query(text)
        except Exception as exc:  # noqa: BLE001 - a failed query embedding falls back to full text
            self.query_failures += 1
            self.last_query_error = clip(f"{type(exc).__name__}: {exc}", 300)
            return None

    def index(self, kind: str) -> VectorIndex | StoredIndex | None:
        """The index of one kind ("m" | "s") for the current model: searched in the store when it
        can (pgvector), else in memory, refreshed when the stored vectors changed: new rows are
        appended, anything else reloads it."""
        embedder = self.embedder
        if embedder is None or embedder.model_id is None or embedder.dim is None:
            return None
        model_id, dim, dtype = embedder.model_id, embedder.dim, self.config.embedding_storage_dtype
        with self._lock:
            version = self.store.vector_version(model_id, kind)
            if self.store.vector_knn_native():
                return StoredIndex(self.store, model_id, kind, dim, int(version[0]))
            cached = self._cache.get(kind)
            if cached is not None and cached.version == version:
                return cached.index
            after = cached.version[1] if cached is not None else 0
            ids, blobs, scales = self.store.load_vectors(model_id, kind, after_id=after)
            rows = decode(blobs, scales, dim, dtype) if ids else np.zeros((0, dim), np.float32)
            if (
                cached is not None
                and cached.version[2] == version[2]
                and len(cached.index) + len(ids) == version[0]
            ):
                index = cached.index.extended(
                    np.asarray(ids, dtype=np.int64), rows
                )  # appended: no reload
            else:
                if cached is not None:  # rows were dropped or replaced: read them all again
                    ids, blobs, scales = self.store.load_vectors(model_id, kind)
                    rows = (
                        decode(blobs, scales, dim, dtype) if ids else np.zeros((0, dim), np.float32)
                    )
                index = VectorIndex(np.asarray(ids, dtype=np.int64), rows, dtype)
            del rows
            self._cache[kind] = _Cached(version, index)
            return index

    def doctor(self) -> tuple[str, str, dict[str, Any]]:
        """The doctor's check: (status, detail, data). One probe call of a fixed text (no stored
        text is sent); a broken setting, a silent provider or job/query failures warn."""
        if self.embedder is None:
            if self.problem:
                return (
                    "warn",
                    f"on but unusable: {self.problem}",
                    {"enabled": True, "problem": self.problem},
                )
            return "ok", "off (LCM_EMBEDDINGS_ENABLED)", {"enabled": False}
        embedder = self.embedder
        problems: list[str] = []
        try:
            embedder.provider.embed([WARMUP_TEXT], timeout=self.config.embedding_query_timeout_s)
        except Exception as exc:  # noqa: BLE001 - what the doctor reports
            problems.append(f"the provider does not answer: {clip(str(exc), 200)}")
        try:
            if embedder.model_id is None:
                embedder.adopt_known_model()
            backlog = embedder.backlog().rows
        except Exception as exc:  # noqa: BLE001 - e.g. a locked database
            backlog, problems = -1, [*problems, f"backlog unknown: {clip(str(exc), 200)}"]
        missing = self._indexes_missing()
        if missing:
            problems.append(
                f"vector index missing ({', '.join(missing)}): searches scan every vector until "
                "`lcm embed --apply` builds it (without blocking writers)"
            )
        errors = list(self.job.errors) if self.job is not None else []
        if errors:
            problems.append(f"embedding job errors: {errors[-1]}")
        if self.query_failures:
            problems.append(
                f"{self.query_failures} query embeddings failed (search ran on full text): "
                f"{self.last_query_error}"
            )
        data = {
            "enabled": True,
            "model": embedder.model,
            "sent_off_this_machine": not embedder.provider.local,
            "backlog_rows": backlog,
            "job_errors": errors,
            "query_failures": self.query_failures,
            "indexes_missing": missing,
        }
        detail = (
            f"{embedder.model}, {'local' if embedder.provider.local else 'sent off this machine'}; "
            f"{backlog} rows without a vector"
        )
        return ("warn" if problems else "ok"), "; ".join([detail, *problems]), data

    def _indexes_missing(self) -> list[str]:
        """The approximate indexes a model with vectors lacks (PostgreSQL; none on SQLite)."""
        try:
            if not self.store.has_vector_tables():
                return []
            return list(self.store.vector_stats().get("indexes_missing", []))
        except Exception:  # noqa: BLE001 - the backlog check above reports an unreadable store
            return []

    def coverage(self, cap: int = 1000) -> tuple[str, int, int]:
        """``(model, messages searched, messages newer than the newest vector still waiting (up to
        cap))`` for lcm_recall's "arms" field; the wait is a primary-key walk from the newest
        embedded id, so it stays cheap on a large store."""
        embedder = self.embedder
        if embedder is None or embedder.model_id is None:
            return "", 0, 0
        cached = self._cache.get("m")
        version = self.store.vector_version(embedder.model_id, "m")
        count, newest = (
            int(version[0]),
            int(version[1]),
        )  # (count, newest id, ...): later fields not needed
        try:
            waiting = len(self.store.unembedded(embedder.model_id, "m", newest, cap))
        except Exception:  # noqa: BLE001 - the note is informational
            waiting = 0
        return embedder.model, len(cached.index) if cached is not None else count, waiting

    def status(self) -> dict[str, Any]:
        """What status and doctor show: the provider, the model, the job, the failures; no text."""
        if self.embedder is None:
            note = self.problem or "off (LCM_EMBEDDINGS_ENABLED)"
            return {"enabled": False, "problem" if self.problem else "note": note}
        embedder = self.embedder
        info: dict[str, Any] = {
            "enabled": True,
            "model": embedder.model,
            "local": embedder.provider.local,
            "sent_off_this_machine": not embedder.provider.local,
            "provider_copy_redacted": embedder.redactor is not None,
            "model_id": embedder.model_id,
            "dim": embedder.dim,
            "dtype": self.config.embedding_storage_dtype,
            "embedded_this_process": embedder.embedded,
            "query_failures": self.query_failures,
            "last_query_error": self.last_query_error,
        }
        if (job := self.job_view()) is not None:
            info["job"] = job
        info["vectors"] = read_stats(self.store.vector_stats)
        return info


__all__ = ["ProviderError", "Semantic"]

"""What every embedding provider shares: the error, the protocol, and the checks on an answer.

A provider's answer is checked here before anyone stores it: the right number of rows, one
dimension for the provider's whole life (vectors of two dimensions cannot be compared, and a
model swapped behind a URL would otherwise mix them silently), finite numbers, no zero row.
Rows are L2-normalized here, so cosine is a dot product for every later reader.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from ..base.redact import clip


class ProviderError(Exception):
    """An embedding call that gave no usable vectors. The message is short, redacted and says why."""

    def __init__(self, message: str, extra_secrets: Sequence[str | None] = ()) -> None:
        # Redacted here, once, so no caller can forget: a provider's body may echo the request.
        super().__init__(clip(message, 300, list(extra_secrets)))


@runtime_checkable
class Provider(Protocol):
    """Texts in, unit vectors out.

    ``name`` says which model made a vector ("openai:text-embedding-3-small"); vectors are kept
    per name. ``local`` is True only when the text never leaves this machine.
    """

    name: str
    local: bool

    def embed(self, texts: Sequence[str], *, timeout: float | None = None) -> np.ndarray:
        """float32, shape (len(texts), dim), each row L2-normalized; raises ProviderError."""
        ...


@runtime_checkable
class QueryProvider(Protocol):
    """A provider whose model embeds a search query unlike a stored text (e5's ``query:`` and
    ``passage:`` prefixes): the searcher asks ``embed_query`` for the query's vector and ``embed``
    for everything stored. A provider without it embeds both alike."""

    def embed_query(self, texts: Sequence[str], *, timeout: float | None = None) -> np.ndarray:
        """Like ``Provider.embed``, for search queries."""
        ...


class DimensionGuard:
    """Remembers a provider's dimension from its first answer and refuses any other after it."""

    def __init__(self, label: str, dim: int | None = None) -> None:
        self.label = label
        self.dim = dim

    def finish(self, rows: Sequence[Sequence[float]] | np.ndarray, expected: int) -> np.ndarray:
        """``rows`` checked (count, dimension, finite, non-zero) and L2-normalized, as float32."""
        if len(rows) != expected:
            raise ProviderError(f"{self.label}: {len(rows)} vectors for {expected} texts")
        if expected == 0:
            return np.zeros((0, self.dim or 0), dtype=np.float32)
        try:
            matrix = np.asarray(rows, dtype=np.float64)
        except (TypeError, ValueError):
            raise ProviderError(
                f"{self.label}: the vectors are not lists of numbers of one length"
            ) from None
        if matrix.ndim != 2 or matrix.shape[1] == 0:
            raise ProviderError(f"{self.label}: the vectors are not lists of numbers of one length")
        dim = int(matrix.shape[1])
        if self.dim is not None and dim != self.dim:
            raise ProviderError(f"{self.label}: the dimension changed from {self.dim} to {dim}")
        if not np.isfinite(matrix).all():
            raise ProviderError(f"{self.label}: a vector holds NaN or infinity")
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        if (norms == 0).any():
            raise ProviderError(f"{self.label}: a vector is all zeros")
        self.dim = dim
        return (matrix / norms).astype(np.float32)


def batches(texts: Sequence[str], size: int) -> list[Sequence[str]]:
    """``texts`` in order, ``size`` at a time (at least one per batch)."""
    size = max(1, int(size))
    return [texts[i : i + size] for i in range(0, len(texts), size)]


def run_batches(
    label: str,
    texts: Sequence[str],
    size: int,
    timeout: float | None,
    guard: DimensionGuard,
    run: Callable[[Sequence[str]], np.ndarray],
) -> np.ndarray:
    """``run`` over ``texts`` a batch at a time, each answer checked by ``guard``, for an in-process
    model: ``timeout`` is checked between batches because a running batch cannot be interrupted."""
    deadline = None if timeout is None else time.monotonic() + float(timeout)
    parts = []
    for batch in batches(texts, size):
        if deadline is not None and time.monotonic() > deadline:
            raise ProviderError(f"{label}: timed out after {float(timeout or 0):.1f}s")
        parts.append(guard.finish(run(batch), len(batch)))
    return np.concatenate(parts, axis=0)

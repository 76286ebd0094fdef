"""Embedding providers over HTTP (httpx): OpenAI-compatible ``/embeddings`` (OpenAI, Voyage, any
server speaking that API) and Ollama's ``/api/embed``.

A call sends the texts in batches of ``embedding_backfill_batch_size``, in order, and returns one
checked, normalized row per text (base.DimensionGuard). ``timeout`` bounds the whole call, every
batch included: a query's embedding must not hold recall up longer than
``LCM_EMBEDDING_QUERY_TIMEOUT_S`` however many batches it takes. Every failure is a ProviderError
whose message is redacted (the key is remembered by redact.py from construction on, and a body
that echoes the request is masked before it is quoted).
"""

from __future__ import annotations

import ipaddress
import time
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

import httpx
import numpy as np

from ..base.httpcall import CallTimeout, CallTooLarge, post_json
from ..base.redact import remember
from .base import DimensionGuard, ProviderError, batches

# A call without a timeout of its own (a backfill batch) still ends: no provider answer is awaited forever.
DEFAULT_TIMEOUT_S = 60.0
# The part of an error body quoted in a ProviderError (redacted first, then cut).
_BODY_CHARS = 160
# The largest answer read: 4,096 texts x 4,096 dimensions as JSON floats fits well inside.
MAX_RESPONSE_BYTES = 512 * 1024 * 1024


def is_loopback(base_url: str) -> bool:
    """True when ``base_url`` names this machine (127.0.0.0/8, ::1, localhost)."""
    host = (urlsplit(base_url).hostname or "").strip("[]").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class _HttpProvider:
    """The shared part: one httpx client, batching, the deadline, the error messages."""

    kind = ""
    path = ""

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None,
        batch_size: int,
        *,
        max_chars: int,
        client: httpx.Client | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.url = self.base_url + self.path
        self.model = model
        self.name = f"{self.kind}:{model}"
        self.batch_size = max(1, int(batch_size))
        # The longest text a caller should send: the caller cuts (the provider sends exactly what it is given),
        # short enough for the model's token limit even at 2-3 characters a token (code, JSON).
        self.max_chars = max_chars
        self._api_key = api_key or None
        remember(api_key)
        self._guard = DimensionGuard(self.name)
        # A loopback server is reached directly: a proxy from the environment must not carry local traffic away.
        self._client = client or httpx.Client(
            trust_env=not is_loopback(self.base_url), follow_redirects=False
        )

    @property
    def dim(self) -> int | None:
        """The dimension seen so far (None before the first answer)."""
        return self._guard.dim

    def close(self) -> None:
        self._client.close()

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}

    def embed(self, texts: Sequence[str], *, timeout: float | None = None) -> np.ndarray:
        texts = list(texts)
        budget = DEFAULT_TIMEOUT_S if timeout is None else float(timeout)
        deadline = time.monotonic() + budget
        parts: list[np.ndarray] = []
        for batch in batches(texts, self.batch_size):
            left = deadline - time.monotonic()
            if left <= 0:
                raise ProviderError(f"{self.name}: timed out after {budget:.1f}s")
            parts.append(
                self._guard.finish(
                    self._rows(self._post(batch, left, budget), len(batch)), len(batch)
                )
            )
        if not parts:
            return np.zeros((0, self._guard.dim or 0), dtype=np.float32)
        return np.concatenate(parts, axis=0)

    def _post(self, batch: Sequence[str], left: float, budget: float) -> Any:
        payload = {"model": self.model, "input": list(batch)}
        try:
            response = post_json(
                self._client,
                self.url,
                payload,
                self._headers(),
                seconds=left,
                max_bytes=MAX_RESPONSE_BYTES,
            )
        except CallTimeout:  # the whole call, however slowly its body trickles in
            raise ProviderError(f"{self.name}: timed out after {budget:.1f}s") from None
        except CallTooLarge:
            raise ProviderError(
                f"{self.name}: the answer is larger than {MAX_RESPONSE_BYTES} bytes"
            ) from None
        except httpx.HTTPError as exc:
            raise ProviderError(
                f"{self.name}: cannot reach {self.base_url}: {type(exc).__name__}: {exc}",
                [self._api_key],
            ) from None
        if not response.ok:
            body = response.text().replace("\n", " ")
            # Redacted before it is cut (ProviderError): a cut key would no longer match itself.
            raise ProviderError(
                f"{self.name}: HTTP {response.status}: {body[: _BODY_CHARS * 16]}", [self._api_key]
            )
        try:
            return response.json()
        except ValueError:
            raise ProviderError(f"{self.name}: the answer is not valid JSON") from None

    def _rows(self, data: Any, expected: int) -> list[Any]:
        raise NotImplementedError


class OpenAIProvider(_HttpProvider):
    """Any OpenAI-compatible ``POST {base}/embeddings``: ``data[].embedding``, put in order by ``index``."""

    kind = "openai"
    path = "/embeddings"

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None,
        batch_size: int,
        *,
        kind: str = "openai",
        max_chars: int = 16_000,
        client: httpx.Client | None = None,
    ) -> None:
        self.kind = kind  # "voyage" is the same API at another address; the name says which
        super().__init__(base_url, model, api_key, batch_size, max_chars=max_chars, client=client)
        # Text sent to an OpenAI-compatible server is treated as leaving the machine even on a loopback
        # address: such a server is often a proxy to a hosted model (only Ollama's own API counts as local).
        self.local = False

    def _rows(self, data: Any, expected: int) -> list[Any]:
        items = data.get("data") if isinstance(data, dict) else None
        if not isinstance(items, list):
            raise ProviderError(f"{self.name}: the answer has no data list")
        by_index: dict[int, Any] = {}
        for position, item in enumerate(items):
            if not isinstance(item, dict) or not isinstance(item.get("embedding"), list):
                raise ProviderError(f"{self.name}: data[{position}] has no embedding list")
            index = item.get("index", position)
            if not isinstance(index, int) or isinstance(index, bool) or index in by_index:
                raise ProviderError(
                    f"{self.name}: data[{position}] has a missing or repeated index"
                )
            by_index[index] = item["embedding"]
        if sorted(by_index) != list(range(len(by_index))):
            raise ProviderError(f"{self.name}: the indexes are not 0..{len(by_index) - 1}")
        if len(by_index) != expected:
            raise ProviderError(f"{self.name}: {len(by_index)} vectors for {expected} texts")
        return [by_index[i] for i in range(expected)]


class OllamaProvider(_HttpProvider):
    """Ollama's ``POST {base}/api/embed`` (``{"model", "input": [...]}`` -> ``embeddings``, in order)."""

    kind = "ollama"
    path = "/api/embed"

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None,
        batch_size: int,
        *,
        max_chars: int = 6_000,
        client: httpx.Client | None = None,
    ) -> None:
        super().__init__(base_url, model, api_key, batch_size, max_chars=max_chars, client=client)
        self.local = is_loopback(self.base_url)

    def _rows(self, data: Any, expected: int) -> list[Any]:
        rows = data.get("embeddings") if isinstance(data, dict) else None
        if not isinstance(rows, list):
            raise ProviderError(f"{self.name}: the answer has no embeddings list")
        return rows

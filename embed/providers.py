"""Which provider the settings name (``provider_for``), with each kind's default URL and model
and where its key comes from."""

from __future__ import annotations

from collections.abc import Mapping

from ..config import LcmConfig
from .base import Provider, ProviderError
from .e5 import MODEL_NAME as E5_MODEL
from .e5 import E5Provider
from .http import OllamaProvider, OpenAIProvider
from .local import MODEL_NAME as LOCAL_MODEL
from .local import LocalProvider

DEFAULT_BASE_URLS = {
    "openai": "https://api.openai.com/v1",
    "voyage": "https://api.voyageai.com/v1",
    "ollama": "http://127.0.0.1:11434",
}
# The local provider's models, by every name that picks them; the first is the default.
LOCAL_MODELS = {
    LOCAL_MODEL: (LOCAL_MODEL, "all-minilm-l6-v2"),
    E5_MODEL: (E5_MODEL, "multilingual-e5-small"),
}
DEFAULT_MODELS = {
    "openai": "text-embedding-3-small",
    "voyage": "voyage-3.5-lite",
    "ollama": "nomic-embed-text",
}


def api_key(config: LcmConfig, env: Mapping[str, str]) -> str | None:
    """The key: ``embedding_api_key``, else the variable ``embedding_api_key_env`` names (which must exist)."""
    if config.embedding_api_key:
        return config.embedding_api_key
    name = config.embedding_api_key_env.strip()
    if not name:
        return None
    value = env.get(name, "").strip()
    if not value:
        raise ProviderError(f"LCM_EMBEDDING_API_KEY_ENV names {name}, which is not set")
    return value


def provider_for(config: LcmConfig, env: Mapping[str, str]) -> Provider | None:
    """The provider the settings name; None when embeddings are off.

    Raises ProviderError when they are on but cannot work as set (no provider named, a key
    variable that is not set, Voyage without a key). The local provider loads its model on first
    use, so building it is cheap and needs no extra installed; its first call says what is missing.
    """
    if not config.embeddings_enabled:
        return None
    kind = config.embedding_provider
    batch = config.embedding_backfill_batch_size
    if kind == "local":
        return local_provider(config.embedding_model, batch)
    if kind not in DEFAULT_BASE_URLS:
        raise ProviderError(
            "LCM_EMBEDDINGS_ENABLED is on but LCM_EMBEDDING_PROVIDER is not set "
            "(openai, voyage, ollama or local)"
        )
    key = api_key(config, env)
    model = config.embedding_model or DEFAULT_MODELS[kind]
    if kind == "ollama":
        base = config.ollama_base_url or config.embedding_base_url or DEFAULT_BASE_URLS[kind]
        return OllamaProvider(base, model, key, batch)
    if kind == "voyage" and not key:
        raise ProviderError(
            "the voyage provider needs a key: LCM_EMBEDDING_API_KEY or LCM_EMBEDDING_API_KEY_ENV"
        )
    base = config.embedding_base_url or DEFAULT_BASE_URLS[kind]
    return OpenAIProvider(base, model, key, batch, kind=kind)


def local_provider(model: str, batch: int) -> Provider:
    """The offline provider for ``model`` (empty: all-MiniLM-L6-v2, the small default)."""
    wanted = model.strip().lower()
    if not wanted or wanted in LOCAL_MODELS[LOCAL_MODEL]:
        return LocalProvider(batch)
    if wanted in LOCAL_MODELS[E5_MODEL]:
        return E5Provider(batch)
    raise ProviderError(
        f"the local provider has the models {' and '.join(LOCAL_MODELS)}, not {model!r}"
    )

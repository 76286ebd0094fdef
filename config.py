"""One typed, validated configuration from ``LCM_*`` environment variables and
the ``lcm:`` block of Hermes' config.yaml.

Every key can be set both ways; the environment wins. An invalid value never
raises into the host: it falls back to the default and is reported in
:attr:`LoadedConfig.problems`, which status and doctor show.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .base import peer_settings as compat
from .base.patterns import MessagePatterns, split_list
from .base.sensitive import Policy

log = logging.getLogger("hermes_lcm")
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}

SUMMARY_PROVIDERS = ("auto", "auxiliary", "openai", "extractive")
SUBAGENT_POLICIES = ("stateless", "store", "ignore")
# The window assumed while the host has not told the model's context length yet.
DEFAULT_CONTEXT_LENGTH = 128_000
# The largest token count any setting may name: ten times the largest context windows sold today.
MAX_TOKENS = 100_000_000


@dataclass(frozen=True)
class LcmConfig:
    """Every setting with its default; each field is documented in docs/operator-guide.md
    (a test compares the two)."""

    database_path: str = ""
    database_url: str = ""
    context_threshold: float = 0.35
    absolute_threshold_tokens: int = 0
    model_thresholds: str = ""
    fresh_tail_count: int = 32
    fresh_tail_max_tokens: int = 0
    leaf_chunk_tokens: int = 20000
    incremental_max_depth: int = 3
    condense_min_nodes: int = 4
    summary_budget_ratio: float = 0.4
    compaction_target_ratio: float = 0.6
    reserve_tokens: int = 0
    max_passes_per_compress: int = 12
    compaction_max_seconds: float = 45.0
    new_session_retain_depth: int = 2
    ignore_session_patterns: str = ""
    stateless_session_patterns: str = ""
    # A delegate_task subagent's session: "stateless" reads its parent's memory and writes nothing,
    # "store" keeps it as its own conversation linked to the parent, "ignore" neither reads nor writes.
    # The session patterns above take precedence.
    subagent_sessions: str = "stateless"
    ignore_message_patterns: str = ""
    summary_provider: str = "auto"
    summary_model: str = ""
    summary_base_url: str = ""
    summary_api_key: str = ""
    summary_fallback_models: str = ""
    summary_timeout_ms: int = 60000
    summary_circuit_breaker_failure_threshold: int = 2
    summary_circuit_breaker_cooldown_seconds: float = 300.0
    summary_max_calls_per_hour: int = 120
    expansion_context_tokens: int = 32000
    tool_response_max_chars: int = 24000
    disabled_tools: str = ""
    assertions_enabled: bool = False
    # Assertions (evidence/assertions.py): the summary route refines the rule-based extraction when on.
    assertion_extraction_enabled: bool = False
    assertion_extraction_max_sources_per_pass: int = 4  # clamped to 1..8 where it is used (LCM-X)
    assertion_extraction_timeout_seconds: float = (
        30.0  # clamped to 0.1..120 where it is used (LCM-X)
    )
    evidence_tools_enabled: bool = True
    adaptive_retrieval_enabled: bool = False
    enable_slash_command: bool = False
    doctor_clean_apply_enabled: bool = False
    payload_min_base64_chars: int = 2048
    backup_dir: str = ""
    empty_lifecycle_min_age_hours: float = 24.0
    # The lcm_* tools read across owners (people, chats) only when on: a team bot whose users
    # share one memory. Off, a call reads its owner's conversations at most (binding.owner_for).
    shared_memory: bool = False
    # An LCM-X database found at the path is upgraded in place before the first turn
    # (lcmx_import.upgrade_in_place); off, it is left alone and status names the command.
    migrate_on_start: bool = True
    # Privacy (sensitive.py): secrets replaced by placeholders before anything is written. Off: lossless.
    sensitive_patterns_enabled: bool = False
    # Catalog kinds or groups to apply ("all", or LCM-X's names: api_key, bearer_token, ...), and user
    # patterns as name=regex entries (see sensitive.parse_policy).
    sensitive_patterns: str = "all"
    # Large outputs (outputs.py): tool results over the threshold go to payload files, the row keeps a stub.
    large_output_externalization_enabled: bool = False
    large_output_externalization_threshold_chars: int = 12000
    # Characters of an externalized output the stub keeps (its head and its tail).
    large_output_preview_chars: int = 1200
    # An answered tool result this large is stubbed in the host's prompt at once (a compress with no summary).
    large_output_active_replay_stubbing_enabled: bool = False
    large_output_active_replay_stub_threshold_tokens: int = 25000
    # Semantic recall (embed/, vectors): off by default; its tables exist only once it is on.
    embeddings_enabled: bool = False
    embedding_provider: str = (
        ""  # openai (any OpenAI-compatible /v1/embeddings), voyage, ollama, local
    )
    embedding_model: str = ""
    embedding_base_url: str = ""
    embedding_api_key: str = ""
    embedding_api_key_env: str = ""  # the name of an environment variable holding the key (LCM-X)
    embedding_storage_dtype: str = "float32"  # or int8 (per-vector scale)
    embedding_store_dim: int = 0  # Matryoshka truncation (0: the model's own dimension)
    embedding_backfill_batch_size: int = 64
    embedding_query_timeout_s: float = 10.0
    # Text sent to a provider that is not on this machine is redacted (sensitive.py) even when
    # LCM_SENSITIVE_PATTERNS_ENABLED is off; false sends it as stored.
    embedding_privacy_enabled: bool = True
    knn_prescreen_multiplier: int = 8
    ollama_base_url: str = ""
    # lcm_recall's fusion: the weight of the vector arm against full text (0: full text alone).
    recall_vector_weight: float = (
        0.2  # tuned on LoCoMo (bench/recall.py --hybrid): 0.3 fell below full text once
    )
    proactive_recall_enabled: bool = False
    proactive_recall_budget_tokens: int = 500
    # The pre-answer evidence hook (evidence/preanswer.py): a sealed brief of exact cited lines before
    # questions about the past; mode "" / legacy_selective / requirements_v1 gate on evidence/need.py, off none.
    preanswer_evidence_enabled: bool = False
    preanswer_evidence_mode: str = ""
    preanswer_evidence_budget_tokens: int = 600
    # Temporal rollups (rollups.py): day/week/month summaries built off the turn; tables only when on.
    temporal_rollups_enabled: bool = False
    rollup_daily_target_tokens: int = 5000
    rollup_daily_max_tokens: int = 15000
    rollup_aggregate_max_tokens: int = 20000
    rollup_builds_per_pass: int = 2
    timezone: str = ""  # an IANA name (Europe/Paris): rollups in it too; "" = UTC only

    @property
    def fallback_models(self) -> tuple[str, ...]:
        return split_list(self.summary_fallback_models)

    @property
    def disabled_tool_names(self) -> frozenset[str]:
        return frozenset(split_list(self.disabled_tools))

    def threshold_ratio_for(self, model: str) -> float:
        """The per-model override whose key is the longest substring of ``model``."""
        best: tuple[int, float] | None = None
        for key, ratio in parse_model_thresholds(self.model_thresholds):
            if key and key in (model or "") and (best is None or len(key) > best[0]):
                best = (len(key), ratio)
        return best[1] if best else self.context_threshold

    def threshold_tokens_for(self, model: str, context_length: int) -> int:
        """The compaction threshold in tokens; see :func:`compute_threshold`."""
        return compute_threshold(self, model, context_length).tokens


def parse_model_thresholds(value: str) -> tuple[tuple[str, float], ...]:
    """``"glm-5.2:0.70,glm-5.2-1M:0.25"`` -> pairs; the ratio is after the last colon."""
    pairs = []
    for item in split_list(value):
        key, sep, ratio = item.rpartition(":")
        if not sep:
            raise ValueError(f"model threshold {item!r} has no ':ratio'")
        number = float(ratio)
        if not (math.isfinite(number) and 0 < number <= 1):
            raise ValueError(f"model threshold ratio {number} not in (0, 1]")
        pairs.append((key.strip(), number))
    return tuple(pairs)


@dataclass(frozen=True)
class Threshold:
    """A compaction threshold, with the settings that could not be used for it and why."""

    tokens: int
    problems: tuple[str, ...] = ()


def compute_threshold(config: LcmConfig, model: str, context_length: int) -> Threshold:
    """The one function that computes the compaction threshold (engine window, fallback, status).

    ``absolute_threshold_tokens`` wins when set and it fits the model's window; otherwise the
    window times the per-model ratio (longest matching key) or ``context_threshold``. Until the
    host has said the window (``context_length`` <= 0) DEFAULT_CONTEXT_LENGTH stands in, so a
    threshold exists from the engine's construction on. Settings that only make sense against the
    window (an absolute threshold above it, a reserve that eats the threshold) are reported here,
    because only here is the window known.
    """
    known = context_length > 0
    window = min(context_length, MAX_TOKENS) if known else DEFAULT_CONTEXT_LENGTH
    tokens = max(1, int(window * config.threshold_ratio_for(model)))
    problems = []
    absolute = config.absolute_threshold_tokens
    if absolute > 0 and (not known or absolute <= window):
        tokens = absolute
    elif absolute > 0:
        problems.append(
            f"absolute_threshold_tokens={absolute} is above the context length {window} of "
            f"{model or 'the model'}; using {tokens}"
        )
    if config.reserve_tokens and reserve_for(config, tokens) != config.reserve_tokens:
        problems.append(
            f"reserve_tokens={config.reserve_tokens} leaves less than half of the threshold "
            f"{tokens}; using {reserve_for(config, tokens)}"
        )
    return Threshold(tokens, tuple(problems))


def reserve_for(config: LcmConfig, threshold_tokens: int) -> int:
    """Tokens kept free below the threshold for the next turn.

    The configured ``reserve_tokens`` when it leaves at least half of the threshold for the
    prompt; otherwise (unset, or absurd for this window) a tenth of the threshold, 256..4096.
    With proactive recall on, its block's budget on top (at most half of the threshold in all).
    """
    configured = config.reserve_tokens
    reserve = (
        configured
        if 0 < configured <= threshold_tokens // 2
        else min(4096, max(256, threshold_tokens // 10))
    )
    if (
        config.proactive_recall_enabled
    ):  # the recall block rides in the next turn's message (proactive.py)
        reserve = min(threshold_tokens // 2, reserve + config.proactive_recall_budget_tokens)
    if config.preanswer_evidence_enabled:  # so does the evidence brief (evidence/preanswer.py)
        reserve = min(threshold_tokens // 2, reserve + config.preanswer_evidence_budget_tokens)
    return max(
        1, reserve
    )  # a threshold of 1 token (a window of 1) would halve to 0: keep one token free


@dataclass(frozen=True)
class LoadedConfig:
    config: LcmConfig
    problems: tuple[str, ...] = ()
    sources: Mapping[str, str] = field(default_factory=dict)


def _parse_bool(raw: Any) -> bool:
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError(f"expected a boolean, got {raw!r}")


def _parse_str(raw: Any) -> str:
    if isinstance(raw, list | tuple):
        return ",".join(str(item) for item in raw)
    if isinstance(raw, Mapping):
        return ",".join(f"{key}:{value}" for key, value in raw.items())
    return str(raw)


_PARSERS: dict[type, Callable[[Any], Any]] = {
    bool: _parse_bool,
    int: lambda raw: int(str(raw).strip()),
    float: lambda raw: float(str(raw).strip()),
    str: _parse_str,
}

# Bounds checked after parsing: (minimum, maximum); None means open.
# Every numeric key has both bounds, so no number that parses can be absurd (a test checks this).
_BOUNDS: dict[str, tuple[float, float]] = {
    "context_threshold": (0.01, 1.0),
    "absolute_threshold_tokens": (0, MAX_TOKENS),
    "fresh_tail_count": (1, 10_000),
    "fresh_tail_max_tokens": (0, MAX_TOKENS),
    "leaf_chunk_tokens": (500, 1_000_000),
    "incremental_max_depth": (-1, 64),
    "condense_min_nodes": (2, 64),
    "summary_budget_ratio": (0.05, 0.9),
    "compaction_target_ratio": (0.1, 1.0),
    "reserve_tokens": (0, MAX_TOKENS),
    "max_passes_per_compress": (1, 200),
    "compaction_max_seconds": (0.0, 3600.0),
    "new_session_retain_depth": (-1, 64),
    "summary_timeout_ms": (100, 3_600_000),
    "summary_circuit_breaker_failure_threshold": (1, 100),
    "summary_circuit_breaker_cooldown_seconds": (0.0, 86_400.0),
    "summary_max_calls_per_hour": (0, 100_000),
    "expansion_context_tokens": (500, 1_000_000),
    "tool_response_max_chars": (1000, 1_000_000),
    "payload_min_base64_chars": (256, 1 << 30),
    "empty_lifecycle_min_age_hours": (0.0, 87_600.0),
    "large_output_externalization_threshold_chars": (1000, 1 << 30),
    "large_output_preview_chars": (0, 100_000),
    "large_output_active_replay_stub_threshold_tokens": (100, MAX_TOKENS),
    "embedding_store_dim": (0, 16384),
    "embedding_backfill_batch_size": (1, 4096),
    "embedding_query_timeout_s": (0.1, 600.0),
    "knn_prescreen_multiplier": (1, 1000),
    "recall_vector_weight": (0.0, 1.0),
    "proactive_recall_budget_tokens": (50, 20000),
    "preanswer_evidence_budget_tokens": (100, 8000),
    "rollup_daily_target_tokens": (200, 200_000),
    "rollup_daily_max_tokens": (200, 400_000),
    "rollup_aggregate_max_tokens": (200, 400_000),
    "rollup_builds_per_pass": (1, 100),
    "assertion_extraction_max_sources_per_pass": (0, 1_000_000),
    "assertion_extraction_timeout_seconds": (0.0, 86_400.0),
}
PREANSWER_MODES = ("", "off", "legacy_selective", "requirements_v1")
EMBEDDING_PROVIDERS = ("", "openai", "voyage", "ollama", "local")
EMBEDDING_DTYPES = ("float32", "int8")


def _validate(name: str, value: Any) -> None:
    """Raise ValueError for a parsed value out of its key's range.

    NaN compares false with everything, so a range check alone lets it through: every
    float must first be finite.
    """
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{value} is not a finite number")
    if name in _BOUNDS:
        low, high = _BOUNDS[name]
        if not low <= value <= high:
            raise ValueError(f"{value} is outside {low}..{high}")
    if name == "subagent_sessions" and value not in SUBAGENT_POLICIES:
        raise ValueError(f"{value!r} is not one of {', '.join(SUBAGENT_POLICIES)}")
    if name == "summary_provider" and value not in SUMMARY_PROVIDERS:
        raise ValueError(f"{value!r} is not one of {', '.join(SUMMARY_PROVIDERS)}")
    if name == "embedding_provider" and value not in EMBEDDING_PROVIDERS:
        hint = (
            " (fastembed: use local, the offline ONNX model of hermes-lcm[local])"
            if value == "fastembed"
            else ""
        )
        raise ValueError(f"{value!r} is not one of openai, voyage, ollama, local{hint}")
    if name == "embedding_storage_dtype" and value not in EMBEDDING_DTYPES:
        raise ValueError(f"{value!r} is not one of {', '.join(EMBEDDING_DTYPES)}")
    if name == "model_thresholds":
        parse_model_thresholds(value)
    if name == "preanswer_evidence_mode" and value.strip().lower() not in PREANSWER_MODES:
        raise ValueError(
            f"{value!r} is not one of off, legacy_selective, requirements_v1 (or empty)"
        )
    if name == "timezone" and value:
        check_timezone(value)
    if name == "database_url" and value and not value.startswith(("postgresql://", "postgres://")):
        raise ValueError("not a postgresql:// URL (a SQLite file is set with LCM_DATABASE_PATH)")


def check_timezone(name: str) -> None:
    """Raise ValueError unless ``name`` is an IANA zone this machine knows ("" is UTC)."""
    import zoneinfo  # here: only a set LCM_TIMEZONE pays for the zone database

    if "/" in name and (name.startswith("/") or ".." in name):
        raise ValueError(f"{name!r} is not an IANA time zone name")
    try:
        zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError) as exc:
        raise ValueError(
            f"{name!r} is not a known IANA time zone (e.g. Europe/Paris, Asia/Tokyo)"
        ) from exc


def env_name(field_name: str) -> str:
    return "LCM_" + field_name.upper()


def load_config(
    env: Mapping[str, str] | None = None, yaml_block: Mapping[str, Any] | None = None
) -> LoadedConfig:
    """Merge defaults, the ``lcm:`` YAML block, then ``LCM_*`` env (env wins).

    Every ``LCM_*`` variable and every key of the block is classified (:mod:`compat`): ours, a
    peer's alias (applied, converted), a peer's setting we do not support, or unknown (with a
    "did you mean"). All but ours leave a note in ``problems``; none is ignored silently.
    """
    env = os.environ if env is None else env
    yaml_block = yaml_block if isinstance(yaml_block, Mapping) else {}
    values: dict[str, Any] = {}
    problems: list[str] = []
    sources: dict[str, str] = {}
    known = [f.name for f in dataclasses.fields(LcmConfig)]
    from_yaml, from_env = compat.sort_yaml(yaml_block, known), compat.sort_env(env, known)
    problems.extend((*from_yaml.notes, *from_env.notes))
    for spec in dataclasses.fields(LcmConfig):
        for origin, found in (
            ("yaml", from_yaml.values.get(spec.name)),
            ("env", from_env.values.get(spec.name)),
        ):
            if found is None or found[0] is None:
                continue
            raw, label = found
            if spec.name == "embedding_provider" and str(raw).strip().lower() == "fastembed":
                raw = _fastembed(label, problems)
            try:
                parsed = _PARSERS[_field_type(spec)](raw)
                _validate(spec.name, parsed)
            except (TypeError, ValueError, ArithmeticError) as exc:
                problems.append(
                    f"{label}={raw!r} is invalid ({exc}); using {values.get(spec.name, spec.default)!r}"
                )
                continue
            values[spec.name] = parsed
            sources[spec.name] = (
                "fastembed"
                if raw == "local" and str(found[0]).strip().lower() == "fastembed"
                else origin
            )
    if sources.get("embedding_provider") == "fastembed":
        values.pop(
            "embedding_model", None
        )  # a fastembed model name means nothing to the local provider
        sources.pop("embedding_model", None)
        sources["embedding_provider"] = (
            "env" if from_env.values.get("embedding_provider") else "yaml"
        )
    config = LcmConfig(**values)
    return LoadedConfig(config, (*problems, *pattern_problems(config)), sources)


def _fastembed(label: str, problems: list[str]) -> str:
    """LCM-X's in-process ``fastembed`` provider is served by ours, ``local`` (an offline ONNX
    model too), so a switching user keeps semantic recall; its model is all-MiniLM-L6-v2 whatever
    fastembed model was named, and LCM-X's vectors are not reused (``lcm embed --apply``)."""
    problems.append(
        f"setting {label}=fastembed read as local (the offline all-MiniLM-L6-v2 of hermes-lcm[local]; "
        "LCM_EMBEDDING_MODEL is not used with it; run `lcm embed --apply` to embed the history)"
    )
    return "local"


def pattern_problems(config: LcmConfig) -> tuple[str, ...]:
    """The entries of the pattern settings that cannot be used (an invalid regex, an unknown secret
    kind): each is left out and named here, so status and doctor show it instead of a silent drop."""
    found = list(MessagePatterns.parse(config.ignore_message_patterns).problems)
    if config.sensitive_patterns_enabled:
        found.extend(Policy.parse(config.sensitive_patterns).problems)
    return tuple(found)


_ANNOUNCED: set[str] = set()


def announce(loaded: LoadedConfig) -> None:
    """Log each settings note (an alias read, a peer setting or an unknown key ignored) once per
    process: the host log is where an operator looks after a restart, and engines are created
    per agent, so repeating the same warning on every copy would bury it."""
    for note in loaded.problems:
        if compat.is_settings_note(note) and note not in _ANNOUNCED:
            _ANNOUNCED.add(note)
            log.warning("hermes-lcm: %s", note)


def _field_type(spec: dataclasses.Field[Any]) -> type:
    names = {"bool": bool, "int": int, "float": float, "str": str}
    declared = spec.type if isinstance(spec.type, str) else spec.type.__name__
    return names[declared]


def read_yaml_block(
    hermes_home: str | os.PathLike[str] | None,
) -> tuple[dict[str, Any], str | None]:
    """The ``lcm:`` block of ``$HERMES_HOME/config.yaml``; ``({}, problem)`` when unreadable."""
    if not hermes_home:
        return {}, None
    path = Path(hermes_home) / "config.yaml"
    if not path.is_file():
        return {}, None
    try:
        import yaml

        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except Exception as exc:  # noqa: BLE001 - a broken config.yaml must not crash the host
        return {}, f"{path}: unreadable ({exc.__class__.__name__}: {exc})"
    block = data.get("lcm") if isinstance(data, Mapping) else None
    if block is None:
        return {}, None
    if not isinstance(block, Mapping):
        return {}, f"{path}: 'lcm' is not a mapping, ignored"
    return {str(key).lower(): value for key, value in block.items()}, None


def load_for_home(
    env: Mapping[str, str], hermes_home: str | os.PathLike[str] | None
) -> LoadedConfig:
    """``load_config`` over env and ``$HERMES_HOME/config.yaml``; an unreadable file is one more problem."""
    block, problem = read_yaml_block(hermes_home)
    loaded = load_config(env, block)
    if problem:
        return LoadedConfig(loaded.config, (*loaded.problems, problem), loaded.sources)
    return loaded

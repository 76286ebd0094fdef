"""What a setting may hold, and what a reader is told about it.

The rules every ``LCM_*`` value must obey once parsed (finite numbers within their range, one of
a fixed set of words, a well-formed list or zone name) live here, apart from the
:class:`~hermes_lcm.config.LcmConfig` that names the settings, for two readers: the loader, which
turns a raw env or YAML value into a checked one, and the generated settings reference
(docs/settings.md), which prints the same ranges and choices, so the page cannot drift from the
checks. Nothing here knows the settings' defaults or imports ``config``.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable, Mapping
from typing import Any

from .patterns import glob_to_regex, split_list

# The largest token count any setting may name: ten times the largest context windows sold today.
MAX_TOKENS = 100_000_000

SUMMARY_PROVIDERS = ("auto", "auxiliary", "openai", "extractive")
COMPACTION_MODES = ("deferred", "inline")
SUBAGENT_POLICIES = ("stateless", "store", "ignore")
PREANSWER_MODES = ("", "off", "legacy_selective", "requirements_v1")
EMBEDDING_PROVIDERS = ("", "openai", "voyage", "ollama", "local")
EMBEDDING_DTYPES = ("float32", "int8")
# Hermes' reasoning efforts (hermes_constants.VALID_REASONING_EFFORTS, and none); "": the model's own.
REASONING_EFFORTS = ("", "none", "minimal", "low", "medium", "high", "xhigh", "max", "ultra")

# The words a setting must be one of (checked after parsing; the reference lists them).
CHOICES: dict[str, tuple[str, ...]] = {
    "subagent_sessions": SUBAGENT_POLICIES,
    "summary_provider": SUMMARY_PROVIDERS,
    "compaction_mode": COMPACTION_MODES,
    "embedding_provider": EMBEDDING_PROVIDERS,
    "embedding_storage_dtype": EMBEDDING_DTYPES,
    "preanswer_evidence_mode": PREANSWER_MODES,
    "summary_reasoning_effort": REASONING_EFFORTS,
    "expansion_reasoning_effort": REASONING_EFFORTS,
}

# Bounds checked after parsing: (minimum, maximum).
# Every numeric key has both bounds, so no number that parses can be absurd (a test checks this).
BOUNDS: dict[str, tuple[float, float]] = {
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
    "prepare_at_ratio": (0.1, 1.0),
    "new_session_retain_depth": (-1, 64),
    "summary_timeout_ms": (100, 3_600_000),
    "expansion_timeout_ms": (0, 3_600_000),
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

# The reference's sections, in the order it prints them (the operator guide's order).
GROUPS = (
    "Database and storage",
    "When to compact",
    "What stays verbatim",
    "How to compact",
    "Summarizer",
    "Sessions and noise",
    "The host's own agents",
    "Semantic recall",
    "Privacy",
    "Large outputs",
    "Temporal rollups",
    "The pre-answer hook",
    "Tools",
    "Operator surface",
)


def setting(default: Any, group: str, help: str, form: str = "") -> Any:
    """A settings field that carries what the reference says about it.

    The help sits with the field so adding a setting without saying what it does fails a test,
    and the reference is printed from the fields, never copied by hand. ``form`` describes a
    free-text value's shape (a list, a URL) where no range or choices say it.
    """
    if group not in GROUPS:
        raise ValueError(f"unknown settings group {group!r}")
    return dataclasses.field(default=default, metadata={"help": help, "group": group, "form": form})


_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def parse_bool(raw: Any) -> bool:
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


PARSERS: dict[str, Callable[[Any], Any]] = {
    "bool": parse_bool,
    "int": lambda raw: int(str(raw).strip()),
    "float": lambda raw: float(str(raw).strip()),
    "str": _parse_str,
}


@dataclasses.dataclass(frozen=True)
class ThresholdRule:
    """One LCM_THRESHOLD_OVERRIDES rule: the threshold ``ratio`` for the model, window and
    session it names (each condition it leaves empty matches all)."""

    ratio: float
    name: str = ""
    model: str = ""  # a substring of the model id
    window_min: int = 0
    window_max: int = 0  # 0: no upper bound
    session: str = ""  # a session glob (as LCM_IGNORE_SESSION_PATTERNS)

    @property
    def label(self) -> str:
        if self.name:
            return self.name
        parts = [f"model={self.model}" if self.model else ""]
        parts += [f"window>={self.window_min}" if self.window_min else ""]
        parts += [f"window<={self.window_max}" if self.window_max else ""]
        parts += [f"session={self.session}" if self.session else ""]
        return " ".join(p for p in parts if p) + f" -> {self.ratio:g}"

    def matches(self, model: str, window: int, session_id: str, platform: str) -> bool:
        if self.model and self.model not in (model or ""):
            return False
        if window < self.window_min or (self.window_max and window > self.window_max):
            return False
        if self.session:
            keys = [session_id, platform, f"{platform}:{session_id}" if platform else ""]
            rx = glob_to_regex(self.session)
            return any(k and rx.match(k) for k in keys)
        return True


_RULE_TOKEN = re.compile(r"^(name|model|session)=(\S+)$|^window(>=|<=)(\d+)$")


def parse_threshold_overrides(value: str) -> tuple[ThresholdRule, ...]:
    """``"window>=900000 -> 0.15 name=large; session=telegram:** -> 0.3"`` -> rules, in order;
    rules are separated by ``;`` (or ``,``, as a YAML list joins them)."""
    rules = []
    for item in (part.strip() for part in re.split(r"[;,]", value or "")):
        if not item:
            continue
        conditions, arrow, rest = item.partition("->")
        words = rest.split()
        if not arrow or not words:
            raise ValueError(f"threshold rule {item!r} has no '-> ratio'")
        ratio = float(words[0])
        if not (math.isfinite(ratio) and 0 < ratio <= 1):
            raise ValueError(f"threshold rule {item!r}: ratio {ratio:g} not in (0, 1]")
        fields: dict[str, Any] = {"ratio": ratio}
        for token in [*conditions.split(), *words[1:]]:
            match = _RULE_TOKEN.match(token)
            if match is None:
                raise ValueError(
                    f"threshold rule {item!r}: {token!r} is not model=, window>=, window<=, "
                    "session= or name="
                )
            if match.group(1):
                fields[match.group(1)] = match.group(2)
            else:
                fields["window_min" if match.group(3) == ">=" else "window_max"] = int(
                    match.group(4)
                )
        rules.append(ThresholdRule(**fields))
    return tuple(rules)


def claw_threshold_overrides(raw: Any) -> Any:
    """lossless-claw's ``contextThresholdOverrides`` (a list of ``{name, match: {...},
    contextThreshold}``) in LCM_THRESHOLD_OVERRIDES' form; anything else is left to be reported."""
    if not isinstance(raw, list | tuple):
        return raw
    keys = {
        "model": "model=",
        "modelId": "model=",
        "modelPattern": "model=",
        "modelContextWindowMin": "window>=",
        "modelContextWindowMax": "window<=",
        "sessionPattern": "session=",
    }
    rules = []
    for rule in raw:
        if not isinstance(rule, Mapping) or "contextThreshold" not in rule:
            return raw
        match = rule.get("match") or {}
        if not isinstance(match, Mapping) or set(match) - set(keys):
            return raw
        words = [f"{keys[k]}{v}" for k, v in match.items()]
        name = f" name={rule['name']}" if rule.get("name") else ""
        rules.append(f"{' '.join(words)} -> {rule['contextThreshold']}{name}")
    return "; ".join(rules)


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


def validate(name: str, value: Any) -> None:
    """Raise ValueError for a parsed value out of its key's range.

    NaN compares false with everything, so a range check alone lets it through: every
    float must first be finite.
    """
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{value} is not a finite number")
    if name in BOUNDS:
        low, high = BOUNDS[name]
        if not low <= value <= high:
            raise ValueError(f"{value} is outside {low}..{high}")
    if name == "embedding_provider" and value not in EMBEDDING_PROVIDERS:
        hint = (
            " (fastembed: use local, the offline ONNX model of hermes-lcm[local])"
            if value == "fastembed"
            else ""
        )
        raise ValueError(f"{value!r} is not one of openai, voyage, ollama, local{hint}")
    if name == "preanswer_evidence_mode" and value.strip().lower() not in PREANSWER_MODES:
        raise ValueError(
            f"{value!r} is not one of off, legacy_selective, requirements_v1 (or empty)"
        )
    if name in CHOICES and name != "preanswer_evidence_mode" and value not in CHOICES[name]:
        words = ", ".join(c for c in CHOICES[name] if c)
        raise ValueError(
            f"{value!r} is not one of {words}{' (or empty)' if '' in CHOICES[name] else ''}"
        )
    if name == "model_thresholds":
        parse_model_thresholds(value)
    if name == "threshold_overrides":
        parse_threshold_overrides(value)
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

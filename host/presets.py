"""Model-aware setting presets: inspectable, suggestible, previewable; never applied live.

A preset is a named set of ``LCM_*`` values for a family of routes. ``/lcm preset
apply NAME --dry-run`` only prints what would change and which explicit
environment values would keep winning; it writes no file and changes no
process state. Operators copy the lines into their environment or config.yaml.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..config import env_name


@dataclass(frozen=True)
class Preset:
    name: str
    family: str
    description: str
    context_window: int
    model_markers: tuple[str, ...]
    settings: tuple[tuple[str, str], ...]
    benchmark_only: tuple[tuple[str, str], ...]
    provenance: str


_PROVENANCE = (
    "values published with the LCM-X reference presets (its operator guide); not re-benchmarked "
    "by hermes-lcm. Treat them as a starting point and check lcm_status after a normal message."
)

PRESETS: tuple[Preset, ...] = (
    Preset(
        "codex_gpt_long_context",
        "openai-codex-gpt",
        "near-272k GPT/Codex routes",
        272_000,
        ("gpt", "codex"),
        (("context_threshold", "0.75"), ("fresh_tail_count", "24"), ("leaf_chunk_tokens", "8000")),
        (("target_after_compaction", "0.55"),),
        _PROVENANCE,
    ),
    Preset(
        "codex_spark_context",
        "openai-codex-spark",
        "near-128k GPT-5.3 Codex Spark routes",
        128_000,
        ("spark",),
        (("context_threshold", "0.75"), ("fresh_tail_count", "16"), ("leaf_chunk_tokens", "8000")),
        (("target_after_compaction", "0.55"),),
        _PROVENANCE,
    ),
)

# A context window within this fraction of a preset's window counts as "near" it.
NEAR = 0.25


class PresetError(ValueError):
    """Unknown preset or bad arguments (shown to the operator)."""


def find(name: str) -> Preset:
    for preset in PRESETS:
        if preset.name == name:
            return preset
    raise PresetError(f"unknown preset {name!r}; known: {', '.join(p.name for p in PRESETS)}")


def show(name: str | None = None) -> dict[str, Any]:
    if not name:
        return {"presets": [_describe(p) for p in PRESETS]}
    return _describe(find(name))


def _describe(preset: Preset) -> dict[str, Any]:
    return {
        "name": preset.name,
        "family": preset.family,
        "description": preset.description,
        "context_window": preset.context_window,
        "settings": {env_name(k): v for k, v in preset.settings},
        "benchmark_only_fields": dict(preset.benchmark_only),
        "benchmark_only_note": "benchmark provenance, not runtime settings: the engine has no such knob",
        "provenance": preset.provenance,
    }


def suggest(context_length: int, model: str = "") -> dict[str, Any]:
    """The preset nearest the current window, with how sure we are and why."""
    if context_length <= 0:
        return {
            "suggestion": None,
            "reasons": ["context length unknown: send one normal message first"],
        }
    near = [p for p in PRESETS if abs(context_length - p.context_window) <= p.context_window * NEAR]
    if not near:
        return {
            "suggestion": None,
            "context_length": context_length,
            "reasons": [
                f"no shipped preset targets a window near {context_length} tokens; defaults apply"
            ],
        }
    lowered = (model or "").lower()
    preset = min(
        near,
        key=lambda p: (
            not any(m in lowered for m in p.model_markers),
            abs(context_length - p.context_window),
        ),
    )
    route_match = any(m in lowered for m in preset.model_markers)
    reasons = [
        f"context window {context_length} is within {int(NEAR * 100)}% of {preset.context_window}"
    ]
    if route_match:
        reasons.append(f"model {model!r} names the {preset.family} route the preset was made for")
    else:
        reasons.append(
            f"model {model or '(unknown)'!r} is not a {preset.family} route: confirm the provider/model "
            "family before applying"
        )
    return {
        "suggestion": preset.name,
        "family": preset.family,
        "context_length": context_length,
        "confidence": "benchmark-backed-route" if route_match else "context-only",
        "reasons": reasons,
        "dry_run": f"/lcm preset apply {preset.name} --dry-run",
    }


def dry_run(
    name: str, config: Any, sources: Mapping[str, str], env: Mapping[str, str]
) -> dict[str, Any]:
    """What applying the preset would change; writes nothing."""
    preset = find(name)
    rows, lines = [], []
    for field_name, value in preset.settings:
        var = env_name(field_name)
        current = getattr(config, field_name, None)
        source = sources.get(field_name, "default")
        raw_env = env.get(var)
        if raw_env is not None and source != "env":
            action = f"would set (current {var}={raw_env!r} is invalid and ignored)"
        elif source == "env":
            action = (
                "kept: explicit environment value wins" if str(current) != value else "already set"
            )
        elif str(current) == value:
            action = "already set"
        else:
            action = "would set"
        if action.startswith("would set"):
            lines.append(f"{var}={value}")
        rows.append(
            {
                "variable": var,
                "preset": value,
                "current": current,
                "current_source": source,
                "action": action,
            }
        )
    return {
        "preset": preset.name,
        "dry_run": True,
        "writes_nothing": True,
        "changes": rows,
        "env_lines": lines,
        "benchmark_only_fields": dict(preset.benchmark_only),
        "how_to_apply": "add the env_lines to the environment Hermes starts with (or the lcm: block of "
        "config.yaml), then restart Hermes",
    }

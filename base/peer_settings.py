"""Every setting of the two systems hermes-lcm replaces (LCM-X and lossless-claw), and what
hermes-lcm does with it: ``same`` (our key, same meaning), ``alias`` (read as one of our keys,
with a documented conversion) or ``unsupported`` (reported, with what to do instead).

Why: users migrating keep their old environment and config. A setting that is silently ignored
makes them believe a feature is on that is not, so :mod:`config` classifies every ``LCM_*``
variable and every key of the ``lcm:`` block through this table, and status, doctor and the host
log name what was not honoured. The lists below were extracted from the peers' own sources
(``LCMX_SOURCE``, ``CLAW_SOURCE``); ``tests/test_settings_compat.py`` checks that each one is
classified, and ``python -m hermes_lcm.base.peer_settings`` prints the totals and the table
docs/guide/import-and-migrate.md ("Every peer setting") shows.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from collections import Counter
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from .setting_rules import claw_threshold_overrides

LCMX = "LCM-X"
CLAW = "lossless-claw"

LCMX_SOURCE = (
    "github.com/electricsheephq/lcm-x @07b73e5: config.py (_ENV_FIELD_SPECS, os.environ reads, "
    "_SUPPORTED_LCM_CONFIG_YAML_KEYS), command.py, diagnostics.py; README and operator guide tables"
)
LCMX_ENV = tuple(
    "LCM_" + name
    for name in """
ABSOLUTE_THRESHOLD_TOKENS ADAPTIVE_RETRIEVAL_ENABLED ASSERTIONS_ENABLED ASSERTION_EXTRACTION_ENABLED
ASSERTION_EXTRACTION_MAX_SOURCES_PER_PASS ASSERTION_EXTRACTION_MODEL ASSERTION_EXTRACTION_TIMEOUT_SECONDS
CACHE_FRIENDLY_CONDENSATION_ENABLED CACHE_FRIENDLY_MIN_DEBT_GROUPS CONDENSATION_FANIN CONTEXT_THRESHOLD
CRITICAL_BUDGET_PRESSURE_RATIO CUSTOM_INSTRUCTIONS DATABASE_PATH DEFERRED_MAINTENANCE_ENABLED
DEFERRED_MAINTENANCE_MAX_PASSES DISABLED_TOOLS DOCTOR_CLEAN_APPLY_ENABLED DYNAMIC_LEAF_CHUNK_ENABLED
DYNAMIC_LEAF_CHUNK_MAX EMBEDDINGS_ENABLED EMBEDDING_API_KEY EMBEDDING_API_KEY_ENV EMBEDDING_BACKFILL_BATCH_SIZE
EMBEDDING_BACKFILL_TIMEOUT_S EMBEDDING_BASE_URL EMBEDDING_BINARY_PRESCREEN EMBEDDING_BOUNDED_SCAN_ROWS
EMBEDDING_MAX_BATCH_ITEMS EMBEDDING_MODEL EMBEDDING_PRIVACY_ENABLED EMBEDDING_PROVIDER
EMBEDDING_QUERY_SPEND_BACKOFF_SECONDS EMBEDDING_QUERY_SPEND_MAX_CALLS EMBEDDING_QUERY_SPEND_WINDOW_SECONDS
EMBEDDING_QUERY_TIMEOUT_S EMBEDDING_STORAGE_DTYPE EMBEDDING_STORE_DIM EMBED_CONTENT_POLICY
EMPTY_LIFECYCLE_GC_ENABLED EMPTY_LIFECYCLE_GC_MAX_AGE_HOURS EMPTY_LIFECYCLE_GC_THRESHOLD ENABLE_SLASH_COMMAND
EXPANSION_CONTEXT_TOKENS EXPANSION_MODEL EXPANSION_REASONING_EFFORT EXPANSION_TIMEOUT_MS EXTRACTION_ENABLED
EXTRACTION_MODEL EXTRACTION_OUTPUT_PATH FRESH_TAIL_COUNT FRESH_TAIL_MAX_TOKENS FRESH_TAIL_PRESSURE_YIELD_ENABLED
FRESH_TAIL_PRESSURE_YIELD_MIN_OBSERVATIONS FTS_INTEGRITY_CHECK_INTERVAL_HOURS HERMES_BASE_DIR
IGNORE_MESSAGE_PATTERNS IGNORE_SESSION_PATTERNS INCREMENTAL_MAX_DEPTH KNN_PRESCREEN_MULTIPLIER L2_BUDGET_RATIO
L3_TRUNCATE_TOKENS LARGE_OUTPUT_ACTIVE_REPLAY_STUBBING_ENABLED LARGE_OUTPUT_ACTIVE_REPLAY_STUB_THRESHOLD_TOKENS
LARGE_OUTPUT_EXTERNALIZATION_ENABLED LARGE_OUTPUT_EXTERNALIZATION_PATH LARGE_OUTPUT_EXTERNALIZATION_THRESHOLD_CHARS
LARGE_OUTPUT_TRANSCRIPT_GC_ENABLED LEAF_CHUNK_TOKENS MAX_ASSEMBLY_TOKENS MODEL_THRESHOLDS NATIVE_RECOVERY
NEW_SESSION_RETAIN_DEPTH OLLAMA_BASE_URL PREANSWER_EVIDENCE_ENABLED PREANSWER_EVIDENCE_MODE
PROACTIVE_RECALL_BUDGET_TOKENS PROACTIVE_RECALL_ENABLED PROACTIVE_RECALL_MIN_SCORE PROACTIVE_RECALL_PROVIDER
QUERY_VIEWS_ENABLED RECALL_ARM_WEIGHTS RECALL_QUERY_TIMEOUT_S RECALL_REFERENCE_STRICT RECALL_SCAN_BUDGET_S
RECALL_SCAN_MAX_ROWS RECALL_SCAN_ROWS RERANK_ENABLED RERANK_MARGIN RERANK_MODEL RERANK_WINDOW_LIMIT
RESERVE_TOKENS_FLOOR ROLLUP_AGGREGATE_MAX_TOKENS ROLLUP_BUILDS_PER_PASS ROLLUP_DAILY_MAX_TOKENS
ROLLUP_DAILY_TARGET_TOKENS ROLLUP_MAINTENANCE_BUDGET_MS SELECTIVE_COMPILER_ENABLED SELECTIVE_COMPILER_MODEL
SENSITIVE_PATTERNS SENSITIVE_PATTERNS_ENABLED STATELESS_SESSION_PATTERNS SUMMARY_CIRCUIT_BREAKER_COOLDOWN_SECONDS
SUMMARY_CIRCUIT_BREAKER_FAILURE_THRESHOLD SUMMARY_FALLBACK_MODELS SUMMARY_MODEL SUMMARY_PREFIX_TARGET_TOKENS
SUMMARY_REASONING_EFFORT SUMMARY_SPEND_BACKOFF_SECONDS SUMMARY_SPEND_MAX_CALLS SUMMARY_SPEND_WINDOW_SECONDS
SUMMARY_TIMEOUT_MS TEMPORAL_ROLLUPS_ENABLED THRESHOLD_FULL_SWEEP_ENABLED
""".split()
)
# LCM-X's own config.yaml keys under ``lcm:`` (it ignores every other key there).
LCMX_YAML = (
    "context_threshold",
    "model_thresholds",
    "summary_reasoning_effort",
    "expansion_reasoning_effort",
)

CLAW_SOURCE = (
    "github.com/Martian-Engineering/lossless-claw @4214b480: src/db/config.ts (env), "
    "openclaw.plugin.json configSchema.properties (plugin config keys)"
)
CLAW_ENV = tuple(
    "LCM_" + name
    for name in """
AUTO_ROTATE_SESSION_FILES_CREATE_BACKUPS AUTO_ROTATE_SESSION_FILES_ENABLED AUTO_ROTATE_SESSION_FILES_RUNTIME
AUTO_ROTATE_SESSION_FILES_SIZE_BYTES AUTO_ROTATE_SESSION_FILES_STARTUP BOOTSTRAP_MAX_TOKENS
CACHE_AWARE_COMPACTION_ENABLED CACHE_TTL_SECONDS CIRCUIT_BREAKER_COOLDOWN_MS CIRCUIT_BREAKER_THRESHOLD
COLD_CACHE_OBSERVATION_THRESHOLD COMPACT_UNTIL_UNDER_DEADLINE_MS CONDENSED_MIN_FANOUT CONDENSED_MIN_FANOUT_HARD
CONDENSED_TARGET_TOKENS CONTEXT_THRESHOLD CRITICAL_BUDGET_PRESSURE_RATIO CUSTOM_INSTRUCTIONS DATABASE_PATH
DELEGATION_TIMEOUT_MS DYNAMIC_LEAF_CHUNK_TOKENS_ENABLED DYNAMIC_LEAF_CHUNK_TOKENS_MAX ENABLED
ENABLE_SUMMARY_THINKING EXPANSION_MODEL EXPANSION_PROVIDER FALLBACK_MAX_TOKENS FALLBACK_PROVIDERS
FRESH_TAIL_COUNT FRESH_TAIL_MAX_TOKENS HOST_FALLBACK_MODE HOT_CACHE_BUDGET_HEADROOM_RATIO
HOT_CACHE_PRESSURE_FACTOR IGNORE_SESSION_PATTERNS INCREMENTAL_MAX_DEPTH LARGE_FILES_DIR
LARGE_FILE_SUMMARY_MODEL LARGE_FILE_SUMMARY_PROVIDER LARGE_FILE_TOKEN_THRESHOLD LEAF_CHUNK_TOKENS
LEAF_MIN_FANOUT LEAF_TARGET_TOKENS LOG_FILE LOG_FILE_ENABLED LOG_MAX_FILE_BYTES MAX_ASSEMBLY_TOKEN_BUDGET
MAX_COLD_CACHE_CATCHUP_PASSES MAX_EXPAND_TOKENS MAX_SWEEP_ITERATIONS NEW_SESSION_RETAIN_DEPTH
PROACTIVE_THRESHOLD_COMPACTION_MODE PROMPT_AWARE_EVICTION_ENABLED PRUNE_HEARTBEAT_OK
REPLAY_FLOOD_THRESHOLD_EXTERNAL REPLAY_FLOOD_THRESHOLD_INTERNAL SKIP_STATELESS_SESSIONS
STATELESS_SESSION_PATTERNS STRIP_INJECTED_CONTEXT_TAGS STUB_LARGE_TOOL_PAYLOADS SUMMARY_CALL_WINDOW_MS
SUMMARY_MAX_CALLS_PER_WINDOW SUMMARY_MAX_OVERAGE_FACTOR SUMMARY_MODEL SUMMARY_PREFIX_TARGET_TOKENS
SUMMARY_PROVIDER SUMMARY_SPEND_BACKOFF_MS SUMMARY_TIMEOUT_MS SWEEP_DEADLINE_MS SWEEP_MAX_DEPTH
TRANSCRIPT_GC_ENABLED
""".split()
)
CLAW_PLUGIN = tuple(
    """
enabled hostFallbackMode contextThreshold contextThresholdOverrides sweepMaxDepth incrementalMaxDepth
freshTailCount freshTailMaxTokens promptAwareEviction stubLargeToolPayloads leafChunkTokens
summaryPrefixTargetTokens maxSweepIterations sweepDeadlineMs compactUntilUnderDeadlineMs bootstrapMaxTokens
newSessionRetainDepth leafTargetTokens condensedTargetTokens maxExpandTokens leafMinFanout condensedMinFanout
condensedMinFanoutHard dbPath ignoreSessionPatterns statelessSessionPatterns skipStatelessSessions
largeFileThresholdTokens largeFileTokenThreshold summaryModel summaryProvider largeFileSummaryModel
largeFileSummaryProvider expansionModel expansionProvider delegationTimeoutMs summaryTimeoutMs
summaryCallWindowMs summaryMaxCallsPerWindow summarySpendBackoffMs maxAssemblyTokenBudget summaryMaxOverageFactor
fallbackMaxTokens customInstructions circuitBreakerThreshold circuitBreakerCooldownMs replayFloodThresholdExternal
replayFloodThresholdInternal cacheAwareCompaction dynamicLeafChunkTokens timezone pruneHeartbeatOk
transcriptGcEnabled enableSummaryThinking proactiveThresholdCompactionMode autoRotateSessionFiles
independentLogFile databasePath largeFilesDir fallbackProviders stripInjectedContextTags
""".split()
)

# Environment variables hermes-lcm reads that are not LcmConfig fields (tools, benchmarks, start-up).
OTHER_OURS = frozenset(
    {"LCM_BENCH_TMP", "LCM_BENCH_KEEP", "LCM_CRASH_TURNS", "LCM_CRASH_SEEDS", "LCM_CRASH_KILLS"}
)

# Peer names with our key and our meaning (the env name is ours: LCM_ + field in capitals).
SAME = {
    LCMX: frozenset(
        "LCM_" + n
        for n in """
        ABSOLUTE_THRESHOLD_TOKENS ADAPTIVE_RETRIEVAL_ENABLED ASSERTIONS_ENABLED CONTEXT_THRESHOLD DATABASE_PATH
        DISABLED_TOOLS DOCTOR_CLEAN_APPLY_ENABLED ENABLE_SLASH_COMMAND EXPANSION_CONTEXT_TOKENS FRESH_TAIL_COUNT
        FRESH_TAIL_MAX_TOKENS IGNORE_MESSAGE_PATTERNS IGNORE_SESSION_PATTERNS INCREMENTAL_MAX_DEPTH
        LEAF_CHUNK_TOKENS MODEL_THRESHOLDS NEW_SESSION_RETAIN_DEPTH STATELESS_SESSION_PATTERNS
        SENSITIVE_PATTERNS SENSITIVE_PATTERNS_ENABLED LARGE_OUTPUT_EXTERNALIZATION_ENABLED
        LARGE_OUTPUT_EXTERNALIZATION_THRESHOLD_CHARS LARGE_OUTPUT_ACTIVE_REPLAY_STUBBING_ENABLED
        LARGE_OUTPUT_ACTIVE_REPLAY_STUB_THRESHOLD_TOKENS EMBEDDINGS_ENABLED EMBEDDING_PROVIDER EMBEDDING_MODEL
        EMBEDDING_BASE_URL EMBEDDING_API_KEY EMBEDDING_API_KEY_ENV EMBEDDING_STORAGE_DTYPE EMBEDDING_STORE_DIM
        EMBEDDING_BACKFILL_BATCH_SIZE EMBEDDING_QUERY_TIMEOUT_S EMBEDDING_PRIVACY_ENABLED KNN_PRESCREEN_MULTIPLIER
        OLLAMA_BASE_URL PROACTIVE_RECALL_ENABLED PROACTIVE_RECALL_BUDGET_TOKENS PREANSWER_EVIDENCE_ENABLED
        PREANSWER_EVIDENCE_MODE
        SUMMARY_CIRCUIT_BREAKER_COOLDOWN_SECONDS SUMMARY_CIRCUIT_BREAKER_FAILURE_THRESHOLD SUMMARY_FALLBACK_MODELS
        CUSTOM_INSTRUCTIONS SUMMARY_REASONING_EFFORT EXPANSION_MODEL EXPANSION_TIMEOUT_MS
        EXPANSION_REASONING_EFFORT
        SUMMARY_MODEL SUMMARY_TIMEOUT_MS TEMPORAL_ROLLUPS_ENABLED ROLLUP_DAILY_TARGET_TOKENS
        ROLLUP_DAILY_MAX_TOKENS ROLLUP_AGGREGATE_MAX_TOKENS ROLLUP_BUILDS_PER_PASS
        ASSERTION_EXTRACTION_ENABLED ASSERTION_EXTRACTION_MAX_SOURCES_PER_PASS
        ASSERTION_EXTRACTION_TIMEOUT_SECONDS""".split()
    ),
    CLAW: frozenset(
        "LCM_" + n
        for n in """
        CONTEXT_THRESHOLD DATABASE_PATH FRESH_TAIL_COUNT FRESH_TAIL_MAX_TOKENS IGNORE_SESSION_PATTERNS
        INCREMENTAL_MAX_DEPTH LEAF_CHUNK_TOKENS NEW_SESSION_RETAIN_DEPTH STATELESS_SESSION_PATTERNS SUMMARY_MODEL
        SUMMARY_TIMEOUT_MS CUSTOM_INSTRUCTIONS EXPANSION_MODEL EXPANSION_PROVIDER""".split()
    ),
}


@dataclass(frozen=True)
class Alias:
    """A peer setting read as one of our fields; ``convert`` says how its value is converted."""

    ours: str
    convert: str = ""


ALIASES: dict[str, dict[str, Alias]] = {
    LCMX: {
        "LCM_CONDENSATION_FANIN": Alias("condense_min_nodes"),
        "LCM_EMPTY_LIFECYCLE_GC_MAX_AGE_HOURS": Alias("empty_lifecycle_min_age_hours"),
    },
    CLAW: {
        "LCM_CIRCUIT_BREAKER_THRESHOLD": Alias("summary_circuit_breaker_failure_threshold"),
        "LCM_CIRCUIT_BREAKER_COOLDOWN_MS": Alias(
            "summary_circuit_breaker_cooldown_seconds", "ms_to_s"
        ),
        "LCM_CONDENSED_MIN_FANOUT": Alias("condense_min_nodes"),
        "LCM_MAX_SWEEP_ITERATIONS": Alias("max_passes_per_compress"),
        "LCM_COMPACT_UNTIL_UNDER_DEADLINE_MS": Alias("compaction_max_seconds", "ms_to_s"),
        "LCM_MAX_EXPAND_TOKENS": Alias("expansion_context_tokens"),
        # deferred | inline, lossless-claw's words for what LCM_COMPACTION_MODE says
        "LCM_PROACTIVE_THRESHOLD_COMPACTION_MODE": Alias("compaction_mode"),
        # on/off: true asks summaries at medium effort, false with none
        "LCM_ENABLE_SUMMARY_THINKING": Alias("summary_reasoning_effort", "thinking"),
        # the time its expansion sub-agent may take: here the time lcm_expand_query's answer may
        "LCM_DELEGATION_TIMEOUT_MS": Alias("expansion_timeout_ms"),
    },
}

_NO_VECTORS = (
    "not used here: semantic recall takes LCM_EMBEDDINGS_ENABLED, LCM_EMBEDDING_PROVIDER (openai, ollama, "
    "local), LCM_EMBEDDING_MODEL and LCM_RECALL_VECTOR_WEIGHT; see docs/guide/semantic-recall.md"
)
_SUMMARY_SIZE = "summary sizes follow LCM_SUMMARY_BUDGET_RATIO"
_SPEND = "use LCM_SUMMARY_MAX_CALLS_PER_HOUR (= max calls x 3600 / window seconds)"
_NO_SUBAGENT = (
    "no expansion sub-agent: lcm_expand returns the stored text, sized by LCM_EXPANSION_CONTEXT_TOKENS; "
    "lcm_expand_query answers through the summary routes (LCM_SUMMARY_*)"
)
_LARGE = (
    "large tool results go to payload files with LCM_LARGE_OUTPUT_EXTERNALIZATION_ENABLED (threshold "
    "LCM_LARGE_OUTPUT_EXTERNALIZATION_THRESHOLD_CHARS); base64 payloads always do (LCM_PAYLOAD_MIN_BASE64_CHARS)"
)
_CACHE = (
    "no cache window to wait for: the prompt changes only when compress runs at "
    "LCM_CONTEXT_THRESHOLD (with LCM_COMPACTION_MODE=deferred it publishes what was prepared "
    "between turns); below it the cached prefix is never rewritten"
)
_ASSEMBLY = "the prompt budget follows the host's window; cap it with LCM_ABSOLUTE_THRESHOLD_TOKENS"

# What to do instead, by the name's start (the first match wins); then the exact names.
FAMILIES: tuple[tuple[str, str], ...] = (
    (
        "LCM_ASSERTION_EXTRACTION_",
        "assertion refinement uses the summary model (LCM_SUMMARY_MODEL); "
        "LCM_ASSERTION_EXTRACTION_ENABLED turns it on",
    ),
    ("LCM_EMBEDDING", _NO_VECTORS),
    ("LCM_EMBED_", _NO_VECTORS),
    ("LCM_KNN_", _NO_VECTORS),
    ("LCM_OLLAMA_", _NO_VECTORS),
    ("LCM_RERANK_", _NO_VECTORS),
    ("LCM_RECALL_", "recall scans and weights are fixed here (lcm_grep, lcm_recall); remove it"),
    ("LCM_ROLLUP_", "rollup maintenance is bounded by LCM_ROLLUP_BUILDS_PER_PASS builds per pass"),
    ("LCM_TEMPORAL_ROLLUPS_", "LCM_TEMPORAL_ROLLUPS_ENABLED turns temporal rollups on"),
    (
        "LCM_PROACTIVE_RECALL_",
        "the relevance floor and the search are fixed here (see Proactive "
        "recall); LCM_PROACTIVE_RECALL_ENABLED and _BUDGET_TOKENS are honoured",
    ),
    ("LCM_SELECTIVE_COMPILER_", "no selective compiler; remove it"),
    ("LCM_LARGE_OUTPUT_", _LARGE),
    ("LCM_LARGE_FILE", _LARGE),
    ("LCM_STUB_LARGE_", _LARGE),
    ("LCM_EXTRACTION_", "no extraction side-output; remove it"),
    ("LCM_FRESH_TAIL_PRESSURE_", "bound the fresh tail with LCM_FRESH_TAIL_MAX_TOKENS"),
    ("LCM_DYNAMIC_LEAF_CHUNK_", "leaf chunks are fixed: LCM_LEAF_CHUNK_TOKENS"),
    ("LCM_CACHE_FRIENDLY_", "condensation starts at LCM_CONDENSE_MIN_NODES nodes"),
    (
        "LCM_DEFERRED_MAINTENANCE_",
        "compaction is deferred by default here (LCM_COMPACTION_MODE=deferred: summaries prepared "
        "between turns from LCM_PREPARE_AT_RATIO of the threshold, published by compress); its "
        "knobs are not read",
    ),
    (
        "LCM_EMPTY_LIFECYCLE_GC_",
        "nothing is deleted automatically: /lcm doctor clean lifecycle (preview, then "
        "apply) with LCM_EMPTY_LIFECYCLE_MIN_AGE_HOURS",
    ),
    ("LCM_SUMMARY_SPEND_", _SPEND),
    ("LCM_SUMMARY_CALL_WINDOW_", _SPEND),
    ("LCM_SUMMARY_MAX_CALLS_PER_WINDOW", _SPEND),
    ("LCM_AUTO_ROTATE_SESSION_FILES", "Hermes owns its session files; remove it"),
    ("LCM_CACHE_", _CACHE),
    ("LCM_COLD_CACHE_", _CACHE),
    ("LCM_HOT_CACHE_", _CACHE),
    ("LCM_MAX_COLD_CACHE_", _CACHE),
    ("LCM_LOG_", "hermes-lcm logs to the host's log (logger hermes_lcm)"),
    (
        "LCM_REPLAY_FLOOD_",
        "not needed: messages are aligned by fingerprint, a replay is never stored twice",
    ),
    ("LCM_EXPANSION_", _NO_SUBAGENT),
)
INSTEAD: dict[str, str] = {
    "LCM_CRITICAL_BUDGET_PRESSURE_RATIO": "not needed: the fresh tail always yields to the budget (its newest "
    "group whole, the rest kept stored), and a deferred compaction stops waiting for prepared summaries once "
    "the prompt is past halfway from its goal to the budget",
    "LCM_FTS_INTEGRITY_CHECK_INTERVAL_HOURS": "no check at start; run lcm doctor --deep when you want one",
    "LCM_HERMES_BASE_DIR": "payload files live beside the database; not needed",
    "LCM_LARGE_OUTPUT_EXTERNALIZATION_PATH": "payload files live beside the database (lcm-payloads); not needed",
    "LCM_LARGE_OUTPUT_TRANSCRIPT_GC_ENABLED": "rows of externalized outputs keep only a stub from the start; "
    "payload files no row references: lcm gc-payloads (preview, then "
    "--apply)",
    "LCM_L2_BUDGET_RATIO": _SUMMARY_SIZE,
    "LCM_L3_TRUNCATE_TOKENS": _SUMMARY_SIZE,
    "LCM_SUMMARY_PREFIX_TARGET_TOKENS": _SUMMARY_SIZE,
    "LCM_CONDENSED_TARGET_TOKENS": _SUMMARY_SIZE,
    "LCM_LEAF_TARGET_TOKENS": _SUMMARY_SIZE,
    "LCM_SUMMARY_MAX_OVERAGE_FACTOR": _SUMMARY_SIZE,
    "LCM_FALLBACK_MAX_TOKENS": _SUMMARY_SIZE,
    "LCM_MAX_ASSEMBLY_TOKENS": _ASSEMBLY,
    "LCM_MAX_ASSEMBLY_TOKEN_BUDGET": _ASSEMBLY,
    "LCM_NATIVE_RECOVERY": "not applicable: a failed compaction leaves the host's list as it was",
    "LCM_QUERY_VIEWS_ENABLED": "no query views; remove it",
    "LCM_RESERVE_TOKENS_FLOOR": "closest: LCM_RESERVE_TOKENS (kept free below the threshold, not the window)",
    "LCM_THRESHOLD_FULL_SWEEP_ENABLED": "compress runs passes until the goal: LCM_MAX_PASSES_PER_COMPRESS",
    "LCM_BOOTSTRAP_MAX_TOKENS": "no start-up import: run lcm import (see docs/guide/import-and-migrate.md)",
    "LCM_CONDENSED_MIN_FANOUT_HARD": "use LCM_CONDENSE_MIN_NODES",
    "LCM_LEAF_MIN_FANOUT": "use LCM_CONDENSE_MIN_NODES",
    "LCM_ENABLED": "choose the engine in Hermes' config (context engine); hermes-lcm has no off switch of its own",
    "LCM_FALLBACK_PROVIDERS": "list model names in LCM_SUMMARY_FALLBACK_MODELS (same route)",
    "LCM_HOST_FALLBACK_MODE": "not applicable: an engine error never reaches the host",
    "LCM_PROMPT_AWARE_EVICTION_ENABLED": "the newest user request always stays; remove it",
    "LCM_PRUNE_HEARTBEAT_OK": "keep such messages out with LCM_IGNORE_MESSAGE_PATTERNS (e.g. ^HEARTBEAT_OK$)",
    "LCM_SKIP_STATELESS_SESSIONS": "always on: sessions matching LCM_STATELESS_SESSION_PATTERNS never write",
    "LCM_STRIP_INJECTED_CONTEXT_TAGS": "not needed: our block is recognised by its seal and never stored",
    "LCM_SUMMARY_PROVIDER": "here it picks the route (auto, auxiliary, openai, extractive); put a provider's model "
    "in LCM_SUMMARY_MODEL and its endpoint in LCM_SUMMARY_BASE_URL",
    "LCM_SWEEP_DEADLINE_MS": "use LCM_COMPACTION_MAX_SECONDS",
    "LCM_SWEEP_MAX_DEPTH": "use LCM_INCREMENTAL_MAX_DEPTH",
    "LCM_TRANSCRIPT_GC_ENABLED": "Hermes owns its session files; remove it",
    "LCM_STUB_LARGE_TOOL_PAYLOADS": "use LCM_LARGE_OUTPUT_EXTERNALIZATION_ENABLED and "
    "LCM_LARGE_OUTPUT_ACTIVE_REPLAY_STUBBING_ENABLED",
    # lossless-claw plugin keys without an environment twin, and LCM-X's YAML-only keys:
}
# lossless-claw plugin keys with no environment twin of theirs read as one of ours, converted.
PLUGIN_ALIASES = {
    # [{name, match: {modelContextWindowMin, sessionPattern, ...}, contextThreshold}, ...]
    "contextThresholdOverrides": Alias("threshold_overrides", "claw_overrides"),
}
# lossless-claw plugin keys with no environment twin of theirs that are our key, same meaning.
PLUGIN_OURS = {"timezone": "timezone"}  # the zone whose days are the day boundaries
# lossless-claw plugin keys whose environment twin is not LCM_ + the key in capitals.
PLUGIN_TWIN = {
    "promptAwareEviction": "LCM_PROMPT_AWARE_EVICTION_ENABLED",
    "largeFileThresholdTokens": "LCM_LARGE_FILE_TOKEN_THRESHOLD",
    "cacheAwareCompaction": "LCM_CACHE_AWARE_COMPACTION_ENABLED",
    "dbPath": "LCM_DATABASE_PATH",
    "dynamicLeafChunkTokens": "LCM_DYNAMIC_LEAF_CHUNK_TOKENS_ENABLED",
    "independentLogFile": "LCM_LOG_FILE",
    "autoRotateSessionFiles": "LCM_AUTO_ROTATE_SESSION_FILES_ENABLED",
}


@dataclass(frozen=True)
class PeerSetting:
    """One row of the migration table."""

    peer: str
    kind: str  # "env", "yaml" (under lcm:), "plugin" (lossless-claw's plugin config key)
    name: str
    status: str  # "same", "alias", "unsupported"
    ours: str = ""  # our field ("same", "alias")
    note: str = ""  # the conversion ("alias") or what to do instead ("unsupported")
    convert: str = (
        ""  # "" (same value), "ms_to_s", "thinking" (on/off -> an effort), "claw_overrides"
    )


def instead(name: str) -> str:
    """What to do instead of an unsupported peer setting; "" when the table has no entry."""
    if name in INSTEAD:
        return INSTEAD[name]
    return next((advice for prefix, advice in FAMILIES if name.startswith(prefix)), "")


def _env_row(peer: str, kind: str, name: str, env: str) -> PeerSetting:
    if env in SAME[peer]:
        return PeerSetting(peer, kind, name, "same", env[4:].lower())
    alias = ALIASES[peer].get(env)
    if alias is not None:
        how = {"ms_to_s": "milliseconds / 1000", "thinking": "true: medium, false: none"}.get(
            alias.convert, "same value"
        )
        return PeerSetting(
            peer,
            kind,
            name,
            "alias",
            alias.ours,
            f"read as LCM_{alias.ours.upper()} ({how})",
            alias.convert,
        )
    return PeerSetting(peer, kind, name, "unsupported", "", instead(env))


def norm(key: str) -> str:
    """A key without case, underscores or dashes: fresh_tail_count, freshTailCount -> freshtailcount."""
    return re.sub(r"[^a-z0-9]", "", str(key).lower())


def plugin_twin(key: str) -> str:
    """The lossless-claw environment variable a plugin config key corresponds to."""
    return PLUGIN_TWIN.get(key) or "LCM_" + re.sub(r"(?<!^)(?=[A-Z])", "_", key).upper()


def _build() -> tuple[PeerSetting, ...]:
    rows = [_env_row(LCMX, "env", name, name) for name in LCMX_ENV]
    for key in LCMX_YAML:
        rows.append(
            _env_row(LCMX, "yaml", key, "LCM_" + key.upper())
            if key not in INSTEAD
            else PeerSetting(LCMX, "yaml", key, "unsupported", "", INSTEAD[key])
        )
    rows.extend(_env_row(CLAW, "env", name, name) for name in CLAW_ENV)
    for key in CLAW_PLUGIN:
        twin = plugin_twin(key)
        if key in PLUGIN_OURS:
            rows.append(PeerSetting(CLAW, "plugin", key, "same", PLUGIN_OURS[key]))
        elif key in PLUGIN_ALIASES:
            alias = PLUGIN_ALIASES[key]
            note = f"read as LCM_{alias.ours.upper()} (each rule's match and contextThreshold)"
            rows.append(PeerSetting(CLAW, "plugin", key, "alias", alias.ours, note, alias.convert))
        elif key in INSTEAD or twin not in CLAW_ENV:
            rows.append(
                PeerSetting(CLAW, "plugin", key, "unsupported", "", instead(key) or instead(twin))
            )
        else:
            row = _env_row(CLAW, "plugin", key, twin)
            if row.status == "same" and norm(key) != norm(
                row.ours
            ):  # dbPath: another name for our key
                row = dataclasses.replace(
                    row, status="alias", note=f"read as LCM_{row.ours.upper()} (same value)"
                )
            rows.append(row)
    return tuple(rows)


TABLE: tuple[PeerSetting, ...] = _build()


def totals() -> dict[str, Counter[str]]:
    """Per peer, how many of its settings are honoured ("same"), aliased and reported."""
    counts: dict[str, Counter[str]] = {LCMX: Counter(), CLAW: Counter()}
    for row in TABLE:
        counts[row.peer][row.status] += 1
    return counts


# -- classifying what a user set ------------------------------------------------------------


_BY_ENV: dict[str, list[PeerSetting]] = {}
_BY_KEY: dict[str, list[PeerSetting]] = {}
for _row in TABLE:
    if _row.kind == "env":
        _BY_ENV.setdefault(_row.name, []).append(_row)
    _BY_KEY.setdefault(norm(_row.name[4:] if _row.kind == "env" else _row.name), []).append(_row)


def _convert(raw: Any, how: str) -> Any:
    if how == "claw_overrides":
        return claw_threshold_overrides(raw)
    if how == "thinking":
        word = str(raw).strip().lower()
        if word in ("1", "true", "yes", "on"):
            return "medium"
        return "none" if word in ("0", "false", "no", "off") else raw
    if how != "ms_to_s":
        return raw
    try:
        return float(str(raw).strip()) / 1000
    except ValueError:
        return raw  # the parser then reports it, labelled with the peer's name


@dataclass(frozen=True)
class Sorted:
    """What a source (the environment or the ``lcm:`` block) sets: our field -> (raw value, label),
    aliases already converted, and the notes on whatever was not taken as it is."""

    values: dict[str, tuple[Any, str]]
    notes: tuple[str, ...]


def _peers(rows: list[PeerSetting]) -> str:
    return "/".join(dict.fromkeys(row.peer for row in rows))


def closest(written: str, candidates: Collection[str], most: int = 3) -> list[str]:
    """The settings a mistyped key most likely meant: those holding it as a whole word first
    (``LCM_THRESHOLD``: ``LCM_CONTEXT_THRESHOLD``, shortest first), then the spellings nearest it."""
    stem = re.sub(r"^lcm_", "", written, flags=re.I)
    word = re.compile(rf"(^|_){re.escape(stem)}(_|$)", re.I) if stem else None
    holding = sorted(
        (
            c
            for c in candidates
            if word
            and c.lower() != written.lower()
            and word.search(re.sub(r"^lcm_", "", c, flags=re.I))
        ),
        key=len,
    )
    near = difflib.get_close_matches(written, candidates, n=most, cutoff=0.75)
    return list(dict.fromkeys([*holding, *near]))[:most]


def _sort(
    items: list[tuple[str, Any, str, list[PeerSetting]]],
    ours: Mapping[str, str],
    candidates: Collection[str],
) -> Sorted:
    """``items``: (what the user wrote, value, label, peer rows); ``ours``: what they wrote -> our field."""
    values: dict[str, tuple[Any, str]] = {}
    notes: list[str] = []
    aliased: list[tuple[str, Any, str, PeerSetting]] = []
    for written, raw, label, rows in items:
        if written in ours:
            values[ours[written]] = (raw, label)
            continue
        alias = next((row for row in rows if row.status in ("same", "alias")), None)
        if alias is not None:
            aliased.append((written, raw, label, alias))
        elif rows:
            notes.append(
                f"setting {label} ({_peers(rows)}): not supported, ignored; {rows[0].note}"
            )
        else:
            close = closest(written, candidates)
            hint = (
                f"; did you mean {' or '.join([', '.join(close[:-1]), close[-1]] if len(close) > 1 else close)}?"
                if close
                else ""
            )
            notes.append(f"setting {label}: unknown key, ignored{hint}")
    for _written, raw, label, row in aliased:
        target = f"LCM_{row.ours.upper()}"  # "same" rows of another spelling (dbPath) have no note
        if row.ours in values and values[row.ours][1] != label:
            notes.append(f"setting {label} ({row.peer}): ignored, {values[row.ours][1]} is set")
            continue
        values[row.ours] = (_convert(raw, row.convert), label)
        notes.append(f"setting {label} ({row.peer}): {row.note or 'read as ' + target}; rename it")
    return Sorted(values, tuple(notes))


def sort_env(env: Mapping[str, str], fields: Collection[str]) -> Sorted:
    """Every ``LCM_*`` variable: ours, a peer's alias (applied), a peer's unsupported setting or unknown."""
    ours = {"LCM_" + name.upper(): name for name in fields}
    items = [
        (name, raw, name, _BY_ENV.get(name, []))
        for name, raw in env.items()
        if name.startswith("LCM_") and name not in OTHER_OURS
    ]
    aliases = {row.name for rows in _BY_ENV.values() for row in rows if row.status == "alias"}
    return _sort(items, ours, [*ours, *sorted(aliases), *sorted(OTHER_OURS)])


def sort_yaml(block: Mapping[str, Any], fields: Collection[str]) -> Sorted:
    """Every key of the ``lcm:`` block, compared without case or underscores (freshTailCount is
    fresh_tail_count): ours, a peer's alias (applied), a peer's unsupported setting or unknown."""
    by_norm = {norm(name): name for name in fields}
    ours = {str(key): by_norm[norm(key)] for key in block if norm(key) in by_norm}
    items = [
        (str(key), raw, f"config.yaml lcm.{key}", _BY_KEY.get(norm(key), []))
        for key, raw in block.items()
    ]
    aliases = {
        row.name if row.kind != "env" else row.name[4:].lower()
        for rows in _BY_KEY.values()
        for row in rows
        if row.status == "alias"
    }
    return _sort(items, ours, [*fields, *sorted(aliases)])


def is_settings_note(text: str) -> bool:
    """A note from :func:`sort_env` / :func:`sort_yaml` (status and doctor show them apart)."""
    return text.startswith("setting ")


def is_ignored_note(text: str) -> bool:
    """A settings note about a value not used (not an alias that was read)."""
    return is_settings_note(text) and "ignored" in text


def markdown_table() -> str:
    """The peer settings table of docs/guide/import-and-migrate.md (a generated block)."""
    lines = ["| peer | kind | setting | here | note |", "| --- | --- | --- | --- | --- |"]
    for row in TABLE:
        here = {"same": f"same: `{row.ours}`", "alias": f"alias of `{row.ours}`"}.get(
            row.status, "reported"
        )
        lines.append(f"| {row.peer} | {row.kind} | `{row.name}` | {here} | {row.note} |")
    return "\n".join(lines)


def markdown_totals() -> str:
    """The totals list of docs/guide/import-and-migrate.md (a generated block, so it cannot go
    stale when a row changes)."""
    return "\n".join(
        f"- {peer}: {sum(counts.values())} settings: {counts['same']} honoured as they are, "
        f"{counts['alias']} read as aliases, {counts['unsupported']} reported."
        for peer, counts in totals().items()
    )


if __name__ == "__main__":
    print(markdown_totals())

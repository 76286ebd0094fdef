"""One typed, validated configuration from ``LCM_*`` environment variables and
the ``lcm:`` block of Hermes' config.yaml.

Every key can be set both ways; the environment wins. An invalid value never
raises into the host: it falls back to the default and is reported in
:attr:`LoadedConfig.problems`, which status and doctor show.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .base import peer_settings as compat
from .base.patterns import MessagePatterns, split_list
from .base.setting_rules import (
    MAX_TOKENS,
    PARSERS,
    ThresholdRule,
    parse_model_thresholds,
    parse_threshold_overrides,
    setting,
    validate,
)

log = logging.getLogger("hermes_lcm")

# The window assumed while the host has not told the model's context length yet.
DEFAULT_CONTEXT_LENGTH = 128_000

# The settings' groups (base/setting_rules.GROUPS), named once for the fields below.
_STORE, _WHEN, _VERBATIM, _HOW = (
    "Database and storage",
    "When to compact",
    "What stays verbatim",
    "How to compact",
)
_SUMMARIZER, _SESSIONS, _AGENTS = ("Summarizer", "Sessions and noise", "The host's own agents")
_RECALL, _PRIVACY, _OUTPUTS, _ROLLUPS = (
    "Semantic recall",
    "Privacy",
    "Large outputs",
    "Temporal rollups",
)
_PREANSWER, _TOOLS, _OPERATOR = ("The pre-answer hook", "Tools", "Operator surface")


@dataclass(frozen=True)
class LcmConfig:
    """Every setting with its default, its group and what it does: docs/settings.md is printed
    from these fields (scripts/docs.py; a test fails when the page is stale)."""

    database_path: str = setting(
        "",
        _STORE,
        "SQLite file. Empty: `$HERMES_HOME/lcm.db`, resolved per session from the host's home.",
    )
    database_url: str = setting(
        "",
        _STORE,
        "The memory on this PostgreSQL server, shared by all who name it (`postgres` extra); wins over the path.",
        form="`postgresql://` URL",
    )
    context_threshold: float = setting(
        0.35,
        _WHEN,
        "Compaction starts when the prompt reaches this fraction of the context window.",
    )
    absolute_threshold_tokens: int = setting(
        0,
        _WHEN,
        "A fixed trigger in tokens; > 0 replaces the fractions. Above the model's window it is reported and unused.",
    )
    model_thresholds: str = setting(
        "",
        _WHEN,
        "Per-model fractions (`glm-5.2:0.70,glm-5.2-1M:0.25`); the longest name contained in the model id wins.",
        form="`name:ratio`, comma-separated; ratio in (0, 1]",
    )
    threshold_overrides: str = setting(
        "",
        _WHEN,
        "Rules by model, window and session; the first that matches sets the fraction, before LCM_MODEL_THRESHOLDS.",
        form="`window>=900000 -> 0.15 name=large; session=telegram:** -> 0.3` (also `model=`, `window<=`)",
    )
    fresh_tail_count: int = setting(
        32,
        _VERBATIM,
        "Newest messages kept verbatim and never compacted; a tool call and its results are never split.",
    )
    fresh_tail_max_tokens: int = setting(
        0,
        _VERBATIM,
        "Token cap on that tail; 0 = no cap. The newest message and user request are always kept.",
    )
    leaf_chunk_tokens: int = setting(
        20000, _HOW, "Size of the oldest raw chunk turned into one depth-0 summary per leaf pass."
    )
    incremental_max_depth: int = setting(
        3,
        _HOW,
        "Deepest summary level; -1 unlimited, 0 leaves only. At the cap the oldest leave the context (not the DAG).",
    )
    condense_min_nodes: int = setting(
        4, _HOW, "Same-depth summaries wanted before a condensation pass makes a deeper node."
    )
    summary_budget_ratio: float = setting(
        0.4,
        _HOW,
        "Share of the compaction goal the summary prefix may use; the rest is for the fresh tail.",
    )
    compaction_target_ratio: float = setting(
        0.6,
        _HOW,
        "Compaction aims at this fraction of the prompt budget, leaving headroom until the next one.",
    )
    reserve_tokens: int = setting(
        0,
        _WHEN,
        "Tokens kept free for the reply; 0: a tenth of the threshold, 256..4096 (over half of it: reported).",
    )
    max_passes_per_compress: int = setting(
        12, _HOW, "Upper bound on leaf/condense passes in one compress call."
    )
    compaction_max_seconds: float = setting(
        45.0,
        _HOW,
        "Time budget of one compress call (ingest included); also bounds every other host call's ingest.",
    )
    compaction_mode: str = setting(
        "deferred",
        _HOW,
        "deferred: summaries are made between turns, compress publishes them without a call; "
        "inline: all inside compress.",
    )
    prepare_at_ratio: float = setting(
        0.4,
        _HOW,
        "Share of the threshold the prompt must reach before a reply's ingest prepares the next compaction.",
    )
    new_session_retain_depth: int = setting(
        2,
        _VERBATIM,
        "After `/new`, summaries this deep or deeper stay in context; -1 all, 0 none. Nothing is deleted.",
    )
    ignore_session_patterns: str = setting(
        "",
        _SESSIONS,
        "Matching sessions store nothing (the prompt stays bounded); tried on `session_id`, `platform`, both.",
        form="globs, comma-separated (`*` within a `:` segment, `**` across)",
    )
    stateless_session_patterns: str = setting(
        "",
        _SESSIONS,
        "Matching sessions read existing memory but never write.",
        form="globs, as above",
    )
    subagent_sessions: str = setting(
        "stateless",
        _AGENTS,
        "A subagent reads its parent's memory (`stateless`), is kept linked to it (`store`), or neither.",
    )
    ignore_message_patterns: str = setting(
        "",
        _SESSIONS,
        "A message whose text or tool-call arguments match is not stored (nor a dropped call's results).",
        form="regexes, comma-separated (`\\,` and commas in `{2,5}`, `[a,b]` do not split)",
    )
    summary_provider: str = setting(
        "auto",
        _SUMMARIZER,
        "`auto`: your endpoint if set, else the host's auxiliary LLM, else offline; failures fall back offline.",
    )
    summary_model: str = setting(
        "",
        _SUMMARIZER,
        "Summary model: on your endpoint with `LCM_SUMMARY_BASE_URL`, else asked of the host's auxiliary LLM.",
    )
    summary_base_url: str = setting("", _SUMMARIZER, "That endpoint's base URL.")
    summary_api_key: str = setting("", _SUMMARIZER, "Its API key (never printed by status).")
    summary_fallback_models: str = setting(
        "", _SUMMARIZER, "Models tried after the first route fails.", form="comma-separated"
    )
    summary_reasoning_effort: str = setting(
        "",
        _SUMMARIZER,
        "Reasoning effort asked of the summary model; empty: the model's default.",
    )
    custom_instructions: str = setting(
        "",
        _SUMMARIZER,
        "Your own instructions added to every summary prompt (what to keep, how to write); the transcript stays data.",
        form="text, at most 2,000 characters used",
    )
    summary_timeout_ms: int = setting(
        60000,
        _SUMMARIZER,
        "Timeout of one whole summary call (a trickling server is cut off; an answer over 8 MB is refused).",
    )
    summary_circuit_breaker_failure_threshold: int = setting(
        2, _SUMMARIZER, "Consecutive failures before a route is skipped."
    )
    summary_circuit_breaker_cooldown_seconds: float = setting(
        300.0, _SUMMARIZER, "How long a failed route is skipped."
    )
    summary_max_calls_per_hour: int = setting(
        120,
        _SUMMARIZER,
        "Spend guard: summary LLM calls per rolling hour; beyond it summaries are made offline.",
    )
    expansion_context_tokens: int = setting(32000, _TOOLS, "Context budget of `lcm_expand_query`.")
    expansion_model: str = setting(
        "",
        _TOOLS,
        "Model `lcm_expand_query` answers with (the summary endpoint's, else the host's); empty: the summary route.",
    )
    expansion_provider: str = setting(
        "",
        _TOOLS,
        "Hermes provider `lcm_expand_query` asks through the host (`openrouter`, ...); empty: the host's choice.",
    )
    expansion_timeout_ms: int = setting(
        0, _TOOLS, "Timeout of one `lcm_expand_query` answer; 0: `LCM_SUMMARY_TIMEOUT_MS`."
    )
    expansion_reasoning_effort: str = setting(
        "", _TOOLS, "Reasoning effort of that answer; empty: `LCM_SUMMARY_REASONING_EFFORT`."
    )
    tool_response_max_chars: int = setting(
        24000,
        _TOOLS,
        "Hard cap on one tool answer (lowered to the host's per-result limit); bigger answers ask to narrow.",
    )
    disabled_tools: str = setting(
        "", _TOOLS, "`lcm_*` tools hidden from the model.", form="tool names, comma-separated"
    )
    assertions_enabled: bool = setting(
        False,
        _TOOLS,
        "The assertion sidecar and `lcm_query_state`; off, no table, no extraction, the tool answers disabled.",
    )
    assertion_extraction_enabled: bool = setting(
        False,
        _TOOLS,
        "With assertions on, the summary route also extracts facts (a message holding a secret is not sent).",
    )
    assertion_extraction_max_sources_per_pass: int = setting(
        4,
        _TOOLS,
        "Messages the summary route is asked about per extraction run; clamped to 1..8 where used.",
    )
    assertion_extraction_timeout_seconds: float = setting(
        30.0, _TOOLS, "Timeout of each of those calls; clamped to 0.1..120 where used."
    )
    evidence_tools_enabled: bool = setting(
        True,
        _TOOLS,
        "`lcm_compute`, `lcm_compile_evidence`, `lcm_evidence_pack` answer; false: `status: disabled`.",
    )
    adaptive_retrieval_enabled: bool = setting(
        False,
        _TOOLS,
        "Activates `lcm_retrieve`, the bounded retrieval controller; off, it answers `status: disabled`.",
    )
    enable_slash_command: bool = setting(
        False, _OPERATOR, "Registers `/lcm` (interactive CLI and gateway; not `hermes chat -q`)."
    )
    doctor_clean_apply_enabled: bool = setting(
        False,
        _OPERATOR,
        "Allows `/lcm doctor clean apply` and `... lifecycle apply`, the commands that delete rows.",
    )
    payload_min_base64_chars: int = setting(
        2048,
        _STORE,
        "A base64-looking run this long goes to a payload file (`data:...;base64,` URIs always do).",
    )
    backup_dir: str = setting(
        "",
        _STORE,
        "Where backups go (`/lcm backup`, `lcm backup`, every apply, the importer). Empty: `<db dir>/lcm-backups`.",
    )
    empty_lifecycle_min_age_hours: float = setting(
        24.0, _OPERATOR, "Empty session rows younger than this are never lifecycle-cleaned."
    )
    # Off, a call reads its owner's conversations at most (sessions/binding.owner_for).
    shared_memory: bool = setting(
        False,
        _TOOLS,
        "Off: tools read the caller's owner's conversations at most. On: a team bot's users share one memory.",
    )
    # The upgrade is importers/lcmx_swap.upgrade_in_place.
    migrate_on_start: bool = setting(
        True,
        _TOOLS,
        "An LCM-X database at the path is upgraded in place (original kept) before the first turn.",
    )
    sensitive_patterns_enabled: bool = setting(
        False,
        _PRIVACY,
        "Redact secrets before anything is stored (cannot be undone). Off: lossless.",
    )
    sensitive_patterns: str = setting(
        "all",
        _PRIVACY,
        "Which kinds: `all`, kind names, LCM-X's groups (`api_key`, ...), your own `name=regex`.",
        form="names or `name=regex`, comma-separated",
    )
    large_output_externalization_enabled: bool = setting(
        False, _OUTPUTS, "Write large tool results to payload files; their rows keep a stub."
    )
    large_output_externalization_threshold_chars: int = setting(
        12000, _OUTPUTS, "A text of a tool result at least this long is externalized."
    )
    large_output_preview_chars: int = setting(
        1200,
        _OUTPUTS,
        "Characters of head and tail in the stub; cut so a stub is always below the threshold.",
    )
    large_output_active_replay_stubbing_enabled: bool = setting(
        False,
        _OUTPUTS,
        "Also replace answered large outputs in the host's own list, at once (a compress with no summary).",
    )
    large_output_active_replay_stub_threshold_tokens: int = setting(
        25000,
        _OUTPUTS,
        "How large (tokens) an answered tool result must be for active replay to act.",
    )
    embeddings_enabled: bool = setting(
        False,
        _RECALL,
        "Turn on the vector arm of recall; off, nothing is embedded, created or sent.",
    )
    embedding_provider: str = setting(
        "",
        _RECALL,
        "`openai`: any `/v1/embeddings`; `local`: `hermes-lcm[local]` offline. LCM-X's `fastembed` reads as `local`.",
    )
    embedding_model: str = setting(
        "",
        _RECALL,
        "The model id; vectors are kept per model. `local`: `all-minilm-l6-v2-int8` "
        "(default) or `multilingual-e5-small-q4` (`local-e5` extra).",
    )
    embedding_base_url: str = setting(
        "", _RECALL, "The endpoint of an `openai` or `voyage` provider."
    )
    embedding_api_key: str = setting("", _RECALL, "Its key (masked everywhere, like every key).")
    embedding_api_key_env: str = setting(
        "", _RECALL, "The name of an environment variable holding the key instead (LCM-X's)."
    )
    embedding_storage_dtype: str = setting(
        "float32", _RECALL, "`int8` keeps a quarter of the size (per-vector scale)."
    )
    embedding_store_dim: int = setting(
        0, _RECALL, "Matryoshka truncation to this many leading dimensions (0: the model's own)."
    )
    embedding_backfill_batch_size: int = setting(
        64, _RECALL, "Texts per provider call when embedding history (shortest first)."
    )
    embedding_query_timeout_s: float = setting(
        10.0,
        _RECALL,
        "How long a query's whole embedding call may take before recall goes on with full text alone.",
    )
    embedding_privacy_enabled: bool = setting(
        True,
        _RECALL,
        "Text sent to a provider off this machine is redacted even when redaction of the store is off.",
    )
    knn_prescreen_multiplier: int = setting(
        8,
        _RECALL,
        "The sign-bit prescreen keeps this many times k candidates for the exact rescore.",
    )
    ollama_base_url: str = setting(
        "", _RECALL, "Ollama's endpoint (empty: `http://127.0.0.1:11434`)."
    )
    # Tuned on LoCoMo (bench/recall.py --hybrid): 0.3 fell below full text once.
    recall_vector_weight: float = setting(
        0.2,
        _RECALL,
        "The vector arm's weight in `lcm_recall`'s fusion (0: full text alone); unset with the "
        "local e5 model, 0.5.",
    )
    proactive_recall_enabled: bool = setting(
        False,
        _RECALL,
        "A budget-capped block of the best earlier hits for the newest user message.",
    )
    proactive_recall_budget_tokens: int = setting(
        500, _RECALL, "The most that block may cost (counted in the prompt reserve)."
    )
    preanswer_evidence_enabled: bool = setting(
        False, _PREANSWER, "A sealed brief of exact cited lines before questions about the past."
    )
    preanswer_evidence_mode: str = setting(
        "",
        _PREANSWER,
        "With the hook on: `off` turns it off; the others run it behind the recall-need gate.",
    )
    preanswer_evidence_budget_tokens: int = setting(
        600,
        _PREANSWER,
        "The brief's size in tokens, framing included (counted in the prompt reserve).",
    )
    temporal_rollups_enabled: bool = setting(
        False,
        _ROLLUPS,
        "Day, week and month summaries built in the background, served by `lcm_recent`; tables only once on.",
    )
    rollup_daily_target_tokens: int = setting(
        5000, _ROLLUPS, "The size a day rollup is summarized to."
    )
    rollup_daily_max_tokens: int = setting(
        15000, _ROLLUPS, "The size a day rollup is cut to if the summary route returns more."
    )
    rollup_aggregate_max_tokens: int = setting(
        20000, _ROLLUPS, "The size of a week or month rollup (its target and its limit)."
    )
    rollup_builds_per_pass: int = setting(
        2, _ROLLUPS, "The most rollups one background pass builds (days before weeks and months)."
    )
    timezone: str = setting(
        "",
        _ROLLUPS,
        "Rollups are also kept for this zone's days, served by `lcm_recent`. Empty: UTC only.",
        form="IANA zone name (`Europe/Paris`)",
    )

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

    def threshold_rule_for(
        self, model: str, window: int, session: tuple[str, str] = ("", "")
    ) -> ThresholdRule | None:
        """The first LCM_THRESHOLD_OVERRIDES rule that matches (session: id and platform)."""
        rules = parse_threshold_overrides(self.threshold_overrides)
        return next((r for r in rules if r.matches(model, window, *session)), None)

    def threshold_tokens_for(self, model: str, context_length: int) -> int:
        """The compaction threshold in tokens; see :func:`compute_threshold`."""
        return compute_threshold(self, model, context_length).tokens


@dataclass(frozen=True)
class Threshold:
    """A compaction threshold, the setting that chose it (``rule``, for status), and the
    settings that could not be used for it and why."""

    tokens: int
    problems: tuple[str, ...] = ()
    rule: str = "context_threshold"


def compute_threshold(
    config: LcmConfig, model: str, context_length: int, session: tuple[str, str] = ("", "")
) -> Threshold:
    """The one function that computes the compaction threshold (engine window, fallback, status).

    ``absolute_threshold_tokens`` wins when set and it fits the model's window; otherwise the
    window times the first ``threshold_overrides`` rule matching the model, window and
    ``session`` (its id and platform), else the per-model ratio (longest matching key), else
    ``context_threshold``. Until the
    host has said the window (``context_length`` <= 0) DEFAULT_CONTEXT_LENGTH stands in, so a
    threshold exists from the engine's construction on. Settings that only make sense against the
    window (an absolute threshold above it) are reported here, because only here is the window
    known; the reserve's own check against it is :func:`prompt.budget.reserve_problem`.
    """
    known = context_length > 0
    window = min(context_length, MAX_TOKENS) if known else DEFAULT_CONTEXT_LENGTH
    matched = config.threshold_rule_for(model, window, session)
    if matched is not None:
        ratio, rule = matched.ratio, f"threshold_overrides: {matched.label}"
    else:
        ratio = config.threshold_ratio_for(model)
        keys = [k for k, r in parse_model_thresholds(config.model_thresholds) if k and k in model]
        rule = f"model_thresholds: {max(keys, key=len)}" if keys else "context_threshold"
    tokens = max(1, int(window * ratio))
    problems = []
    absolute = config.absolute_threshold_tokens
    if absolute > 0 and (not known or absolute <= window):
        tokens, rule = absolute, "absolute_threshold_tokens"
    elif absolute > 0:
        problems.append(
            f"absolute_threshold_tokens={absolute} is above the context length {window} of "
            f"{model or 'the model'}; using {tokens}"
        )
    return Threshold(tokens, tuple(problems), rule)


@dataclass(frozen=True)
class LoadedConfig:
    config: LcmConfig
    problems: tuple[str, ...] = ()
    sources: Mapping[str, str] = field(default_factory=dict)


def env_name(field_name: str) -> str:
    return "LCM_" + field_name.upper()


# The vector weight of a local model when LCM_RECALL_VECTOR_WEIGHT is not set: e5 ranks LoCoMo's
# questions well enough alone to take more weight with no conversation below full text, which lifts
# questions asked in other words (bench/fusion_lab.py; docs/benchmarks.md).
LOCAL_VECTOR_WEIGHTS = {"multilingual-e5-small-q4": 0.5, "multilingual-e5-small": 0.5}


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
                parsed = PARSERS[_field_type(spec)](raw)
                validate(spec.name, parsed)
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
    model = str(values.get("embedding_model", "")).strip().lower()
    local = values.get("embedding_provider") == "local"
    if local and model in LOCAL_VECTOR_WEIGHTS and "recall_vector_weight" not in sources:
        values["recall_vector_weight"] = LOCAL_VECTOR_WEIGHTS[model]
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
        from .base.sensitive import Policy  # lazily: its catalog is not cheap to import

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


def _field_type(spec: dataclasses.Field[Any]) -> str:
    return spec.type if isinstance(spec.type, str) else spec.type.__name__


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
    # as the user wrote them: keys are matched without case (compat.norm), notes name them as written
    return {str(key): value for key, value in block.items()}, None


def load_for_home(
    env: Mapping[str, str], hermes_home: str | os.PathLike[str] | None
) -> LoadedConfig:
    """``load_config`` over env and ``$HERMES_HOME/config.yaml``; an unreadable file is one more problem."""
    block, problem = read_yaml_block(hermes_home)
    loaded = load_config(env, block)
    if problem:
        return LoadedConfig(loaded.config, (*loaded.problems, problem), loaded.sources)
    return loaded

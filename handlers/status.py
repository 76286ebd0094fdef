"""What status surfaces show about a live engine: host-side token accounting
plus the core's store, DAG and summarizer health.

It reads the engine through the :class:`EngineFacts` protocol, so the engine, /lcm and the
tool dispatcher all use it and it imports none of them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from ..base.peer_settings import is_settings_note
from ..base.redact import redact_value
from ..base.tokens import backend_name
from ..version import __version__

if TYPE_CHECKING:
    from ..core import LcmCore
    from ..host.overhead import OverheadMeter


class EngineFacts(Protocol):
    """What a status report reads of a live engine."""

    last_prompt_tokens: int
    threshold_tokens: int
    context_length: int
    compression_count: int
    model: str
    meter: OverheadMeter
    startup_error: str | None
    errors: list[str]
    core: LcmCore | None

    @property
    def name(self) -> str: ...

    @property
    def config_problems(self) -> tuple[str, ...]: ...


def engine_status(engine: EngineFacts) -> dict[str, Any]:
    """The status report, with every credential masked: it reaches the model (``lcm_status``), the
    operator (``/lcm status``) and logs, and holds error texts that came from outside."""
    report: dict[str, Any] = redact_value(_status(engine))
    return report


def _status(engine: EngineFacts) -> dict[str, Any]:
    last_prompt = max(0, engine.last_prompt_tokens)
    info: dict[str, Any] = {
        "engine": engine.name,
        "version": __version__,
        "last_prompt_tokens": last_prompt,
        "threshold_tokens": engine.threshold_tokens,
        "context_length": engine.context_length,
        "usage_percent": round(min(100.0, last_prompt / engine.context_length * 100), 1)
        if engine.context_length
        else 0,
        "compression_count": engine.compression_count,
        "model": engine.model,
        "overhead_tokens": engine.meter.snapshot(),
        "threshold_problem": engine.meter.watch.problem,
        "over_threshold": _over(engine, last_prompt),
        "token_counter": backend_name(),
        "config_problems": [
            p for p in engine.config_problems if not is_settings_note(p)
        ],  # notes: below
        # peer settings read as ours, or ignored (LCM-X, lossless-claw, typos): docs/operator-guide.md, Migration
        "settings_notes": [p for p in engine.config_problems if is_settings_note(p)],
        "startup_error": engine.startup_error,
        "engine_errors": list(engine.errors),
    }
    if engine.core is not None:
        try:
            info["payload_problem"] = (
                engine.core.guard.problem
            )  # a refused (symlinked) payload directory
            info.update(engine.core.status())
        except Exception as exc:  # noqa: BLE001 - status must work when the store does not
            info["store_error"] = (
                f"{exc.__class__.__name__}: {exc}"  # masked with the rest by engine_status
            )
    return info


def _over(engine: EngineFacts, last_prompt: int) -> dict[str, Any] | None:
    """How far the last prompt went over the threshold, and why (None when it did not)."""
    if not engine.threshold_tokens or last_prompt <= engine.threshold_tokens:
        return None
    cause = (
        f"the host's own tokens: {engine.meter.watch.problem}"
        if engine.meter.watch.problem
        else "a turn crossed it: the prompt is rebuilt under the threshold at the compaction that follows"
    )
    return {"tokens": last_prompt - engine.threshold_tokens, "cause": cause}

"""Which optional ingest steps run on a database: what the settings turn on, and what the database
was written with before.

The steps (ingest.Step) run before the always-on payload guard, redaction first, so no later step
or file ever sees a secret. A step that was used on this database and is off now still runs as a
*shadow*, writing nothing, only so that a message stored in that form is recognised when the host
sends it again (ingest.Normalizer.alternates): turning a step off must not store it twice.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from ..base.payloads import PayloadGuard
from ..base.sensitive import Redactor, redactor_for
from ..config import LcmConfig
from ..store import Store, StoreError
from .externalize import STEP_NAME, ExternalizeStep
from .steps import RedactStep, Step

log = logging.getLogger("hermes_lcm")
REDACTION = "redaction"


@dataclass(frozen=True)
class Pipeline:
    steps: tuple[Step, ...]
    shadow: tuple[Step, ...]
    redactor: Redactor | None  # the live redactor (None: redaction is off)


def pipeline_for(config: LcmConfig, store: Store, guard: PayloadGuard) -> Pipeline:
    """The optional steps ``config`` turns on for ``store``, and the shadow steps (see above)."""
    wanted = {
        REDACTION: config.sensitive_patterns_enabled,
        STEP_NAME: config.large_output_externalization_enabled,
    }
    used = {name: _marked(store, name, on) for name, on in wanted.items()}
    redactor = _redactor(config, store) if wanted[REDACTION] else None
    steps: list[Step] = []
    shadow: list[Step] = []
    if redactor is not None:
        steps.append(RedactStep(redactor))
    if used[REDACTION]:
        shadow.append(RedactStep(redactor or _redactor(config, store)))
    sizes = (config.large_output_externalization_threshold_chars, config.large_output_preview_chars)
    if wanted[STEP_NAME]:  # after redaction: the file gets the redacted text
        steps.append(ExternalizeStep(guard, *sizes))
    if used[STEP_NAME]:
        shadow.append(ExternalizeStep(guard, *sizes, write=False))
    off_now = any(used[name] and not wanted[name] for name in wanted)
    return Pipeline(tuple(steps), tuple(shadow) if off_now else (), redactor)


def _redactor(config: LcmConfig, store: Store) -> Redactor:
    """The redactor of LCM_SENSITIVE_PATTERNS, keyed by this database's own key."""
    redactor = redactor_for(True, config.sensitive_patterns, store.secret(REDACTION))
    assert redactor is not None
    return redactor


def _marked(store: Store, name: str, on: bool) -> bool:
    """Record that step ``name`` is used on this database (``on``), or say whether it ever was."""
    try:
        if on:
            store.mark(name)
            return True
        return store.marked(name)
    except StoreError as exc:  # a store that cannot say: recognise by the current form only
        log.warning("hermes-lcm: could not record the use of %s: %s", name, exc)
        return on

"""The evidence family (lcm_query_state, lcm_compute, lcm_compile_evidence, lcm_evidence_pack,
lcm_retrieve): always listed so the tool surface is stable. A tool whose flag is off answers
``status: disabled`` and says how to enable it; one whose body is built (``BODIES``) runs when
its flag is on; one without a body yet says so.
"""

from __future__ import annotations

from typing import Any

from ..evidence import KINDS
from .evidence_tools import BODIES
from .toolkit import Args, Ctx, Handler

# tool -> (config flag, environment variable, what it needs)
EVIDENCE_TOOLS: dict[str, tuple[str, str, str]] = {
    "lcm_query_state": ("assertions_enabled", "LCM_ASSERTIONS_ENABLED", "the assertion sidecar"),
    "lcm_compute": ("evidence_tools_enabled", "LCM_EVIDENCE_TOOLS_ENABLED", "the evidence tools"),
    "lcm_compile_evidence": (
        "evidence_tools_enabled",
        "LCM_EVIDENCE_TOOLS_ENABLED",
        "the evidence tools",
    ),
    "lcm_evidence_pack": (
        "evidence_tools_enabled",
        "LCM_EVIDENCE_TOOLS_ENABLED",
        "the evidence tools",
    ),
    "lcm_retrieve": (
        "adaptive_retrieval_enabled",
        "LCM_ADAPTIVE_RETRIEVAL_ENABLED",
        "adaptive retrieval",
    ),
}


def disabled_tool(name: str) -> Handler:
    flag, env, feature = EVIDENCE_TOOLS[name]

    body = BODIES.get(name)

    def handler(ctx: Ctx, args: Args) -> dict[str, Any]:
        enabled = bool(getattr(ctx.config, flag, False))
        if enabled and body is not None:
            return body(ctx, args)
        answer: dict[str, Any] = {
            "tool": name,
            "status": "disabled",
            "flag": env,
            "flag_on": enabled,
        }
        if enabled:
            answer["reason"] = (
                f"{env} is on, but {feature} is not part of this hermes-lcm build yet"
            )
        else:
            answer["reason"] = f"{feature} is off"
            answer["enable"] = (
                f"set {env}=true (or lcm: {{{flag}: true}} in config.yaml) and restart Hermes"
            )
        answer["instead"] = "use lcm_grep / lcm_expand for exact evidence"
        return answer

    return handler


def lcm_query_state(ctx: Ctx, args: Args) -> dict[str, Any]:
    """The latest value of a subject's state (and its history, newest first) as of a time, from
    the assertion sidecar; every value cites its message (store_id, span, quote, time). Reads
    only the caller's reach; answers ``status: disabled`` while LCM_ASSERTIONS_ENABLED is off."""
    if not getattr(ctx.config, "assertions_enabled", False):
        return disabled_tool("lcm_query_state")(ctx, args)
    subject = (args.text("subject") or "").strip()
    kind = args.choice("kind", ("", *KINDS), "") or ""
    as_of = args.time("as_of", end=True)
    limit = args.integer("limit", 10, 1, 50)
    sidecar = ctx.core.assertions
    found = sidecar.query(
        ctx.reach(), subject, kind, None if as_of is None else as_of - 0.001, limit
    )
    answer: dict[str, Any] = {
        "tool": "lcm_query_state",
        "status": "ok",
        "subject": subject,
        "kind": kind or None,
        "as_of": None if as_of is None else args.text("as_of"),
        **found,
    }
    if not found["states"]:
        stats = ctx.core.store.assertion_stats()
        answer["note"] = (
            "no assertion matches; the sidecar holds facts the rules found in plain statements "
            f"({stats.get('total', 0)} in this store, extraction runs after each reply)"
        )
        answer["instead"] = "use lcm_grep / lcm_expand for exact evidence"
    return answer

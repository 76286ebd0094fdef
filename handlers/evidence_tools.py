"""The bodies of lcm_evidence_pack, lcm_compile_evidence and lcm_compute: thin adapters from the
tool arguments to the evidence services (evidence/), reading only within the caller's reach and
kept within the tool size cap. Bad input is a ToolError answer naming what works. Each call's
work is bounded (evidence/limits.py) and its answer's ``limits`` says what a bound left unread."""

from __future__ import annotations

from typing import Any

from ..evidence import (
    DEFAULT_BUDGET,
    MAX_QUESTION_CHARS,
    OPERATIONS,
    RefError,
    build_pack,
    compile_brief,
    compute,
    hydrate_all,
    parse_refs,
)
from .toolkit import Args, Ctx, Handler, ToolError, fit, share


def _tz(ctx: Ctx) -> str:
    """The user's timezone for relative dates (LCM_TIMEZONE when set), else UTC."""
    return ctx.config.timezone


def _question(args: Args, required: bool = False) -> str:
    """The question argument, at most ``MAX_QUESTION_CHARS`` (its names and needs are read)."""
    question = args.text("question", required=required) or ""
    if len(question) > MAX_QUESTION_CHARS:
        raise ToolError(
            f"question is longer than {MAX_QUESTION_CHARS} characters; ask one question"
        )
    return question


def _refs_arg(args: Args) -> object:
    value = args.raw.get("refs")
    if value is None or value == "" or value == []:
        raise ToolError(
            'refs is required: store ids from lcm_grep/lcm_expand, e.g. ["812", "812:10-80"]'
        )
    return value


def _bounded(answer: dict[str, Any], key: str, cap: int) -> dict[str, Any]:
    """Cut ``answer[key]`` (a list of line items) to the cap; lines left out are named."""
    items = list(answer.get(key) or [])
    limit = share(cap, len(items))
    for item in items:
        if isinstance(item.get("text"), str) and len(item["text"]) > limit:
            start = item.get("span", [0])[0]
            item["text"] = item["text"][:limit]
            item["span"] = [start, start + limit]
            item["truncated"] = True
    kept = fit(answer, key, items, cap)
    if kept < len(items):
        answer["omitted"] = list(answer.get("omitted") or []) + [i["ref"] for i in items[kept:]]
        answer["omitted_hint"] = "over the size cap: cite these refs again in another call"
    return answer


def lcm_evidence_pack(ctx: Ctx, args: Args) -> dict[str, Any]:
    budget = args.integer("budget_tokens", DEFAULT_BUDGET, 100, 8000)
    question = _question(args)
    try:
        pack = build_pack(ctx.core.store, _refs_arg(args), ctx.reach(), budget, question, _tz(ctx))
    except RefError as exc:
        raise ToolError(str(exc)) from exc
    answer: dict[str, Any] = {"tool": "lcm_evidence_pack", **pack.as_dict()}
    return _bounded(answer, "lines", ctx.cap)


def lcm_compile_evidence(ctx: Ctx, args: Args) -> dict[str, Any]:
    question = _question(args, required=True)
    try:
        brief = compile_brief(
            ctx.core.store, question, args.raw.get("claims"), ctx.reach(), tz=_tz(ctx)
        )
    except ValueError as exc:
        raise ToolError(str(exc)) from exc
    _bounded_claims(brief["claims"], ctx.cap)
    return _bounded({"tool": "lcm_compile_evidence", **brief}, "lines", ctx.cap)


def _bounded_claims(verdicts: list[dict[str, Any]], cap: int) -> None:
    """Each verdict within its share of half the cap, so 20 claims of 64 refs still fit: its text
    and why cut (marked with an ellipsis), and its ref lists cut to their first labels with how
    many more were cited (``<list>_more``); the status is never cut."""
    room = max(600, (cap // 2) // max(1, len(verdicts)))
    for verdict in verdicts:
        verdict["text"] = verdict["text"][: min(400, room // 4)]
        why = str(verdict.get("why", ""))
        if len(why) > room // 3:
            verdict["why"] = why[: room // 3 - 1] + "…"
        for key in ("refs", "missing_refs", "unread_refs"):
            labels = [str(label) for label in verdict.get(key) or []]
            kept: list[str] = []
            used = 0
            for label in labels:
                used += len(label) + 4
                if used > room // 8 and kept:
                    break
                kept.append(label)
            if len(kept) < len(labels):
                verdict[key], verdict[f"{key}_more"] = kept, len(labels) - len(kept)


def lcm_compute(ctx: Ctx, args: Args) -> dict[str, Any]:
    operation = (args.text("operation", required=True) or "").strip().lower()
    if operation not in OPERATIONS:
        raise ToolError(f"operation must be one of {', '.join(OPERATIONS)}; got {operation!r}")
    try:
        refs = parse_refs(_refs_arg(args))
    except RefError as exc:
        raise ToolError(str(exc)) from exc
    question = _question(args)
    lines, missing = hydrate_all(ctx.core.store, refs, ctx.reach(), _tz(ctx))
    answer: dict[str, Any] = {"tool": "lcm_compute", "operation": operation}
    if missing:
        answer.update(
            status="insufficient",
            reason="cited refs could not be read: "
            + ", ".join(f"{m.ref} ({m.reason})" for m in missing),
            missing=[m.as_dict() for m in missing],
        )
        return answer
    answer.update(compute(operation, lines, question))
    result = answer.get("result")
    if (
        isinstance(result, dict)
        and isinstance(result.get("text"), str)
        and len(result["text"]) > ctx.cap // 3
    ):
        result["text"] = result["text"][: ctx.cap // 3]
        result["truncated"] = True
    if "trace" in answer:
        trace = answer["trace"]
        kept = fit(answer, "trace", trace, ctx.cap)
        if kept < len(trace):
            answer["trace_omitted"] = len(trace) - kept
    return answer


BODIES: dict[str, Handler] = {
    "lcm_evidence_pack": lcm_evidence_pack,
    "lcm_compile_evidence": lcm_compile_evidence,
    "lcm_compute": lcm_compute,
}

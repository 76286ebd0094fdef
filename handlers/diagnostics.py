"""lcm_status, lcm_inspect and lcm_doctor: read-only diagnostics, metadata only.

They answer for every session, ignored and stateless ones included (with what applies to them),
and never return message content. The database checks are ``maintenance.doctor_report``, the
same report ``/lcm doctor`` and the ``lcm`` CLI show; this module adds what only a live engine
knows (context pressure, summarizer breakers, the bound session).
"""

from __future__ import annotations

from typing import Any

from ..base.display import ELLIPSIS, cut, iso
from ..base.registry import live_session_ids
from ..maintenance.checks import INSPECT
from ..maintenance.doctor import doctor_report
from ..maintenance.retention import payload_stats
from ..schemas import tool_names
from .toolkit import Args, Ctx, fit


def _tools_view(ctx: Ctx) -> dict[str, Any]:
    disabled = sorted(ctx.config.disabled_tool_names & tool_names())
    return {"available": len(tool_names()) - len(disabled), "disabled": disabled}


def lcm_status(ctx: Ctx, args: Args) -> dict[str, Any]:
    info = ctx.status()
    info["tools"] = _tools_view(ctx)
    info["engine_errors"] = [cut(e, 300, ELLIPSIS)[0] for e in info.get("engine_errors", [])][-5:]
    info["errors"] = [cut(e, 300, ELLIPSIS)[0] for e in info.get("errors", [])][-5:]
    return info


def _binding(ctx: Ctx) -> dict[str, Any]:
    binding = ctx.core.binding
    config = ctx.core.config
    return {
        "session_id": binding.session_id or None,
        "mode": binding.mode,
        "agent_role": binding.role,
        "matched_session_pattern": binding.matched_pattern,
        "conversation_id": binding.conversation_id,
        "patterns": {
            "ignore_session_patterns": config.ignore_session_patterns,
            "stateless_session_patterns": config.stateless_session_patterns,
            "subagent_sessions": config.subagent_sessions,
            "ignore_message_patterns": config.ignore_message_patterns,
            "ignored_messages_this_process": ctx.core.normalizer.ignored_count,
        },
    }


def lcm_inspect(ctx: Ctx, args: Args) -> dict[str, Any]:
    answer: dict[str, Any] = {"binding": _binding(ctx)}
    conv = ctx.conversation_id
    if conv is None:
        answer["note"] = (
            "nothing stored for this session (ignored sessions store nothing; stateless ones read only)"
        )
        return answer
    store, dag = ctx.core.store, ctx.core.dag
    state = store.conversation(conv)
    context = dag.context(conv)
    answer.update(
        {
            "conversation": {
                "id": conv,
                "key": state.key,
                "messages": state.last_seq,
                "frontier_seq": state.frontier_seq,
                "fresh_tail_messages": state.last_seq - state.frontier_seq,
            },
            "context_nodes": [
                {
                    "node_id": n.node_id,
                    "depth": n.depth,
                    "tokens": n.tokens,
                    "from": iso(n.earliest_at),
                    "to": iso(n.latest_at),
                }
                for n in context
            ],
            "summaries_by_depth": {str(d): n for d, n in sorted(dag.depth_counts(conv).items())},
            "last_compaction": ctx.core.stats.last_compaction or None,
            "summarizer": {
                "routes": ctx.core.summarizer_name,
                "open_breakers": ctx.core.call_guard.snapshot()["open_breakers"],
            },
            "payloads": payload_stats(store.path, store),
            "recent_warnings": [
                {
                    "at": iso(at),
                    "level": level,
                    "kind": kind,
                    "detail": cut(detail, 200, ELLIPSIS)[0],
                }
                for at, level, kind, detail in store.recent_events(10)
                if level != "info"
            ][:5],
        }
    )
    sessions = store.sessions_page(conv, 0, 21)
    for row in sessions:
        row.pop("rowid", None)
        row["started_at"], row["ended_at"] = iso(row["started_at"]), iso(row["ended_at"])
    fit(answer, "sessions", sessions[:20], ctx.cap)
    if len(sessions) > 20:
        answer["sessions_truncated"] = True
    return answer


def _engine_checks(ctx: Ctx) -> list[dict[str, Any]]:
    """What only the live engine knows: prompt pressure, summarizer breakers, payload write failures."""
    core = ctx.core
    checks = []
    threshold, prompt = ctx.threshold_tokens, ctx.last_prompt_tokens
    if threshold and prompt > threshold * 1.5:
        checks.append(
            {
                "name": "context_pressure",
                "status": "warn",
                "action": INSPECT,
                "detail": f"last prompt {prompt} tokens, threshold {threshold}",
            }
        )
    else:
        checks.append(
            {
                "name": "context_pressure",
                "status": "ok",
                "detail": f"last prompt {prompt} tokens, threshold {threshold}",
            }
        )
    breakers = core.call_guard.snapshot()["open_breakers"]
    checks.append(
        {
            "name": "summarizer",
            "status": "warn" if breakers else "ok",
            "detail": f"open breakers: {breakers}"
            if breakers
            else f"routes: {core.summarizer_name}",
            **({"action": INSPECT} if breakers else {}),
        }
    )
    if core.stats.write_failures:
        unstored = core.stats.unstored_messages
        checks.append(
            {
                "name": "store_writes",
                "status": "warn",
                "action": INSPECT,
                "detail": f"{core.stats.write_failures} writes refused, last: {core.stats.last_write_failure}; "
                + (
                    f"{unstored} messages wait in the host's list until a write succeeds"
                    if unstored
                    else "no message is waiting to be stored"
                ),
            }
        )
    if core.guard.failures:
        checks.append(
            {
                "name": "payload_writes",
                "status": "warn",
                "action": INSPECT,
                "detail": f"{core.guard.failures} payloads kept inline: their file write failed",
            }
        )
    return checks


SEVERITY = {"fail": 0, "warn": 1, "skip": 3, "ok": 4}
GUIDANCE_CHARS = 300


def lcm_doctor(ctx: Ctx, args: Args) -> dict[str, Any]:
    deep = args.flag("deep", False)
    report = doctor_report(
        ctx.core.store,
        deep=deep,
        config=ctx.core.config,
        config_problems=ctx.config_problems,
        live_sessions=live_session_ids(),
        semantic=ctx.core.semantic,
    )
    extra = _engine_checks(ctx)
    checks = list(report.get("checks", [])) + extra
    report["guidance"] = list(report.get("guidance", [])) + [
        f"{c['name']}: {c['action']} ({c['detail']})"
        for c in extra
        if c["status"] in ("warn", "fail")
    ]
    if any(c["status"] == "warn" for c in extra) and report.get("status") == "ok":
        report["status"] = "warn"
    report["binding"] = {
        "session_id": ctx.core.binding.session_id or None,
        "mode": ctx.core.binding.mode,
    }
    report["deep"] = deep
    # A capped answer drops passing checks first; guidance repeats each check's detail, so it is
    # clipped (the check itself carries the whole detail) and can never crowd the checks out.
    checks.sort(key=lambda c: SEVERITY.get(str(c.get("status")), 2))
    report["guidance"] = [
        g if len(g) <= GUIDANCE_CHARS else g[:GUIDANCE_CHARS] + "…" for g in report["guidance"]
    ]
    shown = fit(report, "checks", checks, ctx.cap)
    if shown < len(checks):
        report["checks_omitted"] = len(checks) - shown
    return report

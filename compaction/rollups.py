"""Temporal rollups: day, week and month summaries of a conversation, built off the turn.

A day rollup summarizes the leaf summaries whose time span lies in the day, and the day's other
messages (not summarized yet, or under a leaf that spans other days too), through the summary
route (the model's, else the offline extractive summarizer), within
LCM_ROLLUP_DAILY_TARGET_TOKENS (cut at _MAX_TOKENS). A week (ISO, from Monday) and a month are
summarized from their ready day rollups (cut at LCM_ROLLUP_AGGREGATE_MAX_TOKENS), once none of
their days waits for a build. Periods are UTC days, and also LCM_TIMEZONE days when set.

Staleness needs no hook in compaction: the job reads what was stored since its cursor (new
messages, new leaf summaries; storage/rollups.py) and marks the days their messages fall in,
and their week and month, stale. A late message (an older host time) re-stales its old day. A
build publishes only when no newer mark arrived meanwhile (the row's generation). A failed
build keeps its error and is retried after ``retry_after_s``; sources are never touched.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta, tzinfo
from datetime import time as clock
from typing import Any

from ..base.jobs import BackgroundJob, JobOwner, read_stats
from ..base.progress import Tick, quiet_tick
from ..base.records import Rollup
from ..base.redact import clip
from ..base.tokens import count_tokens
from ..config import LcmConfig
from ..store import Store
from .summarize import CallGuard, SourceItem, SummaryOutcome, build_routes, summarize

KINDS = ("day", "week", "month")
SummarizeFn = Callable[
    [Sequence[SourceItem], int, int, "str | None", "float | None"], SummaryOutcome
]
SCAN_ROWS = (
    5000  # rows read per scan (a scan is repeated until caught up, at most SCANS_PER_RUN times)
)
SCANS_PER_RUN = 20
DAY_LEAVES = 400  # sources of one day, at most (leaf summaries, then unsummarized messages)
DAY_MESSAGES = 400
MAX_SPAN_DAYS = 62  # a leaf spanning longer marks only its first and last 31 days


def zone(name: str) -> tzinfo:
    """The zone of a rollup row ("UTC" or an IANA name the settings validated)."""
    if not name or name == "UTC":
        return UTC
    import zoneinfo

    return zoneinfo.ZoneInfo(name)


def day_of(at: float, tz: str) -> date:
    """The local day of ``at``. Floored to the second first: fromtimestamp rounds to the nearest
    microsecond, which puts 23:59:59.9999998 in the next day (zone offsets are whole seconds)."""
    return datetime.fromtimestamp(math.floor(at), zone(tz)).date()


def period_start(kind: str, day: date) -> date:
    if kind == "week":
        return day - timedelta(days=day.weekday())
    if kind == "month":
        return day.replace(day=1)
    return day


def period_end(kind: str, start: date) -> date:
    """The first day after the period."""
    if kind == "week":
        return start + timedelta(days=7)
    if kind == "month":
        return (start.replace(day=28) + timedelta(days=4)).replace(day=1)
    return start + timedelta(days=1)


def span(kind: str, start: date, tz: str) -> tuple[float, float]:
    """The period as epoch seconds [since, until): local midnights, so a DST day is 23 or 25 hours."""
    where = zone(tz)
    first = datetime.combine(start, clock(), tzinfo=where).timestamp()
    return first, datetime.combine(period_end(kind, start), clock(), tzinfo=where).timestamp()


def days(first: date, last: date) -> Iterator[date]:
    while first <= last:
        yield first
        first += timedelta(days=1)


@dataclass(frozen=True)
class Built:
    """One build's outcome (for the CLI and tests)."""

    kind: str
    start: str
    tz: str
    status: str  # ready | failed | empty | waiting
    seconds: float
    tokens: int = 0
    error: str = ""


class Rollups(JobOwner):
    """The rollups of one store: stale marks, bounded builds, status. Inert when turned off."""

    def __init__(
        self,
        config: LcmConfig,
        store: Store,
        summarize: SummarizeFn,
        *,
        retry_after_s: float = 60.0,
    ) -> None:
        self.config, self.store, self.summarize = config, store, summarize
        self.retry_after_s = retry_after_s
        self.enabled = config.temporal_rollups_enabled
        self.zones = ("UTC",) + (
            (config.timezone,) if config.timezone and config.timezone != "UTC" else ()
        )
        self.job: RollupJob | None = None
        self.problem: str | None = None
        self.last_error: str | None = None
        self.builds = 0
        if self.enabled and not store.readonly:
            try:
                store.ensure_rollup_tables()
                self.job = RollupJob(self)
            except Exception as exc:  # noqa: BLE001 - rollups that cannot start are a status line
                self.problem = clip(f"{type(exc).__name__}: {exc}", 300)

    @property
    def zone_name(self) -> str:
        """The zone lcm_recent serves (LCM_TIMEZONE when set, else UTC)."""
        return self.zones[-1]

    # -- stale marks ---------------------------------------------------------------------------

    def _periods(
        self, conversation_id: int, first: float, last: float
    ) -> set[tuple[int, str, str, str]]:
        out: set[tuple[int, str, str, str]] = set()
        for tz in self.zones:
            lo, hi = day_of(first, tz), day_of(max(first, last), tz)
            found = list(days(lo, hi))
            if len(found) > MAX_SPAN_DAYS:
                found = found[: MAX_SPAN_DAYS // 2] + found[-MAX_SPAN_DAYS // 2 :]
            for day in found:
                for kind in KINDS:
                    out.add((conversation_id, kind, period_start(kind, day).isoformat(), tz))
        return out

    def scan(self) -> int:
        """Turn what was stored since the cursor into stale marks; returns the periods marked."""
        marked = 0
        for _ in range(SCANS_PER_RUN):
            message_after, summary_after = self.store.rollup_cursor()
            messages, nodes = self.store.rollup_changes(message_after, summary_after, SCAN_ROWS)
            if not messages and not nodes:
                break
            periods: set[tuple[int, str, str, str]] = set()
            for _id, conversation_id, at in messages:
                periods |= self._periods(conversation_id, at, at)
            leaves = [node[0] for node in nodes if node[4] == 0]
            for conversation_id, at in self.store.leaf_message_times(leaves):
                periods |= self._periods(
                    conversation_id, at, at
                )  # the days of its messages, no day between
            cursor = (
                messages[-1][0] if messages else message_after,
                nodes[-1][0] if nodes else summary_after,
            )
            marked += self.store.mark_rollups_stale(sorted(periods), cursor)
        return marked

    # -- builds --------------------------------------------------------------------------------

    def step(self, limit: int | None = None) -> list[Built]:
        """One bounded pass: stale marks, then at most LCM_ROLLUP_BUILDS_PER_PASS builds, days first."""
        self.scan()
        budget = self.config.rollup_builds_per_pass if limit is None else limit
        done: list[Built] = []
        for row in self.store.rollups_to_build(budget * 4 + 8, time.time() - self.retry_after_s):
            if len(done) >= budget:
                break
            built = self.build(row)
            if built.status != "waiting":
                done.append(built)
        return done

    def drain(self, max_passes: int = 1000, progress: Tick = quiet_tick) -> list[Built]:
        """Passes until nothing is left to build (the CLI's ``build``; tests); ``progress(built, None)``
        after each pass (each period commits on its own, so stopping between passes loses nothing)."""
        out: list[Built] = []
        for _ in range(max_passes):
            step = self.step()
            out.extend(step)
            progress(len(out), None)
            if not step:
                break
        return out

    def build(self, row: Rollup) -> Built:
        started = time.perf_counter()
        try:
            status, tokens = self._build(row)
        except Exception as exc:  # noqa: BLE001 - a failed build is kept on its row, the sources untouched
            error = clip(f"{type(exc).__name__}: {exc}", 300)
            self.last_error = f"{row.kind} {row.start} {row.tz}: {error}"
            self.store.finish_rollup(row.id, row.generation, "failed", error=error)
            return Built(
                row.kind, row.start, row.tz, "failed", time.perf_counter() - started, error=error
            )
        if status != "waiting":
            self.builds += 1
        return Built(row.kind, row.start, row.tz, status, time.perf_counter() - started, tokens)

    def _build(self, row: Rollup) -> tuple[str, int]:
        start = date.fromisoformat(row.start)
        since, until = span(row.kind, start, row.tz)
        if row.kind == "day":
            sources, ids, limit = (
                self._day_sources(row.conversation_id, since, until),
                [],
                self.config.rollup_daily_max_tokens,
            )
            ids = [int(label.split()[1]) for label, _ in sources if label.startswith("summary ")]
            target, depth = self.config.rollup_daily_target_tokens, 1
            focus = f"what happened on {row.start} ({row.tz})"
        else:
            last = (period_end(row.kind, start) - timedelta(days=1)).isoformat()
            rows = self.store.rollups_in([row.conversation_id], "day", row.tz, row.start, last)
            if any(r.status != "ready" for r in rows):
                return "waiting", 0  # its days first (they sort before it; a failed one is retried)
            ready = [r for r in rows if r.status == "ready"]
            sources = [(f"day {r.start}", r.content) for r in ready]
            ids = [r.id for r in ready]
            limit = target = self.config.rollup_aggregate_max_tokens
            depth, focus = 2, f"the {row.kind} starting {row.start} ({row.tz}), day by day"
        if not sources:
            self.store.drop_rollup(row.id, row.generation)
            return "empty", 0
        outcome = self.summarize(
            [SourceItem(label, text) for label, text in sources],
            depth,
            target,
            focus,
            time.monotonic() + max(30.0, self.config.summary_timeout_ms / 1000 * 2),
        )
        text = outcome.text.strip()
        if count_tokens(text) > limit:
            text = text[: limit * 3].rstrip() + "\n[cut at the rollup's token limit]"
        if not text:
            raise ValueError("the summarizer returned nothing")
        tokens = count_tokens(text)
        self.store.finish_rollup(
            row.id, row.generation, "ready", content=text, tokens=tokens, source_ids=ids
        )
        return "ready", tokens

    def _day_sources(
        self, conversation_id: int, since: float, until: float
    ) -> list[tuple[str, str]]:
        """The leaves lying wholly in the day, and the day's messages no such leaf covers (not yet
        summarized, or under a leaf that spans other days: its text would bring them in)."""
        leaves = self.store.leaves_within(conversation_id, since, until, DAY_LEAVES)
        raw = self.store.messages_outside_leaves(conversation_id, since, until, DAY_MESSAGES)
        out = [
            (f"summary {n.id} {_iso(n.earliest_at)}..{_iso(n.latest_at)}", n.content)
            for n in leaves
        ]
        out += [
            (f"message {m.id} {m.role} {_iso(m.created_at)}", m.content)
            for m in raw
            if m.content.strip()
        ]
        return out

    # -- reading -------------------------------------------------------------------------------

    def ready(
        self, conversation_ids: Sequence[int], kind: str, first: date, last: date
    ) -> list[Rollup]:
        """Rows of ``kind`` starting in [first, last] in the served zone (any status)."""
        if not self.enabled or not conversation_ids:
            return []
        return self.store.rollups_in(
            conversation_ids, kind, self.zone_name, first.isoformat(), last.isoformat()
        )

    def rebuild(self, kinds: Sequence[str], start: str | None) -> int:
        """Mark rows stale again (``/lcm rollups rebuild``); the job rebuilds them."""
        count = self.store.restale_rollups(kinds, start)
        self.after_ingest()
        return count

    def status(self) -> dict[str, Any]:
        """The status block: present when off too, so an operator sees why nothing is built."""
        info: dict[str, Any] = {
            "enabled": self.enabled,
            "timezone": self.config.timezone or "UTC",
            "zones": list(self.zones),
        }
        if not self.enabled:
            info["note"] = (
                "off: set LCM_TEMPORAL_ROLLUPS_ENABLED=true (lcm_recent reads leaf summaries meanwhile)"
            )
        if self.problem:
            info["problem"] = self.problem
        stats = read_stats(self.store.rollup_stats)
        info["tables"] = stats.get("tables", False)
        counts: dict[str, dict[str, int]] = stats.get("counts") or {}
        info["counts"] = {kind: counts.get(kind, {}) for kind in KINDS}
        oldest = stats.get("oldest_stale_at")
        info["oldest_stale_age_s"] = round(time.time() - oldest, 1) if oldest else None
        failure = stats.get("last_failure")
        info["last_error"] = self.last_error or (
            f"{failure[0]} {failure[1]} {failure[2]}: {failure[3]}" if failure else None
        )
        info["builds_this_process"] = self.builds
        info["job_errors"] = list(self.job.errors) if self.job is not None else []
        return info


def _iso(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%MZ")


class RollupJob(BackgroundJob):
    """The bounded pass after ingest and compaction, on its own thread (jobs.py). A pass that
    built its full share asks for another, so a backlog drains a few builds at a time."""

    name = "hermes-lcm-rollups"

    def __init__(self, rollups: Rollups) -> None:
        super().__init__()
        self.rollups = rollups

    def step(self) -> None:
        built = self.rollups.step()
        if len(built) >= self.rollups.config.rollup_builds_per_pass and not self._stopping:
            self._wake.set()


_NDAYS = re.compile(r"^(\d{1,4})\s*d(?:ays?)?$")


def plan(name: str | None, now: float, tz: str) -> tuple[str, date, date] | None:
    """What an lcm_recent period asks of rollups: ``(kind, first day, last day)`` in ``tz``;
    kind "day" covers today, yesterday, date:YYYY-MM-DD and Nd (a day at a time), "week" and
    "month" the current ISO week and month. None: a period rollups do not serve."""
    text = (name or "today").strip().lower()
    today = day_of(now, tz)
    if text == "today":
        return "day", today, today
    if text == "yesterday":
        return "day", today - timedelta(days=1), today - timedelta(days=1)
    if text in ("week", "this week"):
        return "week", period_start("week", today), today
    if text in ("month", "this month"):
        return "month", period_start("month", today), today
    found = _NDAYS.match(text)
    if found:
        count = min(max(1, int(found.group(1))), 62)
        return "day", today - timedelta(days=count - 1), today
    day = text[5:] if text.startswith("date:") else text
    try:
        parsed = date.fromisoformat(day) if re.fullmatch(r"\d{4}-\d{2}-\d{2}", day) else None
    except ValueError:
        return None
    return ("day", parsed, parsed) if parsed is not None else None


@dataclass(frozen=True)
class Served:
    """Ready rollups for a period, and the days (with their spans) that fall back to leaves."""

    rollups: tuple[Rollup, ...]
    fallback_days: tuple[date, ...]
    stale_days: tuple[date, ...]
    tz: str


def serve(
    rollups: Rollups, conversation_ids: Sequence[int], name: str | None, now: float
) -> Served | None:
    """The rollups lcm_recent shows: the period's own week/month rollup when ready, else its
    ready day rollups, each day without one (or with a stale one) falling back to leaves."""
    if not rollups.enabled or not conversation_ids:
        return None
    tz = rollups.zone_name
    wanted = plan(name, now, tz)
    if wanted is None:
        return None
    kind, first, last = wanted
    if kind != "day":
        whole = [
            r for r in rollups.ready(conversation_ids, kind, first, first) if r.status == "ready"
        ]
        if whole and len(whole) == len(set(conversation_ids) & {r.conversation_id for r in whole}):
            return Served(tuple(whole), (), (), tz)
    rows = rollups.ready(conversation_ids, "day", first, last)
    ready = tuple(r for r in rows if r.status == "ready")
    ready_days = {r.start for r in ready}
    stale = tuple(sorted({date.fromisoformat(r.start) for r in rows if r.status != "ready"}))
    fallback = tuple(d for d in days(first, last) if d.isoformat() not in ready_days)
    return Served(ready, fallback, stale, tz)


def standalone_summarizer(config: LcmConfig) -> SummarizeFn:
    """The summary route outside a host session (``lcm rollups build``): the configured model when
    LCM_SUMMARY_PROVIDER is openai or auto with a model, else the offline extractive summarizer."""
    provider = config.summary_provider
    routes = (
        []
        if provider not in ("auto", "openai") or not config.summary_model
        else build_routes(
            config.summary_model,
            config.summary_base_url,
            config.summary_api_key,
            list(config.fallback_models),
            None,
        )
    )
    guard = CallGuard(
        failure_threshold=config.summary_circuit_breaker_failure_threshold,
        cooldown_s=config.summary_circuit_breaker_cooldown_seconds,
        max_calls=config.summary_max_calls_per_hour,
        window_s=3600.0,
    )

    def run(
        sources: Sequence[SourceItem],
        depth: int,
        target: int,
        focus: str | None,
        deadline: float | None,
    ) -> SummaryOutcome:
        return summarize(
            sources,
            depth=depth,
            target_tokens=target,
            focus=focus,
            routes=routes,
            guard=guard,
            deadline=deadline,
            timeout_s=config.summary_timeout_ms / 1000,
        )

    return run


def command(rollups: Rollups, words: Sequence[str], progress: Tick = quiet_tick) -> dict[str, Any]:
    """``/lcm rollups`` and ``lcm rollups``: ``[status]``, ``build`` (one drain, timed), or
    ``rebuild day|week|month|all [YYYY-MM-DD]`` (marks them stale; the job or ``build`` rebuilds)."""
    verb = words[0] if words else "status"
    if verb == "status" and len(words) <= 1:
        return rollups.status()
    if not rollups.enabled:
        raise ValueError("temporal rollups are off: set LCM_TEMPORAL_ROLLUPS_ENABLED=true")
    if rollups.store.readonly:
        raise ValueError("the database is read-only here: nothing can be built")
    if verb == "build" and len(words) == 1:
        started = time.perf_counter()
        built = rollups.drain(progress=progress)
        ready = [b.seconds for b in built if b.status == "ready"]
        return {
            "built": [
                {
                    "kind": b.kind,
                    "start": b.start,
                    "tz": b.tz,
                    "status": b.status,
                    "tokens": b.tokens,
                    "seconds": round(b.seconds, 3),
                    **({"error": b.error} if b.error else {}),
                }
                for b in built
            ],
            "seconds": round(time.perf_counter() - started, 3),
            "mean_seconds_per_ready_build": round(sum(ready) / len(ready), 4) if ready else None,
            "status": rollups.status(),
        }
    if verb == "rebuild" and len(words) in (2, 3) and words[1] in (*KINDS, "all"):
        kinds = KINDS if words[1] == "all" else (words[1],)
        start: str | None = None
        if len(words) == 3:
            try:
                day = date.fromisoformat(words[2])
            except ValueError as exc:
                raise ValueError(f"not a date: {words[2]!r} (use YYYY-MM-DD)") from exc
            if len(kinds) > 1:
                raise ValueError("rebuild all takes no date; name day, week or month with a date")
            start = period_start(kinds[0], day).isoformat()
        return {
            "marked_stale": rollups.rebuild(kinds, start),
            "kinds": list(kinds),
            "start": start,
            "next": "the background job rebuilds them; `build` does it now",
        }
    raise ValueError("usage: rollups [status | build | rebuild day|week|month|all [YYYY-MM-DD]]")

"""The assertion sidecar for one store: extraction after each reply (off the turn), rebuild, and
lcm_query_state's read.

Off (``LCM_ASSERTIONS_ENABLED`` false) nothing is created and nothing runs. On, the sidecar's
tables are created on the first extraction; :class:`AssertionJob` reads the messages stored since
its cursor, a bounded batch per run on its own thread, and stores the facts the rules find
(assertion_rules.py), each citing its message's id and exact span. With
``LCM_ASSERTION_EXTRACTION_ENABLED`` the summary route is asked too, for at most
``LCM_ASSERTION_EXTRACTION_MAX_SOURCES_PER_PASS`` messages a run, each call within
``LCM_ASSERTION_EXTRACTION_TIMEOUT_SECONDS``; its answer is validated against the source text (a
quote that is not in the message, or a value that is not in its quote, is dropped). With
redaction on, a fact whose quote holds a secret is never stored (rows stored before redaction was
turned on may still hold one).
"""

from __future__ import annotations

import datetime as dt
import json
import time
from collections.abc import Callable, Sequence
from typing import Any

from ..base.jobs import BackgroundJob, JobOwner, read_stats
from ..base.redact import clip
from ..base.sensitive import Redactor
from ..compaction.routes import CallGuard, LlmRoute
from ..config import LcmConfig
from ..store import Store
from .assertion_rules import Candidate, DateLike, canonical, extract
from .timeexpr import resolve_dates

MAX_MESSAGE_CHARS = 20_000  # what one message is read as, at most
KINDS = ("event", "quantity", "state", "preference", "commitment")
DateResolver = Callable[[str, float], Sequence[DateLike]]


def _clamp(value: float, low: float, high: float) -> float:
    return max(low, min(high, value))


class Assertions(JobOwner):
    """The sidecar of one store; ``job`` is None when it is off or the store is read-only."""

    def __init__(
        self,
        config: LcmConfig,
        store: Store,
        redactor: Redactor | None = None,
        routes: Sequence[LlmRoute] = (),
        guard: CallGuard | None = None,
        dates: DateResolver | None = None,
    ) -> None:
        self.config, self.store, self.redactor = config, store, redactor
        tz = config.timezone
        self.routes, self.guard = list(routes), guard
        self.dates: DateResolver | None = dates or (lambda text, at: resolve_dates(text, at, tz))
        self.enabled = bool(config.assertions_enabled)
        self.refine = (
            self.enabled and bool(config.assertion_extraction_enabled) and bool(self.routes)
        )
        self.max_sources = int(_clamp(config.assertion_extraction_max_sources_per_pass, 1, 8))
        self.timeout_s = _clamp(config.assertion_extraction_timeout_seconds, 0.1, 120.0)
        self.job = AssertionJob(self) if self.enabled and not store.readonly else None
        self.extracted = 0
        self.refused = (
            0  # candidates dropped: a secret in the quote, or an LLM answer not in the text
        )
        self.llm_errors: list[str] = []

    # -- extraction ---------------------------------------------------------------------------

    def step(self, max_rows: int, deadline: float | None = None) -> int:
        """Extract from up to ``max_rows`` messages after the cursor until ``deadline``
        (monotonic); returns how many messages were read (0: nothing left)."""
        self.store.ensure_assertion_tables()
        after, read = self.store.assertion_cursor(), 0
        llm_budget = self.max_sources if self.refine else 0
        while read < max_rows and (deadline is None or time.monotonic() < deadline):
            rows = self.store.assertion_sources(after, min(64, max_rows - read), MAX_MESSAGE_CHARS)
            if not rows:
                break
            found: list[dict[str, Any]] = []
            for row in rows:
                found.extend(self._rows(row, self._candidates(row), "rules"))
                if llm_budget > 0 and row["text"].strip():
                    llm_budget -= 1
                    found.extend(self._rows(row, self._llm(row), "llm"))
                after = row["id"]
                read += 1
                if deadline is not None and time.monotonic() >= deadline:
                    break
            self.extracted += self.store.put_assertions(found, cursor=after)
        return read

    def rebuild(self, should_stop: Callable[[], bool] = lambda: False) -> dict[str, Any]:
        """Drop every assertion and extract again from the first message; the same store gives
        the same facts (idempotent). Returns the counts and the time taken."""
        started = time.monotonic()
        self.store.ensure_assertion_tables()
        dropped = self.store.clear_assertions()
        read = 0
        while not should_stop():
            count = self.step(1000)
            if count == 0:
                break
            read += count
        stats = self.store.assertion_stats()
        return {
            "dropped": dropped,
            "messages_read": read,
            "assertions": stats.get("total", 0),
            "seconds": round(time.monotonic() - started, 3),
        }

    def _candidates(self, row: dict[str, Any]) -> list[Candidate]:
        resolver = self.dates
        at = float(row["at"])
        return extract(
            row["text"], row["role"], (lambda text: resolver(text, at)) if resolver else None
        )

    def _rows(
        self, row: dict[str, Any], candidates: Sequence[Candidate], extractor: str
    ) -> list[dict[str, Any]]:
        out = []
        for cand in candidates:
            if self.redactor is not None and self.redactor.redact(cand.quote) != cand.quote:
                self.refused += 1  # a secret stored before redaction was on: never a fact
                continue
            at = float(row["at"])
            if cand.date is not None:
                at = dt.datetime(
                    cand.date.year, cand.date.month, cand.date.day, tzinfo=dt.UTC
                ).timestamp()
            out.append(
                {
                    **cand.as_row(),
                    "conversation_id": row["conversation_id"],
                    "store_id": row["id"],
                    "valid_from": at,
                    "extractor": extractor,
                }
            )
        return out

    def _llm(self, row: dict[str, Any]) -> list[Candidate]:
        """The summary route's facts for one message, each checked against the message's text."""
        if self.redactor is not None:
            text = row["text"]
            if self.redactor.redact(text) != text:
                return []  # a message holding a secret is not sent
        messages = [
            {"role": "system", "content": _PROMPT},
            {"role": "user", "content": row["text"][:8000]},
        ]
        for route in self.routes:
            if self.guard is not None and self.guard.acquire(route.name):
                continue
            try:
                raw = route.complete(messages, self.timeout_s)
            except Exception as exc:  # noqa: BLE001 - a failed call costs this message's refinement only
                if self.guard is not None:
                    self.guard.record_failure(route.name, clip(str(exc), 200))
                self.llm_errors = [
                    *self.llm_errors[-4:],
                    clip(f"{route.name}: {type(exc).__name__}: {exc}", 300),
                ]
                continue
            if self.guard is not None:
                self.guard.record_success(route.name)
            return self.validated(row["text"], raw)
        return []

    def validated(self, text: str, raw: str) -> list[Candidate]:
        """The model's answer, kept only where it holds: a JSON list of objects whose ``quote`` is
        in ``text`` and whose ``value`` is in that quote; anything else is counted and dropped."""
        try:
            start, end = raw.find("["), raw.rfind("]")
            items = json.loads(raw[start : end + 1]) if 0 <= start < end else []
        except ValueError:
            items = []
        out: list[Candidate] = []
        for item in items if isinstance(items, list) else []:
            if not isinstance(item, dict):
                continue
            kind, quote, value = (
                str(item.get("kind", "")),
                str(item.get("quote", "")),
                str(item.get("value", "")),
            )
            subject = canonical(str(item.get("subject", "")))
            at = text.find(quote) if quote else -1
            if (
                kind not in KINDS
                or at < 0
                or not value.strip()
                or value not in quote
                or not subject
                or len(quote) > 300
                or len(value) > 500
            ):
                self.refused += 1
                continue
            out.append(
                Candidate(
                    kind,
                    subject,
                    value.strip(),
                    str(item.get("unit", ""))[:20].lower(),
                    at,
                    at + len(quote),
                    quote,
                )
            )
            if len(out) >= 20:
                break
        return out

    # -- the read -------------------------------------------------------------------------------

    def query(
        self, reach: Sequence[int] | None, subject: str, kind: str, as_of: float | None, limit: int
    ) -> dict[str, Any]:
        """The latest value of a subject's state as of ``as_of`` and its history, newest first;
        two values holding from the same time are both shown as a conflict."""
        rows = self.store.assertions_for(reach, canonical(subject), kind, as_of, limit * 4)
        by_subject: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for row in rows:
            by_subject.setdefault((row["subject"], row["kind"]), []).append(row)
        states = []
        for (subj, knd), history in list(by_subject.items())[:limit]:
            latest = history[0]
            tied = [h for h in history if h["valid_from"] == latest["valid_from"]]
            conflict = len({h["value"].lower() for h in tied}) > 1
            states.append(
                {
                    "subject": subj,
                    "kind": knd,
                    "value": latest["value"],
                    "unit": latest["unit"],
                    "conflict": conflict,
                    "conflicting": [_cite(h) for h in tied] if conflict else [],
                    "current": _cite(latest),
                    "history": [_cite(h) for h in history[:limit]],
                }
            )
        return {"states": states, "count": len(states)}

    def status(self) -> dict[str, Any]:
        if not self.enabled:
            return {"enabled": False, "note": "off (LCM_ASSERTIONS_ENABLED)"}
        info: dict[str, Any] = {
            "enabled": True,
            "llm_refinement": self.refine,
            "extracted_this_process": self.extracted,
            "refused_this_process": self.refused,
            "llm_errors": self.llm_errors,
        }
        if (job := self.job_view()) is not None:
            info["job"] = job
        info["sidecar"] = read_stats(self.store.assertion_stats)
        return info


def _cite(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "value": row["value"],
        "unit": row["unit"],
        "store_id": row["store_id"],
        "span": [row["span_start"], row["span_end"]],
        "quote": row["quote"],
        "time": dt.datetime.fromtimestamp(row["valid_from"], dt.UTC).isoformat(),
        "date": row["date_text"] or None,
        "extractor": row["extractor"],
        "conversation_id": row["conversation_id"],
    }


_PROMPT = (
    "Extract typed facts stated in the user's text. Answer only with a JSON list of objects "
    '{"subject", "kind", "value", "unit", "quote"}: kind is one of event, quantity, state, preference, '
    "commitment; quote is copied exactly from the text (one sentence); value is copied exactly from the "
    "quote. Leave out questions, hypotheticals, negations and code. No facts: []."
)


class AssertionJob(BackgroundJob):
    """The bounded extraction after each reply, on a thread of its own (jobs.py): a turn only
    requests it. A run reads at most ``ROWS_PER_RUN`` messages within ``SECONDS_PER_RUN``, then
    requests itself again while messages are left, so a backlog is worked through in bounded
    runs while the chat goes on."""

    name = "hermes-lcm-assertions"
    ROWS_PER_RUN = 500
    SECONDS_PER_RUN = 2.0

    def __init__(self, sidecar: Assertions) -> None:
        super().__init__()
        self.sidecar = sidecar

    def step(self) -> None:
        deadline = time.monotonic() + self.SECONDS_PER_RUN
        read = self.sidecar.step(self.ROWS_PER_RUN, deadline)
        more = read >= self.ROWS_PER_RUN or (read > 0 and time.monotonic() >= deadline)
        if more and not self._stopping:
            self._wake.set()  # more is waiting: one more bounded run

"""lcm_retrieve: a bounded retrieval controller for one question.

The model asks one question; the controller runs at most three searches or expansions the
question's plan calls for (the search layer directly, not the JSON tools), keeps only the exact
store ids those calls observed, builds the evidence pack from them (evidence.pack.build_pack),
and stops as soon as the pack says it is sufficient, or at the budget. The answer is the pack,
the calls made, and what is still missing. It writes no prose and answers nothing itself: the
model reads the pack and answers (or says the evidence does not determine it).

The plan, in order, each step only while the pack is not sufficient:

* ``lcm_recent``: when the question names a period ("last week", "in May 2023", "yesterday";
  timeexpr), the question's words searched within that period over the caller's reach;
* ``lcm_grep``: the question's words in the current conversation (what lcm_grep searches);
* ``lcm_recall``: the same over every conversation in the caller's reach (what lcm_recall sees);
* ``lcm_expand``: the neighbours of the best hits so far (the turn before and after: a question
  and its answer are usually adjacent) and the source messages of a summary hit.

A question about two people ("Nate and Joanna") searches once for each in the steps that search
(``part_queries``), and takes the hits in turn from each.

Bounds (LCM-X's): ``MAX_CALLS`` calls, ``MAX_REFS`` candidate refs, ``MAX_CONTEXT_TOKENS`` of
hit text read; one reading budget for all the packs it builds (limits.py), so a line is read
once, at most ``limits.MAX_CALL_CHARS`` in all, and the answer's ``limits`` names what was left
unread. Reach: every search is scoped to the caller's conversations (``reach``); the pack
hydrates only rows in reach, so no other owner's row is read or reported.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cache
from itertools import zip_longest
from typing import Any

from ..base.tokens import count_tokens
from ..dag import Dag
from ..search.query import Query, build_query
from ..search.searcher import Filters, Hit, Scope, Searcher, SearchRequest
from ..search.visible import Visible
from ..store import Store, StoreError
from .limits import ReadingBudget
from .pack import build_pack
from .timeexpr import resolve_dates

MAX_CALLS = 3
MAX_REFS = 40
MAX_CONTEXT_TOKENS = 7500
PACK_TOKENS = 1500
HITS_PER_CALL = 20
GROW_TRIES = 4  # packs built to add refs past the estimate (``_pack``)
NEIGHBOURS = 1  # turns either side of a hit that lcm_expand adds
STEPS = ("lcm_recent", "lcm_grep", "lcm_recall", "lcm_expand")


@dataclass(frozen=True)
class Call:
    """One call the controller made: what it asked and the refs it observed (new ones only)."""

    tool: str
    args: dict[str, Any]
    refs: tuple[int, ...]
    hits: int

    def as_dict(self) -> dict[str, Any]:
        return {
            "tool": self.tool,
            "args": self.args,
            "hits": self.hits,
            "new_refs": list(self.refs),
        }


@dataclass(frozen=True)
class Retrieved:
    """The controller's answer: the pack, the calls, why it stopped, and what is missing."""

    question: str
    pack: Any
    calls: tuple[Call, ...]
    refs: tuple[int, ...]
    context_tokens: int
    stopped: str  # sufficient | budget | exhausted | nothing
    missing_terms: tuple[str, ...] = ()
    seconds: float = 0.0

    @property
    def sufficient(self) -> bool:
        return self.stopped == "sufficient"

    def as_dict(self) -> dict[str, Any]:
        pack = self.pack.as_dict()
        limits = pack.pop("limits", None)  # what a work limit left unread, said once at the top
        missing: dict[str, Any] = {"refs": pack.get("missing", [])}
        if self.missing_terms:
            missing["terms_not_found"] = list(self.missing_terms)
        return {
            "question": self.question,
            "status": "sufficient" if self.sufficient else "insufficient",
            "stopped": self.stopped,
            "pack": pack,
            "calls": [c.as_dict() for c in self.calls],
            "missing": missing,
            "budget": {
                "calls": f"{len(self.calls)}/{MAX_CALLS}",
                "candidate_refs": f"{len(self.refs)}/{MAX_REFS}",
                "context_tokens": f"{self.context_tokens}/{MAX_CONTEXT_TOKENS}",
            },
            "next": "answer from the pack's lines only, citing store_ids; if it is insufficient say what is "
            "missing, or lcm_expand / lcm_grep for more",
            **({"limits": limits} if limits else {}),
        }


def is_sufficient(pack: Any) -> bool:
    """The pack's own verdict for the question (evidence.pack), read whatever its shape."""
    verdict = pack.as_dict().get("sufficiency")
    if isinstance(verdict, dict):
        verdict = verdict.get("status", verdict.get("sufficient"))
    return verdict is True or verdict == "sufficient"


@dataclass
class _Run:
    store: Store
    dag: Dag
    question: str
    query: Query
    conversation_id: int | None
    reach: tuple[int, ...] | None
    visible: Visible | None
    novel_only: bool = False  # leave out the rows the prompt already shows (the pre-answer brief)
    exclude: frozenset[int] = (
        frozenset()
    )  # store ids shown elsewhere already (proactive recall's block)
    pool: Sequence[Hit] | None = (
        None  # the lcm_recall step's hits when a search of the same scope ran already
    )
    refs: list[int] = field(default_factory=list)
    best: list[Hit] = field(default_factory=list)
    context_tokens: int = 0
    parts: list[Query] = field(default_factory=list)  # what each search asks (``part_queries``)

    def __post_init__(self) -> None:
        self.parts = part_queries(self.question, self.query)  # once, for every step that searches

    def search(self, scope: Scope, filters: Filters | None = None) -> list[Hit]:
        """The question's hits; a question about two people ("what do Nate and Joanna both
        like") is searched once for each, without the other's name, and the hits are taken in
        turn from each: one search ranks the turns naming both first, which are rarely where
        each said what they like."""
        found = [self._search(q, scope, filters) for q in self.parts]
        if len(found) == 1:
            return found[0]
        merged: dict[tuple[str, int], Hit] = {}
        for row in zip_longest(*found):
            for hit in row:
                if hit is not None:
                    merged.setdefault((hit.kind, hit.id), hit)
        return list(merged.values())[:HITS_PER_CALL]

    def _search(self, query: Query, scope: Scope, filters: Filters | None) -> list[Hit]:
        request = SearchRequest(
            query,
            scope,
            filters or Filters(),
            "relevance",
            HITS_PER_CALL,
            visible=self.visible,
            rank_visible=not self.novel_only,
        )
        try:
            hits = Searcher(self.store, self.dag, request).page().hits
        except StoreError:
            return []
        asked = _plain(self.question)
        return [
            h for h in hits if _plain(h.text) != asked
        ]  # the question itself, stored: no evidence

    def keep(self, hits: Sequence[Hit], ids: Sequence[int] = ()) -> tuple[int, ...]:
        """Observed refs within the bounds: message hits (and ``ids`` read by an expansion)."""
        new: list[int] = []
        for hit in hits:
            if self.context_tokens >= MAX_CONTEXT_TOKENS:
                break
            if (self.novel_only and hit.in_context) or (
                hit.kind == "message" and hit.id in self.exclude
            ):
                continue
            self.context_tokens += count_tokens(hit.text)
            if hit.kind == "message" and hit.id not in self.refs and len(self.refs) < MAX_REFS:
                self.refs.append(hit.id)
                new.append(hit.id)
                self.best.append(hit)
            elif hit.kind == "summary":
                self.best.append(hit)
        for ref in ids:
            if ref in self.exclude:
                continue
            if (
                ref not in self.refs
                and len(self.refs) < MAX_REFS
                and self.context_tokens < MAX_CONTEXT_TOKENS
            ):
                self.refs.append(ref)
                new.append(ref)
        return tuple(new)

    def expand(self) -> tuple[list[int], int]:
        """The neighbours of the best message hits and the sources of the best summary hit."""
        ids: list[int] = []
        read = 0
        for hit in self.best[:4]:
            if hit.kind == "summary" and hit.node is not None:
                rows = self.store.summary_sources(hit.node.id, 0, 6)
            elif hit.kind == "message":
                rows = self.store.messages_between(
                    hit.conversation_id, hit.seq - NEIGHBOURS, hit.seq + NEIGHBOURS
                )
            else:
                continue
            for row in rows:
                if self.reach is None or row.conversation_id in (*self.reach, self.conversation_id):
                    read += (
                        row.tokens
                    )  # counted at ingest: recounting a 300 KB row costs more than a retrieval may
                    ids.append(row.id)
        self.context_tokens += read
        return ids, read


_TWO_PEOPLE = re.compile(r"\b([A-Z][a-z]+)\s+and\s+([A-Z][a-z]+)\b")


def part_queries(question: str, query: Query) -> list[Query]:
    """One query per person when the question names two joined by "and" (capitalised words,
    not at its start), else the question's own."""
    found = _TWO_PEOPLE.search(question)
    if found is None or found.start() == 0:
        return [query]
    parts = []
    for keep, drop in ((found.group(1), found.group(2)), (found.group(2), found.group(1))):
        text = question[: found.start()] + keep + question[found.end() :]
        part = build_query(text.replace(drop, " "))
        if not part.empty:
            parts.append(part)
    return parts or [query]


@cache
def line_overhead() -> int:
    """The fewest tokens a pack line costs besides its text: one with a one-digit ref, the
    shortest role, no session id (the line before named it) and no dates. Counted, not guessed,
    and lazily (the tokenizer is not loaded at import)."""
    bare = {"ref": "1", "store_id": 1, "role": "user", "at": "2023-01-01T00:00:00Z", "text": ""}
    return count_tokens(json.dumps(bare)) + 1


def fitting(store: Store, refs: Sequence[int], budget_tokens: int) -> list[int]:
    """The refs, best first, whose whole lines may fit the pack's budget together (a long one
    that does not fit is skipped for shorter ones after it). The pack orders its lines by time and
    cuts at the budget, so handing it everything would keep the oldest lines, not the best. Each
    line is costed at its stored tokens plus ``line_overhead``: an estimate, off either way (a
    session id or dates add, the stored count's message framing is not in a line), which
    ``_pack`` corrects by growing or bisecting. A guessed 60 tokens a line left a sixth of the
    budget unused on short turns."""
    sizes = {row.id: row.tokens for row in store.messages_by_ids(list(refs))}
    chosen: list[int] = []
    used = 0
    overhead = line_overhead()
    for ref in refs:
        cost = sizes.get(ref, 0) + overhead
        if used + cost <= budget_tokens or not chosen:
            chosen.append(ref)
            used += cost
    return chosen


def _pack(
    store: Store,
    refs: Sequence[int],
    reach: tuple[int, ...] | None,
    budget_tokens: int,
    question: str,
    tz: str,
    work: ReadingBudget,
) -> Any:
    """The pack of the best refs that fit whole: the estimate first; when it fits, the next best
    refs while they too fit whole (a line's session and dates make the estimate wrong either
    way); when it does not, the longest run of the best refs whose pack leaves none out. The run
    is found by bisection (a longer run leaves out at least as much), so at most
    ``log2(MAX_REFS) + 2`` packs are built, or ``GROW_TRIES`` + 1 when growing, not one per
    ref; ``work`` is the call's reading, so a line is read and counted once however many packs
    hold it."""

    def build(run: Sequence[int]) -> Any:
        return build_pack(
            store, run, reach, budget_tokens=budget_tokens, question=question, tz=tz, work=work
        )

    chosen = fitting(store, refs, budget_tokens)
    pack = build(chosen)
    if not pack.omitted:
        return _grown(build, refs, chosen, pack, budget_tokens)
    if len(chosen) <= 1:
        return pack
    built: dict[int, Any] = {}
    low, high, best = 1, len(chosen) - 1, 1  # the longest fitting run is in [low, high]
    while low <= high:
        mid = (low + high) // 2
        built[mid] = build(chosen[:mid])
        if built[mid].omitted:
            high = mid - 1
        else:
            best, low = mid, mid + 1
    return built[best] if best in built else build(chosen[:best])


def _grown(
    build: Callable[[Sequence[int]], Any],
    refs: Sequence[int],
    chosen: list[int],
    pack: Any,
    budget_tokens: int,
) -> Any:
    """The pack with the next best refs added while each fits whole (nothing left out, no line
    cut that was whole): an estimate that was too high left room a line would have used."""
    taken = set(chosen)
    for ref in [ref for ref in refs if ref not in taken][:GROW_TRIES]:
        if budget_tokens - pack.used_tokens < line_overhead():
            break
        wider = build([*chosen, ref])
        if wider.omitted or _cut_lines(wider) > _cut_lines(pack):
            break
        chosen, pack = [*chosen, ref], wider
    return pack


def _cut_lines(pack: Any) -> int:
    return sum(1 for line in pack.lines if line.get("truncated"))


def period_of(question: str, anchor: float, tz: str = "") -> tuple[str, float, float] | None:
    """The first period the question names that is not a bare year (a year bounds too little),
    as epoch bounds of its days in UTC; with a timezone a day wider each side (its offset, at most
    14 hours, is not applied here: a little more history is searched, never less)."""
    for mention in resolve_dates(question, anchor, tz):
        if mention.relative or mention.granularity != "year":
            since = datetime.combine(mention.first, datetime.min.time(), UTC).timestamp()
            until = datetime.combine(mention.last, datetime.min.time(), UTC).timestamp() + 86400
            slack = 86400 if tz else 0
            return mention.phrase, since - slack, until + slack
    return None


def retrieve(
    store: Store,
    dag: Dag,
    question: str,
    *,
    conversation_id: int | None,
    reach: tuple[int, ...] | None,
    visible: Visible | None = None,
    budget_tokens: int = PACK_TOKENS,
    anchor: float | None = None,
    steps: Sequence[str] = STEPS,
    max_calls: int = MAX_CALLS,
    tz: str = "",
    novel_only: bool = False,
    exclude: frozenset[int] = frozenset(),
    pool: Sequence[Hit] | None = None,
) -> Retrieved:
    """Run the plan for ``question`` within the bounds; see the module docstring."""
    started = time.perf_counter()
    work = ReadingBudget()  # the call's reading, shared by every pack it builds (limits.py)
    query = build_query(question)
    run = _Run(
        store, dag, question, query, conversation_id, reach, visible, novel_only, exclude, pool
    )
    calls: list[Call] = []
    pack = build_pack(
        store, [], reach, budget_tokens=budget_tokens, question=question, tz=tz, work=work
    )
    if query.empty:
        return Retrieved(
            question, pack, (), (), 0, "nothing", seconds=time.perf_counter() - started
        )
    period = period_of(question, anchor if anchor is not None else time.time(), tz)
    stopped = "exhausted"
    for step in steps:
        if (
            len(calls) >= max_calls
            or len(run.refs) >= MAX_REFS
            or run.context_tokens >= MAX_CONTEXT_TOKENS
        ):
            stopped = "budget"
            break
        call = _step(run, step, period)
        if call is None:
            continue
        calls.append(call)
        if call.refs:
            pack = _pack(store, run.refs, reach, budget_tokens, question, tz, work)
        if is_sufficient(pack):
            stopped = "sufficient"
            break
    else:
        if len(calls) >= max_calls and not is_sufficient(pack):
            stopped = "budget"
    shown = " ".join(str(line.get("text", "")) for line in pack.as_dict().get("lines", [])).lower()
    missing = tuple(t.text for t in query.parts if not all(w in shown for w in t.words))
    return Retrieved(
        question,
        pack,
        tuple(calls),
        tuple(run.refs),
        run.context_tokens,
        stopped,
        missing,
        time.perf_counter() - started,
    )


def _step(run: _Run, step: str, period: tuple[str, float, float] | None) -> Call | None:
    """One call of the plan, or None when it does not apply to this question / caller."""
    words = " ".join(t.text for t in run.query.parts)
    if step == "lcm_recent":
        if period is None:
            return None
        phrase, since, until = period
        hits = run.search(Scope("all", conversations=run.reach), Filters(since=since, until=until))
        return Call(step, {"period": phrase, "query": words}, run.keep(hits), len(hits))
    if step == "lcm_grep":
        if run.conversation_id is None:
            return None
        hits = run.search(Scope("current", run.conversation_id))
        return Call(step, {"query": words, "session_scope": "current"}, run.keep(hits), len(hits))
    if step == "lcm_recall":
        asked = _plain(run.question)
        hits = (
            [h for h in run.pool if _plain(h.text) != asked]
            if run.pool is not None
            else run.search(Scope("all", conversations=run.reach))
        )
        return Call(step, {"query": words}, run.keep(hits), len(hits))
    if step == "lcm_expand":
        if not run.best:
            return None
        ids, _ = run.expand()
        return Call(step, {"around": [h.id for h in run.best[:4]]}, run.keep([], ids), len(ids))
    raise ValueError(f"unknown step {step!r}")


def _plain(text: str) -> str:
    return " ".join(text.split()).casefold()

"""Shared pieces of the benchmarks: seeded synthetic histories, engines in temp dirs,
timing statistics, result files and the docs/benchmarks.md renderer.

Every benchmark is one command (``python bench/<name>.py``). Each writes its figures to
``bench/results/<name>.json`` (small, committed) and then re-renders docs/benchmarks.md from
all result files, so the document always shows the latest run of every benchmark.
Large histories are generated here, deterministically from a seed, into a temp dir; nothing
large is ever written into the repository.
"""

from __future__ import annotations

import atexit
import copy
import json
import os
import platform
import random
import shlex
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from report import (
    RESULTS,
    render_doc,
)  # sibling module: bench/ is on sys.path when a bench script runs

from hermes_lcm.core import LcmCore
from hermes_lcm.engine import LcmEngine

ROOT = Path(__file__).resolve().parents[1]

# ---------------------------------------------------------------------------- synthetic histories


def _words(text: str) -> list[str]:
    return text.split()


_COMMON = _words(
    "file error test function value config database query result update change check build run "
    "server request response model token session message user data code module import output input "
    "path line issue fix version install package option setting default cache index table column "
    "process thread memory timeout retry connection client api call return type string number list"
)
_PROSE = _words(
    "we should probably look again at how this works before merging because the last attempt broke "
    "something subtle in production and nobody noticed until the nightly job failed with a strange "
    "message about permissions so please keep the old behaviour behind a flag while testing the new "
    "path and write down what you find in the notes for tomorrow morning when the team meets again "
    "decided agreed migration rollback deploy staging latency throughput benchmark profile regression "
    "customer invoice billing report dashboard metric alert incident postmortem schedule deadline"
)
_MODULES = _words(
    "auth billing search storage scheduler gateway payments ingest export metrics worker"
)
_VERBS = _words("load save parse render fetch validate compute merge flush resolve")
_NOUNS = _words("user token invoice session record batch index cursor payload config")


def _identifiers(rng: random.Random, n: int) -> list[str]:
    out = []
    for _ in range(n):
        mod, verb, noun = rng.choice(_MODULES), rng.choice(_VERBS), rng.choice(_NOUNS)
        out.append(
            rng.choice(
                (
                    f"src/{mod}/{noun}_{verb}.py",
                    f"{verb}{noun.capitalize()}ById",
                    f"{mod.upper()}_{noun.upper()}_LIMIT",
                    f"{mod}.{verb}_{noun}",
                    f"tests/test_{mod}_{noun}.py",
                )
            )
        )
    return sorted(set(out))


class History:
    """A deterministic coding-agent history: user asks, tool calls, tool results, replies.

    Sentences come from a seeded pool (fast to compose at a million messages), words follow a
    Zipf-like skew (so common terms are really common), identifiers and paths recur, and
    ``rare_terms`` are planted a few times each at fixed positions. Every message carries its
    index, so no two messages are identical.
    """

    RARE_PER_TERM = 3

    def __init__(self, seed: int = 1, pool: int = 4000) -> None:
        rng = random.Random(seed)
        self.seed = seed
        self.identifiers = _identifiers(rng, 400)
        words = _COMMON + _PROSE
        weights = [1.0 / (i + 1) ** 0.8 for i in range(len(words))]
        self.sentences = []
        for _ in range(pool):
            n = rng.randint(6, 16)
            picked = rng.choices(words, weights, k=n)
            if rng.random() < 0.35:
                picked.insert(rng.randrange(len(picked)), rng.choice(self.identifiers))
            self.sentences.append(" ".join(picked).capitalize() + ".")
        self.rare_terms = [f"zq{rng.randrange(16**6):06x}rare" for _ in range(64)]

    def _text(self, i: int, lo: int, hi: int) -> str:
        rng = random.Random(self.seed * 1_000_003 + i)
        text = " ".join(rng.choice(self.sentences) for _ in range(rng.randint(lo, hi)))
        term = self.rare_at(i)
        return f"{text} {term}" if term else text

    def rare_at(self, i: int) -> str | None:
        """Rare term planted in message ``i``: each term in RARE_PER_TERM messages, spread out."""
        if i % 996 != 0:  # 996 is a multiple of 4: always a user message
            return None
        slot = i // 996
        return self.rare_terms[(slot // self.RARE_PER_TERM) % len(self.rare_terms)]

    def message(self, i: int) -> dict[str, Any]:
        """Message ``i`` of the history; turns are 4 messages: ask, call, result, reply."""
        turn, kind = divmod(i, 4)
        if kind == 0:
            return {"role": "user", "content": f"[{i}] " + self._text(i, 1, 4)}
        call_id = f"call_{turn}"
        if kind == 1:
            rng = random.Random(i)
            args = json.dumps(
                {"path": rng.choice(self.identifiers), "pattern": rng.choice(_COMMON)}
            )
            return {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": "search_files", "arguments": args},
                    }
                ],
            }
        if kind == 2:
            return {
                "role": "tool",
                "tool_call_id": call_id,
                "name": "search_files",
                "content": f"[{i}] " + self._text(i, 3, 10),
            }
        return {"role": "assistant", "content": f"[{i}] " + self._text(i, 2, 6)}

    def messages(self, start: int, stop: int) -> list[dict[str, Any]]:
        return [self.message(i) for i in range(start, stop)]

    def raw_bytes(self, m: dict[str, Any]) -> int:
        """Bytes of the text a message carries (content plus tool-call JSON)."""
        size = len(str(m.get("content") or "").encode("utf-8"))
        if m.get("tool_calls"):
            size += len(json.dumps(m["tool_calls"], ensure_ascii=False).encode("utf-8"))
        return size


# ---------------------------------------------------------------------------- engines

ENV_OFFLINE = {"LCM_SUMMARY_PROVIDER": "extractive"}


def make_engine(
    home: Path,
    session: str = "bench",
    *,
    context_length: int = 128_000,
    extra_env: dict[str, str] | None = None,
) -> LcmEngine:
    """An engine copy the way the host makes one, bound to ``session`` in ``home``."""
    env = {"HERMES_HOME": str(home), **ENV_OFFLINE, **(extra_env or {})}
    engine = copy.deepcopy(LcmEngine(env=env))
    engine.update_model("bench-model", context_length)
    engine.on_session_start(session, hermes_home=str(home), platform="cli")
    return engine


def core_of(engine: LcmEngine) -> LcmCore:
    core = engine.ensure_core()
    assert core is not None, engine.startup_error
    return core


OVERLAP = 8


def bulk_ingest(
    core: LcmCore,
    history: History,
    start: int,
    stop: int,
    batch: int = 1000,
    compact_every: int = 0,
    budget: Any = None,
) -> float:
    """Append messages [start, stop) in batches through the engine's own ingest; seconds spent in the engine.

    Generating the synthetic messages is not timed. Like a host's or importer's list, each batch
    starts with the newest stored messages, so ingest anchors on the stored tail. With
    ``compact_every`` the conversation is compacted after that many messages, so a large history
    looks like one that grew turn by turn: summaries in the DAG, the frontier near the end.
    """
    spent = 0.0
    since = 0
    for lo in range(start, stop, batch):
        hi = min(stop, lo + batch)
        messages = history.messages(max(0, lo - OVERLAP), hi)
        t0 = time.perf_counter()
        stored = core.ingest(messages, source="bench")
        since += hi - lo
        if compact_every and since >= compact_every:
            core.compact(budget)
            since = 0
        spent += time.perf_counter() - t0
        assert stored == hi - lo, f"batch {lo}:{hi} stored {stored}"
    return spent


_made: list[Path] = []


def temp_dir(prefix: str) -> Path:
    """A scratch directory (under $LCM_BENCH_TMP if set), removed at exit unless LCM_BENCH_KEEP=1."""
    base = os.environ.get("LCM_BENCH_TMP") or None
    path = Path(tempfile.mkdtemp(prefix=f"lcm-bench-{prefix}-", dir=base))
    if not _made:
        atexit.register(_cleanup)
    _made.append(path)
    return path


def _cleanup() -> None:
    if os.environ.get("LCM_BENCH_KEEP") == "1":
        return
    from hermes_lcm.store import close_all

    close_all()
    for path in _made:
        shutil.rmtree(path, ignore_errors=True)


# ---------------------------------------------------------------------------- timing


@dataclass(frozen=True)
class Timing:
    median_ms: float
    p90_ms: float
    n: int

    def as_dict(self) -> dict[str, float]:
        return {"median_ms": round(self.median_ms, 3), "p90_ms": round(self.p90_ms, 3), "n": self.n}


def summarize_ms(samples: Sequence[float]) -> Timing:
    ordered = sorted(samples)
    p90 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.9))]
    return Timing(statistics.median(ordered) * 1000, p90 * 1000, len(ordered))


def time_calls(fn: Callable[[], Any], repeat: int, warmup: int = 2) -> Timing:
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return summarize_ms(samples)


def file_size(path: str | Path) -> int:
    """Bytes of a database file after folding the WAL back in."""
    con = sqlite3.connect(str(path))
    try:
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        con.close()
    return Path(path).stat().st_size


# ---------------------------------------------------------------------------- machine and results


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return (
        f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"SQLite {sqlite3.sqlite_version}, {platform.system()} {platform.release()}"
    )


def git_rev() -> str:
    try:
        out = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def command() -> str:
    """The command line that ran this benchmark, as the reader would type it from the repo root
    (the result's name is not always its script's: ``recall.py --hybrid`` writes recall_hybrid)."""
    script = Path(sys.argv[0]).resolve()
    shown = script.relative_to(ROOT) if script.is_relative_to(ROOT) else Path(script.name)
    return " ".join(["python", shown.as_posix(), *(shlex.quote(a) for a in sys.argv[1:])])


def save_result(name: str, rows: list[dict[str, Any]], details: dict[str, Any]) -> Path:
    """Write ``bench/results/<name>.json`` and re-render docs/benchmarks.md.

    ``rows`` are table rows: target, ours, reference, (optional) verdict.
    """
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    if "notes" not in details and path.exists():
        # the notes written beside a result (how it was tuned, what was tried) outlive a rerun
        previous = json.loads(path.read_text(encoding="utf-8")).get("details", {})
        if isinstance(previous, dict) and previous.get("notes"):
            details = {**details, "notes": previous["notes"]}
    payload = {
        "name": name,
        "date": time.strftime("%Y-%m-%d"),
        "machine": machine(),
        "commit": git_rev(),
        "command": command(),
        "rows": rows,
        "details": details,
    }
    path.write_text(json.dumps(payload, indent=2, sort_keys=False) + "\n", encoding="utf-8")
    render_doc()
    return path


def print_table(rows: list[dict[str, Any]]) -> None:
    for row in rows:
        verdict = f"  [{row['verdict']}]" if row.get("verdict") else ""
        print(
            f"- {row['target']}: {row['ours']}  (reference: {row.get('reference', '-')}){verdict}"
        )

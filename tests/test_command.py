"""``/lcm`` through the handler the host calls, acting on live engines over real databases.

The tests marked ``both_backends`` run on a SQLite file and on PostgreSQL (pg_dump on PATH for
the backups its writing commands take); FTS5 repair and a SQLite backup copy stay on SQLite
(PostgreSQL's are in tests/test_command_pg.py)."""

from __future__ import annotations

import gc
import io
import json
import os
import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest
import yaml

import hermes_lcm
from hermes_lcm.base.registry import live_engines
from hermes_lcm.command import handle_command

from .backends import raw_sql
from .conftest import new_engine
from .convo import conversation, host_run

NO_COMPACTION = 10**9


WHERE: dict[
    str, str
] = {}  # the running test's database settings (empty: a SQLite file in its home)


@pytest.fixture(autouse=True)
def clean_registry(clean_home, backend_env, monkeypatch):
    """No live engine from another test; the template reads this test's home (and its database)."""
    WHERE.clear()
    WHERE.update(backend_env)
    if backend_env:
        from .pgserver import binaries

        monkeypatch.setenv("LCM_DATABASE_URL", backend_env["LCM_DATABASE_URL"])
        monkeypatch.setenv("PATH", f"{binaries()}{os.pathsep}{os.environ.get('PATH', '')}")
    yield clean_home
    WHERE.clear()


def lcm(args: str) -> dict[str, Any]:
    """Run ``/lcm <args> --json`` and parse the answer (fails on an error text)."""
    text = handle_command(f"{args} --json")
    assert not text.startswith("hermes-lcm:"), text
    return json.loads(text)


def engine_with_history(
    home: Path, turns: int = 20, threshold: int = NO_COMPACTION, session: str = "s1", **env: str
):
    engine = new_engine(home, threshold, session, LCM_ENABLE_SLASH_COMMAND="1", **WHERE, **env)
    history, _ = host_run(engine, list(conversation(5, turns)))
    return engine, history


class StubContext:
    """Stands in for the host's PluginContext: records what register() hands over."""

    def __init__(self) -> None:
        self.commands: dict[str, Any] = {}
        self.engines: list[Any] = []
        self.hooks: list[str] = []
        self.hints: dict[str, tuple[str, str]] = {}

    def register_context_engine(self, engine: Any) -> None:
        self.engines.append(engine)

    def register_hook(self, name: str, fn: Any) -> None:
        self.hooks.append(name)

    def register_command(
        self, name: str, handler: Any, description: str = "", args_hint: str = ""
    ) -> None:
        self.commands[name] = handler
        self.hints[name] = (description, args_hint)


def test_command_is_registered_only_when_enabled(monkeypatch):
    ctx = StubContext()
    hermes_lcm.register(ctx)
    assert ctx.commands == {} and ctx.engines[0].name == "lcm"
    monkeypatch.setenv("LCM_ENABLE_SLASH_COMMAND", "1")
    ctx = StubContext()
    hermes_lcm.register(ctx)
    assert "lcm" in ctx.commands
    assert "status" in ctx.commands["lcm"]("help")
    # the host's command list names every verb, as help does
    description, hint = ctx.hints["lcm"]
    for verb in ("status", "doctor", "embed", "rollups", "view", "redact", "gc-payloads", "rotate"):
        assert verb in hint.strip("[]").split("|") and verb in description
        assert f"  {verb}" in ctx.commands["lcm"]("help")


def test_the_manifest_names_every_hook_registered():
    """plugin.yaml's provides_hooks is what register() registers, no more and no less."""
    manifest = yaml.safe_load((Path(hermes_lcm.__file__).parent / "plugin.yaml").read_text())
    ctx = StubContext()
    hermes_lcm.register(ctx)
    assert sorted(manifest["provides_hooks"]) == sorted(ctx.hooks)


def test_status_before_any_session_is_unbound(tmp_path):
    assert live_engines() == []
    text = handle_command("status")
    info = yaml.safe_load(text)
    assert info["session_id"] == "(unbound)" and info["database_exists"] is False
    assert "send one normal message" in handle_command("doctor")


@pytest.mark.both_backends
def test_status_and_doctor_on_the_live_engine(tmp_path):
    _engine, _ = engine_with_history(tmp_path, threshold=6000)
    status = lcm("status")
    assert status["session_id"] == "s1" and status["messages_in_conversation"] > 0
    assert status["last_rotate_at"] is None and status["backup_dir"].endswith("lcm-backups")
    assert yaml.safe_load(handle_command(""))["session_id"] == "s1"  # bare /lcm is status
    doctor = lcm("doctor")
    assert doctor["status"] == "ok" and doctor["guidance"] == []
    assert "status: ok" in handle_command("doctor")


def test_backup_writes_a_verified_copy(tmp_path):
    engine_with_history(tmp_path)
    result = lcm("backup")
    copy = sqlite3.connect(result["backup"])
    assert copy.execute("PRAGMA quick_check").fetchone()[0] == "ok"
    assert copy.execute("SELECT count(*) FROM messages").fetchone()[0] > 0
    copy.close()


def test_repair_preview_apply_and_noop(tmp_path):
    engine, _ = engine_with_history(tmp_path)
    assert lcm("doctor repair")["status"] == "noop"
    with engine.core.store.write() as con:
        con.execute("DROP TRIGGER messages_au")
        con.execute("UPDATE messages_fts_data SET block=zeroblob(length(block)) WHERE id > 10")
    assert lcm("doctor")["status"] == "fail"
    plan = lcm("doctor repair")
    assert plan["status"] == "ready" and "recreate trigger messages_au" in plan["actions"]
    applied = lcm("doctor repair apply")
    assert applied["status"] == "applied" and Path(applied["backup"]["path"]).exists()
    assert lcm("doctor")["status"] == "ok"
    assert lcm("doctor repair apply")["status"] == "noop"


@pytest.mark.both_backends
def test_source_preview_apply_and_noop(tmp_path):
    engine, _ = engine_with_history(tmp_path)
    with engine.core.store.write() as con:
        con.execute("UPDATE messages SET source='' WHERE id <= 5")
    assert lcm("doctor")["status"] == "warn"
    assert lcm("doctor source")["blank_source_rows"] == 5
    assert lcm("doctor source apply")["updated"] == 5
    assert lcm("doctor source apply")["status"] == "noop"


@pytest.mark.both_backends
def test_clean_needs_the_apply_flag(tmp_path):
    noisy = new_engine(tmp_path, NO_COMPACTION, "cron:nightly", **WHERE)
    host_run(noisy, list(conversation(2, 5)))
    noisy_conversation = noisy.core.binding.conversation_id
    del noisy
    gc.collect()
    _engine, _ = engine_with_history(tmp_path, LCM_IGNORE_SESSION_PATTERNS="cron:*")
    preview = lcm("doctor clean")
    assert [c["conversation_id"] for c in preview["conversations"]] == [noisy_conversation]
    refused = handle_command("doctor clean apply")
    assert refused.startswith("hermes-lcm:") and "LCM_DOCTOR_CLEAN_APPLY_ENABLED" in refused
    assert lcm("doctor clean")["status"] == "ready"  # nothing was deleted


@pytest.mark.both_backends
def test_clean_apply_and_lifecycle_when_enabled(tmp_path):
    noisy = new_engine(tmp_path, NO_COMPACTION, "cron:nightly", **WHERE)
    host_run(noisy, list(conversation(2, 5)))
    fork = new_engine(
        tmp_path, NO_COMPACTION, "idle-fork", **WHERE
    )  # started, never stored anything
    del noisy, fork
    gc.collect()
    _engine, _ = engine_with_history(
        tmp_path,
        LCM_IGNORE_SESSION_PATTERNS="cron:*",
        LCM_DOCTOR_CLEAN_APPLY_ENABLED="true",
        LCM_EMPTY_LIFECYCLE_MIN_AGE_HOURS="0",
    )
    applied = lcm("doctor clean apply")
    assert applied["status"] == "applied" and applied["deleted"]["conversations"] == 1
    assert lcm("doctor clean apply")["status"] == "noop"
    lifecycle = lcm("doctor clean lifecycle")
    assert [s["id"] for s in lifecycle["sessions"]] == ["idle-fork"]
    assert lcm("doctor clean lifecycle apply")["deleted"]["sessions"] == 1
    assert lcm("doctor clean lifecycle apply")["status"] == "noop"
    assert lcm("status")["messages_in_conversation"] > 0  # the live conversation is untouched


@pytest.mark.both_backends
def test_retention(tmp_path):
    engine_with_history(tmp_path)
    report = lcm("doctor retention")
    assert report["totals"]["conversations"] == 1 and report["how_to_bound"]
    assert "read-only" in handle_command("doctor retention apply")


@pytest.mark.both_backends
def test_rotate_preview_apply_noop_and_status(tmp_path):
    engine, _ = engine_with_history(tmp_path, turns=25, LCM_FRESH_TAIL_COUNT="10")
    preview = lcm("rotate")
    assert preview["status"] == "ready" and preview["apply"] == "/lcm rotate apply"
    applied = lcm("rotate apply")
    assert (
        applied["status"] == "applied"
        and applied["frontier_seq_after"] == preview["target_frontier_seq"]
    )
    # a copy of the file beside it; for a URL a pg_dump under the home, named after its database
    latest = r"lcm-pg-[0-9a-f]{12}-rotate-latest\.dump" if WHERE else r"lcm-rotate-latest\.sqlite3"
    assert re.fullmatch(latest, Path(applied["backup"]["path"]).name), applied["backup"]
    again = lcm("rotate apply")
    assert again["status"] == "noop" and again["backup"] is None
    status = lcm("status")
    assert status["last_rotate_at"] and re.fullmatch(latest, Path(status["rotate_backup"]).name)
    assert status["frontier_seq"] == preview["target_frontier_seq"]
    # the agent's lcm_status tool tells it the same: when, and the backup that undoes it
    tool = json.loads(engine.handle_tool_call("lcm_status", {}))
    assert {k: tool[k] for k in ("last_rotate_at", "rotate_backup", "backup_dir")} == {
        k: status[k] for k in ("last_rotate_at", "rotate_backup", "backup_dir")
    }


@pytest.mark.both_backends
def test_rotate_refuses_stateless_and_ignored_sessions(tmp_path):
    writer, _ = engine_with_history(tmp_path, session="s1")
    del writer
    gc.collect()
    reader = new_engine(tmp_path, NO_COMPACTION, "s1", LCM_STATELESS_SESSION_PATTERNS="s1", **WHERE)
    assert (
        reader.core.binding.mode == "stateless" and reader.core.binding.conversation_id is not None
    )
    text = handle_command("rotate apply")
    assert text.startswith("hermes-lcm:") and "stateless" in text
    ignored = new_engine(
        tmp_path, NO_COMPACTION, "noise:1", LCM_IGNORE_SESSION_PATTERNS="noise:*", **WHERE
    )
    text = handle_command("rotate session=noise:1")
    assert ignored.core.binding.mode == "ignored" and "ignored" in text


@pytest.mark.both_backends
def test_presets(tmp_path, monkeypatch):
    engine, _ = engine_with_history(
        tmp_path, turns=2, LCM_FRESH_TAIL_COUNT="20", LCM_LEAF_CHUNK_TOKENS="oops"
    )
    listed = lcm("preset show")
    assert {p["name"] for p in listed["presets"]} == {
        "codex_gpt_long_context",
        "codex_spark_context",
    }
    assert lcm("preset show codex_spark_context")["settings"]["LCM_FRESH_TAIL_COUNT"] == "16"
    assert lcm("preset suggest")["suggestion"] is None  # a 64k window
    engine.update_model("gpt-5.2-codex", 272_000)
    suggested = lcm("preset suggest")
    assert suggested["suggestion"] == "codex_gpt_long_context"
    assert suggested["confidence"] == "benchmark-backed-route"
    # the agent's lcm_status and /lcm status carry the same suggestion
    tool = json.loads(engine.handle_tool_call("lcm_status", {}))["preset_suggestion"]
    assert tool == lcm("status")["preset_suggestion"]
    assert tool == {k: suggested[k] for k in ("suggestion", "confidence", "reasons")}
    engine.update_model("some-local-model", 131_072)
    assert lcm("preset suggest")["confidence"] == "context-only"
    dry = lcm("preset apply codex_spark_context --dry-run")
    actions = {c["variable"]: c["action"] for c in dry["changes"]}
    assert actions["LCM_CONTEXT_THRESHOLD"] == "would set"
    assert actions["LCM_FRESH_TAIL_COUNT"].startswith("kept: explicit environment value wins")
    assert "invalid" in actions["LCM_LEAF_CHUNK_TOKENS"]
    assert dry["writes_nothing"] and "LCM_CONTEXT_THRESHOLD=0.75" in dry["env_lines"]
    assert engine.config.context_threshold == 0.35  # nothing changed live
    assert "never applied live" in handle_command("preset apply codex_spark_context")
    assert "unknown preset" in handle_command("preset show nope")


@pytest.mark.both_backends
def test_help_unknown_and_session_selection(tmp_path):
    first, _ = engine_with_history(tmp_path, session="a")
    second = new_engine(tmp_path, NO_COMPACTION, "b", LCM_ENABLE_SLASH_COMMAND="1", **WHERE)
    assert {e.session_id for e in live_engines()} == {first.session_id, second.session_id}
    assert "doctor clean lifecycle" in handle_command("help")
    assert handle_command("frobnicate").startswith("unknown /lcm command")
    assert "unknown doctor command" in handle_command("doctor frobnicate")
    assert "unexpected arguments" in handle_command("backup now")
    assert lcm("status")["session_id"] == "b"  # the most recently bound session
    assert lcm("status session=a")["session_id"] == "a"
    assert "no live engine for session" in handle_command("status session=zzz")


HARNESS_PROMPT = (
    "Review the conversation above and update the skill library. Be ACTIVE — most sessions produce "
    "at least one skill update, even if small.\n\nYou can only call memory and skill management tools."
)


@pytest.mark.both_backends
def test_doctor_finds_stored_harness_turns_and_apply_removes_them(tmp_path):
    """A database an earlier version wrote: two review-fork turns stored in the user's conversation
    (ingested straight, as that version did from the fork's hook), compacted into summaries."""
    engine = new_engine(
        tmp_path,
        5000,
        "s1",
        LCM_ENABLE_SLASH_COMMAND="1",
        LCM_DOCTOR_CLEAN_APPLY_ENABLED="true",
        **WHERE,
    )
    turns = list(conversation(5, 40))
    for at in (8, 20):
        turns.insert(
            at,
            [
                {"role": "user", "content": HARNESS_PROMPT},
                {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [
                        {
                            "id": f"fork{at}",
                            "type": "function",
                            "function": {"name": "skill_manage", "arguments": "{}"},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": f"fork{at}", "content": "skill updated"},
                {"role": "assistant", "content": f"FORK-REPLY-{at}: updated the skill library."},
            ],
        )
    host_run(engine, turns)
    core = engine.core
    cid = core.binding.conversation_id
    before = {m.id: m.content for m in core.store.messages_after(cid, 0)}
    assert any(c.startswith("FORK-REPLY") for c in before.values())
    assert core.dag.depth_counts(cid), "the history never compacted"
    assert any(
        "FORK-REPLY" in n.content or "skill library" in n.content for n in core.store.summaries(cid)
    )

    report = lcm("doctor")
    check = next(c for c in report["checks"] if c["name"] == "harness")
    assert check["status"] == "warn" and "2 turns" in check["detail"]
    preview = lcm("doctor clean harness")
    assert (
        preview["status"] == "ready"
        and preview["messages"] == 8
        and preview["summaries_rebuilt"] >= 1
    )
    assert lcm("doctor clean harness")["messages"] == 8  # the preview wrote nothing

    import io

    from hermes_lcm.cli.main import main as lcm_cli

    out = io.StringIO()  # the shell command reads the same report, without a running agent
    lcm_cli(["--db", str(engine.database_path()), "doctor"], out=out)
    shell = next(c for c in json.loads(out.getvalue())["checks"] if c["name"] == "harness")
    assert shell["status"] == "warn" and shell["data"]["conversations"] == [
        {"conversation_id": cid, "harness_turns": 2}
    ]

    applied = lcm("doctor clean harness apply")
    assert applied["status"] == "applied" and applied["deleted"]["messages"] == 8
    assert Path(applied["backup"]["path"]).exists() or applied["backup"]["path"].startswith(
        "postgres"
    )
    after = {m.id: m.content for m in core.store.messages_after(cid, 0)}
    removed = set(before) - set(after)
    assert len(removed) == 8 and not set(after) - set(before)
    assert all(before[i] == after[i] for i in after)  # nothing else touched
    assert not any(
        "Review the conversation above" in c or c.startswith("FORK-REPLY") for c in after.values()
    )
    for node in core.store.summaries(cid):
        assert "FORK-REPLY" not in node.content and "skill library" not in node.content, (
            node.node_id
        )
    assert next(c for c in lcm("doctor")["checks"] if c["name"] == "harness")["status"] == "ok"
    assert next(c for c in lcm("doctor")["checks"] if c["name"] == "lineage")["status"] == "ok"
    assert lcm("doctor clean harness apply")["status"] == "noop"


BROKEN = [
    "",
    "[ERROR] provider returned 500",
    "I cannot help with that request.",
    "<think>The user wants a summary; I will list the steps...</think>",
]


@pytest.mark.both_backends
def test_broken_summaries_are_found_and_made_again_from_their_sources(tmp_path):
    """A summary set to '' or to a provider's error text passes no doctor: /lcm doctor warns and
    names them, ``doctor repair summaries`` lists them (a dry run), and ``apply`` takes a backup
    and writes each again from its sources: the same node ids, edges and context, the old text
    in the events; the CLI does the same."""
    engine, _ = engine_with_history(tmp_path, turns=40, threshold=5000)
    assert engine.core is not None
    where = WHERE.get("LCM_DATABASE_URL") or str(tmp_path / "lcm.db")
    ids = [int(r[0]) for r in raw_sql(where, "SELECT id FROM summaries ORDER BY id")]
    assert len(ids) >= len(BROKEN), ids
    for node_id, text in zip(ids, BROKEN, strict=False):
        raw_sql(where, "UPDATE summaries SET content=? WHERE id=?", (text, node_id))
    edges = sorted(raw_sql(where, "SELECT parent_id, child_id, child_kind FROM edges"))
    check = next(c for c in lcm("doctor")["checks"] if c["name"] == "summaries")
    assert check["status"] == "warn" and f"{len(BROKEN)} of {len(ids)}" in check["detail"]
    plan = lcm("doctor repair summaries")
    assert plan["broken"] == len(BROKEN) and plan["status"] == "ready"
    reasons = {s["node_id"]: s["reason"] for s in plan["summaries"]}
    assert reasons[f"S{ids[0]}"] == "empty" and "error text" in reasons[f"S{ids[1]}"]
    assert "refusal" in reasons[f"S{ids[2]}"] and "reasoning" in reasons[f"S{ids[3]}"]
    done = lcm("doctor repair summaries apply")
    assert done["repaired"] == len(BROKEN) and done["after"]["broken"] == 0 and done["backup"]
    texts = dict(raw_sql(where, "SELECT id, content FROM summaries"))
    assert all(texts[i].strip() and texts[i] not in BROKEN for i in ids[: len(BROKEN)])
    assert sorted(raw_sql(where, "SELECT parent_id, child_id, child_kind FROM edges")) == edges
    old = [e["detail"]["old_text"] for e in engine.core.store.events_of("summary_repair", None)]
    assert sorted(old) == sorted(BROKEN)
    assert next(c for c in lcm("doctor")["checks"] if c["name"] == "summaries")["status"] == "ok"
    # the CLI: a dry run, then --apply, on a summary broken again
    from hermes_lcm.cli.main import main

    raw_sql(where, "UPDATE summaries SET content=? WHERE id=?", ("", ids[-1]))
    out = io.StringIO()
    assert main(["--db", where, "--format", "json", "doctor", "repair", "summaries"], out=out) == 0
    assert json.loads(out.getvalue())["broken"] == 1
    out = io.StringIO()
    code = main(
        ["--db", where, "--format", "json", "doctor", "repair", "summaries", "--apply"], out=out
    )
    assert code == 0 and json.loads(out.getvalue())["repaired"] == 1
    assert raw_sql(where, "SELECT content FROM summaries WHERE id=?", (ids[-1],))[0][0].strip()


@pytest.mark.both_backends
def test_doctor_checks_the_newest_summaries_and_a_repair_checks_all(tmp_path, monkeypatch):
    """Doctor's check is bounded (it runs inside /lcm doctor, where the user waits): it reads the
    newest summaries and says so; ``doctor repair summaries`` reads every one, in every
    conversation or in one."""
    from hermes_lcm.maintenance import checks, summary_health

    engine, _ = engine_with_history(tmp_path, turns=40, threshold=5000)
    assert engine.core is not None
    store = engine.core.store
    where = WHERE.get("LCM_DATABASE_URL") or str(tmp_path / "lcm.db")
    ids = [int(r[0]) for r in raw_sql(where, "SELECT id FROM summaries ORDER BY id")]
    assert len(ids) >= 3
    raw_sql(where, "UPDATE summaries SET content='' WHERE id=?", (ids[0],))  # the oldest
    monkeypatch.setattr(checks, "DOCTOR_SUMMARIES", 2)
    check = next(c for c in lcm("doctor")["checks"] if c["name"] == "summaries")
    assert check["status"] == "ok" and "the newest 2 summaries" in check["detail"]
    bounded = summary_health.scan(store, newest=2)
    assert (bounded["checked"], bounded["only_newest"], bounded["broken"]) == (2, True, 0)
    full = summary_health.scan(store)
    assert (full["checked"], full["only_newest"], full["broken"]) == (len(ids), False, 1)
    assert summary_health.scan(store, newest=len(ids))["only_newest"] is False
    cid = int(raw_sql(where, "SELECT conversation_id FROM summaries WHERE id=?", (ids[0],))[0][0])
    assert summary_health.scan(store, cid)["broken"] == 1
    assert summary_health.scan(store, cid + 1000)["checked"] == 0
    assert lcm("doctor repair summaries")["broken"] == 1

"""The importer: lossless-claw SQLite (messages + summary DAG) and OpenClaw JSONL, dry-run,
apply, idempotent re-runs, incremental imports and malformed input. Fixtures follow the
published formats; see tests/test_import_fixtures.py for where each shape comes from."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hermes_lcm import store as store_module
from hermes_lcm.cli.main import main as lcm_main
from hermes_lcm.dag import Dag
from hermes_lcm.importers.claw import ImportFailure, run_import
from hermes_lcm.storage.sqlite import SqliteStore as Store
from hermes_lcm.store import detect_source

from .conftest import new_engine
from .convo import assert_lineage_complete, conversation, host_run
from .dbutil import digest
from .dbutil import query_ro as q
from .test_import_fixtures import (
    LosslessClawDb,
    build_lossless_claw,
    build_lossless_claw_malformed,
    openclaw_messy_session,
    openclaw_session,
)

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _close_stores():
    yield
    store_module.close_all()


def target_with_history(home: Path) -> Path:
    """A hermes-lcm database the engine already wrote (the import must leave it intact)."""
    engine = new_engine(home, 10**9, "hermes-1")
    host_run(engine, list(conversation(4, 3)))
    store_module.close_all()
    return home / "lcm.db"


# -- lossless-claw SQLite ----------------------------------------------------------------------


def test_sqlite_dry_run_apply_and_idempotent_rerun(tmp_path):
    source = tmp_path / "claw.db"
    facts = build_lossless_claw(source)
    assert detect_source(source) == "lossless-claw"
    target = target_with_history(tmp_path / "home")
    hermes_rows = q(target, "SELECT id, content FROM messages ORDER BY id")
    before = digest(target)

    dry = run_import(target_db=target, source_db=source, include_summaries=True, import_id="claw-1")
    assert (
        dry["dry_run"] and digest(target) == before and not (target.parent / "lcm-backups").exists()
    )
    assert dry["scanned"] == facts["messages"] and dry["eligible"] == facts["eligible"]
    assert dry["would_import"] == facts["eligible"] and dry["imported"] == 0
    assert dry["skipped_empty"] == facts["empty"] and dry["skipped_unsupported"] == facts["system"]
    assert dry["invalid_rows"] == 0 and dry["skipped_existing"] == 0
    assert dry["summaries"]["would_import"] == facts["summaries"] and dry["balanced"]

    applied = run_import(
        target_db=target, source_db=source, include_summaries=True, import_id="claw-1", apply=True
    )
    assert not applied["dry_run"] and applied["imported"] == facts["eligible"]
    assert applied["summaries"]["imported"] == facts["summaries"]
    backup = Path(applied["backup_path"])
    assert (
        backup.exists() and q(backup, "SELECT id, content FROM messages ORDER BY id") == hermes_rows
    )
    assert (
        q(target, "SELECT id, content FROM messages WHERE id<=?", (hermes_rows[-1][0],))
        == hermes_rows
    )

    rerun = run_import(
        target_db=target, source_db=source, include_summaries=True, import_id="claw-1", apply=True
    )
    assert rerun["imported"] == 0 and rerun["would_import"] == 0
    assert (
        rerun["skipped_existing"] == facts["eligible"]
        and rerun["summaries"]["skipped_existing"] == 4
    )
    assert rerun["backup_path"] is None and len(list(backup.parent.iterdir())) == 1
    assert (
        q(target, "SELECT count(*) FROM messages WHERE source='import:claw-1'")[0][0]
        == facts["eligible"]
    )


def test_sqlite_import_keeps_provenance_tool_calls_and_lineage(tmp_path):
    source = tmp_path / "claw.db"
    build_lossless_claw(source)
    target = tmp_path / "home" / "lcm.db"
    run_import(
        target_db=target, source_db=source, include_summaries=True, import_id="claw-1", apply=True
    )
    keys = [k for (k,) in q(target, "SELECT key FROM conversations ORDER BY id")]
    assert keys == [
        "import:claw-1:lossless-claw:1:agent:main:main",
        "import:claw-1:lossless-claw:2:agent:main:main",
    ]
    sessions = dict(q(target, "SELECT id, platform FROM sessions"))
    assert sessions == {
        "lossless-claw:1:sess-main": "openclaw",
        "lossless-claw:2:sess-old": "openclaw",
    }

    view = Store.open_readonly(target)
    msgs = view.messages_after(1, 0)
    assert [m.role for m in msgs] == ["user", "assistant", "tool", "assistant", "user", "assistant"]
    assert msgs[1].to_host()["tool_calls"] == [
        {
            "id": "call_1",
            "type": "function",
            "function": {"name": "exec", "arguments": '{"command": "ss -ltn"}'},
        }
    ]
    assert msgs[2].to_host() == {
        "role": "tool",
        "content": "LISTEN 0 4096 0.0.0.0:8443",
        "tool_call_id": "call_1",
        "name": "exec",
    }
    assert {m.source for m in msgs} == {"import:claw-1"}
    assert {m.session_id for m in msgs} == {"lossless-claw:1:sess-main"}
    assert msgs[4].created_at == pytest.approx(1767690000.0)  # "2026-01-06 09:00:00" UTC

    dag = Dag(view)
    nodes = {n.route: n for n in dag.nodes_page(1, None, 0, 100)}
    assert set(nodes) == {
        "lossless-claw:sum_leaf_a",
        "lossless-claw:sum_leaf_b",
        "lossless-claw:sum_condensed",
    }
    top = nodes["lossless-claw:sum_condensed"]
    assert top.depth == 1 and top.level == "imported" and (top.first_seq, top.last_seq) == (1, 6)
    assert [c.route for c in dag.children(top.id)] == [
        "lossless-claw:sum_leaf_a",
        "lossless-claw:sum_leaf_b",
    ]
    leaf = nodes["lossless-claw:sum_leaf_a"]
    assert dag.sources(leaf.id)[0].content == "Please set up the reverse proxy on port 8443"
    assert dag.descendant_message_ids(top.id) == [m.id for m in msgs]
    assert dag.lineage_problems() == {}
    view.close()
    assert_lineage_complete(str(target))

    out = io.StringIO()  # imported history is searchable without an agent
    assert (
        lcm_main(["--db", str(target), "grep", "which port did the reverse proxy get?"], out=out)
        == 0
    )
    hits = json.loads(out.getvalue())["items"]
    assert any(h["kind"] == "message" and "8443" in h["snippet"] for h in hits)
    assert any(h["kind"] == "summary" for h in hits)


def test_sqlite_incremental_rerun_imports_only_new_rows(tmp_path):
    source = tmp_path / "claw.db"
    facts = build_lossless_claw(source)
    target = tmp_path / "home" / "lcm.db"
    run_import(
        target_db=target, source_db=source, include_summaries=True, import_id="claw-1", apply=True
    )
    db = LosslessClawDb(source)
    main = facts["conversations"]["main"]
    n1 = db.message(main, "user", "One more thing: rotate the TLS certificate")
    n2 = db.message(main, "assistant", "Certificate rotated.")
    db.summary("sum_leaf_c", main, "leaf", "TLS certificate rotated.", messages=(n1, n2))
    db.close()
    again = run_import(
        target_db=target, source_db=source, include_summaries=True, import_id="claw-1", apply=True
    )
    assert again["imported"] == 2 and again["skipped_existing"] == facts["eligible"]
    assert again["summaries"]["imported"] == 1 and again["summaries"]["skipped_existing"] == 4
    assert q(
        target,
        "SELECT seq, content FROM messages WHERE conversation_id=1 ORDER BY seq DESC LIMIT 1",
    ) == [(8, "Certificate rotated.")]
    assert_lineage_complete(str(target))


def test_sqlite_rerun_condenses_over_leaves_imported_before(tmp_path):
    """A summary added to the source later, condensed over a leaf of the first run and a new leaf:
    its child from the first run is found in the target and linked."""
    source = tmp_path / "claw.db"
    facts = build_lossless_claw(source)
    target = tmp_path / "home" / "lcm.db"
    run_import(
        target_db=target, source_db=source, include_summaries=True, import_id="claw-1", apply=True
    )
    db = LosslessClawDb(source)
    main = facts["conversations"]["main"]
    n1 = db.message(main, "user", "Rotate the TLS certificate too")
    n2 = db.message(main, "assistant", "Certificate rotated.")
    db.summary("sum_leaf_c", main, "leaf", "TLS certificate rotated.", messages=(n1, n2))
    db.summary(
        "sum_top",
        main,
        "condensed",
        "Infra: proxy, cache, TLS.",
        depth=2,
        sources=("sum_condensed", "sum_leaf_c"),
    )
    db.close()
    again = run_import(
        target_db=target, source_db=source, include_summaries=True, import_id="claw-1", apply=True
    )
    assert again["summaries"]["imported"] == 2 and again["summaries"]["skipped_existing"] == 4
    top = q(target, "SELECT id, depth FROM summaries WHERE route='lossless-claw:sum_top'")
    assert len(top) == 1 and top[0][1] == 2
    children = q(
        target,
        "SELECT s.route FROM (SELECT parent_id, iif(child_kind, 'summary', 'message') AS child_kind, child_id, ord FROM edges) e JOIN summaries s ON s.id=e.child_id "  # noqa: E501 (schema 4 raw SQL)
        "WHERE e.parent_id=? AND e.child_kind='summary' ORDER BY s.route",
        (top[0][0],),
    )
    assert children == [("lossless-claw:sum_condensed",), ("lossless-claw:sum_leaf_c",)]
    assert_lineage_complete(str(target))


def test_sqlite_without_summaries_and_a_second_import_id(tmp_path):
    source = tmp_path / "claw.db"
    facts = build_lossless_claw(source)
    target = tmp_path / "home" / "lcm.db"
    first = run_import(target_db=target, source_db=source, apply=True)
    assert first["import_id"].startswith("lossless-claw-") and first["summaries"]["scanned"] == 0
    assert q(target, "SELECT count(*) FROM summaries")[0][0] == 0
    second = run_import(target_db=target, source_db=source, import_id="other", apply=True)
    assert second["imported"] == facts["eligible"]  # a different id is a separate copy, by design
    assert q(target, "SELECT count(*) FROM conversations")[0][0] == 4


def test_sqlite_malformed_rows_are_counted_and_skipped(tmp_path):
    source = tmp_path / "bad.db"
    build_lossless_claw_malformed(source)
    target = tmp_path / "home" / "lcm.db"
    report = run_import(
        target_db=target, source_db=source, include_summaries=True, import_id="bad", apply=True
    )
    assert report["scanned"] == 5
    assert report["invalid_rows"] == 2  # role 'narrator', BLOB content
    assert report["imported"] == 3 and report["skipped_empty"] == 0 and report["balanced"]
    assert report["summaries"] == {
        "scanned": 6,
        "eligible": 1,
        "would_import": 1,
        "imported": 1,
        "skipped_existing": 0,
        "invalid": 5,
    }
    text = "\n".join(report["warnings"])
    for expected in (
        "narrator",
        "non-text content",
        "unreadable created_at",
        "non-JSON input",
        "sum_ghost",
        "sum_p",
        "sum_weird",
        "sum_orphan_parent",
    ):
        assert expected in text, expected
    calls = q(target, "SELECT tool_calls FROM messages WHERE tool_calls IS NOT NULL")
    assert json.loads(json.loads(calls[0][0])[0]["function"]["arguments"]) == {
        "raw": "ls -la (not json)"
    }
    assert_lineage_complete(str(target))


# -- OpenClaw JSONL ---------------------------------------------------------------------------------


def test_jsonl_dry_run_apply_and_idempotent_rerun(tmp_path):
    sessions = tmp_path / "sessions"
    sessions.mkdir()
    openclaw_session(sessions)
    target = target_with_history(tmp_path / "home")
    before = digest(target)

    dry = run_import(target_db=target, jsonl_dirs=[sessions], agent="main", import_id="oc-1")
    assert digest(target) == before
    assert dry["scanned"] == 6 and dry["eligible"] == 6 and dry["would_import"] == 6
    assert any("abandoned branches" in w for w in dry["warnings"])

    applied = run_import(
        target_db=target, jsonl_dirs=[sessions], agent="main", import_id="oc-1", apply=True
    )
    assert applied["imported"] == 6 and Path(applied["backup_path"]).exists()
    rerun = run_import(
        target_db=target, jsonl_dirs=[sessions], agent="main", import_id="oc-1", apply=True
    )
    assert (
        rerun["imported"] == 0 and rerun["skipped_existing"] == 6 and rerun["backup_path"] is None
    )

    view = Store.open_readonly(target)
    state = view.conversation_by_key("import:oc-1:openclaw:main:sess-aaa")
    msgs = view.messages_after(state.id, 0)
    assert [m.role for m in msgs] == ["user", "assistant", "tool", "assistant", "user", "assistant"]
    assert all("ABANDONED" not in m.content for m in msgs)
    # the thinking block is kept (as the host's reasoning field), not dropped
    assert msgs[1].extra_fields() == {"reasoning_content": "look it up"}
    assert msgs[1].to_host(extra=False) == {
        "role": "assistant",
        "content": "Let me check the config.",
        "tool_calls": [
            {
                "id": "call_a",
                "type": "function",
                "function": {"name": "read", "arguments": '{"path": "gateway.yaml"}'},
            }
        ],
    }
    assert msgs[2].to_host() == {
        "role": "tool",
        "content": "port: 9443\nhost: staging",
        "tool_call_id": "call_a",
        "name": "read",
    }
    assert msgs[0].created_at == pytest.approx(1767600001.0)
    image = msgs[4].to_host()["content"]
    assert image[0] == {"type": "text", "text": "Here is a screenshot"}
    assert image[1]["image_url"]["url"].startswith(
        "[lcm-payload ref="
    )  # the payload guard moved the image
    assert list((target.parent / "lcm-payloads").glob("*.payload"))
    assert {m.session_id for m in msgs} == {"openclaw:main:sess-aaa"} and {
        m.source for m in msgs
    } == {"import:oc-1"}
    view.close()


def test_jsonl_files_and_malformed_lines(tmp_path):
    good = openclaw_session(tmp_path, "sess-good")
    messy = openclaw_messy_session(tmp_path)
    target = tmp_path / "home" / "lcm.db"
    report = run_import(
        target_db=target, jsonl=[good, messy], import_id="mix", include_summaries=True, apply=True
    )
    # messy: 2 valid, 1 thinking-only (empty), no role / toolResult without id / object content (invalid),
    # bashExecution (unsupported), plus 2 unparseable lines (not JSON, not an object)
    assert (
        report["invalid_rows"] == 5
        and report["skipped_unsupported"] == 1
        and report["skipped_empty"] == 1
    )
    assert report["scanned"] == 6 + 9 and report["balanced"]
    assert report["imported"] == 6 + 2
    assert any("--include-summaries ignored" in w for w in report["warnings"])
    assert any("sess-messy.jsonl:3: not JSON" in w for w in report["warnings"])
    view = Store.open_readonly(target)
    state = view.conversation_by_key("import:mix:openclaw:sess-messy")
    assert [m.content for m in view.messages_after(state.id, 0)] == [
        "messy but valid question",
        "messy but valid answer",
    ]
    view.close()


def test_refusals(tmp_path):
    source = tmp_path / "claw.db"
    build_lossless_claw(source)
    foreign = tmp_path / "foreign.db"
    shutil.copy(source, foreign)
    with pytest.raises(ImportFailure, match="not a hermes-lcm database"):
        run_import(target_db=foreign, source_db=source, apply=True)
    target = tmp_path / "home" / "lcm.db"
    target_with_history(tmp_path / "home")
    with pytest.raises(ImportFailure, match="not a lossless-claw database"):
        run_import(target_db=tmp_path / "new.db", source_db=target)
    with pytest.raises(ImportFailure, match="either"):
        run_import(target_db=target, source_db=source, jsonl=[tmp_path / "x.jsonl"])
    with pytest.raises(ImportFailure, match="not a directory"):
        run_import(target_db=target, jsonl_dirs=[tmp_path / "missing"])
    assert not (tmp_path / "new.db").exists()


def test_script_end_to_end(tmp_path):
    source = tmp_path / "claw.db"
    facts = build_lossless_claw(source)
    target = tmp_path / "home" / "lcm.db"
    script = REPO / "scripts" / "import_lossless_claw.py"
    base = [
        sys.executable,
        str(script),
        "--source-db",
        str(source),
        "--target-db",
        str(target),
        "--include-summaries",
        "--import-id",
        "cli-1",
    ]
    dry = subprocess.run(
        [*base, "--json"], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert dry.returncode == 0, dry.stderr
    assert json.loads(dry.stdout)["would_import"] == facts["eligible"] and not target.exists()
    text = subprocess.run(
        [*base, "--apply"], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert text.returncode == 0, text.stderr
    assert (
        text.stdout.startswith("APPLIED")
        and f"imported             {facts['eligible']}" in text.stdout
    )
    again = subprocess.run(
        [*base, "--apply", "--json"], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert json.loads(again.stdout)["skipped_existing"] == facts["eligible"]
    quiet = subprocess.run(
        [*base, "--apply"], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert quiet.stdout.startswith("UP TO DATE")
    refused = subprocess.run(
        [
            sys.executable,
            str(script),
            "--source-db",
            str(target),
            "--target-db",
            str(tmp_path / "t2.db"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert refused.returncode == 3 and "not a lossless-claw database" in refused.stderr

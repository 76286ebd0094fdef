"""``lcm view`` without a browser: what the page embeds is the store, whole and inert.

The page's data is decoded here the way the page's script decodes it (base64, zlib, JSON), and
compared with the database: every message once with its exact text, every node with its lineage,
every compaction the engine made. The browser half is tests/browser/. Everything runs on a
SQLite file and on PostgreSQL (``built`` and ``backend``), except the read-only check of a copied
file, which is SQLite's (the PostgreSQL default path has its own test).
"""

from __future__ import annotations

import base64
import io
import json
import os
import re
import sqlite3
import stat
import sys
import time
import webbrowser
import zlib
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from hermes_lcm import store as store_module
from hermes_lcm.cli.main import main
from hermes_lcm.cli.output import EXIT_NOT_FOUND, EXIT_WRITE
from hermes_lcm.command import handle_command
from hermes_lcm.prompt.timeline import PARTS
from hermes_lcm.store import is_url, open_readonly, open_store
from hermes_lcm.viewer import ViewError, write_page
from hermes_lcm.viewer.data import MAX_TEXT_CHARS

from .backends import raw_sql
from .conftest import BACKENDS, database_env, new_engine
from .convo import conversation, host_run
from .dbutil import digest
from .security.test_scope import engine_for, fill

HOSTILE = (
    "</script><script>window.pwned=1</script><img src=x onerror=window.pwned=1> {{SCRIPT}} {{META}} "
    "<!-- \u2028\u2029 \u202e RTL \U0001f600 & &amp; </style>"
)


class Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


def page_data(html: str) -> dict[str, Any]:
    """The page's embedded data, decoded: meta, message rows by seq, summary texts by node id."""
    meta_text = re.search(
        r'<script type="application/json" id="lcm-meta">(.*?)</script>', html, re.S
    )
    assert meta_text
    meta = json.loads(meta_text.group(1))
    chunks = dict(
        re.findall(
            r'<script type="application/octet-stream" id="([ms]\d+)">([A-Za-z0-9+/=]*)</script>',
            html,
        )
    )

    def inflate(name: str) -> Any:
        return json.loads(zlib.decompress(base64.b64decode(chunks[name])).decode("utf-8"))

    rows = [r for i in range(len(meta["message_chunks"])) for r in inflate(f"m{i}")]
    texts = [t for i in range(len(meta["summary_chunks"])) for t in inflate(f"s{i}")]
    return {
        "meta": meta,
        "messages": rows,
        "texts": dict(zip([n[0] for n in meta["nodes"]], texts, strict=True)),
    }


@pytest.fixture(scope="module", params=BACKENDS)
def built(tmp_path_factory, request) -> tuple[str, int]:
    """A compacted conversation from a real engine, with one hostile message and one huge one
    (in a SQLite file or a PostgreSQL schema: where it is, and the conversation's id)."""
    home = tmp_path_factory.mktemp("viewhome")
    where = database_env(request.param)
    engine = new_engine(home, 5000, "view-s1", **where)
    rounds = list(conversation(21, 60))
    rounds[3][0]["content"] = HOSTILE
    rounds[5][0]["content"] = "big " + "words and more " * (MAX_TEXT_CHARS // 10)
    host_run(engine, rounds)
    assert engine.core is not None
    conv = engine.core.binding.conversation_id
    assert conv is not None
    store_module.close_all()
    return where.get("LCM_DATABASE_URL") or str(home / "lcm.db"), conv


def test_every_message_once_with_its_exact_text(built, tmp_path):
    db, conv = built
    store = open_readonly(db)
    out = write_page(store, tmp_path / "v.html")
    data = page_data((tmp_path / "v.html").read_text(encoding="utf-8"))
    stored = store.messages_after(conv, -1)
    assert out["conversation_id"] == conv and out["messages"] == len(stored) > 100
    assert [r[0] for r in data["messages"]] == [m.seq for m in stored]  # each once, in order
    for row, m in zip(data["messages"], stored, strict=True):
        assert row[1] == m.id and row[2] == m.role
        text = m.content if not m.tool_calls else None
        if text is not None and len(text) <= MAX_TEXT_CHARS:
            assert row[7] == text
    big = next(r for r in data["messages"] if r[7].startswith("big words"))
    assert "more characters: lcm expand" in big[7] and len(big[7]) < MAX_TEXT_CHARS + 200
    assert any(r[7] == HOSTILE for r in data["messages"])


def test_nodes_and_lineage_match_the_dag(built, tmp_path):
    db, conv = built
    store = open_readonly(db)
    write_page(store, tmp_path / "v.html", conv)
    data = page_data((tmp_path / "v.html").read_text(encoding="utf-8"))
    meta = data["meta"]
    fields = meta["node_fields"]
    nodes = {n[0]: dict(zip(fields, n, strict=True)) for n in meta["nodes"]}
    stored = store.summaries(conv, limit=10_000)
    assert set(nodes) == {n.id for n in stored} and len(stored) > 3
    assert {n["depth"] for n in nodes.values()} >= {0, 1}
    for n in stored:
        assert data["texts"][n.id] == n.content
        assert nodes[n.id]["tokens"] == n.tokens and nodes[n.id]["first_seq"] == n.first_seq
        kids = meta["children"].get(str(n.id), {"s": [], "m": []})
        if n.depth == 0:
            assert kids["m"] == [m.seq for m in store.summary_sources(n.id)]
        else:
            assert kids["s"] == [c.id for c in store.child_summaries(n.id)]
    assert meta["context"] == [n.id for n in store.context_nodes(conv)]
    covered = {s for kids in meta["children"].values() for s in kids["m"]}
    frontier = meta["conversation"]["frontier_seq"]
    assert covered == {
        m.seq for m in store.messages_after(conv, -1) if m.seq <= frontier
    }  # nothing lost


def test_compactions_are_recorded_with_the_prompt_before_and_after(built, tmp_path):
    db, conv = built
    store = open_readonly(db)
    write_page(store, tmp_path / "v.html", conv)
    meta = page_data((tmp_path / "v.html").read_text(encoding="utf-8"))["meta"]
    made = {n[0] for n in meta["nodes"]}
    recorded = meta["compactions"]
    assert recorded and not meta["derived_compactions"]
    assert {i for c in recorded for i in c["nodes"]} <= made
    for c in recorded:
        assert set(c["before"]) == set(PARTS) == set(c["after"])
        assert sum(c["after"].values()) < sum(c["before"].values())  # a compaction bought room
        assert sum(c["after"].values()) <= c["limit"]
    assert sum(c["after"]["summaries"] > 0 for c in recorded) >= len(recorded) - 1


@pytest.mark.both_backends
def test_a_no_op_compress_records_nothing(make_engine):
    engine = make_engine(10**9, "quiet")
    host_run(engine, list(conversation(3, 8)))
    assert engine.core is not None
    assert engine.core.store.events_of("compaction", None) == []


@pytest.mark.both_backends
def test_the_page_is_inert_whatever_the_text(tmp_path, backend_env):
    """A hostile message and a hostile conversation key stay data: no tag the template did not write."""
    engine = engine_for(
        tmp_path, "s-hostile", chat="</script><img src=x onerror=alert(1)>{{SCRIPT}}", **backend_env
    )
    host_run(
        engine, [[{"role": "user", "content": HOSTILE}, {"role": "assistant", "content": HOSTILE}]]
    )
    assert engine.core is not None
    out = write_page(engine.core.store, tmp_path / "v.html")
    html = (tmp_path / "v.html").read_text(encoding="utf-8")
    parser = Tags()
    parser.feed(html)
    tags = [t for t, _ in parser.tags]
    assert "img" not in tags and "style" in tags
    scripts = [a for t, a in parser.tags if t == "script"]
    # the metadata, the chunks and the one script: nothing else opened a script element
    assert len(scripts) == 2 + len(page_data(html)["meta"]["message_chunks"]) + len(
        page_data(html)["meta"]["summary_chunks"]
    )
    assert html.split("<script>")[-1].startswith(
        '"use strict"'
    )  # the placeholder in the key was not filled
    assert page_data(html)["meta"]["conversation"]["key"].endswith(
        "dm:</script><img src=x onerror=alert(1)>{{SCRIPT}}"
    )
    assert [r[7] for r in page_data(html)["messages"]] == [HOSTILE, HOSTILE]
    assert "default-src 'none'" in html and out["bytes"] == len(html.encode("utf-8"))


def test_written_private_and_whole(built, tmp_path):
    db, _ = built
    target = tmp_path / "out" / "page.html"
    write_page(open_readonly(db), target)
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert [p.name for p in target.parent.iterdir()] == ["page.html"]  # no temporary file left


def test_an_unwritable_target_leaves_nothing(built, tmp_path):
    if os.geteuid() == 0:
        target = Path("/proc/lcm-view-test.html")  # not even root writes here
    else:
        locked = tmp_path / "locked"
        locked.mkdir()
        locked.chmod(0o500)
        target = locked / "v.html"
    db, _ = built
    with pytest.raises(OSError):
        write_page(open_readonly(db), target)
    assert not target.exists()


def cli(db: str | Path, *argv: str) -> tuple[int, Any]:
    out = io.StringIO()
    code = main(["--db", str(db), *argv], out=out)
    return code, json.loads(out.getvalue())


def test_lcm_view_writes_beside_the_database_and_reads_only(built, tmp_path):
    db, conv = built
    if is_url(db):
        pytest.skip(
            "a copy of the SQLite file and its digest; on PostgreSQL: "
            "test_lcm_view_on_a_url_writes_under_the_home"
        )
    copy = tmp_path / "lcm.db"
    with sqlite3.connect(db) as src, sqlite3.connect(copy) as dst:
        src.backup(dst)
    before = digest(copy)
    code, out = cli(copy, "view")
    assert code == 0 and out["conversation_id"] == conv
    assert Path(out["path"]) == tmp_path / "lcm-views" / f"lcm-view-{conv}.html"
    assert Path(out["path"]).stat().st_size == out["bytes"]
    assert digest(copy) == before
    code, out = cli(copy, "view", "--output", str(tmp_path / "x.html"), "--conversation", str(conv))
    assert code == 0 and (tmp_path / "x.html").exists()


def test_lcm_view_on_a_url_writes_under_the_home(built, tmp_path, monkeypatch):
    """No directory beside a server's database: the page goes under this machine's Hermes home
    (one directory per database), nothing is written under the working directory, and the
    database is only read."""
    db, conv = built
    if not is_url(db):
        pytest.skip(
            "PostgreSQL's default path; a file's is test_lcm_view_writes_beside_the_database_and_reads_only"
        )
    home, workdir = tmp_path / "home", tmp_path / "cwd"
    workdir.mkdir()
    monkeypatch.setenv("HERMES_HOME", str(home))
    monkeypatch.chdir(workdir)
    counts = "SELECT (SELECT count(*) FROM messages), (SELECT count(*) FROM summaries), (SELECT count(*) FROM events)"
    before = raw_sql(db, counts)
    code, out = cli(db, "view")
    assert code == 0 and out["conversation_id"] == conv, out
    page = Path(out["path"])
    assert page.parent.parent == home / "lcm-views" and page.name == f"lcm-view-{conv}.html"
    assert page.stat().st_size == out["bytes"] and list(workdir.iterdir()) == []
    assert raw_sql(db, counts) == before


def test_lcm_view_errors(built, tmp_path):
    db, _ = built
    code, out = cli(db, "view", "--conversation", "99999")
    assert code == EXIT_NOT_FOUND and "no conversation 99999" in out["error"]
    code, out = cli(db, "view", "--output", "/proc/nope/x.html")
    assert code == EXIT_WRITE
    empty: str | Path = (
        database_env("postgres")["LCM_DATABASE_URL"] if is_url(db) else tmp_path / "empty.db"
    )
    open_store(empty)
    store_module.close_all()
    code, out = cli(empty, "view")
    assert code == EXIT_NOT_FOUND and "no conversation yet" in out["error"]
    with pytest.raises(ViewError):
        write_page(open_readonly(empty), tmp_path / "e.html")


@pytest.mark.both_backends
def test_slash_view_answers_the_path_and_keeps_owners_apart(tmp_path, clean_home, backend_env):
    alice = engine_for(clean_home, "tg-alice-1", "111", LCM_ENABLE_SLASH_COMMAND="1", **backend_env)
    fill(alice, "aliceword", seed=1, turns=12)
    bob = engine_for(clean_home, "tg-bob-1", "222", LCM_ENABLE_SLASH_COMMAND="1", **backend_env)
    fill(bob, "bobword", seed=2, turns=12)
    assert alice.core is not None and bob.core is not None
    alice_conv = alice.core.binding.conversation_id
    answer = handle_command("view session=tg-bob-1")
    path = Path(answer.split("Wrote ", 1)[1].split(" (", 1)[0])
    html = path.read_text(encoding="utf-8")
    data = page_data(html)
    assert data["meta"]["conversation"]["id"] == bob.core.binding.conversation_id
    assert "aliceword" not in json.dumps(data["messages"]) and "bobword" in json.dumps(
        data["messages"]
    )
    months = data["meta"]["growth"]
    assert sum(m["messages"] for m in months) == len(
        data["messages"]
    )  # Bob's growth, not the file's
    refused = handle_command(f"view {alice_conv} session=tg-bob-1")
    assert refused == f"hermes-lcm: no conversation {alice_conv}"
    assert handle_command("view x y session=tg-bob-1").startswith("hermes-lcm: usage")
    store_module.close_all()


def test_open_hands_the_file_to_the_browser(built, tmp_path, monkeypatch):
    """``--open`` goes through the system's browser setting ($BROWSER here): the page's file URI."""
    seen = tmp_path / "seen.txt"
    script = tmp_path / "browser.py"
    script.write_text(f"import sys; open({str(seen)!r}, 'w').write(sys.argv[1])\n")
    monkeypatch.setenv("BROWSER", f"{sys.executable} {script} %s")
    monkeypatch.setattr(webbrowser, "_tryorder", None)  # re-read $BROWSER
    db, _ = built
    code, out = cli(db, "view", "--output", str(tmp_path / "o.html"), "--open")
    assert code == 0 and out["opened"] is True
    for _ in range(50):
        if seen.exists() and seen.read_text():
            break
        time.sleep(0.1)
    assert seen.read_text() == (tmp_path / "o.html").as_uri()


@pytest.mark.parametrize("api_mode", [False, True])
def test_the_page_counts_every_compress_the_host_counts(make_engine, api_mode):
    """Hermes counts each compress that changed its list; a prompt rebuilt from stored summaries
    (no new summary) is one too, so the page records it (``rebuild``) and the counts agree."""
    engine = make_engine(3000, f"count-{api_mode}")
    host_run(engine, list(conversation(11, 60)), api_mode=api_mode)
    assert engine.core is not None and engine.compression_count > 3
    events = engine.core.store.events_of("compaction", None)
    assert len(events) == engine.compression_count, (
        [e["detail"].get("rebuild") for e in events],
        engine.compression_count,
    )
    assert all(
        e["detail"]["nodes"] or e["detail"].get("rebuild") or e["detail"]["evicted"] for e in events
    )

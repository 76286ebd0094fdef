"""Payloads on PostgreSQL: the guard's base64 payloads and large tool outputs live in the database's
``payloads`` table, so a host reads (lcm_expand) what another host wrote: two engines, two
HERMES_HOMEs, one URL; no file is written under either home. gc-payloads removes an orphaned row."""

from __future__ import annotations

import base64
import os
from pathlib import Path

import psycopg

from hermes_lcm import store as store_module
from hermes_lcm.maintenance import payload_gc

from .conftest import new_engine
from .test_large_outputs import ON, big_output, read_all, tool_turn
from .tooltest import ok


def files_under(home: Path) -> list[str]:
    return [str(p) for p in home.rglob("*.payload")]


def test_host_b_expands_what_host_a_stored(tmp_path):
    from .pgserver import fresh_url

    url = fresh_url()
    home_a, home_b = tmp_path / "a", tmp_path / "b"
    home_a.mkdir()
    home_b.mkdir()
    a = new_engine(home_a, 10**9, "s1", LCM_DATABASE_URL=url, **ON)
    output = big_output(seed="fleet")
    image = base64.b64encode(os.urandom(3000)).decode()
    a.ingest_host(
        [
            {"role": "user", "content": f"look: data:image/png;base64,{image} thanks"},
            *tool_turn("run the tests", output, "call_1"),
        ]
    )
    stored = a.core.store.messages_after(a.core.binding.conversation_id, 0)
    info = next(m for m in stored if m.role == "tool")
    assert "[lcm-output ref=" in info.content and "[lcm-payload ref=" in stored[0].content
    output_ref = info.content.split("[lcm-output ref=")[1][:24]
    image_ref = stored[0].content.split("[lcm-payload ref=")[1][:24]
    b = new_engine(
        home_b, 10**9, "s1", LCM_DATABASE_URL=url, **ON
    )  # the same session, another machine
    assert read_all(b, output_ref) == output
    pages, offset = [], 0
    while offset is not None:  # paged: answers stay below the large-output threshold
        page = ok(b, "lcm_expand", externalized_ref=image_ref, content_offset=offset)
        pages.append(page["content"])
        offset = page["next_content_offset"]
    assert image in "".join(pages) and len(pages) > 1
    assert files_under(home_a) == [] and files_under(home_b) == []
    with psycopg.connect(url) as pg:
        assert pg.execute("SELECT count(*) FROM payloads").fetchone()[0] == 2
    del a, b
    store_module.close_all()


def test_gc_removes_an_orphaned_payload_row_only(tmp_path):
    from .pgserver import fresh_url

    url = fresh_url()
    engine = new_engine(tmp_path, 10**9, "s1", LCM_DATABASE_URL=url, **ON)
    engine.ingest_host(tool_turn("run", big_output(seed="kept"), "c1"))
    store = engine.core.store
    store.payload_put("f" * 24, b"nobody names me")
    with psycopg.connect(url, autocommit=True) as pg:
        pg.execute("UPDATE payloads SET created_at = created_at - 3600")
    found = payload_gc.scan(store)
    assert (
        found["files"] == 2
        and found["removable_refs"] == ["f" * 24]
        and found["missing_files"] == 0
    )
    done = payload_gc.remove(store, found["removable_refs"])
    assert done["removed"] == ["f" * 24] and done["bytes_freed"] == len(b"nobody names me")
    assert payload_gc.scan(store)["files"] == 1 and store.payload_get("f" * 24) is None
    del engine
    store_module.close_all()


def test_backfill_and_gc_through_the_cli_on_postgres(tmp_path, monkeypatch):
    """`lcm backfill-outputs --apply` moves inline tool results into payload rows (after a pg_dump), another
    host expands them, `--rollback --apply` puts them back, and `lcm gc-payloads --apply` then removes the
    orphaned rows."""
    import io
    import json

    from hermes_lcm.cli import main as cli

    from .pgserver import binaries, fresh_url

    url = fresh_url()
    monkeypatch.setenv("HERMES_HOME", str(tmp_path))
    monkeypatch.setenv("PATH", f"{binaries()}{os.pathsep}{os.environ.get('PATH', '')}")
    output = big_output(seed="later")
    writer = new_engine(tmp_path, 10**9, "s1", LCM_DATABASE_URL=url)
    writer.ingest_host(tool_turn("run", output, "c1"))

    def lcm(*argv: str) -> dict:
        out = io.StringIO()
        code = cli.main(["--db", url, "--format", "json", *argv], out=out, err=io.StringIO())
        assert code == 0, out.getvalue()
        return json.loads(out.getvalue())

    manifest = tmp_path / "m.json"
    done = lcm("backfill-outputs", "--apply", "--manifest", str(manifest), "--quiet")
    assert done["rewritten"] == 1 and done["backup"]["path"].endswith("-pre-backfill.dump")
    row = writer.core.store.messages_after(writer.core.binding.conversation_id, 0)[-1]
    ref = row.content.split("[lcm-output ref=")[1][:24]
    reader = new_engine(tmp_path / "other", 10**9, "s1", LCM_DATABASE_URL=url)
    assert read_all(reader, ref) == output
    back = lcm("backfill-outputs", "--rollback", str(manifest), "--apply", "--quiet")
    assert back["restored"] == 1
    assert writer.core.store.message(row.id).content == output
    gc = lcm("gc-payloads", "--apply", "--grace-seconds", "0")
    assert gc["status"] == "applied" and ref in gc["removed_refs"], gc
    assert writer.core.store.payload_get(ref) is None
    del writer, reader
    store_module.close_all()


def test_doctor_and_retention_count_payload_rows(tmp_path):
    from hermes_lcm.maintenance import retention

    from .pgserver import fresh_url

    engine = new_engine(tmp_path, 10**9, "s1", LCM_DATABASE_URL=fresh_url(), **ON)
    engine.ingest_host(tool_turn("run", big_output(seed="counted"), "c1"))
    stats = retention.payload_stats(engine.core.store.path, engine.core.store)
    assert stats["files"] == 1 and stats["bytes"] > 20_000
    del engine
    store_module.close_all()

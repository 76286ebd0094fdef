"""Payload GC on real databases the engine wrote: only true orphans go, never a file a row names
(even one committed between the scan and the delete), never a symlink or a file not named like ours."""

from __future__ import annotations

import base64
import gc
import io
import json
import os
import time
from pathlib import Path

import pytest

from hermes_lcm import store as store_module
from hermes_lcm.base import outputs, private
from hermes_lcm.base.payloads import PLACEHOLDER_PREFIX
from hermes_lcm.cli import main as cli
from hermes_lcm.command import handle_command
from hermes_lcm.maintenance import cleanup, doctor, payload_gc, repairs

from .conftest import new_engine

OLD = time.time() - 7 * 86400


def data_uri(seed: int) -> str:
    return "data:image/png;base64," + base64.b64encode(bytes([seed % 256]) * 3000).decode()


def refs_in(directory: Path) -> set[str]:
    return {p.name[:24] for p in directory.glob("*.payload") if not p.is_symlink()}


def age(directory: Path, *refs: str) -> None:
    for ref in refs:
        os.utime(directory / f"{ref}.payload", (OLD, OLD))


def plant(directory: Path, ref: str, text: str = "orphan bytes") -> None:
    (directory / f"{ref}.payload").write_text(text)
    age(directory, ref)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("HERMES_HOME", str(tmp_path))
    yield tmp_path
    store_module.close_all()


def stored_with_payload(home: Path, session: str = "s1", seed: int = 1):
    engine = new_engine(home, 10**9, session)
    engine.ingest_host(
        [
            {"role": "user", "content": f"look at this {data_uri(seed)} please"},
            {"role": "assistant", "content": "seen"},
        ]
    )
    return engine


def lcm(*argv: str) -> tuple[int, dict]:
    out = io.StringIO()
    code = cli.main(list(argv), out=out, err=io.StringIO())
    return code, json.loads(out.getvalue())


def test_preview_then_apply_removes_only_orphans(home: Path) -> None:
    engine = stored_with_payload(home)
    payloads = home / "lcm-payloads"
    (kept,) = refs_in(payloads)
    age(payloads, kept)
    orphan = "ab" * 12
    plant(payloads, orphan)
    (payloads / "notes.txt").write_text("not ours")
    (payloads / ("AB" * 12 + ".payload")).write_text("upper case: not a ref")
    outside = home / "outside.txt"
    outside.write_text("precious")
    os.symlink(outside, payloads / ("cd" * 12 + ".payload"))
    db = str(home / "lcm.db")
    before = {p.name for p in payloads.iterdir()}

    code, preview = lcm("--db", db, "gc-payloads")
    assert code == 0 and preview["status"] == "ready"
    assert preview["orphan_refs"] == [orphan] and preview["orphans"] == 1 and preview["files"] == 2
    assert preview["ignored"] == 3
    assert {p.name for p in payloads.iterdir()} == before  # the preview removes nothing

    code, done = lcm("--db", db, "gc-payloads", "--apply")
    assert code == 0 and done["status"] == "applied" and done["removed_refs"] == [orphan]
    assert Path(done["backup"]["path"]).is_file()
    assert {p.name for p in payloads.iterdir()} == before - {f"{orphan}.payload"}
    assert outside.read_text() == "precious" and (payloads / ("cd" * 12 + ".payload")).is_symlink()
    assert engine.core is not None and engine.core.guard.read(kept)[1] > 0
    assert lcm("--db", db, "gc-payloads", "--apply")[1]["status"] == "noop"


def test_files_of_rows_removed_by_doctor_clean_become_orphans(home: Path) -> None:
    stored_with_payload(home, "s1", 1)
    junk = stored_with_payload(home, "cron:nightly", 2)
    payloads = home / "lcm-payloads"
    assert len(refs_in(payloads)) == 2
    age(payloads, *refs_in(payloads))
    assert junk.core is not None
    store = junk.core.store
    assert repairs.gc_payloads_scan(store)["status"] == "noop"  # both referenced
    cleanup.lifecycle_apply(
        store, home / "bk", 0, allowed=True
    )  # empty session rows only: nothing freed
    assert repairs.gc_payloads_scan(store)["status"] == "noop"
    cleaned = cleanup.clean_apply(store, home / "bk", "cron:*", allowed=True)
    assert cleaned["deleted"]["messages"] == 2
    plan = repairs.gc_payloads_scan(store)
    assert plan["orphans"] == 1
    done = repairs.gc_payloads_apply(store, home / "bk")
    assert done["removed"] == 1 and len(refs_in(payloads)) == 1
    (left,) = refs_in(payloads)
    assert store.message_ids_mentioning(left, None)  # the survivor is the one a row still names


def test_a_row_committed_between_scan_and_delete_keeps_its_file(home: Path) -> None:
    engine = stored_with_payload(home)
    assert engine.core is not None
    store = engine.core.store
    payloads = home / "lcm-payloads"
    orphan = "ef" * 12
    plant(payloads, orphan)
    plan = payload_gc.scan(store)
    assert plan["removable_refs"] == [orphan]
    # A writer commits a row naming the file after the scan (the placeholder is a fixed point:
    # no file is written, so the file stays old and only the re-check under the lock can save it).
    engine.ingest_host(
        [{"role": "user", "content": f"again {PLACEHOLDER_PREFIX}{orphan} mime=image/png chars=9]"}]
    )
    done = payload_gc.remove(store, plan["removable_refs"])
    assert done["removed"] == [] and done["kept"] == {orphan: "referenced now"}
    assert (payloads / f"{orphan}.payload").read_text() == "orphan bytes"


def test_a_file_a_writer_reuses_meanwhile_is_kept(home: Path) -> None:
    engine = stored_with_payload(home)
    assert engine.core is not None
    store = engine.core.store
    payloads = home / "lcm-payloads"
    orphan = "0a" * 12
    plant(payloads, orphan)
    plan = payload_gc.scan(store)
    assert plan["removable_refs"] == [orphan]
    # The content-addressed write finds the file already there and touches it (its row comes next).
    assert private.write_new(payloads, f"{orphan}.payload", b"orphan bytes") is False
    done = payload_gc.remove(store, plan["removable_refs"])
    assert done["kept"] == {orphan: "fresh"} and (payloads / f"{orphan}.payload").is_file()
    assert not [p for p in payloads.iterdir() if ".gc-" in p.name]  # nothing left aside


def test_a_symlinked_payload_directory_is_refused(home: Path) -> None:
    engine = stored_with_payload(home)
    assert engine.core is not None
    store = engine.core.store
    elsewhere = home / "elsewhere"
    (home / "lcm-payloads").rename(elsewhere)
    plant(elsewhere, "12" * 12)
    os.symlink(elsewhere, home / "lcm-payloads")
    plan = repairs.gc_payloads_scan(store)
    assert plan["status"] == "noop" and "symlink" in plan["refused"]
    assert payload_gc.remove(store, ["12" * 12])["removed"] == []
    assert (elsewhere / ("12" * 12 + ".payload")).is_file()


def test_doctor_reports_orphans_and_missing_files_without_content(home: Path) -> None:
    engine = stored_with_payload(home)
    assert engine.core is not None
    store = engine.core.store
    payloads = home / "lcm-payloads"
    (referenced,) = refs_in(payloads)
    secret_text = "orphan-secret-words"
    plant(payloads, "34" * 12, secret_text)
    check = next(c for c in doctor.doctor_report(store)["checks"] if c["name"] == "payloads")
    assert check["status"] == "warn" and check["data"]["orphans"] == 1
    (payloads / f"{referenced}.payload").unlink()
    report = doctor.doctor_report(store)
    check = next(c for c in report["checks"] if c["name"] == "payloads")
    assert check["status"] == "warn" and check["data"]["missing_files"] == 1
    assert check["data"]["missing_sample"][0]["ref"] == referenced
    assert check["data"]["missing_sample"][0]["kind"] == "message"
    assert secret_text not in json.dumps(report) and "look at this" not in json.dumps(report)


def test_slash_command_previews_then_applies(home: Path) -> None:
    gc.collect()  # no live engine of another test
    engine = new_engine(home, 10**9, "s1", LCM_ENABLE_SLASH_COMMAND="1")
    engine.ingest_host([{"role": "user", "content": f"see {data_uri(3)}"}])
    payloads = home / "lcm-payloads"
    plant(payloads, "56" * 12)
    preview = json.loads(handle_command("gc-payloads --json"))
    assert preview["orphan_refs"] == ["56" * 12] and (payloads / ("56" * 12 + ".payload")).exists()
    done = json.loads(handle_command("gc-payloads apply --json"))
    assert done["status"] == "applied" and not (payloads / ("56" * 12 + ".payload")).exists()
    assert len(refs_in(payloads)) == 1


def test_a_payload_named_only_inside_a_referenced_output_file_is_kept(home: Path) -> None:
    engine = stored_with_payload(home)
    assert engine.core is not None
    payloads = home / "lcm-payloads"
    inner, outer, loose = "78" * 12, "9a" * 12, "bc" * 12
    plant(payloads, inner, "QUJD" * 10)
    plant(payloads, loose, "QUJD" * 11)
    output = f"tool printed {PLACEHOLDER_PREFIX}{inner} mime=image/png chars=40] and more\\n" * 3
    plant(payloads, outer, output)
    engine.ingest_host([{"role": "user", "content": outputs.stub(output, outer, 20)}])
    plan = payload_gc.scan(engine.core.store)
    assert plan["removable_refs"] == [loose]

"""Payload files and the importer never write or read through a planted symlink.

Attacks, each through a real engine (or the real importer) on real files:
* a symlink planted at the old predictable temp name (``<ref>.tmp<pid>``) and at the payload's own
  name, pointing at a file outside: the write must not reach it;
* the payload directory replaced by a symlink to a directory outside: nothing is written there, the
  refusal is visible in status and doctor, the host's call does not fail, and a payload "stored" in
  the outside directory is not read back through the link;
* symlinks in a JSONL import directory pointing at sessions and files outside: not read, and the
  report says they were skipped.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

from hermes_lcm import store as store_module
from hermes_lcm.engine import LcmEngine
from hermes_lcm.importers.claw import run_import

from ..conftest import new_engine
from ..test_import_fixtures import openclaw_session

IMAGE = "data:image/png;base64," + "iVBORw0KGgo" + "QUFB" * 1200
ORIGINAL = "victim file: must stay exactly like this\n"


def ref_of(engine: LcmEngine) -> str:
    """The image's ref in the engine's database (keyed by its secret: known once it exists)."""
    core = engine.ensure_core()
    assert core is not None
    return core.guard.ref_for(IMAGE)


def send_image(engine: LcmEngine, text: str = "look at this") -> list[dict[str, str]]:
    messages = [
        {"role": "user", "content": f"{text} {IMAGE}"},
        {"role": "assistant", "content": "I see a chart."},
    ]
    engine.ingest_host(messages)
    return messages


def victim(tmp_path: Path) -> Path:
    outside = tmp_path / "outside"
    outside.mkdir(exist_ok=True)
    path = outside / "victim.txt"
    path.write_text(ORIGINAL)
    return path


def test_symlink_at_predictable_temp_name_redirects_nothing(tmp_path: Path) -> None:
    home = tmp_path / "home"
    target = victim(tmp_path)
    payloads = home / "lcm-payloads"
    engine = new_engine(home)
    ref = ref_of(engine)
    payloads.mkdir(parents=True, exist_ok=True)
    os.symlink(target, payloads / f"{ref}.tmp{os.getpid()}")  # the old temp name
    send_image(engine)
    assert target.read_text() == ORIGINAL, "the payload write followed the planted symlink"
    stored = payloads / f"{ref}.payload"
    assert stored.is_file() and not stored.is_symlink() and stored.read_text() == IMAGE
    answer = json.loads(engine.handle_tool_call("lcm_expand", {"externalized_ref": ref}))
    assert answer.get("content") == IMAGE[: len(answer.get("content", ""))] and answer.get(
        "chars"
    ) == len(IMAGE), answer
    store_module.close_all()


def test_symlink_at_payload_name_is_replaced_not_followed(tmp_path: Path) -> None:
    home = tmp_path / "home"
    target = victim(tmp_path)
    payloads = home / "lcm-payloads"
    engine = new_engine(home)
    ref = ref_of(engine)
    payloads.mkdir(parents=True, exist_ok=True)
    os.symlink(target, payloads / f"{ref}.payload")
    send_image(engine)
    assert target.read_text() == ORIGINAL
    answer = json.loads(engine.handle_tool_call("lcm_expand", {"externalized_ref": ref}))
    assert "victim file" not in json.dumps(answer) and answer.get("chars") == len(IMAGE), answer
    store_module.close_all()


def test_symlinked_payload_directory_is_refused(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink(outside, home / "lcm-payloads")
    engine = new_engine(home)
    messages = send_image(engine)  # must not raise into the host
    assert list(outside.iterdir()) == [], "a payload was written through the symlinked directory"
    status = engine.get_status()
    assert status["payload_write_failures"] >= 1
    assert "symlink" in (status["payload_problem"] or ""), status["payload_problem"]
    doctor = json.loads(engine.handle_tool_call("lcm_doctor", {}))
    payload_check = next(c for c in doctor["checks"] if c["name"] == "payloads")
    assert payload_check["status"] == "fail" and "symlink" in payload_check["detail"], payload_check
    # the message is kept whole (inline), so nothing is lost
    core = engine.ensure_core()
    assert core is not None and core.binding.conversation_id is not None
    stored = core.store.messages_after(core.binding.conversation_id, 0)
    assert any(IMAGE in m.content for m in stored)
    # a file planted in the outside directory is not read back through the link either
    ref = ref_of(engine)
    (outside / f"{ref}.payload").write_text("SECRET FROM OUTSIDE")
    assert engine.compress(messages, current_tokens=100) is not None
    try:
        core.guard.read(ref)
        read_through = True
    except FileNotFoundError:
        read_through = False
    assert not read_through, "a payload was read through the symlinked directory"
    store_module.close_all()


def test_payload_directory_swapped_for_symlink_is_not_read(tmp_path: Path) -> None:
    """A payload stored normally; then its directory is swapped for a link to a planted copy."""
    home = tmp_path / "home"
    engine = new_engine(home)
    send_image(engine)
    ref = ref_of(engine)
    payloads = home / "lcm-payloads"
    assert (payloads / f"{ref}.payload").is_file()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / f"{ref}.payload").write_text("SECRET FROM OUTSIDE")
    payloads.rename(home / "moved-away")
    os.symlink(outside, payloads)
    answer = engine.handle_tool_call("lcm_expand", {"externalized_ref": ref})
    assert "SECRET FROM OUTSIDE" not in answer, answer
    store_module.close_all()


def test_a_fifo_or_a_hard_link_at_a_payload_name_is_refused_without_blocking(
    tmp_path: Path,
) -> None:
    """Someone with write access to the payload folder plants a FIFO (a read would wait forever)
    or a hard link to another file at a payload's name: lcm_expand answers at once, reads neither."""
    import threading

    home = tmp_path / "home"
    engine = new_engine(home)
    send_image(engine)
    ref = ref_of(engine)
    path = home / "lcm-payloads" / f"{ref}.payload"
    for plant in ("fifo", "hardlink"):
        path.unlink()
        if plant == "fifo":
            os.mkfifo(path)
        else:
            other = victim(tmp_path)
            os.link(other, path)
        answers: list[str] = []

        def ask(into: list[str] = answers) -> None:
            into.append(engine.handle_tool_call("lcm_expand", {"externalized_ref": ref}))

        worker = threading.Thread(target=ask, daemon=True)
        worker.start()
        worker.join(10)
        assert answers, f"lcm_expand blocked on a planted {plant}"
        assert "error" in json.loads(answers[0]) and ORIGINAL.strip() not in answers[0], answers[0]
    store_module.close_all()


def test_importer_skips_symlinks_in_a_jsonl_directory(tmp_path: Path) -> None:
    sessions = tmp_path / "sessions"
    sessions.mkdir()
    openclaw_session(sessions, "sess-inside")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    outside_session = openclaw_session(elsewhere, "sess-outside")
    secret = elsewhere / "secret.txt"
    secret.write_text('{"type": "session", "id": "secret-file"}\n')
    os.symlink(outside_session, sessions / "linked.jsonl")
    os.symlink(secret, sessions / "secret.jsonl")
    os.symlink(tmp_path / "missing.jsonl", sessions / "dangling.jsonl")
    target = tmp_path / "home" / "lcm.db"
    report = run_import(target_db=target, jsonl_dirs=[sessions], import_id="imp", apply=True)
    assert report["imported"] > 0
    assert sorted(Path(p).name for p in report["skipped_symlinks"]) == [
        "dangling.jsonl",
        "linked.jsonl",
        "secret.jsonl",
    ]
    assert all("linked" not in s and "secret" not in s for s in report["source"]), report["source"]
    assert any("symlink, skipped" in w for w in report["warnings"])
    store_module.close_all()
    con = sqlite3.connect(f"file:{target}?mode=ro", uri=True)
    try:
        rows = json.dumps(
            [list(r) for r in con.execute("SELECT * FROM conversations")]
            + [
                list(r)
                for r in con.execute(
                    "SELECT DISTINCT k.name FROM messages m JOIN session_keys k ON k.id=m.session_key"
                )
            ]
        )
    finally:
        con.close()
    assert "sess-inside" in rows
    assert "sess-outside" not in rows and "secret-file" not in rows, rows

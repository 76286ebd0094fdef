"""A payload is read only by the owner whose own rows the engine itself wrote with its ref.

Two people share one database (a gateway: each chat is an owner); Bob stores a large tool output
and an image. Alice never stored either, so every way she can make one of her own rows *name*
Bob's refs must still give her nothing: a tool result holding Bob's whole stub, a user message
typing Bob's image placeholder, her assistant's text quoting it, Bob's stub header pasted into a
tool result, lcm_describe, the evidence tools, and the prompt her model is handed. A ref is keyed
by the database's own secret, so one computed from a known content (plain sha256) or carried from
another database names nothing. An old database (unkeyed refs, no grants) is migrated so that
every payload stays readable by its rightful owner and by nobody else. Real engines, real files,
real PostgreSQL for the tests marked ``both_backends``.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from hermes_lcm import store as store_module
from hermes_lcm.engine import LcmEngine
from hermes_lcm.ingest.normalize import fingerprint_of
from hermes_lcm.maintenance import payload_gc
from hermes_lcm.store import Store, open_store
from hermes_lcm.store import blobs_of as store_module_blobs
from hermes_lcm.store import directory_of as store_module_dir

from ..backends import matching_ids, raw_sql
from ..tooltest import err, ok
from .test_scope import engine_for

ON = {
    "LCM_LARGE_OUTPUT_EXTERNALIZATION_ENABLED": "true",
    "LCM_LARGE_OUTPUT_EXTERNALIZATION_THRESHOLD_CHARS": "2000",
}
MIDDLE = "BOBMIDDLESECRET"  # deep inside Bob's output: never in its stub's head or tail preview
OUTPUT = (
    "\n".join(f"bob line {i}: build step ok" for i in range(150))
    + f"\n{MIDDLE}\n"
    + "\n".join(f"bob line {i}: build step ok" for i in range(150, 300))
)
IMAGE = base64.b64encode(os.urandom(3000)).decode()
IMAGE_PIECE = IMAGE[1500:1560]  # any slice of the image's bytes in an answer would be a leak
_OUTPUT_REF = re.compile(r"\[lcm-output ref=([0-9a-f]{24})")
_PAYLOAD = re.compile(r"\[lcm-payload ref=([0-9a-f]{24})[^\]]*\]")


def legacy(text: str | bytes) -> str:
    """A ref of the old scheme: the unkeyed sha256 prefix of the content."""
    data = text.encode() if isinstance(text, str) else text
    return hashlib.sha256(data).hexdigest()[:24]


def tool_turn(ask: str, output: str, call_id: str) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": ask},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": "terminal", "arguments": '{"cmd": "make"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": call_id, "content": output},
    ]


def rows(engine: LcmEngine) -> list[Any]:
    core = engine.core
    assert core is not None and core.binding.conversation_id is not None
    return core.store.messages_after(core.binding.conversation_id, 0)


def bob_history() -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": f"look: data:image/png;base64,{IMAGE} thanks"},
        {"role": "assistant", "content": "a chart"},
        *tool_turn("build it", OUTPUT, "bob-1"),
        {"role": "assistant", "content": "built"},
    ]


def bob_stores(home: Path, env: dict[str, str]) -> tuple[LcmEngine, str, str, str, str]:
    """Bob's engine, his output's stub and ref, his image's placeholder and ref."""
    bob = engine_for(home, "bob", "bob-chat", **ON, **env)
    bob.ingest_host(bob_history())
    stored = rows(bob)
    stub = next(r.content for r in stored if r.role == "tool")
    placeholder = _PAYLOAD.search(stored[0].content)
    found = _OUTPUT_REF.match(stub)
    assert found is not None and placeholder is not None
    return bob, stub, found.group(1), placeholder.group(0), placeholder.group(1)


def refused(alice: LcmEngine, ref: str) -> None:
    """Neither tool gives Alice the payload, or tells her anything a missing ref would not."""
    missing = "0" * 24
    for scope in ({}, {"session_scope": "all"}):
        for name in ("lcm_expand", "lcm_describe"):
            answer = err(alice, name, externalized_ref=ref, **scope)
            assert MIDDLE not in answer and IMAGE_PIECE not in answer
            assert answer == err(alice, name, externalized_ref=missing, **scope).replace(
                missing, ref
            )


def read_payload(engine: LcmEngine, ref: str, **scope: Any) -> str:
    text, offset = "", 0
    while offset is not None:
        page = ok(engine, "lcm_expand", externalized_ref=ref, content_offset=offset, **scope)
        text += page["content"]
        offset = page["next_content_offset"]
    return text


# -- the attacks -----------------------------------------------------------------------------------


@pytest.mark.both_backends
def test_a_tool_result_holding_anothers_whole_stub_grants_nothing(
    tmp_path: Path, backend_env: dict[str, str]
) -> None:
    _bob, stub, ref, _, _ = bob_stores(tmp_path, backend_env)
    alice = engine_for(tmp_path, "alice", "alice-chat", **ON, **backend_env)
    alice.ingest_host(
        [*tool_turn("cat it", stub, "alice-1"), {"role": "assistant", "content": "ok"}]
    )
    assert any(r.content == stub for r in rows(alice))  # her own row names Bob's ref, byte for byte
    refused(alice, ref)


@pytest.mark.both_backends
def test_a_user_message_typing_anothers_image_placeholder_grants_nothing(
    tmp_path: Path, backend_env: dict[str, str]
) -> None:
    _bob, _, _, placeholder, ref = bob_stores(tmp_path, backend_env)
    alice = engine_for(tmp_path, "alice", "alice-chat", **ON, **backend_env)
    alice.ingest_host([{"role": "user", "content": f"what is in {placeholder}?"}])
    refused(alice, ref)


@pytest.mark.both_backends
def test_a_placeholder_in_her_own_assistants_text_grants_nothing(
    tmp_path: Path, backend_env: dict[str, str]
) -> None:
    _bob, _, _, placeholder, ref = bob_stores(tmp_path, backend_env)
    alice = engine_for(tmp_path, "alice", "alice-chat", **ON, **backend_env)
    alice.ingest_host(
        [
            {"role": "user", "content": "draw something"},
            {"role": "assistant", "content": f"here it is: {placeholder}"},
        ]
    )
    refused(alice, ref)


@pytest.mark.both_backends
def test_anothers_stub_header_pasted_verbatim_grants_nothing(
    tmp_path: Path, backend_env: dict[str, str]
) -> None:
    _bob, stub, ref, _, _ = bob_stores(tmp_path, backend_env)
    header = stub.split("\n", 1)[0]
    alice = engine_for(tmp_path, "alice", "alice-chat", **ON, **backend_env)
    alice.ingest_host(
        [
            *tool_turn("echo", header, "alice-1"),
            {"role": "assistant", "content": "ok"},
            *tool_turn("echo again", f"log:\n{header}\nend", "alice-2"),
            {"role": "user", "content": header},
        ]
    )
    refused(alice, ref)


@pytest.mark.both_backends
def test_describe_tells_nothing_of_anothers_payload(
    tmp_path: Path, backend_env: dict[str, str]
) -> None:
    _bob, stub, ref, placeholder, image_ref = bob_stores(tmp_path, backend_env)
    alice = engine_for(tmp_path, "alice", "alice-chat", **ON, **backend_env)
    alice.ingest_host(
        [*tool_turn("cat", stub, "alice-1"), {"role": "user", "content": placeholder}]
    )
    for guess in (ref, image_ref):
        for scope in ({}, {"session_scope": "all"}):
            answer = json.loads(
                alice.handle_tool_call("lcm_describe", {"externalized_ref": guess, **scope})
            )
            assert "error" in answer and not {"chars", "lines", "mime", "referenced_by"} & set(
                answer
            ), answer


@pytest.mark.both_backends
def test_the_evidence_tools_and_the_prompt_never_carry_anothers_payload(
    tmp_path: Path, backend_env: dict[str, str]
) -> None:
    _bob, stub, _ref, placeholder, _ = bob_stores(tmp_path, backend_env)
    alice = engine_for(
        tmp_path, "alice", "alice-chat", **ON, **backend_env, LCM_ADAPTIVE_RETRIEVAL_ENABLED="true"
    )
    history = [
        {"role": "user", "content": f"bob line image {placeholder}"},
        *tool_turn("cat bob line", stub, "a-1"),
    ]
    alice.ingest_host(history)
    ids = [r.id for r in rows(alice)]
    claims = [{"text": "bob line", "refs": ids}]
    for name, args in (
        ("lcm_evidence_pack", {"refs": ids}),
        ("lcm_compile_evidence", {"question": "bob line?", "claims": claims}),
        ("lcm_retrieve", {"question": "what did bob line say?"}),
    ):
        answer = alice.handle_tool_call(name, args)
        assert MIDDLE not in answer and IMAGE_PIECE not in answer, name
    # The tool result is not answered yet: the prompt shows such an output whole, but only one the
    # engine itself externalized for this owner; a quoted stub stays the stub.
    core = alice.core
    assert core is not None
    prompt = core.assemble(core.budget(60_000, 0))
    assert (
        MIDDLE not in json.dumps(prompt)
        and [m for m in prompt if m.get("role") == "tool"][-1]["content"] == stub
    )
    own = engine_for(tmp_path, "bob", "bob-chat", **ON, **backend_env)
    own.ingest_host(tool_turn("again", OUTPUT, "bob-2"))
    assert own.core is not None  # his own unanswered output is shown whole
    assert MIDDLE in json.dumps(own.core.assemble(own.core.budget(60_000, 0)))


@pytest.mark.both_backends
def test_a_ref_computed_from_a_known_content_is_refused(
    tmp_path: Path, backend_env: dict[str, str]
) -> None:
    bob, _, ref, _, image_ref = bob_stores(tmp_path, backend_env)
    guessed, guessed_image = legacy(OUTPUT), legacy(f"data:image/png;base64,{IMAGE}")
    assert guessed != ref and guessed_image != image_ref  # keyed: the content alone names nothing
    alice = engine_for(tmp_path, "alice", "alice-chat", **ON, **backend_env)
    forged = (
        f"[lcm-output ref={guessed} chars={len(OUTPUT)} lines=301: the whole output is in a file; "
        f"lcm_expand externalized_ref={guessed} pages it]\nbob line 0"
    )
    typed = f"[lcm-payload ref={guessed_image} mime=image/png chars={len(IMAGE) + 22}]"
    alice.ingest_host([*tool_turn("guess", forged, "a-1"), {"role": "user", "content": typed}])
    refused(alice, guessed)
    refused(alice, guessed_image)
    for guess in (guessed, guessed_image):  # Bob himself: his rows never named those
        assert "error" in json.loads(
            bob.handle_tool_call("lcm_expand", {"externalized_ref": guess})
        )


def test_a_ref_of_another_database_is_refused(tmp_path: Path) -> None:
    x = engine_for(tmp_path / "x", "bob", "bob-chat", **ON)
    x.ingest_host(tool_turn("build", OUTPUT, "c1"))
    y = engine_for(tmp_path / "y", "bob", "bob-chat", **ON)
    y.ingest_host(tool_turn("build", OUTPUT, "c1"))
    ref_x = _OUTPUT_REF.match(rows(x)[-1].content)
    ref_y = _OUTPUT_REF.match(rows(y)[-1].content)
    assert ref_x is not None and ref_y is not None
    assert ref_x.group(1) != ref_y.group(1)  # the same content, keyed by each database's own secret
    assert read_payload(y, ref_y.group(1)) == OUTPUT
    # The stub carried from X into Y (a copied row, a pasted answer) names nothing in Y.
    y.ingest_host(
        [
            *tool_turn("build", OUTPUT, "c1"),
            {"role": "assistant", "content": "x said:"},
            *tool_turn("replay", rows(x)[-1].content, "c2"),
        ]
    )
    for scope in ({}, {"session_scope": "all"}):
        assert MIDDLE not in err(y, "lcm_expand", externalized_ref=ref_x.group(1), **scope)
    store_module.close_all()


@pytest.mark.both_backends
def test_the_owner_still_reads_every_payload_of_her_own(
    tmp_path: Path, backend_env: dict[str, str]
) -> None:
    bob, _, ref, _, image_ref = bob_stores(tmp_path, backend_env)
    assert read_payload(bob, ref) == OUTPUT
    assert IMAGE in read_payload(bob, image_ref)
    described = ok(bob, "lcm_describe", externalized_ref=ref)
    assert described["chars"] == len(OUTPUT) and described["kind"] == "large tool output"
    # Another owner who stores the very same content is granted her own copy (deduplicated).
    alice = engine_for(tmp_path, "alice", "alice-chat", **ON, **backend_env)
    alice.ingest_host(tool_turn("build the same", OUTPUT, "a-1"))
    assert _OUTPUT_REF.match(rows(alice)[-1].content).group(1) == ref  # type: ignore[union-attr]
    assert read_payload(alice, ref) == OUTPUT


def test_redact_moves_the_grant_and_a_quote_keeps_no_secret_at_rest(tmp_path: Path) -> None:
    from hermes_lcm.maintenance import scrub

    secret = "sk-proj-" + "Q7rT2mX9vL4pZ8kW1nB6cY3hJ5dF0gS2aE7uI9oR"
    output = OUTPUT.replace(MIDDLE, f"{MIDDLE} OPENAI_API_KEY={secret}")
    bob = engine_for(tmp_path, "bob", "bob-chat", **ON)
    bob.ingest_host(tool_turn("build", output, "b-1"))
    stub = rows(bob)[-1].content
    old = _OUTPUT_REF.match(stub).group(1)  # type: ignore[union-attr]
    alice = engine_for(tmp_path, "alice", "alice-chat", **ON)
    alice.ingest_host([*tool_turn("cat", stub, "a-1"), {"role": "assistant", "content": "ok"}])
    assert bob.core is not None
    result = scrub.apply(bob.core.store, "all", 1200, tmp_path / "backups")
    assert result["status"] == "applied" and result["removed_payload_files"] == 1
    new = _OUTPUT_REF.match(rows(bob)[-1].content).group(1)  # type: ignore[union-attr]
    assert new != old
    text = read_payload(bob, new)  # the grant moved with the stub to the redacted file
    assert secret not in text and MIDDLE in text and "[lcm-redacted:" in text
    assert "error" in json.loads(bob.handle_tool_call("lcm_expand", {"externalized_ref": old}))
    refused(alice, new)
    refused(alice, old)  # her quote was not made a grant, and kept no old file alive
    assert not any(
        secret.encode() in f.read_bytes() for f in (tmp_path / "lcm-payloads").glob("*.payload")
    )
    store_module.close_all()


# -- an old database ---------------------------------------------------------------------------------


def _swap(text: str | None, mapping: dict[str, str]) -> str | None:
    if text is None:
        return None
    for new, old in mapping.items():
        text = text.replace(new, old)
    return text


def downgrade(path: str) -> dict[str, str]:
    """Make the database at ``path`` one the old scheme wrote: every payload named by the unkeyed
    sha256 of its content (files renamed, rows rewritten, fingerprints as the old stubs hashed them),
    no grants, no ref key, schema 4. Returns {keyed ref: old ref}."""
    store: Any = open_store(path)
    directory, blobs = store_module_dir(path), store_module_blobs(store)
    mapping: dict[str, str] = {}
    if blobs is None:
        for file in sorted(directory.glob("*.payload")):
            old = legacy(file.read_bytes())
            mapping[file.stem] = old
            file.rename(directory / f"{old}.payload")
    else:
        for ref, _size, _at in store.payload_list():
            data = blobs.payload_get(ref)
            assert data is not None
            mapping[ref] = legacy(data)
            raw_sql(path, "UPDATE payloads SET ref=? WHERE ref=?", (legacy(data), ref))
    with store.write():
        for m, fingerprint in store.message_rows_after(0, 10**6):
            new = {
                k: _swap(getattr(m, k), mapping)
                for k in ("content", "parts", "tool_calls", "extra")
            }
            if new == {k: getattr(m, k) for k in new}:
                continue
            head = {"role": m.role, "tool_call_id": m.tool_call_id}
            if fingerprint == fingerprint_of(head, (m.content, m.parts, m.tool_calls)):
                fingerprint = fingerprint_of(
                    head, (new["content"], new["parts"], new["tool_calls"])
                )
            store.rewrite_message(m.id, {**new, "tokens": m.tokens, "fingerprint": fingerprint})
        for row_id, text in store.text_rows_after("summaries", 0, 10**6):
            if _swap(text, mapping) != text:
                store.rewrite_text("summaries", row_id, _swap(text, mapping))
    store_module.close_all()
    for table in ("payload_refs", "payload_ref_aliases"):
        raw_sql(path, f"DROP TABLE IF EXISTS {table}")
    raw_sql(
        path, "DELETE FROM meta WHERE key IN ('mark:payload-refs-keyed', 'secret:payload_refs')"
    )
    raw_sql(path, "UPDATE meta SET value='4' WHERE key='schema_version'")
    raw_sql(path, "UPDATE meta SET value='2' WHERE key='pg_schema'")
    return mapping


def old_database(home: Path, env: dict[str, str]) -> tuple[str, dict[str, str], dict[str, Any]]:
    """Bob's payloads and Alice's every kind of quote of them, then the database made old."""
    bob, stub, ref, placeholder, image_ref = bob_stores(home, env)
    alice = engine_for(home, "alice", "alice-chat", **ON, **env)
    own = OUTPUT.replace("bob", "alice")
    header = stub.split("\n", 1)[0]
    alice_history = [
        *tool_turn("cat", stub, "a-1"),
        {"role": "assistant", "content": f"I see {placeholder}"},
        {"role": "user", "content": f"and {placeholder}? {header}"},
        *tool_turn("echo", f"log:\n{header}\nend", "a-2"),
        {"role": "assistant", "content": "ok"},
        *tool_turn("mine", own, "a-3"),
        {"role": "assistant", "content": "done"},
    ]
    alice.ingest_host(alice_history)
    alice_ref = _OUTPUT_REF.match(rows(alice)[-2].content).group(1)  # type: ignore[union-attr]
    assert bob.core is not None
    path = store_module.writable_target(bob.core.store)
    store_module.close_all()
    mapping = downgrade(path)
    return (
        path,
        mapping,
        {
            "ref": ref,
            "image_ref": image_ref,
            "alice_ref": alice_ref,
            "own": own,
            "alice_history": alice_history,
        },
    )


def after_upgrade(home: Path, env: dict[str, str]) -> tuple[LcmEngine, LcmEngine]:
    bob = engine_for(home, "bob", "bob-chat", **ON, **env)
    alice = engine_for(home, "alice", "alice-chat", **ON, **env)
    return bob, alice


def _new_refs(engine: LcmEngine) -> tuple[str, str]:
    stored = rows(engine)
    out = _OUTPUT_REF.match(next(r.content for r in stored if r.role == "tool"))
    image = _PAYLOAD.search(stored[0].content)
    assert out is not None and image is not None
    return out.group(1), image.group(1)


@pytest.mark.both_backends
def test_an_old_database_keeps_each_payload_its_rightful_owners_alone(
    tmp_path: Path, backend_env: dict[str, str]
) -> None:
    path, mapping, facts = old_database(tmp_path, backend_env)
    old_ref, old_image, old_alice = (mapping[facts[k]] for k in ("ref", "image_ref", "alice_ref"))
    bob, alice = after_upgrade(tmp_path, backend_env)
    new_ref, new_image = _new_refs(bob)
    assert new_ref not in (old_ref, facts["ref"]) and new_image not in (
        old_image,
        facts["image_ref"],
    )
    assert read_payload(bob, new_ref) == OUTPUT and IMAGE in read_payload(bob, new_image)
    for ref in (new_ref, new_image, old_ref, old_image):
        refused(alice, ref)
    mine = _OUTPUT_REF.match(rows(alice)[-2].content).group(1)  # type: ignore[union-attr]
    assert mine != old_alice and read_payload(alice, mine) == facts["own"]
    # No row names an old ref any more, the index follows the rows, the old names are gone.
    for old in (old_ref, old_image, old_alice):
        assert not any(old in (r.content + (r.parts or "")) for e in (bob, alice) for r in rows(e))
        assert matching_ids(path, f'"{old}"', None) == set()
    assert any(
        r.role == "tool" for r in rows(bob) if r.id in matching_ids(path, f'"{new_ref}"', None)
    )
    store: Store = bob.core.store  # type: ignore[union-attr]
    assert payload_gc.bytes_of(store, store_module_dir(path), old_ref) is None
    assert payload_gc.bytes_of(store, store_module_dir(path), new_ref) == OUTPUT.encode()
    # The host's copies still align: the whole output, and the old stub a compress once handed it.
    before = len(rows(bob))
    bob.ingest_host(bob_history())
    old_stub = next(r.content for r in rows(bob) if r.role == "tool").replace(new_ref, old_ref)
    replayed = bob_history()
    replayed[4] = {**replayed[4], "content": old_stub}
    bob.ingest_host(replayed)
    assert len(rows(bob)) == before
    store_module.close_all()


@pytest.mark.both_backends
def test_an_interrupted_upgrade_finishes_on_the_next_start(
    tmp_path: Path, backend_env: dict[str, str]
) -> None:
    from hermes_lcm.maintenance import payload_rekey

    path, mapping, facts = old_database(tmp_path, backend_env)
    store: Any = open_store(path)
    calls = []

    def crash(message_id: int) -> None:
        calls.append(message_id)
        if len(calls) == 2:
            raise RuntimeError("killed in the middle of the rewrite")

    with pytest.raises(RuntimeError):
        payload_rekey.upgrade(store, on_row=crash)
    still = raw_sql(
        path, "SELECT count(*) FROM messages WHERE instr(content, ?) > 0", (mapping[facts["ref"]],)
    )
    assert still[0][0] >= 1  # the rewrite is one transaction: nothing of it was kept
    renamed = set(store.ref_aliases().values())  # SQLite: the files were renamed before the rows
    assert not renamed & set(
        payload_gc.scan(store, grace_seconds=0)["removable_refs"]
    )  # gc keeps them
    store_module.close_all()
    bob, alice = after_upgrade(tmp_path, backend_env)
    new_ref, new_image = _new_refs(bob)
    assert read_payload(bob, new_ref) == OUTPUT and IMAGE in read_payload(bob, new_image)
    refused(alice, new_ref)
    refused(alice, new_image)
    assert payload_rekey.upgrade(bob.core.store)["status"] == "done"  # type: ignore[union-attr]
    store_module.close_all()

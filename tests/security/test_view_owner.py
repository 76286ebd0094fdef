"""``/lcm view`` in a gateway serving two people: whoever types it gets a page of their own
conversations only, whether the conversation is named by id, by ``session=``, or not at all.

The caller is the session the host bound to the message being handled: the gateway's
``HERMES_SESSION_ID`` ContextVar, set here by the host's own ``set_session_vars`` in a context of
its own, as the gateway sets it per message. The host's module is loaded from its file alone (its
package's ``__init__`` imports the whole gateway, whose ``tools`` would be this checkout's).
Alice and Bob share one database (both backends); Bob's engine is the newest live one. No answer
Alice gets may carry Bob's words, name his conversation, or list his session, and no page of his
is written; a session of her own owner is still hers to view.
"""

from __future__ import annotations

import contextvars
import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

from hermes_lcm import store as store_module
from hermes_lcm.command import handle_command

from ..test_view import page_data
from .test_scope import engine_for, fill


@pytest.fixture(autouse=True)
def session_context(monkeypatch) -> ModuleType:
    """The host's gateway/session_context.py, in sys.modules under its name as the gateway loads it."""
    spec = importlib.util.find_spec("gateway")
    assert spec is not None and spec.submodule_search_locations
    path = Path(next(iter(spec.submodule_search_locations))) / "session_context.py"
    found = importlib.util.spec_from_file_location("gateway.session_context", path)
    assert found is not None and found.loader is not None
    module = importlib.util.module_from_spec(found)
    found.loader.exec_module(module)
    monkeypatch.setitem(sys.modules, "gateway.session_context", module)
    monkeypatch.delenv("HERMES_SESSION_ID", raising=False)
    return module


def as_caller(session: str, text: str) -> str:
    """``/lcm <text>`` handled as the gateway handles a message from ``session``'s chat."""
    context = sys.modules["gateway.session_context"]

    def handle() -> str:
        context.set_session_vars(platform="telegram", session_id=session)
        return handle_command(text)

    return contextvars.copy_context().run(handle)


def pages(home: Path) -> dict[str, str]:
    return (
        {p.name: p.read_text(encoding="utf-8") for p in (home / "lcm-views").rglob("*.html")}
        if (home / "lcm-views").exists()
        else {}
    )


@pytest.fixture
def gateway(clean_home, backend_env):
    """Alice and Bob in their own chats, one database; Bob's engine started last."""
    alice = engine_for(clean_home, "tg-alice-1", "111", LCM_ENABLE_SLASH_COMMAND="1", **backend_env)
    fill(alice, "aliceword", seed=1, turns=8)
    bob = engine_for(clean_home, "tg-bob-1", "222", LCM_ENABLE_SLASH_COMMAND="1", **backend_env)
    fill(bob, "bobword", seed=2, turns=8)
    assert alice.core is not None and bob.core is not None
    yield alice, bob
    store_module.close_all()


@pytest.mark.both_backends
def test_session_form_refuses_another_owners_session(gateway, clean_home):
    _alice, bob = gateway
    bob_conv = bob.core.binding.conversation_id
    for text in (
        "view session=tg-bob-1",
        f"view {bob_conv} session=tg-bob-1",
        "--json view session=tg-bob-1",
    ):
        answer = as_caller("tg-alice-1", text)
        assert answer.startswith("hermes-lcm: no live engine for session 'tg-bob-1'"), (
            text,
            answer,
        )
        assert (
            "tg-bob-1';" in answer and "'tg-bob-1']" not in answer
        )  # his session is not listed as live
        assert "tg-alice-1" in answer
    # the same words as for a session that is not live at all
    assert as_caller("tg-alice-1", "view session=tg-nobody") == as_caller(
        "tg-alice-1", "view session=tg-bob-1"
    ).replace("tg-bob-1", "tg-nobody")
    assert not [name for name, html in pages(clean_home).items() if "bobword" in html]
    assert not [name for name in pages(clean_home) if name == f"lcm-view-{bob_conv}.html"]


@pytest.mark.both_backends
def test_the_callers_own_page_is_written_in_every_form(gateway, clean_home):
    """Alice's own conversation: by her session, by its id, and with no argument although Bob's
    engine is the newest live one (the caller's session is the one acted on)."""
    alice, bob = gateway
    mine = alice.core.binding.conversation_id
    for text in ("view session=tg-alice-1", f"view {mine}", "view"):
        answer = as_caller("tg-alice-1", text)
        assert answer.startswith("Wrote "), (text, answer)
        html = Path(answer.split("Wrote ", 1)[1].split(" (", 1)[0]).read_text(encoding="utf-8")
        data = page_data(html)
        assert data["meta"]["conversation"]["id"] == mine
        assert "aliceword" in json.dumps(data["messages"]) and "bobword" not in json.dumps(
            data["messages"]
        )
    assert (
        as_caller("tg-alice-1", f"view {bob.core.binding.conversation_id}")
        == f"hermes-lcm: no conversation {bob.core.binding.conversation_id}"
    )


@pytest.mark.both_backends
def test_another_session_of_the_same_owner_may_be_viewed(clean_home, backend_env):
    """Two sessions of one owner (two CLI sessions: the one local owner) are two conversations of
    the same owner: either may view the other's by ``session=``."""
    first = engine_for(clean_home, "cli-1", None, LCM_ENABLE_SLASH_COMMAND="1", **backend_env)
    fill(first, "firstword", seed=3, turns=6)
    second = engine_for(clean_home, "cli-2", None, LCM_ENABLE_SLASH_COMMAND="1", **backend_env)
    fill(second, "secondword", seed=4, turns=6)
    assert first.core is not None and second.core is not None
    assert first.core.binding.conversation_id != second.core.binding.conversation_id
    answer = as_caller("cli-2", "view session=cli-1")
    assert answer.startswith("Wrote "), answer
    html = Path(answer.split("Wrote ", 1)[1].split(" (", 1)[0]).read_text(encoding="utf-8")
    assert page_data(html)["meta"]["conversation"]["id"] == first.core.binding.conversation_id
    store_module.close_all()


@pytest.mark.both_backends
def test_a_caller_without_a_live_engine_views_nothing(gateway, clean_home):
    """A chat whose engine is not bound yet (its first message is this command): nothing to view,
    and no other owner's session is offered."""
    for text in ("view", f"view {gateway[1].core.binding.conversation_id}"):
        assert as_caller("tg-carol-1", text).startswith("hermes-lcm: no live session yet"), text
    for session in ("tg-nobody", "tg-bob-1"):
        assert (
            as_caller("tg-carol-1", f"view session={session}")
            == f"hermes-lcm: no live engine for session '{session}'; live: []"
        )
    assert pages(clean_home) == {}


@pytest.mark.both_backends
@pytest.mark.parametrize("verb", ["status", "--json status", "doctor", "rollups", "redact"])
def test_every_verb_with_a_session_obeys_the_owner_rule(gateway, verb):
    """Not only view: any verb naming another owner's session answers as for a session that is not
    live, and shows nothing of his; the caller's own session still answers."""
    _alice, bob = gateway
    answer = as_caller("tg-alice-1", f"{verb} session=tg-bob-1")
    assert answer.startswith("hermes-lcm: no live engine for session 'tg-bob-1'"), (verb, answer)
    assert (
        "bobword" not in answer
        and str(bob.core.binding.conversation_id) not in answer.split("live:")[0]
    )
    mine = as_caller("tg-alice-1", f"{verb} session=tg-alice-1")
    assert not mine.startswith("hermes-lcm: no live engine"), (verb, mine)

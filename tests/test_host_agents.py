"""The host's own agents stay out of the user's memory: review forks, the curator, subagents.

Each engine copy here is made the way the host makes one (template, deepcopy, update_model,
on_session_start), on the thread the host uses for that agent, and the hooks are called with
the arguments the host passes (agent/turn_finalizer.py, tools/delegate_tool.py in 0.19.0).
"""

from __future__ import annotations

import copy
import json
import sys
import threading
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hermes_lcm.base import hostagents
from hermes_lcm.base.registry import live_engine
from hermes_lcm.base.tokens import count_messages
from hermes_lcm.base.wire import problems
from hermes_lcm.engine import LcmEngine
from hermes_lcm.host import hooks

from . import fuzzmsgs
from .convo import conversation

pytestmark = pytest.mark.both_backends

HARNESS = (
    "Review the conversation above and update the skill library. Be ACTIVE - most sessions produce at "
    "least one skill update.\n\nYou can only call memory and skill management tools."
)


def on_thread(name: str, fn: Callable[[], Any]) -> Any:
    """Run ``fn`` on a thread named like the host's (the review fork runs on ``bg-review``)."""
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["value"] = fn()
        except BaseException as exc:  # the assertion below shows it
            out["error"] = exc

    worker = threading.Thread(target=run, name=name)
    worker.start()
    worker.join(60)
    if "error" in out:
        raise out["error"]
    return out.get("value")


@pytest.fixture
def host(tmp_path: Path, backend_env: dict[str, str]) -> Callable[..., LcmEngine]:
    """An engine copy for an agent, as the host makes it; ``platform`` and the thread say which."""
    template = LcmEngine(
        env={"HERMES_HOME": str(tmp_path), "LCM_SUMMARY_PROVIDER": "extractive", **backend_env}
    )

    def make(session: str, platform: str = "cli", threshold: int = 10**9, **env: str) -> LcmEngine:
        base = template if not env else LcmEngine(env={**template._env, **env})
        engine = copy.deepcopy(base)
        engine.update_model("fake-model", 64000)
        engine.threshold_tokens = threshold
        engine.on_session_start(
            session, hermes_home=str(tmp_path), platform=platform, conversation_id=None
        )
        return engine

    return make


@pytest.fixture
def origin() -> Iterator[Callable[[str], None]]:
    """The host's write-origin context variable (tools/skill_provenance.py), as a module the host loaded."""
    value = {"origin": "assistant_tool"}
    module = types.ModuleType(hostagents._PROVENANCE)
    module.get_current_write_origin = lambda: value["origin"]  # type: ignore[attr-defined]
    saved = sys.modules.get(hostagents._PROVENANCE)
    sys.modules[hostagents._PROVENANCE] = module
    yield lambda v: value.__setitem__("origin", v)
    if saved is None:
        sys.modules.pop(hostagents._PROVENANCE, None)
    else:
        sys.modules[hostagents._PROVENANCE] = saved


def user_history(turns: int = 3) -> list[dict[str, Any]]:
    return [m for t in conversation(seed=5, turns=turns) for m in t]


def stored(engine: LcmEngine, conversation_id: int | None = None) -> list[str]:
    core = engine.core
    assert core is not None
    cid = conversation_id if conversation_id is not None else core.binding.conversation_id
    assert cid is not None
    return [m.content for m in core.store.messages_after(cid, 0, 10_000)]


def all_conversations(engine: LcmEngine) -> list[int]:
    assert engine.core is not None
    return sorted({cid for _, cid, _ in engine.core.store.all_sessions()})


def test_kind_comes_from_the_hosts_thread_origin_and_platform(origin):
    assert hostagents.current_kind("cli") is hostagents.AgentKind.USER
    assert hostagents.current_kind("subagent") is hostagents.AgentKind.SUBAGENT
    assert hostagents.current_kind("curator") is hostagents.AgentKind.FORK
    assert (
        on_thread("bg-review", lambda: hostagents.current_kind("cli")) is hostagents.AgentKind.FORK
    )
    assert (
        on_thread("curator-review", lambda: hostagents.current_kind(""))
        is hostagents.AgentKind.FORK
    )
    # a subagent's own review fork (it runs on bg-review too) is a fork, not a subagent
    assert (
        on_thread("bg-review", lambda: hostagents.current_kind("subagent"))
        is hostagents.AgentKind.FORK
    )
    assert (
        hostagents.current_kind("tui", "preview_1a2b3c") is hostagents.AgentKind.FORK
    )  # the TUI's helper
    assert hostagents.current_kind("tui", "20261201_1200_abc") is hostagents.AgentKind.USER
    origin("background_review")  # the origin the host sets for a review turn, whatever the thread
    assert hostagents.current_kind("telegram") is hostagents.AgentKind.FORK
    origin("assistant_tool")
    assert hostagents.current_kind("telegram") is hostagents.AgentKind.USER


def test_harness_text_is_known_and_a_users_words_are_not():
    assert hostagents.is_harness_text(HARNESS)
    assert hostagents.is_harness_text([{"type": "text", "text": "  " + HARNESS}])
    assert not hostagents.is_harness_text(
        "Please review the conversation above and tell me what you think"
    )
    assert not hostagents.is_harness_text(None)


def test_a_review_fork_with_the_users_session_id_stores_nothing_anywhere(host, origin):
    user = host("user-1")
    history = user_history()
    hooks.post_llm_call(session_id="user-1", platform="cli", conversation_history=history)
    before = stored(user)
    conversations = all_conversations(user)
    fork = on_thread("bg-review", lambda: host("fork-own-id"))  # built on the review thread
    assert fork.core is not None and fork.core.binding.conversation_id is None
    assert live_engine("fork-own-id") is None  # no hook can reach the fork's copy by its id
    fork_history = [
        *history,
        {"role": "user", "content": HARNESS},
        {"role": "assistant", "content": "Nothing."},
    ]

    def fork_turn() -> None:  # the fork's hooks carry the USER's session id (background_review.py)
        origin("background_review")
        hooks.pre_llm_call(
            session_id="user-1",
            platform="cli",
            user_message=HARNESS,
            conversation_history=fork_history[:-1],
        )
        hooks.pre_api_request(
            session_id="user-1",
            platform="cli",
            request_messages=fork_history[:-1],
            request={"body": {"tools": []}},
        )
        hooks.post_llm_call(
            session_id="user-1",
            platform="cli",
            user_message=HARNESS,
            conversation_history=fork_history,
        )
        hooks.on_session_end(session_id="user-1", platform="cli")
        fork.on_session_end("user-1", [])
        fork.ingest_host(fork_history)

    on_thread("bg-review", fork_turn)
    assert stored(user) == before
    assert all_conversations(user) == conversations, "the fork left a conversation behind"
    origin("assistant_tool")
    # the same hook on the user's thread with the harness text (a host that renamed its thread) is refused too
    hooks.post_llm_call(
        session_id="user-1", platform="cli", user_message=HARNESS, conversation_history=fork_history
    )
    assert stored(user) == before
    assert not any(HARNESS[:40] in text for text in stored(user))


def test_a_forks_own_request_still_gets_a_bounded_valid_prompt(host):
    fork = on_thread("bg-review", lambda: host("fork-2", threshold=3000))
    history = [*user_history(14), {"role": "user", "content": HARNESS}]
    out = on_thread(
        "bg-review", lambda: fork.compress(list(history), current_tokens=count_messages(history))
    )
    assert out != history and not problems(out)
    assert count_messages(out) <= fork.threshold_tokens
    assert out[-1]["content"] == HARNESS  # the fork's own request stays
    assert "never stores" in out[0]["content"]  # the prompt says nothing of it was kept
    assert fork.core is not None and fork.core.binding.conversation_id is None


def test_a_subagent_reads_its_parents_memory_and_writes_nothing(host):
    parent = host("parent-1")
    hooks.post_llm_call(
        session_id="parent-1",
        platform="cli",
        conversation_history=[
            {"role": "user", "content": "the staging database listens on port 6543"},
            {"role": "assistant", "content": "noted: staging port 6543"},
        ],
    )
    parent_rows = stored(parent)
    child = host("child-1", platform="subagent")
    hooks.subagent_start(
        parent_session_id="parent-1",
        child_session_id="child-1",
        child_role="leaf",
        child_goal="find the staging port",
    )
    assert child.core is not None
    assert child.core.binding.mode == "stateless"
    assert child.core.binding.conversation_id == parent.core.binding.conversation_id
    child_turn = [
        {"role": "user", "content": "find the staging port"},
        {"role": "assistant", "content": "searching"},
    ]
    hooks.post_llm_call(session_id="child-1", platform="subagent", conversation_history=child_turn)
    answer = json.loads(
        child.handle_tool_call("lcm_grep", {"query": "staging port"}, messages=child_turn)
    )
    assert "6543" in json.dumps(answer)
    assert stored(parent) == parent_rows
    assert len(all_conversations(parent)) == 1
    status = child.get_status()
    assert (
        status["session_mode"] == "stateless"
        and "LCM_SUBAGENT_SESSIONS" in status["matched_session_pattern"]
    )


def test_a_subagent_can_be_stored_as_its_parents_linked_conversation(host):
    parent = host("parent-2", LCM_SUBAGENT_SESSIONS="store")
    hooks.post_llm_call(
        session_id="parent-2",
        platform="cli",
        conversation_history=[{"role": "user", "content": "parent words"}],
    )
    child = host("child-2", platform="subagent", LCM_SUBAGENT_SESSIONS="store")
    assert (
        child.core is not None and child.core.binding.conversation_id is None
    )  # waits for its parent
    hooks.subagent_start(parent_session_id="parent-2", child_session_id="child-2")
    hooks.post_llm_call(
        session_id="child-2",
        platform="subagent",
        conversation_history=[
            {"role": "user", "content": "subagent goal"},
            {"role": "assistant", "content": "subagent done"},
        ],
    )
    cid = child.core.binding.conversation_id
    assert cid is not None and cid != parent.core.binding.conversation_id
    assert stored(child) == ["subagent goal", "subagent done"]
    assert stored(parent) == ["parent words"]
    session = child.core.store.session("child-2")
    assert session is not None and session.parent_session_id == "parent-2"
    status = child.get_status()
    assert status["linked_parent"]["session_id"] == "parent-2"
    assert status["linked_parent"]["conversation_id"] == parent.core.binding.conversation_id
    assert child.core.store.conversation_owner(cid) == parent.core.store.conversation_owner(
        parent.core.binding.conversation_id
    )
    described = json.loads(child.handle_tool_call("lcm_describe", {}))
    assert described["linked_parent"] == {
        "session_id": "parent-2",
        "conversation_id": parent.core.binding.conversation_id,
    }
    assert json.loads(parent.handle_tool_call("lcm_describe", {}))["subagents"] == [
        {"session_id": "child-2", "conversation_id": cid}
    ]
    assert (
        json.loads(child.handle_tool_call("lcm_inspect", {}))["binding"]["agent_role"] == "subagent"
    )


def test_the_operators_patterns_take_precedence_over_the_subagent_default(host):
    child = host("child-3", platform="subagent", LCM_IGNORE_SESSION_PATTERNS="subagent")
    assert child.core is not None and child.core.binding.mode == "ignored"
    assert child.core.binding.matched_pattern == "subagent"
    stored_child = host(
        "child-4",
        platform="subagent",
        LCM_SUBAGENT_SESSIONS="store",
        LCM_STATELESS_SESSION_PATTERNS="child-*",
    )
    assert stored_child.core is not None and stored_child.core.binding.mode == "stateless"
    assert stored_child.core.binding.matched_pattern == "child-*"


def test_an_unknown_subagent_policy_is_reported_and_the_default_kept(host):
    child = host("child-5", platform="subagent", LCM_SUBAGENT_SESSIONS="everything")
    assert any("LCM_SUBAGENT_SESSIONS" in p for p in child.config_problems)
    assert child.core is not None and child.core.binding.mode == "stateless"


def test_an_ignored_session_over_its_threshold_is_summarized_not_trimmed(host):
    engine = host("cron-1", threshold=3000, LCM_IGNORE_SESSION_PATTERNS="cron-*")
    history = user_history(16)
    history[0] = {
        "role": "user",
        "content": "remember: the rollout key is OBSIDIAN-LANTERN-42. " + history[0]["content"],
    }
    out = engine.compress(list(history), current_tokens=count_messages(history))
    assert not problems(out) and count_messages(out) <= engine.threshold_tokens
    head = out[0]["content"]
    assert "were summarized" in head and "OBSIDIAN-LANTERN-42" in head, head[:600]
    assert "LCM_IGNORE_SESSION_PATTERNS" in head
    assert engine.core is not None and engine.core.binding.conversation_id is None
    assert all_conversations(engine) == []
    # the host goes on with that list: the next compress keeps the earlier summary's facts
    more = [*out, *user_history(16)[10:]]
    again = engine.compress(more, current_tokens=count_messages(more))
    assert "OBSIDIAN-LANTERN-42" in again[0]["content"]
    assert count_messages(again) <= engine.threshold_tokens and not problems(again)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    rng=st.randoms(use_true_random=False),
    turns=st.integers(1, 40),
    threshold=st.integers(400, 8000),
    malformed=st.booleans(),
    again=st.integers(0, 12),
)
def test_a_session_that_stores_nothing_always_gets_a_valid_bounded_prompt(
    host, rng, turns, threshold, malformed, again
):
    """Whatever the history (malformed tool sequences included) and the budget, a session that
    stores nothing gets a valid prompt within its budget that keeps the newest message, twice in a row
    (the second compress reads the first one's summary back), and nothing is written."""
    engine = host(f"cron-{rng.random()}", threshold=threshold, LCM_IGNORE_SESSION_PATTERNS="cron-*")
    history = (
        fuzzmsgs.malformed_history(rng, big=400)
        if malformed
        else fuzzmsgs.valid_history(rng, turns)
    )
    tokens = count_messages([m for m in history if isinstance(m, dict)])
    budget = engine.core.budget(
        engine.threshold_tokens, engine.overhead(history, tokens)
    )  # as compress does
    out = engine.compress(list(history), current_tokens=tokens)
    assert not problems(out) and count_messages(out) <= max(budget.total, count_messages(out[-1:]))
    assert not engine.errors, engine.errors
    newest = fuzzmsgs.newest_request_text(history)
    if newest is not None:
        assert fuzzmsgs.shows(out, newest)
    more = [*out, *fuzzmsgs.valid_history(rng, again)]
    budget = engine.core.budget(
        engine.threshold_tokens, engine.overhead(more, count_messages(more))
    )
    second = engine.compress(more, current_tokens=count_messages(more))
    assert not problems(second) and count_messages(second) <= max(
        budget.total, count_messages(second[-1:])
    )
    assert not engine.errors, engine.errors  # no fallback after an internal error
    assert all_conversations(engine) == []


def test_the_tuis_preview_restart_agent_stores_nothing(host):
    """tui_gateway/server.py hands its hidden preview-restart agent the user's last messages under a
    session id of the host's making: copying them into a second conversation would double them."""
    helper = host("preview_1a2b3c", platform="tui")
    assert helper.core is not None and helper.core.binding.conversation_id is None
    hooks.post_llm_call(
        session_id="preview_1a2b3c",
        platform="tui",
        user_message="restart the dev server",
        conversation_history=[
            *user_history(2),
            {"role": "user", "content": "restart the dev server"},
        ],
    )
    assert all_conversations(helper) == []
    user = host("tui-session-1", platform="tui")  # the TUI's own sessions are the user's
    hooks.post_llm_call(
        session_id="tui-session-1", platform="tui", conversation_history=user_history(1)
    )
    assert len(all_conversations(user)) == 1

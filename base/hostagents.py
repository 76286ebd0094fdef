"""Which of the host's agents is calling: the user's own, or one the host runs for itself.

Hermes runs more agents than the one the user talks to, and each gets a copy of the engine and
fires the same hooks. Storing their turns as the user's is how a harness prompt ("Review the
conversation above and update the skill library...") ends up replayed to the model as a standing
instruction. So every host call is placed, from facts the host itself gives:

* a **fork** (the background memory/skill review, the curator): Hermes builds it on its own
  thread (``bg-review``, ``curator-review``) and, during its turn, sets its write-origin
  context variable (``tools.skill_provenance``) to ``background_review``; the review fork even
  takes over the user's session id (for prompt-cache parity), so the session id cannot tell it
  apart, while the thread and the origin do. The curator also runs with ``platform="curator"``.
  A fork is never stored and never reaches the user's engine.
* a **subagent** (``delegate_task``): its own session id, ``platform="subagent"``; its parent is
  named by the ``subagent_start`` hook. Stateless by default (LCM_SUBAGENT_SESSIONS).
* a **helper agent** the host makes for one job: the TUI's hidden preview-restart agent
  (``platform="tui"``, session ``preview_<hex>``, fed the user's recent messages): as a fork.
* anything else is the user's agent (CLI, gateway, cron, ``/background``): stored as always.

Host helper calls (session titles, auxiliary tasks) go through ``call_llm`` and fire no hook
and no engine method, so nothing of them can be stored. The last line of defence is the
harness text itself: a user message that is one of the host's review prompts is recognised
even when neither fact above is there (a host version that renamed its thread).
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Mapping
from enum import Enum
from typing import Any

# run_agent.py AIAgent._spawn_background_review and agent/curator.py name these threads.
FORK_THREADS = frozenset({"bg-review", "curator-review"})
# tools/skill_provenance.py: the origin a review or curator turn runs under.
FORK_ORIGINS = frozenset({"background_review"})
FORK_PLATFORMS = frozenset({"curator"})
SUBAGENT_PLATFORMS = frozenset({"subagent"})
# tui_gateway/server.py: the TUI's hidden preview-restart agent (``preview_<hex>``), which carries
# the last messages of the user's session into a throwaway agent of its own.
HELPER_SESSIONS = (("tui", "preview_"),)
_HELPER_PLATFORMS = frozenset(p for p, _ in HELPER_SESSIONS)
_PROVENANCE = "tools.skill_provenance"
# The host's review prompts start with these words (agent/background_review.py, agent/curator.py);
# the installed host's own constants are used too when it has loaded them (:func:`harness_prompts`).
HARNESS_STARTS = (
    "Review the conversation above and consider saving to memory",
    "Review the conversation above and update the skill library",
    "Review the conversation above and update two things",
    "You are running as Hermes' background skill CURATOR",
)
_HOST_PROMPTS = (
    (
        "agent.background_review",
        ("_MEMORY_REVIEW_PROMPT", "_SKILL_REVIEW_PROMPT", "_COMBINED_REVIEW_PROMPT"),
    ),
    ("agent.curator", ("CURATOR_REVIEW_PROMPT",)),
)
# How much of a message's start is compared with a prompt's start.
_PEEK = 120


class AgentKind(Enum):
    USER = "user"
    FORK = "fork"
    SUBAGENT = "subagent"


def write_origin() -> str:
    """The host's write origin for the running turn ("" outside the host or before any turn).

    Read from the module the host has already imported, never imported here: outside Hermes
    a top-level ``tools`` may be anything (this package's own tools.py when run from the root).
    """
    module = sys.modules.get(_PROVENANCE)
    getter = getattr(module, "get_current_write_origin", None)
    if getter is None:
        return ""
    try:
        return str(getter() or "")
    except Exception:  # noqa: BLE001 - a host fact we could not read is no fact
        return ""


def current_kind(platform: str | None = None, session_id: str | None = None) -> AgentKind:
    """The kind of agent making the current host call, from the thread, the origin, the platform and
    (for the host's helper agents, whose ids the host makes) the session id."""
    if threading.current_thread().name in FORK_THREADS or write_origin() in FORK_ORIGINS:
        return AgentKind.FORK
    if not platform:
        return AgentKind.USER
    platform = platform.strip().lower()
    if platform in FORK_PLATFORMS or (
        platform in _HELPER_PLATFORMS
        and isinstance(session_id, str)
        and any(platform == p and session_id.startswith(prefix) for p, prefix in HELPER_SESSIONS)
    ):
        return AgentKind.FORK
    if platform in SUBAGENT_PLATFORMS:
        return AgentKind.SUBAGENT
    return AgentKind.USER


_known: list[Any] = [
    None,
    None,
    (),
]  # the two host modules last seen, and the prompts read from them


def harness_prompts() -> tuple[str, ...]:
    """The starts of the host's review prompts: ours, and the installed host's own when loaded
    (read again only when the loaded host modules change: every hook asks)."""
    review, curator = (sys.modules.get(name) for name, _ in _HOST_PROMPTS)
    if _known[2] and review is _known[0] and curator is _known[1]:
        return tuple(_known[2])
    texts = [
        getattr(module, name)[:_PEEK]
        for module, (_, names) in zip((review, curator), _HOST_PROMPTS, strict=True)
        if module is not None
        for name in names
        if isinstance(getattr(module, name, None), str)
    ]
    _known[:] = [review, curator, tuple(dict.fromkeys((*HARNESS_STARTS, *texts)))]
    return tuple(_known[2])


def is_harness_text(text: Any) -> bool:
    """Is ``text`` (a user message's content, a string or parts) one of the host's review prompts?"""
    if isinstance(text, list):
        text = "\n".join(str(p.get("text") or "") for p in text if isinstance(p, Mapping))
    if not isinstance(text, str):
        return False
    head = text.lstrip()[:_PEEK]
    return head.startswith(harness_prompts())


def is_fork_hook(kwargs: Mapping[str, Any]) -> bool:
    """Does this hook call come from one of the host's forks? Its facts first, then its prompt."""
    if current_kind(kwargs.get("platform"), kwargs.get("session_id")) is AgentKind.FORK:
        return True
    return is_harness_text(kwargs.get("user_message"))

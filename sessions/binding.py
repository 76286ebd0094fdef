"""Which conversation a host session reads and writes, whether it writes at all, and who owns it.

A host session binds to one logical conversation: the one it was bound to before (resume), its
parent's when it continues one (a compression boundary, ``/new``), the host's chat, else a new
one. Whether it writes is the operator's patterns first (LCM_IGNORE_SESSION_PATTERNS,
LCM_STATELESS_SESSION_PATTERNS), then whose agent it is: a fork the host runs for itself never
writes; a delegated subagent follows LCM_SUBAGENT_SESSIONS (reading its parent's conversation,
or stored as its own conversation linked to the parent). The owner decides what the tools may
read beyond the bound conversation.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from ..base.patterns import SessionPatterns
from ..config import LcmConfig
from ..store import Store

MODE_NORMAL, MODE_STATELESS, MODE_IGNORED = "normal", "stateless", "ignored"

# Binding.matched_pattern of a session that stores nothing because of the host agent it is.
FORK_REASON = "(host fork: a background review or the curator, never stored)"
_SUBAGENT_STATELESS = "(subagent: LCM_SUBAGENT_SESSIONS=stateless)"
_SUBAGENT_IGNORED = "(subagent: LCM_SUBAGENT_SESSIONS=ignore)"
SUBAGENT_REASONS = (_SUBAGENT_STATELESS, _SUBAGENT_IGNORED)

# Whose agent a session is (hostagents.AgentKind's values): the user's, a fork the host runs for
# itself (a memory/skill review, the curator), or a delegated subagent.
ROLE_USER, ROLE_FORK, ROLE_SUBAGENT = "user", "fork", "subagent"

# The one owner of a single-user host's conversations (the CLI).
LOCAL_OWNER = "local"


def owner_for(platform: str, conversation_key: str | None, user_id: str | None = None) -> str:
    """Who a new conversation belongs to, from what the host tells: the user on a platform when
    the host names them, else the host's chat (the gateway's session key: platform, chat id, and
    the user in a group that isolates users), else the one local owner (the CLI, a single user).
    A host serving several people always passes its chat key, so they never share an owner."""
    if user_id:
        return f"user:{platform or 'unknown'}:{user_id}"
    if conversation_key:
        return f"chat:{conversation_key}"
    return LOCAL_OWNER


def storable_id(value: str | None) -> str | None:
    """An identity string as it can be stored: itself when it is valid UTF-8, else its escaped form
    with a short hash of the original (two ids that differ stay two ids)."""
    if value is None:
        return None
    text = str(value)
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:8]
        return f"{text.encode('utf-8', 'backslashreplace').decode('utf-8')}~{digest}"


@dataclass(frozen=True)
class Binding:
    session_id: str
    conversation_id: int | None
    mode: str
    # Why the session stores nothing: the LCM_*_SESSION_PATTERNS entry it matched, or the host agent it is.
    matched_pattern: str | None
    # Who owns the bound conversation (stored per conversation): what the tools may read beyond it.
    owner: str = LOCAL_OWNER
    role: str = ROLE_USER
    # A subagent's parent session, once the host named it (the subagent_start hook).
    parent_session_id: str | None = None


class Binder:
    """Binds host sessions of one core to conversations; keeps the current :class:`Binding`."""

    def __init__(self, config: LcmConfig, store: Store) -> None:
        self.config = config
        self.store = store
        self.ignore_sessions = SessionPatterns.parse(config.ignore_session_patterns)
        self.stateless_sessions = SessionPatterns.parse(config.stateless_session_patterns)
        self.binding = Binding("", None, MODE_NORMAL, None)
        self._bind_args: dict[
            str, Any
        ] = {}  # what the last bind was told (link_parent binds again with it)

    def bind(
        self,
        session_id: str,
        *,
        platform: str = "",
        conversation_key: str | None = None,
        parent_session_id: str | None = None,
        reason: str | None = None,
        user_id: str | None = None,
        role: str = ROLE_USER,
        linked_parent: str | None = None,
        wait_for_parent: bool = False,
    ) -> Binding:
        """Bind a host session; finds or creates its conversation.

        A session seen before keeps its conversation (resume). A new session joins
        its parent's conversation when it continues one (compression boundary,
        ``/new``), else the host's conversation key, else starts its own.
        ``role`` is whose agent the session is (:data:`ROLE_FORK` never stores, a
        :data:`ROLE_SUBAGENT` follows LCM_SUBAGENT_SESSIONS); ``linked_parent`` names a
        subagent's parent: a stateless subagent reads the parent's conversation, a stored one
        gets its own conversation, owned by the parent's owner and linked to the parent session.
        ``wait_for_parent``: a stored subagent whose parent is not named yet creates nothing until
        :meth:`link_parent` names it (or a later bind without the flag, at its first write).
        """
        # an id the host sends is stored whatever it holds (a lone surrogate cannot be UTF-8)
        session_id, platform = storable_id(session_id) or "", storable_id(platform) or ""
        conversation_key, user_id = storable_id(conversation_key), storable_id(user_id)
        parent_session_id, linked_parent = (
            storable_id(parent_session_id),
            storable_id(linked_parent),
        )
        self._bind_args = {
            "platform": platform,
            "conversation_key": conversation_key,
            "user_id": user_id,
        }
        mode, why = self.mode_for(session_id, platform, role)
        if (
            wait_for_parent
            and role == ROLE_SUBAGENT
            and mode == MODE_NORMAL
            and linked_parent is None
        ):
            self.binding = Binding(session_id, None, mode, None, LOCAL_OWNER, role)
            return self.binding
        owner = owner_for(platform, conversation_key, user_id)
        parent_conversation = None
        if linked_parent and (parent_info := self.store.session(linked_parent)) is not None:
            parent_conversation = parent_info.conversation_id
            owner = self.store.conversation_owner(parent_conversation) or owner
        if role == ROLE_FORK:
            conversation_id = None
        elif role == ROLE_SUBAGENT and mode == MODE_STATELESS and why == _SUBAGENT_STATELESS:
            conversation_id = parent_conversation
        elif role == ROLE_SUBAGENT:
            conversation_id = self._conversation_for(
                session_id, conversation_key, None, mode, owner
            )
            parent_session_id, reason = linked_parent, "subagent"
        else:
            conversation_id = self._conversation_for(
                session_id, conversation_key, parent_session_id, mode, owner
            )
        if conversation_id is not None:
            owner = self.store.conversation_owner(conversation_id) or owner
        if conversation_id is not None and mode == MODE_NORMAL:
            self.store.upsert_session(
                session_id,
                conversation_id,
                platform=platform,
                mode=mode,
                parent_session_id=parent_session_id,
                reason=reason,
            )
        self.binding = Binding(
            session_id,
            conversation_id,
            mode,
            why,
            owner,
            role,
            linked_parent if role == ROLE_SUBAGENT else None,
        )
        return self.binding

    def mode_for(self, session_id: str, platform: str, role: str) -> tuple[str, str | None]:
        """Whether the session stores (and why not): the operator's patterns first, then the host agent it is."""
        if ignored := self.ignore_sessions.match(session_id, platform):
            return MODE_IGNORED, ignored
        if stateless := self.stateless_sessions.match(session_id, platform):
            return MODE_STATELESS, stateless
        if role == ROLE_FORK:
            return MODE_IGNORED, FORK_REASON
        if role == ROLE_SUBAGENT and self.config.subagent_sessions != "store":
            if self.config.subagent_sessions == "ignore":
                return MODE_IGNORED, _SUBAGENT_IGNORED
            return MODE_STATELESS, _SUBAGENT_STATELESS
        return MODE_NORMAL, None

    def relink(self, parent_session_id: str) -> dict[str, Any] | None:
        """The arguments that bind the current subagent again once the host named its parent
        (``subagent_start``); None when there is nothing to change (not a subagent, the same parent)."""
        parent_session_id = storable_id(parent_session_id) or ""
        if (
            self.binding.role != ROLE_SUBAGENT
            or parent_session_id == self.binding.parent_session_id
        ):
            return None
        return {**self._bind_args, "role": ROLE_SUBAGENT, "linked_parent": parent_session_id}

    def linked_parent(self) -> dict[str, Any] | None:
        """The parent session of a bound subagent and the conversation it is stored in (status, describe)."""
        parent = self.binding.parent_session_id
        if not parent:
            return None
        info = self.store.session(parent)
        return {"session_id": parent, "conversation_id": info.conversation_id if info else None}

    def reach(self, shared: bool) -> tuple[int, ...] | None:
        """The conversations the bound owner may read when a call asks beyond the current one:
        its owner's, or every one (None) when the operator shares memory (LCM_SHARED_MEMORY)."""
        if shared:
            return None
        found = self.store.owner_conversations(self.binding.owner)
        current = self.binding.conversation_id
        return tuple(found) if current is None or current in found else (*found, current)

    def _conversation_for(
        self,
        session_id: str,
        key: str | None,
        parent: str | None,
        mode: str,
        owner: str = LOCAL_OWNER,
    ) -> int | None:
        known = self.store.session(session_id)
        if known is not None:
            return known.conversation_id
        if parent:
            parent_info = self.store.session(parent)
            if parent_info is not None:
                return parent_info.conversation_id
        conversation_key = key or f"session:{session_id}"
        if mode == MODE_NORMAL:
            return self.store.ensure_conversation(conversation_key, owner)
        state = self.store.conversation_by_key(conversation_key)
        return state.id if state else None

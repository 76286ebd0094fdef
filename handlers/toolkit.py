"""What every lcm_* tool body shares: typed arguments, the call context, the refusal type and
the helpers that keep an answer within the size cap.

It sits below both the dispatcher (tools.py) and the tool families, so the bodies take their
tools from here and never from the dispatcher that calls them.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..base.times import TimeError, parse_time
from ..search.searcher import Scope
from ..search.visible import Visible, visible_now

if TYPE_CHECKING:
    from ..config import LcmConfig
    from ..core import LcmCore


class ToolError(ValueError):
    """A clear, expected refusal returned to the model as JSON."""


@dataclass
class Args:
    """Typed access to one call's arguments; records clamps for the answer."""

    tool: str
    raw: dict[str, Any]
    clamped: dict[str, dict[str, Any]] = field(default_factory=dict)

    def has(self, key: str) -> bool:
        return self.raw.get(key) not in (None, "")

    def text(self, key: str, default: str | None = None, *, required: bool = False) -> str | None:
        value = self.raw.get(key)
        if value is None or value == "":
            if required:
                raise ToolError(f"{key} is required")
            return default
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise ToolError(f"{key} must be a string, got {type(value).__name__}")
        return str(value)

    def choice(self, key: str, choices: Sequence[str], default: str | None) -> str | None:
        value = self.text(key, default)
        if value is not None and value.lower() not in choices:
            raise ToolError(f"{key} must be one of {', '.join(choices)}; got {value!r}")
        return value.lower() if value is not None else None

    def integer(self, key: str, default: int, low: int, high: int) -> int:
        """An integer argument clamped to [low, high]; a clamp is reported in the answer."""
        value = self.raw.get(key)
        if value is None or value == "":
            return default
        number = _as_int(key, value)
        used = min(high, max(low, number))
        if used != number:
            self.clamped[key] = {"requested": number, "used": used}
        return used

    def number(self, key: str, default: float, low: float, high: float) -> float:
        value = self.raw.get(key)
        if value is None or value == "":
            return default
        try:
            number = float(value) if not isinstance(value, bool) else math.nan
        except (TypeError, ValueError):
            number = math.nan
        if math.isnan(number):
            raise ToolError(f"{key} must be a number, got {value!r}")
        if not math.isfinite(number):
            raise ToolError(f"{key} must be a finite number, got {value!r}")
        used = min(high, max(low, number))
        if used != number:
            self.clamped[key] = {"requested": number, "used": used}
        return used

    def flag(self, key: str, default: bool = False) -> bool:
        value = self.raw.get(key)
        if value is None:
            return default
        if isinstance(value, bool):
            return value
        if str(value).strip().lower() in ("true", "1", "yes"):
            return True
        if str(value).strip().lower() in ("false", "0", "no", ""):
            return False
        raise ToolError(f"{key} must be true or false, got {value!r}")

    def strings(self, key: str) -> list[str]:
        value = self.raw.get(key)
        if value is None or value == "":
            return []
        items = (
            value
            if isinstance(value, list | tuple)
            else str(value).split(",")
            if isinstance(value, str)
            else None
        )
        if items is None or not all(
            isinstance(v, str | int) and not isinstance(v, bool) for v in items
        ):
            raise ToolError(f"{key} must be a list of strings")
        return [str(v).strip() for v in items if str(v).strip()]

    def time(self, key: str, *, end: bool = False) -> float | None:
        if not self.has(key):
            return None
        try:
            return parse_time(self.raw[key], end=end)
        except TimeError as exc:
            raise ToolError(f"{key}: {exc}") from exc


def _as_int(key: str, value: Any) -> int:
    if isinstance(value, bool):
        raise ToolError(f"{key} must be an integer, got {value!r}")
    if isinstance(value, int):
        return value
    try:
        number = float(value)
    except (TypeError, ValueError) as exc:
        raise ToolError(f"{key} must be an integer, got {value!r}") from exc
    if not number.is_integer():
        raise ToolError(f"{key} must be an integer, got {value!r}")
    return int(number)


@dataclass(frozen=True)
class Ctx:
    """What a tool body needs: the core's services and the caller's binding, the size cap, and
    what only the live engine knows (its settings, context pressure, status), handed over by the
    dispatcher so that no body reaches for the engine itself."""

    core: LcmCore
    cap: int
    config: LcmConfig
    config_problems: tuple[str, ...]
    last_prompt_tokens: int
    threshold_tokens: int
    status: Callable[[], dict[str, Any]]

    @property
    def conversation_id(self) -> int | None:
        return self.core.binding.conversation_id

    def conversation(self) -> int:
        """The current conversation, or a clear error when nothing is stored for this session."""
        if self.conversation_id is None:
            raise ToolError(
                f"nothing is stored for this session yet (mode {self.core.binding.mode}); "
                "the tools work once a turn has been stored"
            )
        return self.conversation_id

    def visible(self) -> Visible | None:
        """What the caller's prompt shows now (None before anything is stored): searches list it last."""
        if self.conversation_id is None:
            return None
        return visible_now(self.core.store, self.conversation_id)

    def reach(self) -> tuple[int, ...] | None:
        """What a call may read when it asks beyond the current conversation: its owner's
        conversations, or the whole store (None) when the operator turned shared memory on."""
        return self.core.reach(bool(getattr(self.config, "shared_memory", False)))

    def in_reach(self, conversation_id: int) -> bool:
        if conversation_id == self.conversation_id:
            return True
        reach = self.reach()
        return reach is None or conversation_id in reach

    def scope(self, args: Args, choices: Sequence[str] = ("current", "session", "all")) -> Scope:
        """The search scope: the current conversation unless the caller opts into another; "all"
        and "session" stay within the owner's reach (another owner's session is unknown)."""
        kind = args.choice("session_scope", choices, "current") or "current"
        if kind == "all":
            return Scope("all", conversations=self.reach())
        if kind == "session":
            session_id = args.text("session_id", required=True)
            info = self.core.store.session(str(session_id))
            if info is None or not self.in_reach(info.conversation_id):
                raise ToolError(f"unknown session_id {session_id!r}")
            return Scope("session", info.conversation_id, info.id)
        if args.has("session_id"):
            raise ToolError("session_id needs session_scope='session'")
        return Scope("current", self.conversation())

    def readable(self, conversation_id: int, args: Args, what: str, missing: str) -> None:
        """Ids of another conversation are read only on explicit opt-in (session_scope='all'), and
        only within the owner's reach: beyond it the id answers ``missing``, exactly like an id
        that does not exist, so no other person's ids can be probed."""
        if conversation_id == self.conversation_id:
            return
        if not self.in_reach(conversation_id):
            raise ToolError(missing)
        if args.choice("session_scope", ("current", "all"), "current") != "all":
            raise ToolError(
                f"{what} belongs to another conversation; pass session_scope='all' to read it"
            )


Handler = Callable[[Ctx, Args], dict[str, Any]]


def dumps(value: Any) -> str:
    """Strict JSON: a number that is not finite (an overflowed sum, an echoed 1e309) is no JSON
    number; it is written as null, never as ``Infinity`` or ``NaN`` a strict parser refuses."""
    try:
        return json.dumps(value, ensure_ascii=False, default=str, allow_nan=False)
    except ValueError:
        return json.dumps(_finite(value), ensure_ascii=False, default=str, allow_nan=False)


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def fit(answer: dict[str, Any], key: str, items: Sequence[dict[str, Any]], cap: int) -> int:
    """Put the leading ``items`` that fit under ``cap`` into ``answer[key]``; returns how many.

    At least one item is always included when there is one (bodies cut item text to a share of
    the cap first), so a paged walk always makes progress.
    """
    room = cap - len(dumps(answer)) - len(key) - 600
    chosen: list[dict[str, Any]] = []
    for item in items:
        size = len(dumps(item)) + 2
        if chosen and size > room:
            break
        chosen.append(item)
        room -= size
    answer[key] = chosen
    return len(chosen)


def share(cap: int, count: int, floor: int = 300) -> int:
    """Characters of text each of ``count`` items may carry within the cap."""
    return max(floor, (cap - 2000) // max(1, count) - 250)

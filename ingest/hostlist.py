"""The host's list of one host call, normalized once.

One compress visits the host's list several times: alignment walks it back from the newest
message, the records are built forwards, the prompt kept while messages wait unstored appends the
unstored rest, the check that our prompt is the host's list compares it message by message, and a
session that stores nothing summarizes and trims it. Each visit needs every message as the host's
own (:func:`~.normalize.host_view`: our summary block left out, our recall block cut out), and
that costs a scan of the message's text. A :class:`HostList` is made once where the call enters
the core and passed down, so each message is normalized at most once per call whatever path the
call takes. Views are computed on first need, newest first as alignment asks for them: a usual
turn still reads only the newest few messages of a history the host re-sends whole.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..base.scaffold import BlockSeal
from .normalize import host_view


@dataclass(frozen=True)
class HostList:
    """The host's messages as given (:attr:`messages`, never changed) and, per message object,
    its host view when it is storable (None when it is not: system, malformed, only our block)."""

    messages: Sequence[Any]
    seal: BlockSeal | None = None
    # id(message) -> (the message, its storable view or None); the message is kept so an id reused
    # by another object is never taken for it.
    _views: dict[int, tuple[Any, Mapping[str, Any] | None]] = field(
        default_factory=dict, compare=False, repr=False
    )

    def __len__(self) -> int:
        return len(self.messages)

    def view_of(self, message: Any) -> Mapping[str, Any] | None:
        """``message`` as the host's own if it is worth storing (normalize.is_storable), else None."""
        hit = self._views.get(id(message))
        if hit is not None and hit[0] is message:
            return hit[1]
        view = (
            host_view(message, self.seal)
            if isinstance(message, Mapping)
            and isinstance(message.get("role"), str)
            and message["role"] != "system"
            else None
        )
        self._views[id(message)] = (message, view)
        return view

    def view(self, index: int) -> Mapping[str, Any] | None:
        return self.view_of(self.messages[index])

    def is_storable(self, index: int) -> bool:
        return self.view(index) is not None

    def last(self, end: int | None = None) -> int | None:
        """Index of the newest storable message before ``end``; scans back only as far as needed."""
        index = len(self.messages) if end is None else end
        while index > 0:
            index -= 1
            if self.is_storable(index):
                return index
        return None

    def storable(self, start: int = 0) -> list[Mapping[str, Any]]:
        """The storable messages from ``start`` on, each as the host's own."""
        views = (self.view(i) for i in range(start, len(self.messages)))
        return [v for v in views if v is not None]

"""The guard on every host-facing method: nothing the engine raises may escape into the host's turn.

On an error the method records it (status and doctor show it) and answers what its fallback
gives: a bounded, valid prompt for compress, a no-op for a lifecycle call.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

_T = TypeVar("_T")


def guarded(fallback: Callable[..., _T]) -> Callable[[Callable[..., _T]], Callable[..., _T]]:
    """Run a host-facing method; on any error record it and return ``fallback(...)``."""

    def wrap(method: Callable[..., _T]) -> Callable[..., _T]:
        @functools.wraps(method)
        def run(self: Any, *args: Any, **kwargs: Any) -> _T:
            try:
                return method(self, *args, **kwargs)
            except Exception as exc:  # noqa: BLE001 - nothing may escape into the host's turn
                self.record_error(f"{method.__name__}: {exc.__class__.__name__}: {exc}")
                return fallback(self, *args, **kwargs)

        return run

    return wrap

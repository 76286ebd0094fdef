"""One JSON POST bounded as a whole: a wall-clock deadline and a byte cap, both while the body streams.

httpx's timeouts are per operation: a read timeout restarts with every byte that arrives, so a
server that trickles a byte a second holds a 3-second call for as long as it likes, and a size
checked after ``response.content`` has already read the whole body into memory. Embedding and
summary calls go through :func:`post_json` instead: the body is read in chunks, and the call fails
the moment the deadline passes or the body passes ``max_bytes``.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx


class CallTimeout(Exception):
    """The whole call took longer than its deadline."""


class CallTooLarge(Exception):
    """The answer's body grew past the byte cap."""


@dataclass(frozen=True)
class Answer:
    status: int
    body: bytes

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    def text(self, limit: int = 65536) -> str:
        return self.body[:limit].decode("utf-8", "replace")

    def json(self) -> Any:
        """The body as JSON; ValueError when it is not."""
        return json.loads(self.body)


def post_json(
    client: httpx.Client,
    url: str,
    payload: Any,
    headers: dict[str, str],
    *,
    seconds: float,
    max_bytes: int,
) -> Answer:
    """POST ``payload`` and read the answer within ``seconds`` in all and ``max_bytes`` of body.

    Raises :class:`CallTimeout`, :class:`CallTooLarge`, or httpx's own errors (cannot connect)."""
    deadline = time.monotonic() + max(0.0, seconds)

    def left() -> float:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise CallTimeout(f"no complete answer within {seconds:.1f}s")
        return remaining

    try:
        with client.stream(
            "POST", url, json=payload, headers=headers, timeout=httpx.Timeout(left())
        ) as response:
            # a read that stalls after the last chunk would wait its whole timeout: close it at the deadline
            watchdog = threading.Timer(left(), response.close)
            watchdog.daemon = True
            watchdog.start()
            try:
                return _read(response, max_bytes, left)
            except (httpx.StreamError, httpx.ReadError) as exc:
                left()  # closed by the watchdog: the deadline passed
                raise httpx.ReadError(str(exc)) from exc
            finally:
                watchdog.cancel()
    except httpx.TimeoutException as exc:
        raise CallTimeout(f"no complete answer within {seconds:.1f}s") from exc


def _read(response: httpx.Response, max_bytes: int, left: Callable[[], float]) -> Answer:
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > max_bytes:
        raise CallTooLarge(f"the answer is larger than {max_bytes} bytes")
    chunks: list[bytes] = []
    size = 0
    for chunk in response.iter_bytes():
        size += len(chunk)
        if size > max_bytes:
            raise CallTooLarge(f"the answer is larger than {max_bytes} bytes")
        chunks.append(chunk)
        left()  # a trickle that keeps each read alive still ends at the deadline
    return Answer(response.status_code, b"".join(chunks))

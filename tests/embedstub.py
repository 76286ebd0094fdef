"""A stub OpenAI-compatible (and Ollama) embeddings server on 127.0.0.1, shared by the provider,
embedder, CLI and integration tests.

It speaks the wire format of each API (/v1/embeddings, /api/embed); a test sets what it answers
(``answer``: status, payload, delay) and reads back exactly what was sent (``requests``). Nothing
reaches the network.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest

from .httpserve import reply, start


def vec(text: str, dim: int = 8) -> list[float]:
    """A deterministic, text-dependent vector (not normalized: the provider must normalize)."""
    return [float((ord(c) * (i + 3)) % 17 + 1) for i, c in enumerate(((text or "-") * dim)[:dim])]


Answer = Callable[[dict[str, Any], str], tuple[int, Any, float]]


def openai_ok(request: dict[str, Any], path: str) -> tuple[int, Any, float]:
    data = [
        {"object": "embedding", "index": i, "embedding": vec(t)}
        for i, t in enumerate(request["input"])
    ]
    return 200, {"object": "list", "data": list(reversed(data)), "model": request["model"]}, 0.0


def ollama_ok(request: dict[str, Any], path: str) -> tuple[int, Any, float]:
    return 200, {"model": request["model"], "embeddings": [vec(t) for t in request["input"]]}, 0.0


@dataclass
class Stub:
    answer: Answer = openai_ok
    requests: list[tuple[str, dict[str, Any], dict[str, str]]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    base_url: str = ""
    open_requests: int = 0  # requests received and not yet answered (a hanging provider)
    received: list[float] = field(default_factory=list)  # when each request came (time.time())
    spans: list[tuple[float, float]] = field(
        default_factory=list
    )  # (received, answered) of each answered one

    def handle(self, path: str, body: bytes, headers: dict[str, str]) -> tuple[int, Any, float]:
        request = json.loads(body)
        with self.lock:
            self.requests.append((path, request, headers))
        return self.answer(request, path)


def _handler_for(stub: Stub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            with stub.lock:
                stub.open_requests += 1
            received = time.time()
            with stub.lock:
                stub.received.append(received)
            try:
                code, payload, delay = stub.handle(self.path, body, dict(self.headers))
                time.sleep(delay)
            finally:
                with stub.lock:
                    stub.open_requests -= 1
                    stub.spans.append((received, time.time()))
            reply(self, code, payload)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


def serve(state: Stub | None = None) -> tuple[Stub, Callable[[], None]]:
    """Start a stub server (a fresh Stub, or ``state``); returns it and the function that stops it."""
    state = state or Stub()
    state.base_url, close = start(_handler_for(state))
    return state, close


@pytest.fixture
def stub() -> Iterator[Stub]:
    state, close = serve()
    try:
        yield state
    finally:
        close()

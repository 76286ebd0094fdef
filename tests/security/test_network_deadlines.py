"""Every embedding and summary call is bounded as a whole: a server that trickles its answer a byte
at a time, stalls halfway, or streams an endless body is cut off at the call's deadline or its byte
cap, not at a read timeout that restarts with every byte."""

from __future__ import annotations

import time
from http.server import BaseHTTPRequestHandler
from typing import Any

import httpx
import pytest

from hermes_lcm.base.httpcall import CallTimeout, CallTooLarge, post_json
from hermes_lcm.compaction.routes import OpenAICompatibleRoute
from hermes_lcm.embed.base import ProviderError
from hermes_lcm.embed.http import OpenAIProvider

from ..httpserve import start

BEHAVIOUR: dict[str, Any] = {"mode": "trickle"}


class Hostile(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt: str, *args: Any) -> None:
        return

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        mode = BEHAVIOUR["mode"]
        body = b'{"data": [{"index": 0, "embedding": [0.1, 0.2]}]}' + b" " * 200
        try:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            if mode == "endless":
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                chunk = b"x" * 65536
                while True:
                    self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if mode == "trickle":  # a byte every 0.2 s: each read succeeds, the whole takes 50 s
                for byte in body:
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()
                    time.sleep(0.2)
            else:  # stall: half the body, then nothing for a long time
                self.wfile.write(body[:10])
                self.wfile.flush()
                time.sleep(30)
        except OSError:
            return


@pytest.fixture(scope="module")
def hostile() -> Any:
    url, stop = start(Hostile)
    yield url
    stop()


@pytest.mark.parametrize("mode", ["trickle", "stall"])
def test_a_slow_body_ends_at_the_deadline(hostile: str, mode: str) -> None:
    BEHAVIOUR["mode"] = mode
    with httpx.Client() as client:
        started = time.monotonic()
        with pytest.raises(CallTimeout):
            post_json(client, hostile + "/x", {}, {}, seconds=1.5, max_bytes=1 << 20)
        assert time.monotonic() - started < 3.5


def test_an_endless_body_ends_at_the_byte_cap(hostile: str) -> None:
    BEHAVIOUR["mode"] = "endless"
    with httpx.Client() as client:
        started = time.monotonic()
        with pytest.raises(CallTooLarge):
            post_json(client, hostile + "/x", {}, {}, seconds=20, max_bytes=1 << 20)
        assert time.monotonic() - started < 10


@pytest.mark.parametrize("mode", ["trickle", "stall"])
def test_embedding_and_summary_calls_keep_their_timeout(hostile: str, mode: str) -> None:
    BEHAVIOUR["mode"] = mode
    provider = OpenAIProvider(hostile + "/v1", "m", None, 8)
    started = time.monotonic()
    with pytest.raises(ProviderError, match=r"timed out after 1\.5s"):
        provider.embed(["hello"], timeout=1.5)
    assert time.monotonic() - started < 3.5
    route = OpenAICompatibleRoute(hostile + "/v1", None, "m")
    started = time.monotonic()
    with pytest.raises(CallTimeout):
        route.complete([{"role": "user", "content": "summarize"}], timeout_s=1.5)
    assert time.monotonic() - started < 3.5

"""The part every stub HTTP server in the tests shares: a threaded server on 127.0.0.1 and a JSON
reply that tolerates a client which gave up (the timeout tests)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def reply(handler: BaseHTTPRequestHandler, code: int, payload: Any) -> None:
    """Send ``payload`` (bytes as they are, anything else as JSON) with ``code``."""
    data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    try:
        handler.send_response(code)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)
    except OSError:  # the client gave up (timeout test)
        pass


def start(handler: type[BaseHTTPRequestHandler]) -> tuple[str, Callable[[], None]]:
    """Serve ``handler`` on a free port of 127.0.0.1; returns the base URL and the stop function."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    server.block_on_close = False
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()

    def stop() -> None:
        server.shutdown()
        server.server_close()

    return f"http://127.0.0.1:{server.server_address[1]}", stop

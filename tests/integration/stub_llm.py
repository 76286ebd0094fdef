"""A scripted OpenAI-compatible model server for driving the real Hermes host offline.

Serves on 127.0.0.1 with an ephemeral port, one thread per connection:

* ``POST /v1/chat/completions`` - plain JSON, or SSE when the body says ``"stream": true``.
  Every answer carries a ``usage`` block whose ``prompt_tokens`` is an o200k count of the
  request (messages + tool schemas), so the host's real-usage bookkeeping sees realistic numbers.
  With ``prefix_cache=True`` it also reports ``prompt_tokens_details.cached_tokens`` the way an
  automatic prefix cache would (:class:`PrefixCache`).
* ``GET /v1/models`` (and ``/v1/models/<id>``) - the fake model with its context length.
* anything else - 404 (the host probes ``/api/show``, ``/api/v1/models``, ... and copes).

Every request is recorded (thread-safe) as a :class:`Recorded` entry so tests can assert on
exactly what the host sent. Answers come from a *policy*: a callable taking the
:class:`Recorded` request and returning a :class:`Reply` (text or a tool call).

The default policy (:func:`directive_policy`) is driven by directives inside the user's text,
so a test scripts the model by writing the conversation:

* ``[[tool NAME {json args}]]`` (or ``[[tool NAME @key]]`` with the arguments registered in
  :func:`make_directive_policy`) in the newest user message: the first main-agent call of that
  turn answers with that tool call; once the tool result is back, the model answers with text
  that quotes the start of the tool result.
* otherwise a deterministic, moderately long reply that echoes the turn's marker words.

Requests are classified: ``main`` (has ``tools``), ``title`` (Hermes' session-title prompt),
``summary`` (any other tool-less request: a context engine's summarizer). Summary requests get
a plausible summary text built from the request's own content.
"""

from __future__ import annotations

import json
import re
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

FAKE_MODEL = "fake-model"
FAKE_CONTEXT_LENGTH = 64_000

_TITLE_MARKER = "Generate a short, descriptive title"
_DIRECTIVE = re.compile(r"\[\[tool\s+([A-Za-z0-9_\-]+)\s*(\{.*?\}|@[A-Za-z0-9_\-]+)?\s*\]\]", re.S)


def _count_request_tokens(messages: list[dict[str, Any]], tools: list[Any] | None) -> int:
    """o200k count of a request, through hermes_lcm's offline counter when importable."""
    try:
        from hermes_lcm.base.tokens import count_messages, count_tokens
    except Exception:  # pragma: no cover - fallback when the package is not importable
        text = json.dumps(messages, ensure_ascii=False) + json.dumps(
            tools or [], ensure_ascii=False
        )
        return max(1, len(text) // 4)
    total = count_messages(messages)
    if tools:
        total += count_tokens(json.dumps(tools, ensure_ascii=False))
    return total


def _count_text_tokens(text: str) -> int:
    try:
        from hermes_lcm.base.tokens import count_tokens
    except Exception:  # pragma: no cover - fallback when the package is not importable
        return max(1, len(text) // 4)
    return count_tokens(text)


def text_of(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in content)
    return str(content)


@dataclass
class Recorded:
    """One request the stub received."""

    seq: int
    path: str
    body: dict[str, Any]
    kind: str  # main | title | summary | other
    prompt_tokens: int
    at: float
    reply: dict[str, Any] | None = None
    problems: list[str] = field(default_factory=list)
    cached_tokens: int = 0

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body.get("messages") or [])

    @property
    def tools(self) -> list[dict[str, Any]]:
        return list(self.body.get("tools") or [])

    @property
    def tool_names(self) -> list[str]:
        return [((t or {}).get("function") or {}).get("name", "") for t in self.tools]

    def last_user_text(self) -> str:
        for m in reversed(self.messages):
            if m.get("role") == "user":
                return text_of(m.get("content"))
        return ""

    def tail_role(self) -> str:
        msgs = self.messages
        return msgs[-1].get("role", "") if msgs else ""


@dataclass
class Reply:
    """What the model says: text, or one tool call (``tool_name`` + ``tool_args``)."""

    text: str = ""
    tool_name: str | None = None
    tool_args: dict[str, Any] = field(default_factory=dict)
    completion_tokens: int | None = None


Policy = Callable[[Recorded], Reply]


class PrefixCache:
    """A provider's automatic prompt cache, as OpenAI documents it: a request reuses the longest
    prefix it shares with any earlier request, counted in 128-token blocks and only from 1,024
    tokens on. The prefix is the request as a provider renders it: tool schemas first, then the
    messages in order, each serialized canonically, so one changed byte anywhere cuts the cache
    at that point. No expiry: the runs are short and an expiry would only blur the comparison."""

    MIN_TOKENS = 1024
    BLOCK = 128

    def __init__(self) -> None:
        self._seen: list[str] = []
        self._lock = threading.Lock()

    @staticmethod
    def render(body: dict[str, Any]) -> str:
        parts = [json.dumps(body.get("tools") or [], sort_keys=True, ensure_ascii=False)]
        parts += [
            json.dumps(m, sort_keys=True, ensure_ascii=False) for m in body.get("messages") or []
        ]
        return "\n".join(parts)

    @staticmethod
    def _shared(a: str, b: str) -> int:
        """Length of the common prefix, by bisection over slice comparisons (C speed)."""
        lo, hi = 0, min(len(a), len(b))
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if a[:mid] == b[:mid]:
                lo = mid
            else:
                hi = mid - 1
        return lo

    def cached_tokens(self, body: dict[str, Any], prompt_tokens: int) -> int:
        text = self.render(body)
        with self._lock:
            best = max((self._shared(text, seen) for seen in self._seen), default=0)
            self._seen.append(text)
        if not best:
            return 0
        tokens = min(prompt_tokens, _count_text_tokens(text[:best]))
        if tokens < self.MIN_TOKENS:
            return 0
        return tokens - tokens % self.BLOCK


def sequence_problems(messages: list[dict[str, Any]]) -> list[str]:
    """What a strict provider would reject: orphan tool results, unanswered tool calls,
    a system message after the start, a conversation not ending in user/tool."""
    problems: list[str] = []
    pending: set[str] = set()
    for i, m in enumerate(messages):
        role = m.get("role")
        if role == "system" and i != 0:
            problems.append(f"#{i}: system message after the start")
        if role == "tool":
            tcid = m.get("tool_call_id")
            if tcid not in pending:
                problems.append(
                    f"#{i}: tool result {tcid!r} without a matching assistant tool call"
                )
            pending.discard(tcid)
            continue
        if pending:
            problems.append(
                f"#{i}: tool call(s) {sorted(pending)} left unanswered before a {role} message"
            )
            pending.clear()
        if role == "assistant":
            for tc in m.get("tool_calls") or []:
                pending.add((tc or {}).get("id"))
    if pending:
        problems.append(f"end: tool call(s) {sorted(pending)} unanswered")
    if messages and messages[-1].get("role") not in ("user", "tool"):
        problems.append(f"end: last message is {messages[-1].get('role')!r}")
    return problems


def classify(body: dict[str, Any]) -> str:
    if body.get("tools"):
        return "main"
    msgs = body.get("messages") or []
    first = text_of(msgs[0].get("content")) if msgs else ""
    if _TITLE_MARKER in first:
        return "title"
    return "summary" if msgs else "other"


_ENVELOPE = re.compile(r"<([A-Za-z][\w\-]*)>\n?(.*?)</\1>", re.S)
_TOKEN_CAP = re.compile(r"at most (\d+) tokens", re.I)
_NONCE_LIKE = re.compile(r"(?=.*\d)[0-9a-f]{8,}", re.I)


def plausible_summary(req: Recorded, max_terms: int = 120) -> str:
    """A summary-looking answer built from the transcript being summarized: concrete words,
    identifiers and turn numbers. Reads only inside an ``<tag>...</tag>`` envelope when the
    prompt has one (never echoing the tag), and honours a stated "at most N tokens" cap."""
    prompt = "\n".join(text_of(m.get("content")) for m in req.messages if m.get("role") != "system")
    inside = [body for _tag, body in _ENVELOPE.findall(prompt)]
    blob = "\n".join(inside) if inside else prompt
    seen: dict[str, None] = {}
    for w in re.findall(r"[A-Za-z][A-Za-z0-9_\-]{3,}", blob):
        if _NONCE_LIKE.search(w):
            continue
        seen.setdefault(w.lower(), None)
        if len(seen) >= max_terms:
            break
    terms = list(seen)
    codes = sorted(set(re.findall(r"\b[A-Z]{2,}-\d{2,}\b", blob)))[:12]
    turns = sorted({int(n) for n in re.findall(r"\bturn (\d+)\b", blob)})
    cap = _TOKEN_CAP.search(prompt)
    budget_words = int(int(cap.group(1)) * 0.6) if cap else 400

    lines = ["Summary of the earlier conversation:"]
    if turns:
        lines.append(
            f"- Covers turns {turns[0]} to {turns[-1]}; each a user request and the answer."
        )
    if codes:
        lines.append("- Identifiers mentioned: " + ", ".join(codes) + ".")
    closing = "Expand for details about: " + ", ".join((codes + terms)[:6]) + "."
    used = sum(len(line.split()) for line in lines) + len(closing.split())
    for i in range(0, len(terms), 12):
        chunk = terms[i : i + 12]
        if used + len(chunk) + 1 > budget_words:
            break
        lines.append("- Discussed: " + ", ".join(chunk) + ".")
        used += len(chunk) + 1
    lines.append(closing)
    return "\n".join(lines)


def filler_reply(user_text: str, words: int = 240) -> str:
    """A deterministic assistant answer of roughly ``words`` words echoing the user's marker."""
    m = re.search(r"\bturn\s+(\d+)\b", user_text, re.I)
    tag = f"turn {m.group(1)}" if m else "this request"
    base = (
        f"Acknowledged {tag}. Here is a considered answer that restates the request, "
        "walks through the reasoning step by step, notes assumptions about the environment, "
        "lists the commands that would be run and the files they touch, and closes with a "
        "short recommendation for the next step."
    ).split()
    out: list[str] = []
    i = 0
    while len(out) < words:
        out.append(base[i % len(base)])
        i += 1
    return " ".join(out)


def make_directive_policy(named_args: dict[str, dict[str, Any]] | None = None) -> Policy:
    """The default policy (see the module docstring). ``[[tool NAME @key]]`` takes its
    arguments from ``named_args[key]``, so the user's text need not contain the query words."""
    named = dict(named_args or {})

    def policy(req: Recorded) -> Reply:
        if req.kind == "title":
            return Reply(text="Integration test conversation")
        if req.kind != "main":
            return Reply(text=plausible_summary(req))
        user_text = req.last_user_text()
        directive = _DIRECTIVE.search(user_text)
        if directive and req.tail_role() == "user":
            name, raw = directive.group(1), directive.group(2) or ""
            args = dict(named[raw[1:]]) if raw.startswith("@") else json.loads(raw or "{}")
            return Reply(tool_name=name, tool_args=args)
        if req.tail_role() == "tool":
            result = text_of(req.messages[-1].get("content"))
            return Reply(text="Based on the tool result: " + result[:400])
        return Reply(text=filler_reply(user_text))

    return policy


directive_policy = make_directive_policy()


class StubLLM:
    """The server; use as a context manager or call start()/stop()."""

    def __init__(
        self,
        policy: Policy | None = None,
        *,
        model: str = FAKE_MODEL,
        context_length: int = FAKE_CONTEXT_LENGTH,
        prefix_cache: bool = False,
    ) -> None:
        self.policy: Policy = policy or directive_policy
        self.cache: PrefixCache | None = PrefixCache() if prefix_cache else None
        self.model = model
        self.context_length = context_length
        self._lock = threading.Lock()
        self._requests: list[Recorded] = []
        self._misses: list[tuple[str, str]] = []
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ------------------------------------------------------------------------
    def start(self) -> StubLLM:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, fmt: str, *args: Any) -> None:  # silence stderr
                return

            def do_GET(self) -> None:
                stub._handle_get(self)

            def do_POST(self) -> None:
                stub._handle_post(self)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="stub-llm", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> StubLLM:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._server is not None, "stub not started"
        return self._server.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    # -- records --------------------------------------------------------------------------
    @property
    def requests(self) -> list[Recorded]:
        with self._lock:
            return list(self._requests)

    def requests_of(self, kind: str) -> list[Recorded]:
        return [r for r in self.requests if r.kind == kind]

    @property
    def misses(self) -> list[tuple[str, str]]:
        """(method, path) of requests answered 404."""
        with self._lock:
            return list(self._misses)

    # -- HTTP -----------------------------------------------------------------------------
    @staticmethod
    def _send_json(h: BaseHTTPRequestHandler, status: int, obj: Any) -> None:
        data = json.dumps(obj).encode()
        h.send_response(status)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)

    def _model_entry(self) -> dict[str, Any]:
        return {
            "id": self.model,
            "object": "model",
            "created": 0,
            "owned_by": "stub",
            "context_length": self.context_length,
            "max_model_len": self.context_length,
        }

    def _handle_get(self, h: BaseHTTPRequestHandler) -> None:
        path = h.path.split("?", 1)[0].rstrip("/")
        if path == "/v1/models":
            self._send_json(h, 200, {"object": "list", "data": [self._model_entry()]})
        elif path == f"/v1/models/{self.model}":
            self._send_json(h, 200, self._model_entry())
        else:
            with self._lock:
                self._misses.append(("GET", h.path))
            self._send_json(h, 404, {"error": {"message": "not found", "type": "not_found"}})

    def _handle_post(self, h: BaseHTTPRequestHandler) -> None:
        length = int(h.headers.get("Content-Length") or 0)
        raw = h.rfile.read(length) if length else b""
        path = h.path.split("?", 1)[0].rstrip("/")
        if path != "/v1/chat/completions":
            with self._lock:
                self._misses.append(("POST", h.path))
            self._send_json(h, 404, {"error": {"message": "not found", "type": "not_found"}})
            return
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            self._send_json(
                h, 400, {"error": {"message": "bad json", "type": "invalid_request_error"}}
            )
            return
        prompt_tokens = _count_request_tokens(body.get("messages") or [], body.get("tools"))
        with self._lock:
            rec = Recorded(
                seq=len(self._requests),
                path=path,
                body=body,
                kind=classify(body),
                prompt_tokens=prompt_tokens,
                at=time.time(),
                problems=sequence_problems(body.get("messages") or []),
            )
            self._requests.append(rec)
        try:
            reply = self.policy(rec)
        except Exception as exc:  # a broken policy must be visible, not a hung host
            self._send_json(h, 500, {"error": {"message": f"stub policy failed: {exc!r}"}})
            return
        message = self._message_for(reply)
        completion_tokens = reply.completion_tokens
        if completion_tokens is None:
            completion_tokens = max(1, len((reply.text or "") + json.dumps(reply.tool_args)) // 4)
        usage: dict[str, Any] = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        }
        if self.cache is not None:
            rec.cached_tokens = self.cache.cached_tokens(body, prompt_tokens)
            usage["prompt_tokens_details"] = {"cached_tokens": rec.cached_tokens}
        rec.reply = message
        finish = "tool_calls" if message.get("tool_calls") else "stop"
        if body.get("stream"):
            self._send_stream(h, message, finish, usage)
        else:
            self._send_json(
                h,
                200,
                {
                    "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": self.model,
                    "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                    "usage": usage,
                },
            )

    @staticmethod
    def _message_for(reply: Reply) -> dict[str, Any]:
        if reply.tool_name:
            return {
                "role": "assistant",
                "content": reply.text or None,
                "tool_calls": [
                    {
                        "id": f"call_{uuid.uuid4().hex[:16]}",
                        "type": "function",
                        "function": {
                            "name": reply.tool_name,
                            "arguments": json.dumps(reply.tool_args),
                        },
                    }
                ],
            }
        return {"role": "assistant", "content": reply.text}

    def _send_stream(
        self, h: BaseHTTPRequestHandler, message: dict[str, Any], finish: str, usage: dict[str, Any]
    ) -> None:
        cid = f"chatcmpl-{uuid.uuid4().hex[:12]}"
        created = int(time.time())

        def chunk(choices: list[dict[str, Any]], with_usage: bool = False) -> bytes:
            obj: dict[str, Any] = {
                "id": cid,
                "object": "chat.completion.chunk",
                "created": created,
                "model": self.model,
                "choices": choices,
            }
            if with_usage:
                obj["usage"] = usage
            return b"data: " + json.dumps(obj).encode() + b"\n\n"

        parts = [
            chunk(
                [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]
            )
        ]
        text = message.get("content") or ""
        step = 64
        for i in range(0, len(text), step):
            delta = {"content": text[i : i + step]}
            parts.append(chunk([{"index": 0, "delta": delta, "finish_reason": None}]))
        for idx, tc in enumerate(message.get("tool_calls") or []):
            delta = {"tool_calls": [{"index": idx, **tc}]}
            parts.append(chunk([{"index": 0, "delta": delta, "finish_reason": None}]))
        parts.append(chunk([{"index": 0, "delta": {}, "finish_reason": finish}]))
        parts.append(chunk([], with_usage=True))
        parts.append(b"data: [DONE]\n\n")
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.send_header("Cache-Control", "no-cache")
        h.send_header("Connection", "close")
        h.end_headers()
        for p in parts:
            h.wfile.write(p)
        h.wfile.flush()
        h.close_connection = True


def stepped_policy(plan: Callable[[int, Recorded], Reply]) -> Policy:
    """A scripted model: the n-th main request (0, 1, ...) gets ``plan(n, request)``; titles and
    summaries get the default policy's answers. Thread-safe: the host may ask from two threads."""
    lock = threading.Lock()
    count = [0]
    fallback = make_directive_policy()

    def policy(req: Recorded) -> Reply:
        if req.kind != "main":
            return fallback(req)
        with lock:
            step = count[0]
            count[0] += 1
        return plan(step, req)

    return policy

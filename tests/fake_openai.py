"""A fake OpenAI-compatible chat server for tests and benchmarks (stdlib only).

It serves ``POST /v1/chat/completions`` (and ``/chat/completions``) on
127.0.0.1 at a free port, in a background thread. What it does with each
request is decided, in order, by:

1. a queue of *actions* the test pushed (``server.push(...)``), one per request;
2. otherwise a *responder* function ``responder(body) -> str | Action`` if set;
3. otherwise a normal reply with ``default_text``.

An :class:`Action` can answer normally (``text``, ``model``, ``reasoning``),
fail with a status (429 / 500 / 503 / 400, optionally with ``Retry-After``),
sleep before answering (slow reply, or past the client's timeout), or send a
malformed body. ``delay_s`` adds a fixed latency to every request (the
benchmark's 200 ms). Every request body and its arrival time is kept in
``server.requests``; the Authorization header is never stored, only whether
one came (``server.auth_seen``).

Prompt caching as OpenAI does it, on its own: with ``auto_cache_min_tokens`` set, the
usage of a reply reports ``prompt_tokens_details.cached_tokens``, the tokens of the
longest run of leading messages an earlier request already sent (when at least that
many; nothing is marked in the request, none is needed). An action's ``cached_tokens``
reports a given number instead.

``POST /v1/responses`` answers in the Responses API's shape (litellm's ``openai/responses/...``
routes): a ``reasoning`` output item with ``encrypted_content`` (when the request asks for
reasoning or the action gives it), the message, function calls. A reasoning item sent back in
``input`` must carry the encrypted content it was given, or the request is refused with 400,
as OpenAI refuses a reasoning item it cannot verify; ``reasoning_replayed`` counts the good ones.
"""
from __future__ import annotations

import json
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Action:
    status: int = 200
    text: str | None = None  # reply text; default_text when None
    model: str | None = None  # model id returned; the requested one when None
    reasoning: str | None = None  # returned as message.reasoning_content
    headers: dict[str, str] = field(default_factory=dict)
    sleep_s: float = 0.0  # before answering (slow reply / timeout)
    malformed: bool = False  # a 200 whose body is not JSON
    error_message: str = "fake server error"
    usage: tuple[int, int] | None = None  # (prompt_tokens, completion_tokens); derived when None
    echo_auth: bool = False  # put the Authorization header into the error message, as some providers do
    tool_calls: list[tuple[str, dict[str, Any] | str]] | None = None  # (name, arguments) native tool calls
    reset: bool = False  # close the connection without an answer (a connection reset)
    usage_json: dict[str, Any] | None = None  # the usage object sent verbatim (details, odd shapes)
    no_usage: bool = False  # a reply without a usage object, as some servers send
    finish_reason: str | None = None  # "stop" (or "tool_calls") when None
    message_extra: dict[str, Any] = field(default_factory=dict)  # more fields of the message, sent as given
    cached_tokens: int | None = None  # usage.prompt_tokens_details.cached_tokens, as OpenAI reports cache reads


def ok(text: str | None = None, **kw: Any) -> Action:
    return Action(200, text=text, **kw)


def status(code: int, retry_after: str | float | None = None, message: str | None = None) -> Action:
    headers = {"Retry-After": str(retry_after)} if retry_after is not None else {}
    return Action(code, headers=headers, error_message=message or f"fake status {code}")


def slow(seconds: float, text: str | None = None) -> Action:
    return Action(200, text=text, sleep_s=seconds)


def malformed() -> Action:
    return Action(200, malformed=True)


def reset() -> Action:
    return Action(200, reset=True)


class Faults:
    """A responder that fails a share of requests, drawn from a seeded RNG, with the
    faults a provider really has: 429 with Retry-After, 500, 503, a reply slower than
    the client's timeout, a connection reset, a malformed body. Everything else is
    answered by ``then(body)``. ``log`` counts the faults served, by kind."""

    KINDS = ("429", "500", "503", "timeout", "reset", "malformed")

    def __init__(self, then: Callable[[dict[str, Any]], str | Action], rate: float = 0.3, seed: int = 0,
                 timeout_sleep_s: float = 1.5, kinds: tuple[str, ...] = KINDS) -> None:
        import random

        self.then, self.rate, self.timeout_sleep_s, self.kinds = then, rate, timeout_sleep_s, kinds
        self.rng = random.Random(seed)
        self.log: dict[str, int] = {}
        self.lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> str | Action:
        with self.lock:
            kind = self.rng.choice(self.kinds) if self.rng.random() < self.rate else None
            if kind:
                self.log[kind] = self.log.get(kind, 0) + 1
        if kind is None:
            return self.then(body)
        if kind == "429":
            return status(429, retry_after="0.05", message="rate limited")
        if kind in ("500", "503"):
            return status(int(kind), message="server fault")
        if kind == "timeout":
            return slow(self.timeout_sleep_s)
        if kind == "reset":
            return reset()
        return malformed()


def _prefix_tokens(messages: list[dict[str, Any]]) -> list[tuple[str, int]]:
    """(hash of the first i+1 messages, their tokens as the fake counts prompt tokens) for each i."""
    import hashlib

    h, total, out = hashlib.sha256(), 0, []
    for m in messages:
        h.update(json.dumps(m, sort_keys=True).encode())
        total += len(str(m.get("content", "")))
        out.append((h.hexdigest(), total // 4))
    return out


class FakeOpenAI:
    def __init__(self, delay_s: float = 0.0, default_text: str = '{"op": "list"}',
                 auto_cache_min_tokens: int | None = None) -> None:
        self.delay_s = delay_s
        self.default_text = default_text
        self.auto_cache_min_tokens = auto_cache_min_tokens
        self.prefixes: set[str] = set()  # message prefixes sent before (the automatic prompt cache)
        self.reasoning_given: dict[str, str] = {}  # Responses API reasoning item id -> its encrypted content
        self.reasoning_replayed = 0
        self.responder: Callable[[dict[str, Any]], str | Action] | None = None
        self.actions: deque[Action] = deque()
        self.requests: list[dict[str, Any]] = []  # {"t": monotonic arrival, "body": ...}
        self.auth_seen = 0
        self.lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- control ---------------------------------------------------------------
    def push(self, *actions: Action) -> None:
        with self.lock:
            self.actions.extend(actions)

    def reset(self) -> None:
        with self.lock:
            self.actions.clear()
            self.requests.clear()
            self.responder = None
            self.auth_seen = 0
            self.prefixes.clear()
            self.reasoning_given.clear()
            self.reasoning_replayed = 0

    @property
    def count(self) -> int:
        with self.lock:
            return len(self.requests)

    @property
    def url(self) -> str:
        assert self._httpd is not None
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def _responses(self, body: dict[str, Any], action: Action) -> tuple[int, dict[str, Any]]:
        """A Responses API answer (see the module docstring), or a 400 for a reasoning item it did not give."""
        import hashlib

        items = body.get("input") if isinstance(body.get("input"), list) else []
        good = 0
        for item in items:
            if isinstance(item, dict) and item.get("type") == "reasoning":
                if self.reasoning_given.get(str(item.get("id"))) != item.get("encrypted_content"):
                    return 400, {"error": {"message": "The encrypted content for item could not be verified.",
                                           "type": "invalid_request_error", "code": "invalid_encrypted_content"}}
                good += 1
        with self.lock:
            self.reasoning_replayed += good
            n = len(self.requests)
        output: list[dict[str, Any]] = []
        if action.reasoning is not None or body.get("reasoning"):
            summary = action.reasoning if action.reasoning is not None else f"Reasoned about request {n}."
            rid = f"rs_fake_{n}"
            enc = "gAAAA" + hashlib.sha256(f"{rid}:{summary}".encode()).hexdigest()
            with self.lock:
                self.reasoning_given[rid] = enc
            output.append({"type": "reasoning", "id": rid, "encrypted_content": enc,
                           "summary": [{"type": "summary_text", "text": summary}]})
        text = self.default_text if action.text is None else action.text
        if text:
            output.append({"type": "message", "id": f"msg_fake_{n}", "role": "assistant", "status": "completed",
                           "content": [{"type": "output_text", "text": text, "annotations": []}]})
        for i, (name, args) in enumerate(action.tool_calls or []):
            output.append({"type": "function_call", "id": f"fc_fake_{n}_{i}", "call_id": f"call_{n}_{i}",
                           "name": name, "arguments": args if isinstance(args, str) else json.dumps(args),
                           "status": "completed"})
        n_in = len(json.dumps(items)) // 4 + 1
        n_out = len(text or "") // 4 + 1
        usage: dict[str, Any] = {"input_tokens": n_in, "output_tokens": n_out, "total_tokens": n_in + n_out,
                                 "input_tokens_details": {"cached_tokens": action.cached_tokens or 0},
                                 "output_tokens_details": {"reasoning_tokens": 0}}
        return 200, {"id": f"resp_fake_{n}", "object": "response", "created_at": int(time.time()),
                     "status": "completed", "model": action.model or body.get("model", "fake"), "output": output,
                     "usage": usage, "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
                     "text": {"format": {"type": "text"}}}

    def start(self) -> FakeOpenAI:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # quiet
                return

            def setup(self) -> None:
                super().setup()
                # headers and body go out in two writes: without this, Nagle + delayed ACK add ~40 ms a reply
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {"_unparseable": raw[:200].decode("utf-8", "replace")}
                with server.lock:
                    server.requests.append({"t": time.monotonic(), "body": body, "path": self.path,
                                            "request_id": self.headers.get("X-Client-Request-Id")})
                    if self.headers.get("Authorization"):
                        server.auth_seen += 1
                    action = server.actions.popleft() if server.actions else None
                if action is None and server.responder is not None:
                    got = server.responder(body)
                    action = got if isinstance(got, Action) else Action(text=got)
                action = action or Action()
                if server.delay_s:
                    time.sleep(server.delay_s)
                if action.sleep_s:
                    time.sleep(action.sleep_s)
                if action.reset:
                    self.close_connection = True
                    try:
                        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
                        self.connection.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass
                    return
                if action.status != 200:
                    msg = action.error_message
                    if action.echo_auth:
                        msg += f" Incorrect API key provided: {self.headers.get('Authorization', '')}"
                    payload = json.dumps({"error": {"message": msg, "type": "fake_error",
                                                    "code": str(action.status)}}).encode()
                    self._send(action.status, payload, action.headers)
                    return
                if action.malformed:
                    self._send(200, b'{"id": "x", "choices": [ {"message": ', {})
                    return
                if self.path.rstrip("/").endswith("/responses"):
                    code, out = server._responses(body, action)
                    self._send(code, json.dumps(out).encode(), action.headers)
                    return
                text = server.default_text if action.text is None else action.text
                message: dict[str, Any] = {"role": "assistant", "content": text}
                if action.reasoning is not None:
                    message["reasoning_content"] = action.reasoning
                message.update(action.message_extra)
                finish = "stop"
                if action.tool_calls:
                    message["content"] = text if action.text is not None else None
                    message["tool_calls"] = [
                        {"id": f"call_{len(server.requests)}_{i}", "type": "function",
                         "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args)}}
                        for i, (name, args) in enumerate(action.tool_calls)]
                    finish = "tool_calls"
                    text = text or ""
                n_prompt = sum(len(str(m.get("content", ""))) for m in body.get("messages", [])) // 4 + 1
                n_completion = len(text) // 4 + 1
                if action.usage is not None:
                    n_prompt, n_completion = action.usage
                cached = action.cached_tokens
                if cached is None and server.auto_cache_min_tokens is not None:
                    prefixes = _prefix_tokens(body.get("messages") or [])
                    with server.lock:
                        hits = [n for h, n in prefixes if h in server.prefixes]
                        server.prefixes.update(h for h, _ in prefixes)
                    cached = max(hits, default=0)
                    cached = min(cached, n_prompt) if cached >= server.auto_cache_min_tokens else 0
                reply: dict[str, Any] = {
                    "id": f"chatcmpl-fake-{len(server.requests)}", "object": "chat.completion",
                    "created": int(time.time()), "model": action.model or body.get("model", "fake"),
                    "choices": [{"index": 0, "message": message, "finish_reason": action.finish_reason or finish}],
                    "usage": action.usage_json or {"prompt_tokens": n_prompt, "completion_tokens": n_completion,
                                                   "total_tokens": n_prompt + n_completion},
                }
                if cached is not None and not action.usage_json:
                    reply["usage"]["prompt_tokens_details"] = {"cached_tokens": cached}
                if action.no_usage:
                    del reply["usage"]
                payload = json.dumps(reply).encode()
                self._send(200, payload, action.headers)

            def _send(self, code: int, payload: bytes, headers: dict[str, str]) -> None:
                try:
                    self.send_response(code)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    for k, v in headers.items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout test)

        class Server(ThreadingHTTPServer):
            daemon_threads = True
            request_queue_size = 512

            def handle_error(self, request: Any, client_address: Any) -> None:
                return  # a reset fault or a client that gave up: expected here, not worth a traceback

        self._httpd = Server(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="fake-openai", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None


def _serve_child(conn: Any, delay_s: float, responder: Callable[[dict[str, Any]], str | Action] | None) -> None:
    srv = FakeOpenAI(delay_s=delay_s)
    srv.responder = responder
    srv.start()
    conn.send(srv.url)
    conn.recv()  # until told to stop
    conn.send(srv.count)
    srv.stop()


class FakeOpenAIProcess:
    """The same server in a child process (fork), so that its threads do not share the
    client's interpreter lock: for benchmarks, where the client's own overhead is measured.
    ``responder`` must be a module-level function."""

    def __init__(self, delay_s: float = 0.0,
                 responder: Callable[[dict[str, Any]], str | Action] | None = None) -> None:
        self.delay_s, self.responder = delay_s, responder
        self.url = ""
        self.count = 0

    def start(self) -> FakeOpenAIProcess:
        import multiprocessing as mp

        ctx = mp.get_context("fork")
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(target=_serve_child, args=(child, self.delay_s, self.responder), daemon=True)
        self._proc.start()
        if not self._conn.poll(30):
            raise RuntimeError("fake server process did not start")
        self.url = self._conn.recv()
        return self

    def stop(self) -> None:
        try:
            self._conn.send("stop")
            if self._conn.poll(10):
                self.count = self._conn.recv()
        finally:
            self._proc.join(10)
            if self._proc.is_alive():
                self._proc.terminate()


FAKE_KEY = "sk-test-FAKE-abcdefghijklmnopqrstuv"  # obviously fake; tests check it never reaches a record


def route_litellm_to(server: FakeOpenAI, monkeypatch: Any, key: str = FAKE_KEY) -> None:
    """Point catalogue entries that read WORKBENCH_FAKE_API_BASE at ``server``, with a
    fake key and fresh connection limits (what every litellm-backed test needs)."""
    from workbench.models.litellm_client import reset_limits

    reset_limits()
    monkeypatch.setenv("OPENAI_API_KEY", key)
    monkeypatch.setenv("WORKBENCH_FAKE_API_BASE", server.url)
    monkeypatch.delenv("WORKBENCH_MODELS", raising=False)

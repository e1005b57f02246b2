"""A fake Anthropic Messages API for tests and benchmarks (stdlib only).

It serves ``POST /v1/messages`` on 127.0.0.1 at a free port, in a background thread,
and behaves like the real API in the ways the workbench depends on:

- **Prompt caching, billed as Anthropic bills it.** Content blocks marked with
  ``cache_control`` are breakpoints. The server keeps one prompt cache (per server, as
  Anthropic's is per organisation): a breakpoint writes the prefix up to it (tools,
  system, messages, in that order), and a later request reads the longest prefix, ending
  at a block boundary at most 20 blocks before one of its breakpoints, that an earlier
  request wrote. The reply's usage splits the prompt as the API does:
  ``input_tokens`` (after the last breakpoint, or not cached), ``cache_read_input_tokens``,
  ``cache_creation_input_tokens``. A prefix shorter than ``min_cache_tokens`` is not
  cached (Anthropic: 1024 tokens for Sonnet-class models). Tokens are counted as about
  4 characters each of a block's JSON (deterministic, not a tokenizer). ``billed`` sums
  input-token equivalents at Anthropic's multipliers (reads 0.1x, writes 1.25x).
- **Thinking blocks with signatures.** With ``thinking`` enabled in the request (or an
  action that asks for one) the reply starts with a ``thinking`` block whose
  ``signature`` is an HMAC of its text. A thinking block sent back in an assistant turn
  must carry the signature it was given, byte for byte, or the request is refused with
  400 (as Anthropic refuses a tampered block); ``thinking_replayed`` counts those that
  came back intact.
- **Tool use.** An action can answer with ``tool_use`` blocks (``stop_reason: tool_use``).

What each request did is decided by a queue of :class:`Action` (``push``), else a
``responder(body) -> str | Action``, else ``default_text``. Every request body is kept in
``requests`` with its path and the headers that matter (``anthropic-version``, the client
request id); the key (``x-api-key``) is never stored, only whether one came.
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import json
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

READ_MULTIPLIER = 0.1  # Anthropic bills a cache read at a tenth of the input price
WRITE_MULTIPLIER = 1.25  # and a (5-minute) cache write at 1.25 times it
LOOKBACK_BLOCKS = 20  # how far before a breakpoint the API looks for an earlier cached prefix


@dataclass
class Action:
    status: int = 200
    text: str | None = None  # the text block; default_text when None ("" sends no text block)
    thinking: str | None = None  # a signed thinking block before the text (also sent when the request enables thinking)
    redacted_thinking: str | None = None  # a redacted_thinking block's opaque data
    tool_uses: list[tuple[str, dict[str, Any]]] | None = None  # (name, input) tool_use blocks
    model: str | None = None
    error_message: str = "fake anthropic error"
    headers: dict[str, str] = field(default_factory=dict)
    sleep_s: float = 0.0
    bad_signature: bool = False  # hand out a thinking block whose signature the server will not accept back


def ok(text: str | None = None, **kw: Any) -> Action:
    return Action(200, text=text, **kw)


def status(code: int, message: str | None = None, retry_after: float | None = None) -> Action:
    headers = {"retry-after": str(retry_after)} if retry_after is not None else {}
    return Action(code, error_message=message or f"fake status {code}", headers=headers)


def tokens_of(value: Any) -> int:
    """The fake's token count of a block: about 4 characters of its JSON a token."""
    return max(1, len(json.dumps(value, sort_keys=True, ensure_ascii=False)) // 4)


def _plain(block: Any) -> Any:
    """A block as the cache sees it: without its cache_control marker."""
    if isinstance(block, dict):
        return {k: v for k, v in block.items() if k != "cache_control"}
    return block


def prompt_blocks(body: dict[str, Any]) -> list[tuple[Any, bool]]:
    """The request's prompt as (block, is a breakpoint), in the order the cache sees it:
    tools, system, then each message's content blocks (tagged with their role)."""
    out: list[tuple[Any, bool]] = []
    for tool in body.get("tools") or []:
        out.append((("tool", _plain(tool)), isinstance(tool, dict) and "cache_control" in tool))
    system = body.get("system")
    if isinstance(system, str) and system:
        out.append((("system", system), False))
    elif isinstance(system, list):
        for b in system:
            out.append((("system", _plain(b)), isinstance(b, dict) and "cache_control" in b))
    for m in body.get("messages") or []:
        content = m.get("content")
        if isinstance(content, str):
            out.append(((m.get("role"), content), False))
            continue
        for b in content or []:
            out.append(((m.get("role"), _plain(b)), isinstance(b, dict) and "cache_control" in b))
    return out


class PromptCache:
    """The server's prompt cache: prefix hashes written by breakpoints, and what each request bills."""

    def __init__(self, min_tokens: int = 0) -> None:
        self.min_tokens = min_tokens
        self.prefixes: set[str] = set()
        self.lock = threading.Lock()

    def bill(self, body: dict[str, Any]) -> dict[str, int]:
        blocks = prompt_blocks(body)
        hashes: list[str] = []
        cum: list[int] = []
        h, total = hashlib.sha256(), 0
        for block, _ in blocks:
            h.update(json.dumps(block, sort_keys=True, ensure_ascii=False).encode())
            hashes.append(h.copy().hexdigest())
            total += tokens_of(block)
            cum.append(total)
        points = [i for i, (_, bp) in enumerate(blocks) if bp]
        with self.lock:
            read_end = -1
            for b in points:
                for j in range(b, max(-1, b - LOOKBACK_BLOCKS - 1), -1):
                    if hashes[j] in self.prefixes:
                        read_end = max(read_end, j)
                        break
            write_end = -1
            for b in points:
                if cum[b] >= self.min_tokens:
                    self.prefixes.add(hashes[b])
                    write_end = max(write_end, b)
        read = cum[read_end] if read_end >= 0 else 0
        write = cum[write_end] - read if write_end > read_end else 0
        return {"input_tokens": total - read - write, "cache_read_input_tokens": read,
                "cache_creation_input_tokens": write}

    def clear(self) -> None:
        with self.lock:
            self.prefixes.clear()


class FakeAnthropic:
    def __init__(self, delay_s: float = 0.0, default_text: str = '{"op": "list"}', min_cache_tokens: int = 0,
                 sign_key: bytes = b"fake-anthropic-signing-key") -> None:
        self.delay_s = delay_s
        self.default_text = default_text
        self.sign_key = sign_key
        self.cache = PromptCache(min_cache_tokens)
        self.responder: Callable[[dict[str, Any]], str | Action] | None = None
        self.actions: deque[Action] = deque()
        self.requests: list[dict[str, Any]] = []  # {"t", "body", "path", "request_id", "version", "usage"}
        self.key_seen = 0
        self.thinking_replayed = 0
        self.billed = {"input_tokens": 0, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0,
                       "output_tokens": 0}
        self.lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None

    # -- control ---------------------------------------------------------------
    def push(self, *actions: Action) -> None:
        with self.lock:
            self.actions.extend(actions)

    def reset(self) -> None:
        """Forget requests, actions, the responder, the bill and the prompt cache."""
        with self.lock:
            self.actions.clear()
            self.requests.clear()
            self.responder = None
            self.key_seen = self.thinking_replayed = 0
            self.billed = dict.fromkeys(self.billed, 0)
        self.cache.clear()

    @property
    def count(self) -> int:
        with self.lock:
            return len(self.requests)

    @property
    def url(self) -> str:
        """The api_base to give litellm's Anthropic route (it appends /v1/messages)."""
        assert self._httpd is not None
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def input_equivalents(self, usage: dict[str, int] | None = None) -> float:
        """Billed input-token equivalents (reads at 0.1x, writes at 1.25x) of ``usage`` or of everything billed."""
        u = self.billed if usage is None else usage
        return (u.get("input_tokens", 0) + READ_MULTIPLIER * u.get("cache_read_input_tokens", 0)
                + WRITE_MULTIPLIER * u.get("cache_creation_input_tokens", 0))

    def signature(self, thinking: str) -> str:
        return base64.b64encode(hmac.new(self.sign_key, thinking.encode(), hashlib.sha256).digest()).decode()

    # -- serving ---------------------------------------------------------------
    def _check_thinking(self, body: dict[str, Any]) -> str | None:
        """None when every thinking block sent back carries its own signature; else why not."""
        good = 0
        for m in body.get("messages") or []:
            if m.get("role") != "assistant" or not isinstance(m.get("content"), list):
                continue
            for b in m["content"]:
                if isinstance(b, dict) and b.get("type") == "thinking":
                    if b.get("signature") != self.signature(str(b.get("thinking", ""))):
                        return "messages: Invalid `signature` in `thinking` block"
                    good += 1
        with self.lock:
            self.thinking_replayed += good
        return None

    def _answer(self, body: dict[str, Any], action: Action) -> dict[str, Any]:
        content: list[dict[str, Any]] = []
        thinking_on = isinstance(body.get("thinking"), dict) and body["thinking"].get("type") == "enabled"
        n = len(self.requests)
        thought = action.thinking if action.thinking is not None else (f"Thinking about turn {n}." if thinking_on
                                                                        else None)
        if thought is not None:
            sig = self.signature(thought) if not action.bad_signature else "forged"
            content.append({"type": "thinking", "thinking": thought, "signature": sig})
        if action.redacted_thinking is not None:
            content.append({"type": "redacted_thinking", "data": action.redacted_thinking})
        text = self.default_text if action.text is None else action.text
        if text:
            content.append({"type": "text", "text": text})
        for i, (name, args) in enumerate(action.tool_uses or []):
            content.append({"type": "tool_use", "id": f"toolu_{n}_{i}", "name": name, "input": args})
        usage: dict[str, Any] = self.cache.bill(body)
        usage["output_tokens"] = sum(tokens_of(b) for b in content) if content else 1
        with self.lock:
            for k in self.billed:
                self.billed[k] += usage[k]
        return {"id": f"msg_fake_{n}", "type": "message", "role": "assistant",
                "model": action.model or body.get("model", "fake"), "content": content,
                "stop_reason": "tool_use" if action.tool_uses else "end_turn", "stop_sequence": None,
                "usage": usage}

    def start(self) -> FakeAnthropic:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                return

            def setup(self) -> None:
                super().setup()
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def do_POST(self) -> None:  # noqa: N802
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {"_unparseable": raw[:200].decode("utf-8", "replace")}
                rec: dict[str, Any] = {"t": time.monotonic(), "body": body, "path": self.path,
                                       "request_id": self.headers.get("X-Client-Request-Id"),
                                       "version": self.headers.get("anthropic-version")}
                with server.lock:
                    server.requests.append(rec)
                    if self.headers.get("x-api-key"):
                        server.key_seen += 1
                    action = server.actions.popleft() if server.actions else None
                if self.path.rstrip("/") != "/v1/messages":
                    return self._error(404, "not_found_error", f"no route {self.path}")
                if not self.headers.get("x-api-key"):
                    return self._error(401, "authentication_error", "x-api-key header is required")
                if not self.headers.get("anthropic-version"):
                    return self._error(400, "invalid_request_error", "anthropic-version header is required")
                if action is None and server.responder is not None:
                    got = server.responder(body)
                    action = got if isinstance(got, Action) else Action(text=got)
                action = action or Action()
                if server.delay_s or action.sleep_s:
                    time.sleep(server.delay_s + action.sleep_s)
                if action.status != 200:
                    return self._error(action.status, "api_error", action.error_message, action.headers)
                bad = server._check_thinking(body)
                if bad is not None:
                    return self._error(400, "invalid_request_error", bad)
                reply = server._answer(body, action)
                rec["usage"] = reply["usage"]
                self._send(200, json.dumps(reply).encode(), action.headers)

            def _error(self, code: int, kind: str, message: str, headers: dict[str, str] | None = None) -> None:
                payload = json.dumps({"type": "error", "error": {"type": kind, "message": message}}).encode()
                self._send(code, payload, headers or {})

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
                    pass

        class Server(ThreadingHTTPServer):
            daemon_threads = True
            request_queue_size = 256

            def handle_error(self, request: Any, client_address: Any) -> None:
                return

        self._httpd = Server(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._httpd.serve_forever, name="fake-anthropic", daemon=True).start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None


FAKE_KEY = "sk-ant-test-FAKE-abcdefghijklmnopqrstuv"  # obviously fake; tests check it never reaches a record

"""The body each provider received is recorded as sent, after litellm's translation: a fake
OpenAI server (plain and lean paths) and a fake Anthropic server (/v1/messages), both started
here on 127.0.0.1, log what they receive; for every call the recorded ``sent`` body equals it,
including a reasoning_effort route that litellm turns into Anthropic's thinking budget."""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tests.fake_openai import FakeOpenAI
from workbench.models.base import ModelRequest
from workbench.models.catalogue import ModelEntry

KEY = "sk-test-sent-body-0123456789"


class FakeAnthropic:
    """A minimal Anthropic Messages endpoint: logs each body, answers with one text block."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.keys: list[str | None] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                outer.bodies.append(json.loads(raw))
                outer.keys.append(self.headers.get("x-api-key"))
                payload = json.dumps({
                    "id": f"msg_{len(outer.bodies)}", "type": "message", "role": "assistant",
                    "model": outer.bodies[-1].get("model"), "stop_reason": "end_turn", "stop_sequence": None,
                    "content": [{"type": "text", "text": '{"op": "list"}'}],
                    "usage": {"input_tokens": 11, "output_tokens": 5}}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.httpd.shutdown()


def _complete(entry: ModelEntry, messages: list[dict[str, Any]]) -> Any:
    import asyncio

    from workbench.models.litellm_client import LiteLLMClient, aclose_clients

    async def go() -> Any:
        try:
            client = LiteLLMClient(entry, seed=1)
            return [await client.complete(ModelRequest(messages=messages)) for _ in range(2)]
        finally:
            await aclose_clients()

    return asyncio.run(go())


MESSAGES = [{"role": "system", "content": "You are agent A."}, {"role": "user", "content": "Your turn."}]


@pytest.mark.parametrize("transport", ["auto", "litellm"])
def test_openai_route_records_the_body_the_server_received(transport, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    server = FakeOpenAI().start()
    try:
        entry = ModelEntry(name="t", route="openai/fake-model", api_base=server.url, max_attempts=1, timeout_s=10,
                           temperature=0.3, max_tokens=40, transport=transport)
        replies = _complete(entry, MESSAGES)
        received = {r["request_id"]: r["body"] for r in server.requests}
    finally:
        server.stop()
    assert len(received) == 2
    for reply in replies:
        assert not reply.error, reply.error
        sent = reply.extra["sent"]
        assert sent == received[reply.attempts[-1]["request_id"]]
        assert sent["temperature"] == 0.3 and sent["max_tokens"] == 40 and KEY not in json.dumps(sent)


def test_anthropic_route_records_the_translated_body_with_its_thinking_budget(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    server = FakeAnthropic()
    try:
        entry = ModelEntry(name="claude", route="anthropic/claude-sonnet-4-5", api_base=server.url, max_attempts=1,
                           timeout_s=10, max_tokens=2048, reasoning_effort="low")
        replies = _complete(entry, MESSAGES)
    finally:
        server.stop()
    assert len(server.bodies) == 2 and server.keys == [KEY, KEY]
    for reply, received in zip(replies, server.bodies):
        assert not reply.error, reply.error
        assert reply.params_sent.get("reasoning_effort") == "low"  # the workbench's own request ...
        assert reply.extra["sent"] == received  # ... and what went on the wire
        assert received["thinking"]["type"] == "enabled" and received["thinking"]["budget_tokens"] > 0
        assert "reasoning_effort" not in received and received["system"]  # translated: system moved, effort mapped
        assert KEY not in json.dumps(reply.to_record())


def test_a_failed_call_records_what_it_sent_too(monkeypatch):
    """A call the server refused still went on the wire: its body is recorded (redacted), never
    left as a raw body on each attempt; earlier attempts keep the hash of theirs."""
    from tests.fake_openai import status

    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    server = FakeOpenAI().start()
    try:
        server.push(status(500), status(500), status(500), status(500))
        entry = ModelEntry(name="t", route="openai/fake-model", api_base=server.url, max_attempts=2, timeout_s=10,
                           backoff_base_s=0.01, temperature=0.3, transport="litellm")
        reply = _complete(entry, MESSAGES)[0]
        received = [r["body"] for r in server.requests]
    finally:
        server.stop()
    assert reply.error and len(reply.attempts) == 2
    assert reply.extra["sent"] == received[1]
    assert all("sent" not in a for a in reply.attempts) and reply.attempts[0]["sent_sha256"]

"""Scripted replies: a fixed list of reply texts for one agent, for tests and
controlled peers. When the list runs out the call fails (recorded as such),
rather than inventing a reply.

Where the request offers tools, a line that is a JSON object with ``tool_calls``
(``{"tool_calls": [{"name": N, "arguments": {...} or "raw text"}], "text": "..."}``)
is replied as native tool calls (ids ``call_K_I``), so that a script can act through
tools as a model does; any other line is reply text, as without tools."""
from __future__ import annotations

import json
from typing import Any

from workbench.models.base import ModelReply, ModelRequest, approx_tokens


def script_calls(line: str, n: int) -> tuple[str, list[dict[str, Any]]] | None:
    """A script line's tool calls and text, or None where the line is not a tools line."""
    if not line.lstrip().startswith("{"):
        return None
    try:
        obj = json.loads(line)
    except (ValueError, RecursionError):
        return None
    if not isinstance(obj, dict) or not isinstance(obj.get("tool_calls"), list):
        return None
    calls = []
    for i, c in enumerate(obj["tool_calls"]):
        c = c if isinstance(c, dict) else {}
        args = c.get("arguments", {})
        calls.append({"id": str(c.get("id") or f"call_{n}_{i}"), "name": str(c.get("name") or ""),
                      "arguments": args if isinstance(args, str) else json.dumps(args)})
    return str(obj.get("text") or ""), calls


class ScriptedClient:
    virtual_time = True  # latency is on the world clock, not waited for
    def __init__(self, replies: list[str], latency_s: float = 1.0, route: str = "scripted") -> None:
        self.replies = list(replies)
        self.latency_s = latency_s
        self.route = route
        self._i = 0

    async def complete(self, request: ModelRequest) -> ModelReply:
        prompt_tokens = sum(approx_tokens(m.get("content") or "") for m in request.messages)
        if self._i >= len(self.replies):
            return ModelReply(
                text="", latency_s=self.latency_s, route=self.route, model_returned=None,
                usage={"prompt_tokens": prompt_tokens, "completion_tokens": 0},
                cost_usd=0.0, params_requested=dict(request.params),
                error=f"script exhausted after {len(self.replies)} replies",
            )
        text = self.replies[self._i]
        self._i += 1
        calls: list[dict[str, Any]] = []
        scripted = script_calls(text, self._i) if request.tools else None
        if scripted is not None:
            text, calls = scripted
        return ModelReply(
            text=text, latency_s=self.latency_s, route=self.route, model_returned=self.route,
            usage={"prompt_tokens": prompt_tokens,
                   "completion_tokens": approx_tokens(text) + sum(approx_tokens(c["arguments"]) for c in calls)},
            cost_usd=0.0, params_requested=dict(request.params), params_sent={}, tool_calls=calls,
        )

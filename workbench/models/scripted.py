"""Scripted replies: a fixed list of reply texts for one agent, for tests and
controlled peers. When the list runs out the call fails (recorded as such),
rather than inventing a reply."""
from __future__ import annotations

from workbench.models.base import ModelReply, ModelRequest, approx_tokens


class ScriptedClient:
    virtual_time = True  # latency is on the world clock, not waited for
    def __init__(self, replies: list[str], latency_s: float = 1.0, route: str = "scripted") -> None:
        self.replies = list(replies)
        self.latency_s = latency_s
        self.route = route
        self._i = 0

    async def complete(self, request: ModelRequest) -> ModelReply:
        prompt_tokens = sum(approx_tokens(m["content"]) for m in request.messages)
        if self._i >= len(self.replies):
            return ModelReply(
                text="", latency_s=self.latency_s, route=self.route, model_returned=None,
                usage={"prompt_tokens": prompt_tokens, "completion_tokens": 0},
                cost_usd=0.0, params_requested=dict(request.params),
                error=f"script exhausted after {len(self.replies)} replies",
            )
        text = self.replies[self._i]
        self._i += 1
        return ModelReply(
            text=text, latency_s=self.latency_s, route=self.route, model_returned=self.route,
            usage={"prompt_tokens": prompt_tokens, "completion_tokens": approx_tokens(text)},
            cost_usd=0.0, params_requested=dict(request.params), params_sent={},
        )

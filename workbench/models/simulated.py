"""What every world kind's simulated agent shares, so that the kinds cannot drift
apart: a seeded RNG, a lognormal latency rounded the same way (it orders events
on the world clock), and the shape of the reply it records (no cost, every
requested parameter "dropped" because nothing was sent, ``extra.simulated``).
A kind's agent subclasses :class:`SimulatedAgent` and decides what to say."""
from __future__ import annotations

import math
import random
from typing import Any

from workbench.models.base import ModelReply, ModelRequest, approx_tokens

LATENCY_DIGITS = 6  # of a simulated latency, in seconds (the world clock's resolution)


class SimulatedAgent:
    """Base of simulated agents: ``profile`` has ``latency_median_s`` and ``latency_sigma``."""

    profile: Any
    route: str
    rng: random.Random

    def _latency(self) -> float:
        p = self.profile
        return round(p.latency_median_s * math.exp(p.latency_sigma * self.rng.gauss(0.0, 1.0)), LATENCY_DIGITS)

    def simulated_reply(self, request: ModelRequest, text: str, *, reasoning: str | None = None,
                        tool_calls: list[dict[str, Any]] | None = None, completion_tokens: int | None = None,
                        extra: dict[str, Any] | None = None) -> ModelReply:
        """The reply as every kind records it; tokens are approximate (characters / 4)."""
        prompt_tokens = sum(approx_tokens(m.get("content") or "") for m in request.messages)
        if completion_tokens is None:
            completion_tokens = approx_tokens(text) + (approx_tokens(reasoning) if reasoning else 0)
        return ModelReply(
            text=text, latency_s=self._latency(), route=self.route, model_returned=self.route, reasoning=reasoning,
            usage={"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens}, cost_usd=0.0,
            params_requested=dict(request.params), params_sent={}, params_dropped=sorted(request.params),
            tool_calls=tool_calls or [], extra={"simulated": True, **(extra or {})})

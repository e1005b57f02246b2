"""Replay: serve one agent's recorded replies again, in order, with their
recorded latency and metadata, so a world can be rebuilt without any model."""
from __future__ import annotations

import copy
from typing import Any

from workbench.models.base import ModelReply, ModelRequest


class ReplayClient:
    virtual_time = True  # latency is on the world clock, not waited for
    def __init__(self, recorded: list[dict[str, Any]], route: str = "replay") -> None:
        """``recorded``: this agent's step records' ``reply`` dicts, in step order."""
        self.recorded = list(recorded)
        self.route = route
        self._i = 0

    async def complete(self, request: ModelRequest) -> ModelReply:
        if self._i >= len(self.recorded):
            # A call the recorded world made but never used: it was in flight when another
            # agent's call failed and the world ended. Its reply arrives "never" on the world
            # clock, so the replay ends where the record did; a world that does get to it
            # (the engine asked for more than was recorded) shows it as a failed step.
            return ModelReply(text="", latency_s=float("inf"), route=self.route,
                              error=f"replay exhausted after {len(self.recorded)} recorded replies")
        rec = copy.deepcopy(self.recorded[self._i])
        self._i += 1
        rec.pop("timing", None)
        route = rec.pop("route", None) or self.route  # the route that answered, as recorded
        reply = ModelReply(route=route, **{k: v for k, v in rec.items() if k in ModelReply.__dataclass_fields__})
        reply.extra = {**reply.extra, "replayed": True}
        return reply

"""Monitor calls: a second model labels each step (optional, per study).

A :class:`Monitor` wraps any :class:`~workbench.models.base.ModelClient` (a
catalogue model such as ``gemini-3.1-flash-lite`` at temperature 0, as in the
source paper, or a scripted/simulated client offline) and a prompt template.
``await monitor.label(step_text)`` renders the template with the step's text,
makes one call and returns a plain dict for the step record::

    {"label", "raw", "route", "model_returned", "usage", "cost", "latency_s", "error"}

The label is read from the reply: the ``label`` field of the first JSON object
in it, else the first of the allowed labels that the reply names, else the
reply's first line. Labels go into the step record only: never back to an
agent, never into a metric. A failed call gives ``label: None`` and ``error``;
the monitor never raises.
"""
from __future__ import annotations

import json
import re
from string import Template
from typing import Any

from workbench.models.base import ModelClient, ModelRequest

DEFAULT_LABELS = ("mentions_other", "none")


class Monitor:
    """The template is the study's (``monitor.prompt``, a file in its templates
    folder that locks hash), never a constant here: a label means what its prompt asked."""

    def __init__(self, client: ModelClient, template: str,
                 labels: tuple[str, ...] | list[str] | None = DEFAULT_LABELS,
                 params: dict[str, Any] | None = None, system: str | None = None) -> None:
        self.client = client
        self.template = Template(template)
        self.labels = tuple(labels) if labels else ()
        self.params = dict(params or {})
        self.system = system

    def render(self, step_text: str) -> str:
        return self.template.safe_substitute(step=step_text, labels=", ".join(self.labels))

    def read_label(self, text: str) -> str | None:
        for m in re.finditer(r"\{[^{}]*\}", text or ""):
            try:
                obj = json.loads(m.group(0))
            except ValueError:
                continue
            if isinstance(obj, dict) and isinstance(obj.get("label"), str):
                return obj["label"].strip()
        low = (text or "").lower()
        hits = [(low.find(lab.lower()), lab) for lab in self.labels if lab.lower() in low]
        if hits:
            return min(hits)[1]
        first = (text or "").strip().splitlines()
        return first[0].strip()[:200] if first else None

    async def label(self, step_text: str) -> dict[str, Any]:
        messages = ([{"role": "system", "content": self.system}] if self.system else []) + \
            [{"role": "user", "content": self.render(step_text)}]
        route = getattr(self.client, "route", None)
        try:
            reply = await self.client.complete(ModelRequest(messages=messages, params=dict(self.params)))
        except Exception as exc:  # noqa: BLE001 - a monitor fault never stops a world
            return {"label": None, "raw": "", "route": route, "model_returned": None, "usage": {}, "cost": None,
                    "latency_s": None, "error": f"{type(exc).__name__}: {str(exc)[:300]}"}
        if reply.failed:
            return {"label": None, "raw": "", "route": reply.route, "model_returned": reply.model_returned,
                    "usage": dict(reply.usage), "cost": reply.cost_usd, "latency_s": reply.latency_s,
                    "error": reply.error}
        return {"label": self.read_label(reply.text), "raw": reply.text, "route": reply.route,
                "model_returned": reply.model_returned, "usage": dict(reply.usage), "cost": reply.cost_usd,
                "latency_s": reply.latency_s, "error": None}


class ReplayMonitor:
    """The labels a monitor gave, served again in the order they were asked for (the
    world labels its steps in step order), so a replayed world carries the same
    labels without a model being called."""

    def __init__(self, recorded: list[dict[str, Any]]) -> None:
        self.recorded = [dict(r) for r in recorded]
        self._i = 0

    async def label(self, step_text: str) -> dict[str, Any]:
        if self._i >= len(self.recorded):
            return {"label": None, "raw": "", "route": "replay", "model_returned": None, "usage": {}, "cost": None,
                    "latency_s": None, "error": f"replay exhausted after {len(self.recorded)} recorded labels"}
        self._i += 1
        return dict(self.recorded[self._i - 1])


def make_monitor(route: str, *, template: str, seed: int = 0,
                 labels: tuple[str, ...] | list[str] | None = DEFAULT_LABELS, params: dict[str, Any] | None = None,
                 **options: Any) -> Monitor:
    """A monitor whose client comes from a route (a catalogue name, a litellm route, sim/…, scripted)."""
    from workbench.models.factory import make_client

    return Monitor(make_client(route, seed=seed, **options), template=template, labels=labels, params=params)

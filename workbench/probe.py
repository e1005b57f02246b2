"""Probing a study's real-model routes: one minimal request each, before the worlds.

Credentials and prices can be checked without a call (:mod:`workbench.models.preflight`),
but a wrong model name, a revoked key, an unreachable base URL or a provider that
rejects the study's parameters only shows on a real request. A probe makes that
request once per route, through the same client, budget and call ledger the worlds
use, so it is recorded and charged like any call, and a route that cannot answer
stops the study before a single world is spent on it. The cache is bypassed: a
cached answer proves nothing about the route today.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from workbench.models.base import ModelRequest
from workbench.models.budget import Budget
from workbench.models.factory import make_client
from workbench.models.failures import classify_error
from workbench.models.ledger import CallLedger
from workbench.routes import is_simulated_route

PROBE_WORLD = "probe"  # the world id probe calls carry in the ledger
PROBE_PROMPT = "Reply with the single word OK."
PROBE_PARAMS = {"max_tokens": 16, "temperature": 0}


@dataclass(frozen=True)
class ProbeResult:
    route: str
    ok: bool
    reply: str  # what the model answered (model-written text: escape it where it is shown as HTML)
    model_returned: str | None
    cost_usd: float | None
    attempts: int
    latency_s: float | None
    error: str | None = None
    failure_class: str | None = None
    cause: str | None = None

    def line(self) -> str:
        cost = "no price" if self.cost_usd is None else f"{self.cost_usd:.6f} USD"
        if self.ok:
            return (f"probe {self.route}: ok ({self.model_returned or 'model not named'}, {self.attempts} attempt(s), "
                    f"{self.latency_s:.2f} s, {cost}): {self.reply[:60]!r}")
        return f"probe {self.route}: FAILED ({self.failure_class}: {self.cause}): {self.error}"

    def to_record(self) -> dict[str, Any]:
        return asdict(self)


def probe_routes_of(study: Any) -> list[str]:
    """The routes a probe calls: every real-model route of the study's cells and monitor."""
    routes = {r for c in study.cells for r in study.kind.routes(c.spec)}
    if study.monitor is not None:
        routes.add(study.monitor.model)
    return sorted(r for r in routes if not is_simulated_route(r))


async def probe_routes(routes: list[str], *, budget: Budget | None = None, ledger: CallLedger | None = None,
                       run: int | None = None) -> list[ProbeResult]:
    """Send the probe to each route in turn (one at a time, so a rate limit is not provoked)."""
    results: list[ProbeResult] = []
    for route in routes:
        options: dict[str, Any] = {}
        if budget is not None:
            options["budget"] = budget
        if ledger is not None:
            options["ledger"] = ledger.bind(world_id=PROBE_WORLD, run=run, slot=route)
        client = make_client(route, seed=0, **options)
        reply = await client.complete(ModelRequest(messages=[{"role": "user", "content": PROBE_PROMPT}],
                                                   params=dict(PROBE_PARAMS)))
        cause, cls = (classify_error(reply.error) or (None, None)) if reply.failed else (None, None)
        results.append(ProbeResult(route=route, ok=not reply.failed, reply=reply.text, model_returned=reply.model_returned,
                                   cost_usd=reply.cost_usd, attempts=len(reply.attempts) or 1,
                                   latency_s=None if reply.failed else reply.latency_s, error=reply.error,
                                   failure_class=cls, cause=cause))
    return results

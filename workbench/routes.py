"""Which routes are real models: the one answer every banner, table and preflight uses.

A route names who answers an agent: a real model (a catalogue name, a litellm
route, a local open-weight model) or something that only acts like one: a
simulated profile (``sim/NAME``, a kind's ``sim-KIND/NAME``), a scripted agent,
a replay of recorded replies, a controlled peer replayed from a cache. Results of
the second kind describe the workbench, not a model, and are labelled SIMULATED.
Kind-free and import-free, so that views and metrics can ask without importing
the model clients.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

NOT_MODELS = ("scripted", "replay", "controlled")  # agents that act without any model behind them


def is_simulated_route(route: str) -> bool:
    """True for every route that is not a real model (simulated, scripted, replayed, controlled)."""
    route = str(route or "")
    prefix = route.split("/", 1)[0]
    if prefix in NOT_MODELS:
        return True
    return "/" in route and (prefix == "sim" or prefix.startswith("sim-"))


def is_real_route(route: str) -> bool:
    return not is_simulated_route(route)


def all_simulated(routes: Iterable[str]) -> bool:
    """No route of these is a real model (and there is at least one)."""
    routes = list(routes)
    return bool(routes) and all(is_simulated_route(r) for r in routes)


def is_simulated_world(world: dict[str, Any]) -> bool:
    """No agent of a recorded world was a real model."""
    return all_simulated(a.get("route", "") for a in world.get("agents") or [])


def all_worlds_simulated(worlds: Iterable[dict[str, Any]]) -> bool:
    """Every world :func:`is_simulated_world`: each has agents, and no route among
    them all is a real model (each distinct route checked once)."""
    routes: set[str] = set()
    for w in worlds:
        agents = w.get("agents") or []
        if not agents:
            return False
        routes.update(a.get("route", "") for a in agents)
    return all(is_simulated_route(r) for r in routes)


def is_simulated_label(model: object) -> bool:
    """A table's model column ("+"-joined routes): simulated if any part is."""
    return isinstance(model, str) and any(is_simulated_route(part) for part in model.split("+"))

"""From a route string in the params to a client for one agent.

Routes: ``sim/PROFILE`` (simulated behaviour), ``scripted`` (fixed replies from
the params), ``replay`` (recorded replies). Real-model routes plug in here by
prefix without any world knowing of them."""
from __future__ import annotations

from typing import Any, Callable

from workbench.models.base import ModelClient
from workbench.models.replay import ReplayClient
from workbench.models.scripted import ScriptedClient
from workbench.models.simulated import Profile, SimulatedClient, get_profile

RouteBuilder = Callable[..., ModelClient]
_EXTRA: dict[str, RouteBuilder] = {}


def register_route(prefix: str, builder: RouteBuilder) -> None:
    """Add a family of routes (``prefix/...``); used by optional back-ends."""
    _EXTRA[prefix] = builder


def check_route(route: str, profiles: dict[str, Profile] | None = None) -> None:
    """Raise ValueError with what was expected when a route cannot be built."""
    if route in ("scripted", "replay"):
        return
    if route.startswith("sim/"):
        get_profile(route[4:], profiles)  # KeyError names the known ones
        return
    prefix = route.split("/", 1)[0]
    if prefix in _EXTRA:
        return
    raise ValueError(f"unknown model route {route!r}; expected sim/<profile>, scripted, replay"
                     + (f" or one of {sorted(_EXTRA)}/..." if _EXTRA else ""))


def make_client(route: str, *, seed: int, script: list[str] | None = None,
                recorded: list[dict[str, Any]] | None = None, latency_s: float | None = None,
                profiles: dict[str, Profile] | None = None, **options: Any) -> ModelClient:
    if route == "scripted":
        return ScriptedClient(script or [], latency_s=1.0 if latency_s is None else latency_s)
    if route == "replay":
        return ReplayClient(recorded or [])
    if route.startswith("sim/"):
        return SimulatedClient(get_profile(route[4:], profiles), seed)
    prefix = route.split("/", 1)[0]
    if prefix in _EXTRA:
        return _EXTRA[prefix](route, seed=seed, **options)
    check_route(route, profiles)
    raise AssertionError("unreachable")

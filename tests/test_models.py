"""The one model interface: a new back-end plugs in by route prefix without any
change to worlds, and the async scheduler copes with clients that really wait."""
from __future__ import annotations

import asyncio
import json
import time

import pytest

from tests.conftest import run_world, study_dict
from workbench.models.base import ModelReply, ModelRequest
from workbench.models.factory import register_route
from workbench.models.scripted import ScriptedClient


class EchoSubmitClient:
    """A stand-in for a real provider: waits for real, reports measured latency."""

    virtual_time = False

    def __init__(self, route: str, seed: int, **_: object) -> None:
        self.route = route
        self.delay = 0.005 + (seed % 7) / 1000
        self.seen: list[ModelRequest] = []

    async def complete(self, request: ModelRequest) -> ModelReply:
        self.seen.append(request)
        t0 = time.perf_counter()
        await asyncio.sleep(self.delay)
        text = request.messages[1]["content"]
        return ModelReply(text=json.dumps({"op": "list"}) if len(request.messages) < 4 else
                          json.dumps({"op": "submit", "answer": len(text)}),
                          latency_s=time.perf_counter() - t0, route=self.route, model_returned="fake-1",
                          usage={"prompt_tokens": 10, "completion_tokens": 3}, cost_usd=0.001,
                          params_requested=dict(request.params), params_sent=dict(request.params))


def test_new_route_plugs_in_without_touching_worlds(write_study):
    register_route("fakeprov", lambda route, seed, **kw: EchoSubmitClient(route, seed, **kw))
    spec = study_dict(cells=[{"model": "fakeprov/m1", "sampling": {"temperature": 0.3, "max_tokens": 64}}])
    out = run_world(write_study(spec))
    assert out.world["valid"] and not out.world["failed"]
    assert {a["route"] for a in out.world["agents"]} == {"fakeprov/m1"}
    assert all(s["request"]["params"] == {"temperature": 0.3, "max_tokens": 64} for s in out.steps)
    assert all(s["reply"]["model_returned"] == "fake-1" for s in out.steps)
    assert all(s["reply"]["timing"]["wall_s"] >= 0.004 for s in out.steps)
    assert len(out.steps) == 8  # list, then submit, for each of four agents
    assert abs(out.world["metrics"]["cost_usd"] - 0.008) < 1e-9


def test_client_exception_is_recorded_as_failed_world(write_study):
    class Boom:
        route = "boom/x"
        virtual_time = True

        async def complete(self, request):
            raise ConnectionError("provider went away")

    register_route("boom", lambda route, seed, **kw: Boom())
    out = run_world(write_study(study_dict(cells=[{"model": "sim/diligent", "agents": {"solo_2": {"model": "boom/x"}}}])))
    assert out.world["failed"] and "ConnectionError: provider went away" in out.world["failed"]["error"]
    assert not out.world["valid"]


def test_async_application_order_follows_the_world_clock(write_study):
    spec = study_dict(cells=[{"model": "sim/diligent"}, {"model": "sim/sloppy", "condition": "authored"}],
                      worlds_per_cell=5)
    path = write_study(spec)
    for cell in range(2):
        for i in range(5):
            out = run_world(path, cell, i)
            times = [s["t_done"] for s in out.steps]
            assert times == sorted(times)
            for s in out.steps:
                assert s["t_done"] >= s["t_issue"]


def test_scripted_client_fails_when_exhausted():
    client = ScriptedClient(["a"])
    req = ModelRequest(messages=[{"role": "user", "content": "x"}])
    first = asyncio.run(client.complete(req))
    second = asyncio.run(client.complete(req))
    assert first.text == "a" and not first.failed
    assert second.failed and "exhausted after 1" in second.error


def test_kinds_register_their_own_simulated_routes_with_a_check():
    from workbench.models.factory import check_route, is_simulated_route, make_client, register_route
    from workbench.models.scripted import ScriptedClient

    def check(route):
        if route.split("/", 1)[1] != "known":
            raise KeyError(f"unknown profile in {route!r}; known: known")

    register_route("sim-testkind", lambda route, *, seed, **o: ScriptedClient(["ok"]), check=check)
    check_route("sim-testkind/known")
    with pytest.raises(KeyError, match="known: known"):
        check_route("sim-testkind/other")
    assert isinstance(make_client("sim-testkind/known", seed=1), ScriptedClient)
    assert is_simulated_route("sim/diligent") and is_simulated_route("sim-testkind/known")
    assert not is_simulated_route("openai/gpt-5.4") and not is_simulated_route("simulator/x")
    assert is_simulated_route("scripted") and is_simulated_route("replay")  # no real model behind either

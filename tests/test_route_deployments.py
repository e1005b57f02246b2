"""One route, many servers (issue 43): a catalogue entry with two deployments, served through
litellm's Router, against two fake servers started here on 127.0.0.1, one of which fails every
other request with a 500. Every world finishes, every call and attempt names its deployment,
the failing server is cooled down and serves fewer calls than the healthy one, and no call is
charged twice (the ledger's total is the answered calls times one call's price)."""
from __future__ import annotations

import itertools
import json
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import PROMPTS
from tests.fake_openai import FAKE_KEY, Action, FakeOpenAI, status
from tests.fault_study import agent_script
from workbench.models.catalogue import CatalogueError, load_catalogue
from workbench.models.ledger import read_ledger

ENTRY = "pool-fake"
USAGE = (100, 10)  # every reply: 100 prompt and 10 output tokens
SERVER_KEYS = ("sk-pool-healthy-0123456789abcdef", "sk-pool-flaky-0123456789abcdef")  # fake, one per server
PRICE = USAGE[0] * 1.0 / 1e6 + USAGE[1] * 2.0 / 1e6  # at 1 and 2 USD per million: one answered call


def _answer(body: dict[str, Any]) -> Action:
    return Action(text=agent_script(body), usage=USAGE)


class EveryOther:
    """A server that fails every other request it receives (500), answering the rest."""

    def __init__(self) -> None:
        self.n = itertools.count()
        self.lock = threading.Lock()
        self.failed = 0

    def __call__(self, body: dict[str, Any]) -> Action:
        with self.lock:
            fail = next(self.n) % 2 == 0
            self.failed += fail
        return status(500, message="replica fault") if fail else _answer(body)


def _catalogue(folder: Path, healthy: str, flaky: str, strategy: str) -> Path:
    path = folder / "models.yaml"
    path.write_text(yaml.safe_dump({"models": {ENTRY: {
        "route": "openai/pool-model", "max_attempts": 6, "timeout_s": 5,
        "backoff_base_s": 0.01, "backoff_max_s": 0.05, "max_connections": 64, "rpm": None, "max_tokens": 64,
        "input_usd_per_mtok": 1.0, "output_usd_per_mtok": 2.0,
        "deployments": [{"name": "healthy", "api_base": healthy, "api_key_env": "POOL_HEALTHY_KEY"},
                        {"name": "flaky", "api_base": flaky, "api_key_env": "POOL_FLAKY_KEY"}],
        "routing": {"strategy": strategy, "allowed_fails": 1, "cooldown_s": 1.0}}}}))
    return path


def _study(folder: Path) -> Path:
    path = folder / "study.yaml"
    path.write_text(yaml.safe_dump({
        "world": "stigmergy", "name": "pool", "seed": 5, "worlds_per_cell": 10, "concurrency": 6,
        "budget_usd": 1.0, "defaults": {"prompts": str(PROMPTS), "max_steps": 6}, "cells": [{"model": ENTRY}]},
        sort_keys=False))
    return path


@pytest.fixture
def servers():
    healthy, flaky = FakeOpenAI(), FakeOpenAI()
    healthy.responder, flaky.responder = _answer, EveryOther()
    healthy.start()
    flaky.start()
    try:
        yield healthy, flaky
    finally:
        healthy.stop()
        flaky.stop()


@pytest.mark.parametrize("strategy", ["least-busy", "usage-based-routing-v2"])
def test_a_route_over_two_servers_one_failing(tmp_path, monkeypatch, servers, strategy):
    from workbench.cli import main
    from workbench.models.litellm_client import get_litellm, reset_limits
    from workbench.models.litellm_client.pool import reset_pools

    healthy, flaky = servers
    monkeypatch.setenv("WORKBENCH_MODELS", str(_catalogue(tmp_path, healthy.url, flaky.url, strategy)))
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    monkeypatch.setenv("POOL_HEALTHY_KEY", SERVER_KEYS[0])
    monkeypatch.setenv("POOL_FLAKY_KEY", SERVER_KEYS[1])
    reset_limits()
    reset_pools()
    out = tmp_path / "run"
    try:
        main(["run", str(_study(tmp_path)), "--out", str(out), "--no-summary", "--no-progress"])
    finally:
        reset_pools()

    worlds = [json.loads(x) for x in (out / "worlds.jsonl").read_text().splitlines()]
    steps = [json.loads(x) for x in (out / "steps.jsonl").read_text().splitlines()]
    assert len(worlds) == 10 and not [w["failed"] for w in worlds if w["failed"]]

    # each call names the deployment that served it, and each attempt the one that took it
    served = Counter(s["reply"]["extra"]["deployment"] for s in steps)
    assert set(served) <= {"healthy", "flaky"} and sum(served.values()) == len(steps)
    attempts = [a for s in steps for a in s["reply"]["attempts"]]
    assert all(a["deployment"] in ("healthy", "flaky") for a in attempts)
    assert all(s["reply"]["extra"]["routing"]["strategy"] == strategy for s in steps)
    retried = [s for s in steps if len(s["reply"]["attempts"]) > 1]
    assert retried and all(s["reply"]["attempts"][0]["deployment"] == "flaky" for s in retried)

    # the failing server was cooled down, and serves a smaller share than the healthy one
    cooldowns = [a for a in attempts if a.get("cooldown_s")]
    assert cooldowns and all(a["deployment"] == "flaky" and a["status"] == 500 for a in cooldowns)
    assert served["flaky"] < served["healthy"], served
    after_cooldown = [s["reply"]["attempts"][i + 1] for s in steps for i, a in enumerate(s["reply"]["attempts"])
                      if a.get("cooldown_s") and i + 1 < len(s["reply"]["attempts"])]
    assert after_cooldown and all(a["deployment"] == "healthy" for a in after_cooldown)  # retried on the other
    assert flaky.count < healthy.count, (flaky.count, healthy.count)

    # every request the servers saw is one ledger attempt, and every call is charged once
    ledger = list(read_ledger(out))
    assert sum(len(e["attempts"]) for e in ledger) == healthy.count + flaky.count
    answered = [e for e in ledger if e["state"] == "answered"]
    assert len(answered) == len(ledger) == len(steps)
    assert Counter(e["deployment"] for e in answered) == served
    assert all(e["cost_usd"] == pytest.approx(PRICE) for e in answered)
    total = sum(e["cost_usd"] for e in ledger)
    assert total == pytest.approx(len(steps) * PRICE)
    budget = json.loads((out / "manifest.json").read_text())["runs"][-1]["budget"]
    assert budget["spent_usd"] == pytest.approx(total) and budget["calls"] == len(steps)

    print(f"pool figures ({strategy}): calls served {dict(served)}, requests healthy {healthy.count} flaky {flaky.count} "
          f"(500s {flaky.responder.failed}), cooldowns {len(cooldowns)}, retried calls {len(retried)}, "
          f"charged {total:.6f} USD = {len(steps)} answered x {PRICE:.6f}")

    # no key in any record, and building the Router left litellm's cost map without the pool's model
    assert healthy.auth_seen == healthy.count and flaky.auth_seen == flaky.count  # each server got its key
    for name in ("steps.jsonl", "calls.jsonl", "worlds.jsonl", "manifest.json"):
        text = (out / name).read_text()
        assert FAKE_KEY not in text and SERVER_KEYS[0] not in text and SERVER_KEYS[1] not in text
    assert "openai/pool-model" not in get_litellm().model_cost and "pool-model" not in get_litellm().model_cost


@pytest.mark.parametrize(("deployments", "where"), [
    ([{"name": "a", "api_base": "http://127.0.0.1:1/v1"}, {"name": "a", "api_base": "http://127.0.0.1:2/v1"}],
     "models.p.deployments"),
    ([{"name": "a", "api_base": "http://127.0.0.1:1/v1"}, {"name": "b", "api_bse": "http://127.0.0.1:2/v1"}],
     "models.p.deployments[1].api_bse"),
    ([{"name": "a", "api_base": "ftp://127.0.0.1:1/v1"}], "models.p.deployments[0].api_base"),
    ([{"name": "a"}], "models.p.deployments[0]"),
    ([{"name": "a", "api_base": "http://u:secret@127.0.0.1:1/v1"}], "models.p.deployments[0].api_base"),
])
def test_bad_deployments_are_refused_naming_the_field(tmp_path, deployments, where):
    path = tmp_path / "models.yaml"
    path.write_text(yaml.safe_dump({"models": {"p": {"route": "openai/m", "deployments": deployments}}}))
    with pytest.raises(CatalogueError) as err:
        load_catalogue(path)
    assert f"{where}:" in str(err.value)


def test_a_pool_names_its_servers_not_the_entry(tmp_path):
    path = tmp_path / "models.yaml"
    body = {"route": "openai/m", "api_base": "http://127.0.0.1:1/v1",
            "deployments": [{"name": "a", "api_base": "http://127.0.0.1:2/v1"}]}
    path.write_text(yaml.safe_dump({"models": {"p": body}}))
    with pytest.raises(CatalogueError, match="leave the entry's api_base"):
        load_catalogue(path)
    path.write_text(yaml.safe_dump({"models": {"p": {"route": "openai/m", "routing": {"strategy": "least-busy"}}}}))
    with pytest.raises(CatalogueError, match="models.p: routing: only an entry with deployments"):
        load_catalogue(path)
    # an entry without deployments dumps as before they existed (its design hash is unchanged)
    path.write_text(yaml.safe_dump({"models": {"p": {"route": "openai/m"}}}))
    dumped = load_catalogue(path).get("p").model_dump()
    assert "deployments" not in dumped and "routing" not in dumped


def test_preflight_asks_each_server_for_its_key(tmp_path, monkeypatch):
    """A pool is served at api_bases of its own: no provider key is demanded for it, but a server
    whose key is missing is named (unless the entry declares `auth: none`)."""
    from workbench.models.preflight import route_problems

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("POOL_B_KEY", raising=False)
    monkeypatch.chdir(tmp_path)  # no ./.env
    deployments = [{"name": "a", "api_base": "http://127.0.0.1:1/v1", "api_key_env": "POOL_A_KEY"},
                   {"name": "b", "api_base": "http://127.0.0.1:2/v1", "api_key_env": "POOL_B_KEY"}]
    path = tmp_path / "models.yaml"
    path.write_text(yaml.safe_dump({"models": {"p": {"route": "openai/m", "deployments": deployments},
                                               "q": {"route": "openai/m", "deployments": deployments, "auth": "none"}}}))
    monkeypatch.setenv("WORKBENCH_MODELS", str(path))
    monkeypatch.setenv("POOL_A_KEY", "sk-pool-a-000000000000")
    problems = route_problems(["p", "q"])
    assert len(problems) == 1 and "deployments ['b'] have no key" in problems[0] and "route p " in problems[0]
    monkeypatch.setenv("POOL_B_KEY", "sk-pool-b-000000000000")
    assert route_problems(["p", "q"]) == []


def test_every_server_cooling_down_the_retry_waits_for_the_first_back(monkeypatch, servers):
    """Both servers fail once and are cooled down (allowed_fails 0): the Router refuses the next
    attempt, which names no deployment, and the call waits for the first server's cooldown to end
    (recorded as its retry_after_s) instead of spending its last attempt on another refusal."""
    import asyncio

    from workbench.models.base import ModelRequest
    from workbench.models.catalogue import ModelEntry
    from workbench.models.litellm_client import LiteLLMClient, reset_limits
    from workbench.models.litellm_client.pool import reset_pools

    healthy, flaky = servers
    healthy.responder = flaky.responder = _answer
    healthy.push(status(500))
    flaky.push(status(500))
    reset_limits()
    reset_pools()
    entry = ModelEntry.model_validate({
        "name": "pool-wait", "route": "openai/pool-model", "auth": "none", "max_attempts": 4, "backoff_base_s": 0.001,
        "backoff_max_s": 0.002, "rpm": None, "input_usd_per_mtok": 1.0, "output_usd_per_mtok": 2.0,
        "deployments": [{"name": "a", "api_base": healthy.url}, {"name": "b", "api_base": flaky.url}],
        "routing": {"strategy": "simple-shuffle", "allowed_fails": 0, "cooldown_s": 0.6}})

    async def one() -> Any:
        return await LiteLLMClient(entry, seed=0).complete(ModelRequest(messages=[{"role": "user", "content": "hi"}]))

    try:
        reply = asyncio.run(one())
    finally:
        reset_pools()
    attempts = reply.attempts
    assert reply.error is None, (reply.error, attempts)
    assert sorted(a["deployment"] for a in attempts[:2]) == ["a", "b"] and all(a["cooldown_s"] for a in attempts[:2])
    refused = attempts[2]
    assert refused["deployment"] is None and 0.3 < refused["retry_after_s"] <= 0.7
    assert attempts[3]["status"] == 200 and reply.cost_usd == pytest.approx(PRICE)

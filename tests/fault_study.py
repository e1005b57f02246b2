"""A shared-store study against a fake server that injects faults, run, killed and
resumed until every world is accounted for: the test of failure classes and
request accounting, and the figures of benchmarks/fault_run.py.

The catalogue is the study's own (``$WORKBENCH_MODELS``), with one entry whose
timeout and backoff are short so that faults cost milliseconds, not minutes."""
from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.conftest import PROMPTS
from tests.fake_openai import FAKE_KEY, Action, FakeOpenAI, Faults, slow

ENTRY = "fault-fake"


def agent_script(body: dict[str, Any]) -> str:
    """A deterministic agent: list, write its note, list, submit."""
    n = sum(1 for m in body["messages"] if m["role"] == "assistant")
    return ['{"op": "list"}', '{"op": "write", "key": "note", "value": 1}', '{"op": "list"}',
            '{"op": "submit", "answer": 0}'][min(n, 3)]


def write_catalogue(folder: Path, url: str, *, timeout_s: float = 0.5, max_attempts: int = 3) -> Path:
    path = folder / "models.yaml"
    path.write_text(yaml.safe_dump({"models": {ENTRY: {
        "route": "openai/fault-model", "api_base": url, "max_attempts": max_attempts, "timeout_s": timeout_s,
        "backoff_base_s": 0.02, "backoff_max_s": 0.05, "max_retry_after_s": 5, "max_connections": 64,
        "rpm": None, "max_tokens": 64, "input_usd_per_mtok": 1.0, "output_usd_per_mtok": 2.0}}}))
    return path


def write_study(folder: Path, worlds: int, *, concurrency: int = 8, seed: int = 5) -> Path:
    path = folder / "faults.yaml"
    path.write_text(yaml.safe_dump({
        "world": "stigmergy", "name": "faults", "seed": seed, "worlds_per_cell": worlds,
        "concurrency": concurrency, "defaults": {"prompts": str(PROMPTS), "max_steps": 6},
        "cells": [{"model": ENTRY}]}, sort_keys=False))
    return path


@dataclass
class FaultRun:
    """What happened, run by run, and the two counts that must agree."""

    runs: list[dict[str, Any]] = field(default_factory=list)
    server_requests: int = 0
    ledger_requests: int = 0
    faults: dict[str, int] = field(default_factory=dict)
    server_ids: list[str | None] = field(default_factory=list)


async def _run_until_quiet(study: Any, out: Path, server: FakeOpenAI, after: int) -> Any:
    """Start a run, and once ``after`` requests have arrived make every further request
    hang, wait until no new request arrives (every call is then in flight and logged
    by the server), and cancel the run: what Ctrl-C does."""
    from workbench.study import run_study_async

    task = asyncio.ensure_future(run_study_async(study, out, progress=False))
    while server.count < after and not task.done():
        await asyncio.sleep(0.01)
    from workbench.models.litellm_client.limits import _LIMITS

    old = server.responder
    hanging = {"n": 0}

    def hang(body: dict[str, Any]) -> Action:
        hanging["n"] += 1
        return slow(30.0)

    server.responder = hang
    # Cancel only once every attempt the client has in flight is hanging on the server:
    # an attempt still being written client-side could not be told from one that arrived.
    deadline = time.monotonic() + 10
    while not task.done() and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
        in_flight = sum(lim.in_flight for lim in list(_LIMITS.values()))
        if in_flight and in_flight == hanging["n"]:
            break
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass
    server.responder = old
    return None


def fault_run(folder: Path, *, worlds: int = 12, rate: float = 0.3, seed: int = 3, kill_after: int | None = 40,
              max_runs: int = 8) -> FaultRun:
    """Run the study with faults at ``rate`` (killed once after ``kill_after`` requests),
    then resume until no world is left in infrastructure failure; the faults stop for
    the last run if ``max_runs - 1`` runs did not get there."""
    from workbench.models.ledger import read_ledger, requests_sent
    from workbench.models.litellm_client import aclose_clients, reset_limits
    from workbench.params import load_study
    from workbench.study import run_study

    server = FakeOpenAI().start()
    saved = {k: os.environ.get(k) for k in ("WORKBENCH_MODELS", "OPENAI_API_KEY")}
    try:
        os.environ["WORKBENCH_MODELS"] = str(write_catalogue(folder, server.url))
        os.environ["OPENAI_API_KEY"] = FAKE_KEY
        reset_limits()
        faults = Faults(agent_script, rate=rate, seed=seed, timeout_sleep_s=1.0)
        server.responder = faults
        study = load_study(write_study(folder, worlds))
        out = folder / "run"
        result = FaultRun()
        if kill_after:
            async def killed() -> None:
                try:
                    await _run_until_quiet(study, out, server, kill_after)
                finally:
                    await aclose_clients()
            asyncio.run(killed())
            result.runs.append({"run": 1, "killed": True})
        for n in range(max_runs):
            if n == max_runs - 1:
                server.responder = agent_script  # the provider recovered
            summary = run_study(study, out, progress=False)
            result.runs.append({"run": summary.run, "finished": summary.finished, "skipped": summary.skipped,
                                "retried": summary.retried, "causes": dict(summary.causes),
                                "infrastructure_failed": summary.infrastructure_failed})
            if not summary.infrastructure_failed:
                break
        time.sleep(0.2)  # requests the server is still reading (none expected) are logged by now
        result.server_requests = server.count
        result.ledger_requests = sum(requests_sent(e) for e in read_ledger(out))
        result.faults = dict(faults.log)
        result.server_ids = [r.get("request_id") for r in server.requests]
        return result
    finally:
        server.stop()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        reset_limits()


__all__ = ["Action", "FaultRun", "agent_script", "fault_run", "write_catalogue", "write_study"]

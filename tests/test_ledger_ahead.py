"""Nothing spent or sent goes unrecorded: one budget per study over every invocation, and a
write-ahead ledger whose attempts match the server's request log after kill -9."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml

from tests.conftest import PROMPTS, ROOT
from tests.fake_openai import FAKE_KEY, FakeOpenAI
from tests.fault_study import ENTRY, agent_script, write_catalogue
from workbench.models.ledger import read_ledger, spent


def _study(folder: Path, worlds: int, budget: float | None = None) -> Path:
    body = {"world": "stigmergy", "name": "ahead", "seed": 5, "worlds_per_cell": worlds, "concurrency": 8,
            "defaults": {"prompts": str(PROMPTS), "max_steps": 6, "scheduler": "lockstep"}, "cells": [{"model": ENTRY}]}
    if budget is not None:
        body["budget_usd"] = budget
    path = folder / "study.yaml"
    path.write_text(yaml.safe_dump(body, sort_keys=False))
    return path


def _env(catalogue: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "WORKBENCH_MODELS": str(catalogue), "OPENAI_API_KEY": FAKE_KEY}


def _run(study: Path, out: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "workbench", "run", str(study), "--out", str(out), "--no-summary"],
                          env=env, capture_output=True, text=True, timeout=300)


def test_the_budget_holds_over_four_invocations(tmp_path, monkeypatch, capsys):
    """The same command four times (what one does after infrastructure failures): the study's
    budget_usd bounds what all four spent together, and each run says what is left. (In one
    process: each invocation starts from the run directory alone, as a new process would.)"""
    from workbench.cli import main
    from workbench.models.litellm_client import reset_limits

    server = FakeOpenAI()
    server.responder = agent_script
    server.start()
    try:
        for key, value in _env(write_catalogue(tmp_path, server.url)).items():
            if key in ("WORKBENCH_MODELS", "OPENAI_API_KEY"):
                monkeypatch.setenv(key, value)
        study, out = _study(tmp_path, worlds=20, budget=0.02), tmp_path / "run"
        runs = []
        for _ in range(4):
            reset_limits()
            main(["run", str(study), "--out", str(out), "--no-summary", "--no-progress"])
            runs.append(capsys.readouterr())
        requests = server.count
    finally:
        server.stop()
    costs = [e.get("cost_usd") or e.get("charged_usd") or 0.0 for e in read_ledger(out)]
    assert 0 < sum(costs) <= 0.02 + 1e-9 and spent(out) == sum(costs)
    assert requests == sum(len(e.get("attempts") or []) for e in read_ledger(out))
    for later in runs[1:]:
        assert "spent by earlier runs of this study" in later.err, later.err[-1500:]
    manifest = json.loads((out / "manifest.json").read_text())
    assert [r.get("budget_before_usd", 0) > 0 for r in manifest["runs"]] == [False, True, True, True]


def test_kill_9_leaves_no_request_unrecorded(tmp_path):
    """Killed while requests are in flight: every request the server received is in the ledger
    (written ahead, synced); the resume closes the cut-off calls as lost, charges their worst
    case to the study, and a request id the server never saw can only be one of those."""
    server = FakeOpenAI(delay_s=0.15)
    server.responder = agent_script
    server.start()
    try:
        env = _env(write_catalogue(tmp_path, server.url))
        study, out = _study(tmp_path, worlds=16, budget=5.0), tmp_path / "run"
        proc = subprocess.Popen([sys.executable, "-m", "workbench", "run", str(study), "--out", str(out),
                                 "--no-summary", "--no-progress"], env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        deadline = time.time() + 120
        while server.count < 40 and time.time() < deadline and proc.poll() is None:
            time.sleep(0.005)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        killed_at = {r["request_id"] for r in server.requests}
        opened = {e["request_id"] for e in read_ledger(out, opens=True) if e.get("state") == "open"}
        assert killed_at and killed_at <= opened  # nothing reached the server unrecorded
        res = _run(study, out, env)
        assert res.returncode == 0, res.stderr[-2000:]
        seen = {r["request_id"] for r in server.requests}
    finally:
        server.stop()
    calls = list(read_ledger(out))
    ledger_ids = {a["request_id"] for e in calls for a in e.get("attempts") or ()}
    lost = [e for e in calls if e["state"] == "lost"]
    lost_ids = {a["request_id"] for e in lost for a in e["attempts"]}
    assert lost and all(e["charged_usd"] and e["charged_usd"] > 0 for e in lost)
    assert seen <= ledger_ids and ledger_ids - seen <= lost_ids  # ledger = server log, but for lost attempts
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["runs"][-1]["lost_calls"] == len(lost) and manifest["runs"][-1]["budget_before_usd"] > 0


def _limited(soft: int, hard: int):
    import resource

    def set_limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    return set_limit


def test_too_few_open_files_is_refused_with_the_numbers_before_any_call(tmp_path):
    server = FakeOpenAI()
    server.responder = agent_script
    server.start()
    try:
        env = _env(write_catalogue(tmp_path, server.url))
        study, out = _study(tmp_path, worlds=4), tmp_path / "run"
        cmd = [sys.executable, "-m", "workbench", "run", str(study), "--out", str(out), "--concurrency", "64"]
        res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120, preexec_fn=_limited(256, 256))
        assert res.returncode == 2 and server.count == 0, res.stderr[-1500:]
        assert "open files" in res.stderr and "256" in res.stderr and "--concurrency" in res.stderr
        # a soft limit below the need and a hard one above it: raised, and the run goes on
        res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300, preexec_fn=_limited(256, 4096))
        assert res.returncode == 0, res.stderr[-1500:]
        assert server.count > 0
    finally:
        server.stop()


def test_a_disk_without_room_is_refused(tmp_path, monkeypatch):
    import shutil as sh

    from workbench import machine

    monkeypatch.setattr(machine.shutil, "disk_usage", lambda p: sh._ntuple_diskusage(10**12, 10**12 - 5_000_000, 5_000_000))
    problem = machine.disk_problem(tmp_path / "new" / "run", 10_000)
    assert problem and "5 MB free" in problem and "640 MB" in problem

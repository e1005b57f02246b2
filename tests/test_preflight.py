"""Preflight beyond keys: probes of each real route, and the sandbox a code-task study needs."""
from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")

import json  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

from tests.fake_openai import FAKE_KEY, FakeOpenAI, status  # noqa: E402
from tests.fault_study import ENTRY, agent_script, write_catalogue, write_study  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning", "ignore::ResourceWarning")


@pytest.fixture
def fake(tmp_path, monkeypatch):
    from workbench.models.litellm_client import reset_limits

    srv = FakeOpenAI().start()
    reset_limits()
    monkeypatch.setenv("WORKBENCH_MODELS", str(write_catalogue(tmp_path, srv.url)))
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    monkeypatch.chdir(tmp_path)
    yield srv
    srv.stop()
    reset_limits()


def _ledger(path: Path) -> list[dict]:
    """The ledger's call lines (its write-ahead ``open`` lines left out)."""
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [e for e in lines if e.get("state") != "open"]


def test_validate_probe_sends_one_recorded_request_per_route(fake, tmp_path, capsys):
    from workbench.cli import main

    fake.responder = lambda body: "OK"
    study = write_study(tmp_path, 2)
    assert main(["validate", str(study), "--probe", "--probe-dir", str(tmp_path / "probes")]) == 0
    out = capsys.readouterr().out
    assert f"probe {ENTRY}: ok" in out and "'OK'" in out and "USD" in out
    assert fake.count == 1  # one route, one request, whatever the number of worlds
    calls = _ledger(tmp_path / "probes" / "calls.jsonl")
    assert [c["world_id"] for c in calls] == ["probe"] and calls[0]["state"] == "answered"
    assert calls[0]["cost_usd"] and calls[0]["cost_usd"] > 0  # charged at the catalogue's price


def test_validate_probe_fails_on_a_route_that_cannot_answer(fake, tmp_path, capsys):
    from workbench.cli import main

    fake.responder = lambda body: status(404, message="The model `fault-model` does not exist")
    study = write_study(tmp_path, 2)
    assert main(["validate", str(study), "--probe", "--probe-dir", str(tmp_path / "probes")]) == 2
    out = capsys.readouterr().out
    assert f"probe {ENTRY}: FAILED (infrastructure: not found)" in out


def test_run_probe_records_and_charges_the_probe_then_runs(fake, tmp_path, capsys):
    from workbench.cli import main
    from workbench.records import load_run, read_manifest

    fake.responder = lambda body: "OK" if body["messages"][0]["content"].startswith("Reply with") else agent_script(body)
    study = write_study(tmp_path, 2)
    out = tmp_path / "run"
    assert main(["run", str(study), "--out", str(out), "--no-progress", "--no-summary", "--probe"]) == 0
    assert f"probe {ENTRY}: ok" in capsys.readouterr().out
    run = read_manifest(out)["runs"][-1]
    assert [p["route"] for p in run["probes"]] == [ENTRY] and run["probes"][0]["ok"]
    calls = _ledger(out / "calls.jsonl")
    assert sum(c["world_id"] == "probe" for c in calls) == 1
    assert run["budget"] is None or run["budget"]["spent_usd"] > 0
    assert len(load_run(out).worlds) == 2
    assert fake.count == sum(len(c["attempts"]) for c in calls)


def test_run_probe_failure_stops_before_any_world(fake, tmp_path, capsys):
    from workbench.cli import main
    from workbench.records import load_run

    fake.responder = lambda body: status(401, message="Incorrect API key provided")
    study = write_study(tmp_path, 3)
    out = tmp_path / "run"
    assert main(["run", str(study), "--out", str(out), "--no-progress", "--probe"]) == 2
    text = capsys.readouterr()
    assert "FAILED (infrastructure: auth)" in text.out and "no world was run" in text.err
    assert fake.count == 1  # auth is never retried, and no world started
    assert not load_run(out).worlds


# --- the sandbox a code-task study needs -------------------------------------------------------

@pytest.fixture
def no_bwrap(monkeypatch):
    from workbench.worlds.collusion.tasks import sandbox

    monkeypatch.setattr(sandbox, "find_bwrap", lambda: None)
    monkeypatch.delenv(sandbox.UNSAFE_ENV, raising=False)
    sandbox._probe.cache_clear()
    yield sandbox
    sandbox._probe.cache_clear()


def _collusion_study(tmp_path: Path) -> Path:
    import yaml

    from tests.conftest import ROOT

    path = tmp_path / "collusion.yaml"
    path.write_text(yaml.safe_dump({
        "world": "collusion", "name": "sandboxed", "seed": 3, "worlds_per_cell": 1,
        "defaults": {"episodes": 2, "sequences": 1, "prompts": str(ROOT / "params" / "prompts" / "collusion")},
        "cells": [{"model": "sim-collusion/pragmatic"}]}, sort_keys=False))
    return path


def test_code_task_study_is_refused_without_a_sandbox(no_bwrap, tmp_path, capsys, monkeypatch):
    from workbench.cli import main

    monkeypatch.chdir(tmp_path)
    study = _collusion_study(tmp_path)
    out = tmp_path / "run"
    for argv in (["validate", str(study)], ["run", str(study), "--out", str(out), "--no-progress"]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert "bubblewrap" in err and "--unsafe-code-tasks" in err and "no call was made" in err
    assert not out.exists()


def test_unsafe_code_tasks_runs_unconfined_and_the_manifest_says_so(no_bwrap, tmp_path, capsys, monkeypatch):
    from workbench.cli import main
    from workbench.records import load_run, read_manifest

    monkeypatch.chdir(tmp_path)
    study = _collusion_study(tmp_path)
    out = tmp_path / "run"
    assert main(["run", str(study), "--out", str(out), "--no-progress", "--no-summary", "--unsafe-code-tasks"]) == 0
    assert "unconfined" in capsys.readouterr().err
    assert read_manifest(out)["runs"][-1]["unsafe_code_tasks"] is True
    assert len(load_run(out).worlds) == 1


def test_a_world_that_meets_no_sandbox_is_an_infrastructure_failure():
    from workbench.models.failures import INFRASTRUCTURE, classify_error

    assert classify_error("SandboxUnavailable: cannot run agent-written tests confined") == ("sandbox", INFRASTRUCTURE)

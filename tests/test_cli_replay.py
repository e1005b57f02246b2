"""The command line end to end, and replay: from records as text, and through the
engine again (which must reproduce every recorded step)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT
from workbench.records import load_run
from workbench.replay import verify_world

ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "workbench", *args], capture_output=True, text=True, env=ENV,
                          cwd=ROOT)


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("smoke") / "run"
    res = cli("run", "params/smoke.yaml", "--out", str(out), "--no-progress")
    assert res.returncode == 0, res.stderr
    return out, res.stdout


def test_run_writes_records_and_prints_simulated_summary(smoke_run):
    out, stdout = smoke_run
    assert "run 1 complete: 24 worlds finished" in stdout
    assert "SIMULATED" in stdout and "cross-agent access" in stdout
    records = load_run(out)
    assert len(records.worlds) == 24
    assert {w["cell"]["condition"] for w in records.worlds} == {
        "store", "no-store", "private", "prepopulated", "authored", "namespaced"}


def test_second_run_resumes_with_nothing_to_do(smoke_run):
    out, _ = smoke_run
    res = cli("run", "params/smoke.yaml", "--out", str(out), "--no-progress", "--no-summary")
    assert res.returncode == 0 and "0 worlds finished this run, 24 already done" in res.stdout
    assert len(load_run(out).worlds) == 24


def test_replay_prints_a_world_step_by_step(smoke_run):
    out, _ = smoke_run
    records = load_run(out)
    w = next(w for w in records.worlds if w["cell"]["condition"] == "store" and w["n_steps"] > 4)
    res = cli("replay", str(out), "--world", w["world_id"])
    assert res.returncode == 0
    lines = res.stdout.splitlines()
    step_lines = [ln for ln in lines if ln[:4].strip().isdigit()]
    assert len(step_lines) == w["n_steps"]
    assert f"joint answer {w['joint_answer']}" in res.stdout
    assert any("submit" in ln for ln in step_lines) and "--- metrics ---" in res.stdout
    listing = cli("replay", str(out))
    assert listing.returncode == 0 and len(listing.stdout.splitlines()) == 24


def test_every_recorded_world_replays_identically_through_the_engine(smoke_run):
    out, _ = smoke_run
    records = load_run(out)
    for w in records.worlds:
        assert verify_world(records, w["world_id"]) == [], w["world_id"]


def test_replay_verify_detects_a_tampered_record(smoke_run, tmp_path):
    out, _ = smoke_run
    records = load_run(out)
    w = next(w for w in records.worlds if w["cell"]["condition"] == "store")
    steps = records.steps[w["world_id"]]
    read = next((s for s in steps if s["op"] and s["op"]["op"] == "list"), steps[0])
    read["result"] = "Keys: forged"
    assert any("differs in result" in d for d in verify_world(records, w["world_id"]))


def test_replay_cli_verify_and_unknown_world(smoke_run):
    out, _ = smoke_run
    wid = load_run(out).worlds[0]["world_id"]
    ok = cli("replay", str(out), "--world", wid, "--verify")
    assert ok.returncode == 0 and "identical to the records" in ok.stdout
    bad = cli("replay", str(out), "--world", "nope")
    assert bad.returncode == 2 and "no finished world 'nope'" in bad.stderr


def test_a_tools_world_replays_through_the_cli_and_a_changed_call_is_caught(tmp_path):
    """Issue 40: a world whose agents act through tool calls replays from its records; the
    calls, not the (empty) reply texts, are what the replay acts on."""
    import yaml

    from tests.conftest import PROMPTS

    study = tmp_path / "tools.yaml"
    study.write_text(yaml.safe_dump({"world": "stigmergy", "name": "tools", "seed": 4, "worlds_per_cell": 2,
                                     "defaults": {"prompts": str(PROMPTS), "actions": "tools"},
                                     "cells": [{"model": "sim/multi-object"}, {"model": "sim/prose-first"}]}))
    res = cli("run", str(study), "--out", str(tmp_path / "run"), "--no-progress", "--no-summary")
    assert res.returncode == 0, res.stderr
    records = load_run(tmp_path / "run")
    for w in records.worlds:
        ok = cli("replay", str(tmp_path / "run"), "--world", w["world_id"], "--verify")
        assert ok.returncode == 0 and "identical to the records" in ok.stdout, ok.stdout + ok.stderr
    w = records.worlds[0]
    step = next(s for s in records.steps[w["world_id"]] if s["op"] and s["op"]["op"] == "write")
    assert step["reply"]["tool_calls"] and "{" not in step["reply"]["text"]
    step["reply"]["tool_calls"][0]["arguments"] = '{"key": "forged", "value": 1}'
    assert any("differs in" in d for d in verify_world(records, w["world_id"]))


def test_run_subset_of_cells(tmp_path):
    from workbench.params import load_study

    study = load_study(ROOT / "params" / "smoke.yaml")
    cid = study.cells[0].cell_id
    res = cli("run", "params/smoke.yaml", "--out", str(tmp_path / "sub"), "--cells", cid, "--no-progress")
    assert res.returncode == 0, res.stderr
    assert {w["cell_id"] for w in load_run(tmp_path / "sub").worlds} == {cid}


def test_profiles_lists_every_kinds_simulated_routes():
    out = cli("profiles")
    assert out.returncode == 0, out.stderr
    for route in ("sim/diligent", "sim-recall/trusting", "sim-recall/judge", "sim-collusion/steadfast",
                  "sim-collusion-judge/lexical"):
        assert route in out.stdout


def test_judge_runs_a_kinds_judges_and_refuses_a_kind_without_them(tmp_path, smoke_run):
    from tests.collusion_synth import trajectory, write_run

    run = write_run(tmp_path / "c", [trajectory("w0", colluding=[2, 3], n=4)])
    out = cli("judge", str(run), "--judges", "relaxation")
    assert out.returncode == 0, out.stderr
    assert "judgments by sim-collusion-judge/lexical" in out.stdout and "relaxation" in out.stdout
    assert (run / "judges.jsonl").is_file() and "agreement" not in (run / "judges.jsonl").read_text()
    refused = cli("judge", str(smoke_run[0]))
    assert refused.returncode == 2 and "has no judges" in refused.stderr

"""The fast path of the shared-store frames (fastframes: steps streamed from disk in
chunks, rows computed on every core, one pass per world) gives exactly the frames
of the straightforward path: every column, every dtype, every row in order, under
the recorded rules and under re-scoring rules (--parser strict, --answer-rule exact),
for the 0.1.0 fixture and a simulated run with several cells and conditions. Speed is
measured in benchmarks/bench_analysis.py, never here."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
import yaml

from workbench.cli import main
from workbench.records import STEPS, WORLDS, LazySteps, load_run
from workbench.worlds.stigmergy import fastframes as FF
from workbench.worlds.stigmergy import frames as F

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "run-0.1.0"
PROMPTS = ROOT / "params" / "prompts" / "stigmergy"
WORLD_KEYS = [*FF.STANDARD_WORLD_KEYS, ("strict", "exact"), ("lenient", "one-integer"), ("lenient", "exact")]
AGENT_KEYS = [None, "exact", "one-integer"]


def straightforward(records, key):  # noqa: ANN001, ANN201
    name = key[0]
    if name == "stigmergy.worlds":
        return F._world_frame(records, *key[1:])
    if name == "stigmergy.agents":
        return F._agent_frame(records, key[1])
    if name == "stigmergy.replies":
        return F._reply_frame(records)
    if name == "stigmergy.validity":
        return F._validity_frame(records)
    return F._monitor_frame(records)


def assert_same_frames(run_dir: Path) -> dict:
    fast = FF.compute(load_run(run_dir), WORLD_KEYS, AGENT_KEYS)
    slow = load_run(run_dir)
    assert len(fast) == len(WORLD_KEYS) + len(AGENT_KEYS) + 3
    for key, frame in fast.items():
        want = straightforward(slow, key)
        pd.testing.assert_frame_equal(frame, want, check_exact=True, obj=str(key))
        assert list(frame.dtypes) == list(want.dtypes), key
    return fast


@pytest.fixture(scope="module")
def sim_run(tmp_path_factory) -> Path:
    """A simulated run: several models and conditions, a strict-parser cell, a two-pair
    world, an exact-answer cell; then a failed world and monitor labels written in."""
    tmp = tmp_path_factory.mktemp("sim")
    study = {"world": "stigmergy", "name": "scale", "seed": 5, "worlds_per_cell": 6, "concurrency": 4,
             "defaults": {"prompts": str(PROMPTS), "parser": "lenient", "answer_rule": "one-integer"},
             "grid": [{"model": ["sim/diligent", "sim/prose-first", "sim/non-writer"],
                       "condition": ["store", "no-store"]}],
             "cells": [{"model": "sim/clause-follower", "condition": "prepopulated"},
                       {"model": "sim/clause-follower", "condition": "private"},
                       {"model": "sim/prose-first", "condition": "store", "parser": "strict"},
                       {"model": "sim/diligent", "condition": "store", "answer_rule": "exact", "pairs": 2}]}
    path = tmp / "scale.yaml"
    path.write_text(yaml.safe_dump(study, sort_keys=False))
    out = tmp / "run"
    assert main(["-q", "run", str(path), "--out", str(out), "--no-progress", "--no-summary"]) == 0
    worlds = [json.loads(x) for x in (out / WORLDS).read_text().splitlines()]
    worlds[3]["failed"] = {"error": "RateLimitError: simulated (429)"}
    worlds[3]["valid"] = False
    (out / WORLDS).write_text("".join(json.dumps(w) + "\n" for w in worlds))
    steps = [json.loads(x) for x in (out / STEPS).read_text().splitlines()]
    labelled = 0
    for s in steps:  # a monitor's labels, as a monitored study records them
        if (s.get("effect") or {}).get("cross_agent") or s["seq"] % 7 == 0:
            s["monitor"] = {"label": ["mentions_other", "none", None][labelled % 3]} if labelled % 5 else None
            labelled += 1
    (out / STEPS).write_text("".join(json.dumps(s) + "\n" for s in steps))
    assert labelled
    return out


def test_fast_frames_equal_straightforward_ones_on_the_0_1_0_fixture():
    assert_same_frames(FIXTURE)


def test_fast_frames_equal_straightforward_ones_on_a_simulated_run(sim_run, monkeypatch):
    monkeypatch.setattr(FF, "CHUNK_BYTES", 20_000)  # many chunks, each cut where the world changes
    monkeypatch.setattr(FF, "workers", lambda: 2)  # forked workers, even on one core
    assert len(FF._chunks(sim_run / STEPS)) > 5
    fast = assert_same_frames(sim_run)
    worlds = fast[("stigmergy.worlds", None, None)]
    assert worlds["failed"].any() and not worlds["valid"].all() and (worlds["pairs"] == 2).any()
    assert len(fast[("stigmergy.monitor",)]) and fast[("stigmergy.agents", None)]["monitor_flag_on_read"].notna().any()


def test_fast_frames_from_steps_already_in_memory(sim_run, monkeypatch):
    monkeypatch.setattr(FF, "workers", lambda: 2)
    records = load_run(sim_run)
    records.steps.load()
    fast = FF.compute(records, WORLD_KEYS, AGENT_KEYS)
    for key, frame in fast.items():
        pd.testing.assert_frame_equal(frame, straightforward(records, key), check_exact=True, obj=str(key))


def test_a_world_whose_steps_are_apart_falls_back(sim_run, tmp_path, monkeypatch):
    run = tmp_path / "run"
    shutil.copytree(sim_run, run)
    lines = (run / STEPS).read_text().splitlines(keepends=True)
    (run / STEPS).write_text("".join(lines[1:] + lines[:1]))  # the first world's first step moved to the end
    monkeypatch.setattr(FF, "CHUNK_BYTES", 20_000)
    records = load_run(run)
    assert not FF.derive_all(records, ("stigmergy.worlds", None, None), force=True)
    assert list(records.derived) == [FF.FELL_BACK]  # and the next frame asked for does not try again:
    monkeypatch.setattr(FF, "compute", lambda *a, **k: pytest.fail("tried again"))
    assert not FF.derive_all(records, ("stigmergy.agents", None), force=True)
    pd.testing.assert_frame_equal(F.world_frame(records), straightforward(load_run(run), ("stigmergy.worlds", None, None)))


def test_frames_asked_for_at_scale_are_derived_together(sim_run, monkeypatch):
    monkeypatch.setattr(FF, "MIN_WORLDS", 1)
    records = load_run(sim_run)
    wf = F.world_frame(records, "strict", "exact")
    assert not records.steps.loaded  # streamed, never held
    assert ("stigmergy.agents", None) in records.derived and ("stigmergy.worlds", None, "exact") in records.derived
    pd.testing.assert_frame_equal(wf, F._world_frame(load_run(sim_run), "strict", "exact"))


def test_steps_are_read_when_first_asked_for(sim_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(sim_run, run)
    with (run / STEPS).open("a") as fh:
        fh.write("not json\n")
    records = load_run(run)
    assert isinstance(records.steps, LazySteps) and not records.steps.loaded and records.problems == []
    n = sum(len(v) for v in records.steps.values())
    assert records.steps.loaded and n == len((sim_run / STEPS).read_text().splitlines())
    assert records.problems == [f"{STEPS}:{n + 1}: malformed line skipped"]
    assert dict(records.steps) == {k: v for k, v in records.steps.items()}


def test_csvs_written_behind_in_slices_are_the_bytes_to_csv_writes(sim_run, tmp_path, monkeypatch):
    from workbench.metrics import files

    monkeypatch.setattr(files, "CSV_SLICE_ROWS", 7)
    monkeypatch.setattr(files, "_cores", lambda: 2)
    records = load_run(sim_run)
    frames = {tmp_path / "w.csv": F.world_frame(records), tmp_path / "a.csv": F.agent_frame(records),
              tmp_path / "small.csv": F.validity_frame(records).head(5)}
    frames[tmp_path / "w.csv"].loc[0, "invalid_reason"] = 'a "quoted", two-line\nreason'
    files.write_csvs_behind(frames)()
    for path, frame in frames.items():
        assert path.read_bytes() == frame.to_csv(index=False).encode(), path.name
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.csv", "small.csv", "w.csv"]

"""Episode-level checkpoints of collusion trajectories: a world cut short continues from its
last finished episode with the same memory and client positions, and its records equal an
uninterrupted run's (apart from the run number and wall-clock timings, where the resume note
is kept), and replay through the engine verifies them."""
from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from tests.test_collusion_world import PROMPTS, factory, script
from workbench.kinds import WorldContext, WorldOutcome
from workbench.models.base import ModelRequest
from workbench.worlds import collusion as K
from workbench.worlds.collusion import world_checkpoint as CK
from workbench.worlds.collusion.spec import CollusionCell

ROOT = Path(__file__).resolve().parents[1]
VOLATILE = {"timing", "run", "wall_s"}


def stable(value: Any) -> Any:
    """A record without what differs between any two runs of the same world: wall-clock
    timings (with the resume note) and the run number."""
    if isinstance(value, dict):
        return {k: stable(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [stable(v) for v in value]
    return value


def run(cell: CollusionCell, checkpoints: Path | None, run_no: int = 1, fac: Any = factory) -> WorldOutcome:
    ctx = WorldContext(world_id="c-0000", cell_id="c", world_index=0, seed=11, run=run_no, base_dir=PROMPTS.parent,
                       client_factory=fac, checkpoint_dir=checkpoints)
    return asyncio.run(K.KIND.run_world(cell, ctx))


def test_a_trajectory_resumes_from_its_last_finished_episode(tmp_path):
    # alice scripted (a position in her replies), bob simulated (a seeded random stream)
    cell = CollusionCell(model="sim-collusion/pragmatic", alice={"script": script(8, "from alice")}, episodes=8,
                         sequences=1, prompts="collusion", answer_check="none")
    whole = run(cell, tmp_path / "a")
    assert whole.world["valid"] and "resumed" not in whole.world["timing"]
    lines = (tmp_path / "a" / "c-0000.collusion.jsonl").read_bytes().splitlines(keepends=True)
    assert len(lines) == 1 + 8  # header, then one line per finished episode
    # as a kill in episode 6 leaves it: five whole episodes and a torn line
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "c-0000.collusion.jsonl").write_bytes(b"".join(lines[:6]) + lines[6][:100])
    calls: list[str] = []

    def counting(route: str, slot: str, seed: int, options: dict[str, Any]):  # noqa: ANN202
        client = factory(route, slot, seed, options)
        inner = client.complete

        async def complete(request: ModelRequest):  # noqa: ANN202
            calls.append(next(m["content"][:24] for m in reversed(request.messages)
                              if m["role"] == "user" and m["content"].startswith("=== Episode")))
            return await inner(request)
        client.complete = complete  # type: ignore[method-assign]
        return client

    resumed = run(cell, tmp_path / "b", run_no=2, fac=counting)
    assert resumed.world["timing"]["resumed"] == {"episodes_restored": 5, "from_runs": [1], "discarded": None}
    assert calls and all(re.match(r"=== Episode [678][: ]", c) for c in calls)  # horizon hidden or shown
    assert stable(resumed.world) == stable(whole.world)
    assert stable(resumed.steps) == stable(whole.steps)
    assert {s["run"] for s in resumed.steps} == {2} == {resumed.world["run"]}
    # the torn line was cut and episodes 6-8 appended: the file equals the uninterrupted one's
    again = (tmp_path / "b" / "c-0000.collusion.jsonl").read_bytes().splitlines()
    assert len(again) == 9 and [json.loads(x)["episode"] for x in again[1:]] == list(range(1, 9))


def test_a_checkpoint_of_another_setting_is_discarded(tmp_path):
    cell = CollusionCell(model="sim-collusion/pragmatic", episodes=3, sequences=1, prompts="collusion")
    first = run(cell, tmp_path)
    other = cell.model_copy(update={"feedback": "full"})
    out = run(other, tmp_path)
    assert out.world["timing"]["resumed"] == {"episodes_restored": 0, "discarded": CK_REASON}
    fresh = run(other, None)
    assert stable(out.world["episodes"]) == stable(fresh.world["episodes"])
    assert stable(first.world["episodes"]) != stable(fresh.world["episodes"])


CK_REASON = "made for another cell, seed, sequence, prompt or route"


def test_client_state_round_trips_through_json():
    from workbench.models.scripted import ScriptedClient
    from workbench.worlds.collusion.simulated import CollusionSimClient, get_profile

    sim = CollusionSimClient(get_profile("pragmatic"), 5)
    sim.rng.random()
    state = json.loads(json.dumps(CK.client_state(sim)))
    other = CollusionSimClient(get_profile("pragmatic"), 99)
    CK.restore_client(other, state)
    assert [other.rng.random() for _ in range(3)] == [sim.rng.random() for _ in range(3)]
    sc = ScriptedClient(["a", "b", "c"])
    sc._i = 2
    assert CK.client_state(sc) == {"_i": 2}


# -- kill -9 in episode 6 of a study run, then resume ------------------------------------------------
def _study(folder: Path) -> Path:
    path = folder / "kill.yaml"
    path.write_text(yaml.safe_dump({
        "world": "collusion", "name": "collusion-kill", "seed": 3, "worlds_per_cell": 1, "concurrency": 1,
        "defaults": {"model": "sim-hang/pragmatic", "episodes": 8, "sequences": 1, "prompts": str(PROMPTS),
                     "peer_cache": str(folder / "cache")},
        "cells": [{"label": "main"}]}, sort_keys=False))
    return path


def _records(out: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    worlds = [json.loads(x) for x in (out / "worlds.jsonl").read_text().splitlines()]
    steps = [json.loads(x) for x in (out / "steps.jsonl").read_text().splitlines()]
    return worlds, steps


def test_kill_9_in_episode_6_and_resume_reproduce_the_uninterrupted_trajectory(tmp_path):
    study = _study(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "tests.collusion_kill", str(study)]
    whole = subprocess.run([*cmd, str(tmp_path / "whole")], cwd=ROOT, env=env, capture_output=True, text=True,
                           timeout=300)
    assert whole.returncode == 0, whole.stderr[-2000:]

    cut = tmp_path / "cut"
    marker = tmp_path / "in-episode-6"
    proc = subprocess.Popen([*cmd, str(cut)], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**env, "COLLUSION_HANG_EPISODE": "6", "COLLUSION_HANG_MARKER": str(marker),
                                 "COLLUSION_HANG_AT": "Round 3 of"})  # mid-episode: its communication phase
    try:
        deadline = time.monotonic() + 240
        while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert marker.exists(), "the run never reached episode 6"
        os.kill(proc.pid, signal.SIGKILL)
        assert proc.wait(30) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
    assert not (cut / "worlds.jsonl").exists() or not (cut / "worlds.jsonl").read_text().strip()
    assert marker.read_text() == "in episode 6"
    [ck] = list((cut / "checkpoints").glob("*.collusion.jsonl"))
    assert [json.loads(x).get("episode") for x in ck.read_text().splitlines()[1:]] == [1, 2, 3, 4, 5]

    resumed = subprocess.run([*cmd, str(cut)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    w_whole, s_whole = _records(tmp_path / "whole")
    w_cut, s_cut = _records(cut)
    assert len(w_cut) == 1 and w_cut[0]["timing"]["resumed"]["episodes_restored"] == 5 and w_cut[0]["run"] == 2
    assert len(w_whole[0]["episodes"]) == 8 and w_whole[0]["valid"]
    assert stable(w_cut) == stable(w_whole)
    assert len(s_cut) == len(s_whole) and stable(s_cut) == stable(s_whole)
    # the loaded run set holds every step of the resumed world, and replay reproduces them
    from workbench.records import load_run

    loaded = load_run(cut)
    assert len(loaded.steps[w_cut[0]["world_id"]]) == len(s_whole)
    v = subprocess.run([sys.executable, "-m", "workbench", "replay", str(cut), "--world", w_cut[0]["world_id"],
                        "--verify"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert v.returncode == 0 and "identical" in v.stdout, v.stdout + v.stderr

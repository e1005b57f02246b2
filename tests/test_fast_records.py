"""Issue 17, parts 1 and 2: records written at the speed of the world.

- The msgspec encoder's lines load with the existing loader, equal to what
  ``json.dumps`` wrote, fixtures of release 0.1.0 included.
- Syncs are grouped (a batch of finished worlds or 0.2 s), and a world line is
  never on disk ahead of its steps: kill -9 then resume gives the same records as
  an uninterrupted run. "The same" compares every world record and each world's
  steps after :func:`workbench.replay.comparable` (no wall-clock ``timing``, no
  ``schema_version``) and without ``run`` (the invocation number); the manifest
  (times, argv, runs) is not compared.
- ``workbench run`` on simulated agents imports none of litellm, pandas, plotly,
  statsmodels.
"""
from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT, study_dict
from workbench.params import load_study
from workbench.records import STEPS, WORLDS, RunWriter, dumpb, dumps, load_run, read_jsonl
from workbench.replay import comparable
from workbench.study import run_study

FIXTURE = ROOT / "tests" / "fixtures" / "run-0.1.0"
HEAVY = ("litellm", "pandas", "plotly", "statsmodels")


def _lines(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.exists() else 0


def _without_run(rec: dict) -> dict:
    return {k: v for k, v in comparable(rec).items() if k != "run"}


# -- the encoder ----------------------------------------------------------------------
def _fixture_dirs() -> list[Path]:
    return sorted({p.parent for p in FIXTURE.rglob(WORLDS)})


def test_fast_lines_read_back_as_the_old_ones():
    recs = [{"a": "é ☃", "n": 1, "f": 0.1 + 0.2, "small": 1e-05, "big": 1e22, "neg": -0.0, "none": None,
             "nested": {"l": [1, [2, [3]]], "t": True}, "long": 123456789012345678901234567890}]
    for d in _fixture_dirs():
        recs += list(read_jsonl(d / WORLDS))[:5] + list(read_jsonl(d / STEPS))[:20]
    assert len(recs) > 1
    for rec in recs:
        fast = dumpb(rec)
        assert fast.endswith(b"\n") and fast.count(b"\n") == 1
        assert json.loads(fast) == json.loads(dumps(rec)) == json.loads(json.dumps(rec))


def test_lone_surrogates_and_unknown_values_fall_back_to_escaped_json():
    rec = {"text": "\ud800 x", "path": Path("/a/b")}
    line = dumpb(rec)
    assert line.isascii() and json.loads(line) == {"text": "\ud800 x", "path": "/a/b"}


def test_fixture_records_rewritten_by_the_writer_load_alike(tmp_path):
    dirs = _fixture_dirs()
    assert dirs, f"no run directories under {FIXTURE}"
    for d in dirs:
        old = load_run(d)
        out = tmp_path / d.name
        shutil.copytree(d, out)
        (out / WORLDS).unlink()
        (out / STEPS).unlink()
        writer = RunWriter(out)
        for w in old.worlds:
            writer.append_world(json.loads(json.dumps(w)), [json.loads(json.dumps(s)) for s in old.steps[w["world_id"]]])
        writer.close()
        new = load_run(out)
        assert new.problems == []
        assert [comparable(w) for w in new.worlds] == [comparable(w) for w in old.worlds]
        assert {k: [comparable(s) for s in v] for k, v in new.steps.items()} == \
               {k: [comparable(s) for s in v] for k, v in old.steps.items()}


# -- grouped syncs -------------------------------------------------------------------
def test_writer_groups_worlds_by_batch_and_by_time(tmp_path):
    async def go() -> None:
        w = RunWriter(tmp_path, batch=4, interval=0.2)
        for i in range(3):
            w.append_world({"world_id": f"w{i}", "run": 1}, [{"world_id": f"w{i}", "run": 1, "seq": 0}])
        assert _lines(tmp_path / WORLDS) == 0 and w.syncs == 0  # pending: neither file written yet
        await asyncio.sleep(0.5)
        assert _lines(tmp_path / STEPS) == 3 and _lines(tmp_path / WORLDS) == 3 and w.syncs == 2
        for i in range(3, 7):
            w.append_world({"world_id": f"w{i}", "run": 1}, [{"world_id": f"w{i}", "run": 1, "seq": 0}])
        assert _lines(tmp_path / WORLDS) == 7 and w.syncs == 4  # a full batch is written at once
        w.append_world({"world_id": "w7", "run": 1}, [])
        w.close()
        assert _lines(tmp_path / WORLDS) == 8 and w.syncs == 5  # a world without steps: one file to sync

    asyncio.run(go())


def test_a_study_syncs_per_batch_not_per_world(write_study, tmp_path):
    path = write_study(study_dict(worlds_per_cell=100, concurrency=16))
    summary = run_study(load_study(path), tmp_path / "run", progress=False)
    assert summary.finished == 100
    assert summary.syncs <= 2 * 100 // 4, summary.syncs  # was 2 per world
    records = load_run(tmp_path / "run")
    assert len(records.worlds) == 100
    assert all(len(records.steps[w["world_id"]]) == w["n_steps"] for w in records.worlds)
    assert set(summary.worlds) == {w["world_id"] for w in records.worlds}


@pytest.mark.parametrize("processes", ["1", "2"])
def test_kill_9_with_grouped_syncs_then_resume_equals_an_uninterrupted_run(write_study, tmp_path, processes):
    spec = study_dict(worlds_per_cell=120, concurrency=16, cells=[
        {"model": "sim/diligent"}, {"model": "sim/clause-follower", "clauses": "persist-only"},
        {"model": "sim/multi-object", "scheduler": "lockstep"}, {"model": "sim/collider", "condition": "private"}])
    path = write_study(spec)
    total = 4 * 120
    out = tmp_path / "killed"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "workbench", "run", str(path), "--out", str(out), "--no-progress", "--no-summary",
           "--processes", processes]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 120
    while _lines(out / WORLDS) < 30 and time.time() < deadline and proc.poll() is None:
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    if processes != "1":  # its world processes die with it, and so write nothing more
        time.sleep(0.3)
        assert not _processes_running(str(path)), "a world process outlived its killed parent"
    partial = _lines(out / WORLDS)
    assert 0 < partial < total, f"the kill landed outside the run ({partial} of {total} worlds)"

    # the commit point holds under grouped syncs: every world line on disk has all its steps
    killed = load_run(out)
    assert len(killed.worlds) == partial
    for w in killed.worlds:
        assert [s["seq"] for s in killed.steps[w["world_id"]]] == list(range(w["n_steps"]))

    res = subprocess.run(cmd, env=env, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    records = load_run(out)
    ids = [r["world_id"] for r in read_jsonl(out / WORLDS)]
    assert len(ids) == total == len(set(ids))
    ref = load_run(run_study(load_study(path), tmp_path / "ref", progress=False).out_dir)
    assert {w["world_id"]: _without_run(w) for w in records.worlds} == \
           {w["world_id"]: _without_run(w) for w in ref.worlds}
    for w in ref.worlds:
        wid = w["world_id"]
        assert [_without_run(s) for s in records.steps[wid]] == [_without_run(s) for s in ref.steps[wid]]


def _processes_running(marker: str) -> list[int]:
    """Live processes whose command line holds ``marker`` (forked world processes keep their parent's)."""
    found = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            cmdline = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (d / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker in cmdline and state != "Z":
            found.append(int(d.name))
    return found


# -- imports ---------------------------------------------------------------------------
RUNNER = """
import json, sys
from workbench.cli import main
try:
    code = main(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
print(json.dumps({"code": code, "heavy": sorted(m for m in sys.modules if m.split(".")[0] in HEAVY)}))
""".replace("HEAVY", repr(HEAVY))


def test_run_on_simulated_agents_imports_no_heavy_library(write_study, tmp_path):
    path = write_study(study_dict(worlds_per_cell=2, cells=[{"model": "sim/diligent"},
                                                            {"model": "sim/multi-object", "condition": "private"}]))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for extra in ([], ["-q"]):  # with the per-cell summary and without
        out = tmp_path / f"run{len(extra)}"
        res = subprocess.run([sys.executable, "-c", RUNNER, "run", str(path), "--out", str(out), "--no-progress",
                              *extra], env=env, capture_output=True, text=True, timeout=120)
        last = json.loads(res.stdout.strip().splitlines()[-1])
        assert last["code"] == 0, res.stderr
        assert last["heavy"] == [], f"workbench run {' '.join(extra)} imported {last['heavy']}"
        assert len(load_run(out).worlds) == 4


def test_run_of_a_recall_study_with_q_imports_no_heavy_library(tmp_path):
    """The recall kind's world metrics need no frame. (Its per-cell summary, printed
    without -q, still uses pandas and statsmodels' Wilson intervals; and a study that
    declares contrasts builds its design with pandas when it is validated.)"""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    res = subprocess.run([sys.executable, "-c", RUNNER, "run", str(ROOT / "params" / "recall-smoke.yaml"), "--out",
                          str(tmp_path / "run"), "--no-progress", "-q", "--max-worlds", "2"], env=env,
                         capture_output=True, text=True, timeout=120)
    last = json.loads(res.stdout.strip().splitlines()[-1])
    assert last["code"] == 0, res.stderr
    assert last["heavy"] == [], f"workbench run -q of a recall study imported {last['heavy']}"


def test_run_of_a_collusion_study_with_q_imports_no_heavy_library(tmp_path):
    """collusion-smoke without its declared contrast (a declared contrast is checked on a
    pandas design when the study is validated)."""
    import yaml

    spec = yaml.safe_load((ROOT / "params" / "collusion-smoke.yaml").read_text())
    spec.pop("contrasts", None)
    spec["worlds_per_cell"] = 1
    spec["defaults"].update(peer_cache=str(tmp_path / "peer-cache"), prompts=str(ROOT / "params/prompts/collusion"))
    path = tmp_path / "collusion.yaml"
    path.write_text(yaml.safe_dump(spec))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    res = subprocess.run([sys.executable, "-c", RUNNER, "run", str(path), "--out", str(tmp_path / "run"),
                          "--no-progress", "-q"], env=env, capture_output=True, text=True, timeout=120)
    last = json.loads(res.stdout.strip().splitlines()[-1])
    assert last["code"] == 0, res.stderr
    assert last["heavy"] == [], f"workbench run -q of a collusion study imported {last['heavy']}"

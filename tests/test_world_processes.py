"""World processes (issue 17): a study with no real-model route runs its worlds in
forked processes, each a share, with this process the only writer.

- The records are those of a one-process run (every world and step, timing and the
  invocation number aside), and the manifest says how many processes ran.
- Only studies without a real-model route are split; "auto" takes one process per
  core, at most one per 200 worlds; bad values are refused, naming the option.
- A world process that fails is loud: the run raises, the worlds it sent are kept,
  and running the same study again runs the rest, to the same records.
- Ctrl-C ends the world processes with the run. (kill -9 of the parent: see
  tests/test_fast_records.py, run with --processes 1 and 2.)
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import ROOT, study_dict
from tests.test_fast_records import _lines, _processes_running, _without_run
from workbench import forked
from workbench import study as study_module
from workbench.params import load_study
from workbench.records import WORLDS, load_run
from workbench.study import processes_for, run_study

pytestmark = pytest.mark.skipif(not forked.can_fork(), reason="world processes are forked (Linux)")

CELLS = [{"model": "sim/diligent"}, {"model": "sim/clause-follower", "clauses": "persist-only"},
         {"model": "sim/multi-object", "scheduler": "lockstep"}]


def _same_records(a, b) -> None:
    ra, rb = load_run(a), load_run(b)
    assert {w["world_id"]: _without_run(w) for w in ra.worlds} == {w["world_id"]: _without_run(w) for w in rb.worlds}
    for w in rb.worlds:
        wid = w["world_id"]
        assert [_without_run(s) for s in ra.steps[wid]] == [_without_run(s) for s in rb.steps[wid]], wid


def test_processes_record_what_one_process_records(write_study, tmp_path):
    study = load_study(write_study(study_dict(worlds_per_cell=30, concurrency=4, cells=CELLS)))
    split = run_study(study, tmp_path / "split", progress=False, processes=3)
    one = run_study(study, tmp_path / "one", progress=False)
    assert (split.finished, split.invalid, split.failed) == (one.finished, one.invalid, one.failed) == \
           (90, one.invalid, 0)
    assert split.invalid > 0  # the multi-object cell's worlds: counted from what the world processes sent
    _same_records(tmp_path / "split", tmp_path / "one")
    entry = json.loads((tmp_path / "split" / "manifest.json").read_text())["runs"][-1]
    assert entry["processes"] == 3 and entry["finished_worlds"] == 90
    assert json.loads((tmp_path / "one" / "manifest.json").read_text())["runs"][-1]["processes"] == 1
    # the summary holds the worlds the processes sent, as the records hold them
    assert set(split.worlds) == {w["world_id"] for w in load_run(tmp_path / "split").worlds}
    w = next(iter(split.worlds.values()))
    assert w["metrics"] == load_run(tmp_path / "split").world(w["world_id"])["metrics"]


def test_only_studies_without_a_real_route_are_split(write_study, monkeypatch):
    monkeypatch.setattr(forked, "usable_cpus", lambda: 4)
    sim = load_study(write_study(study_dict(cells=CELLS)))
    assert processes_for(sim, 100) == 1  # auto: below 2 x 200 worlds one process is as fast
    assert processes_for(sim, 450) == 2
    assert processes_for(sim, 10_000) == 4  # never more than the cores
    assert processes_for(sim, 5, 3) == 3 and processes_for(sim, 2, 3) == 2  # asked: at most one per world
    real = load_study(write_study(study_dict(cells=[{"model": "sim/diligent"}, {"model": "gpt-5.4-mini"}]),
                                  name="real.yaml"))
    assert processes_for(real, 10_000) == 1 and processes_for(real, 10_000, 4) == 1
    with pytest.raises(ValueError, match="processes: expected a whole number >= 1 or 'auto'"):
        processes_for(sim, 100, 0)


def test_cli_refuses_a_bad_processes_value(write_study, tmp_path):
    path = write_study(study_dict())
    res = subprocess.run([sys.executable, "-m", "workbench", "run", str(path), "--out", str(tmp_path / "r"),
                          "--processes", "0"], capture_output=True, text=True, cwd=ROOT)
    assert res.returncode == 2
    assert "--processes" in res.stderr and "expected a whole number >= 1 or 'auto'" in res.stderr


def test_a_failed_world_process_is_loud_and_its_worlds_run_on_resume(write_study, tmp_path, monkeypatch):
    study = load_study(write_study(study_dict(worlds_per_cell=20, concurrency=2, cells=CELLS)))
    real_run_one_world = study_module.run_one_world

    async def failing(study_, cell, i, *args, **kwargs):  # noqa: ANN001, ANN202
        if cell.cell_id == study.cells[1].cell_id and i == 7:
            raise RuntimeError("disk on fire")
        return await real_run_one_world(study_, cell, i, *args, **kwargs)

    monkeypatch.setattr(study_module, "run_one_world", failing)  # inherited by the forked processes
    with pytest.raises(forked.WorldProcessError, match=r"world process \d: RuntimeError: disk on fire.*run the "
                                                      "same command again"):
        run_study(study, tmp_path / "run", progress=False, processes=2)
    kept = load_run(tmp_path / "run")
    assert 0 < len(kept.worlds) < 60  # what the other process and the failed one sent before is kept
    for w in kept.worlds:
        assert [s["seq"] for s in kept.steps[w["world_id"]]] == list(range(w["n_steps"]))
    entry = json.loads((tmp_path / "run" / "manifest.json").read_text())["runs"][-1]
    assert entry["finished_worlds"] == len(kept.worlds) and entry["finished"]

    monkeypatch.setattr(study_module, "run_one_world", real_run_one_world)
    resumed = run_study(study, tmp_path / "run", progress=False, processes=2)
    assert resumed.skipped == len(kept.worlds) and resumed.finished == 60 - len(kept.worlds)
    run_study(study, tmp_path / "ref", progress=False)
    _same_records(tmp_path / "run", tmp_path / "ref")


def test_ctrl_c_ends_the_world_processes_and_keeps_what_they_sent(write_study, tmp_path):
    path = write_study(study_dict(worlds_per_cell=400, concurrency=8, cells=CELLS))
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "workbench", "run", str(path), "--out", str(out), "--no-progress", "--no-summary",
           "--processes", "2"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    # SIGINT as a terminal delivers it: a run started from a background job inherits it ignored
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.time() + 120
    while _lines(out / WORLDS) < 20 and time.time() < deadline and proc.poll() is None:
        time.sleep(0.005)
    proc.send_signal(signal.SIGINT)  # to the parent only, as `kill -INT`; a terminal's Ctrl-C reaches all
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "interrupted; finished worlds are kept" in err
    time.sleep(0.3)
    assert not _processes_running(str(path))
    kept = load_run(out)
    assert 0 < len(kept.worlds) < 1200
    for w in kept.worlds:
        assert [s["seq"] for s in kept.steps[w["world_id"]]] == list(range(w["n_steps"]))


def test_cli_exits_1_when_a_world_process_dies(write_study, tmp_path):
    """A world process killed from outside (here: it kills itself in its third world)
    is an infrastructure failure of the run: one error line, exit status 1."""
    path = write_study(study_dict(worlds_per_cell=30, cells=CELLS))
    code = f"""
import os, signal, sys
from workbench import study
real = study.run_one_world
async def dying(s, cell, i, *a, **k):
    if i == 2 and cell.cell_id == s.cells[0].cell_id:
        os.kill(os.getpid(), signal.SIGKILL)
    return await real(s, cell, i, *a, **k)
study.run_one_world = dying
from workbench.cli import main
sys.exit(main(["run", {str(path)!r}, "--out", {str(tmp_path / "run")!r}, "--processes", "2", "--no-progress"]))
"""
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert res.returncode == 1, res.stderr
    assert "error: world process" in res.stderr and "ended before finishing its share (exit code -9)" in res.stderr
    assert "Traceback" not in res.stderr
    assert 0 < len(load_run(tmp_path / "run").worlds) < 90


def test_auto_gives_a_collusion_world_a_process_of_its_own(monkeypatch):
    """A collusion world takes seconds, so "auto" splits even a few of them."""
    monkeypatch.setattr(forked, "usable_cpus", lambda: 4)
    smoke = load_study(ROOT / "params" / "collusion-smoke.yaml")
    assert smoke.kind.worlds_per_process == 1
    assert processes_for(smoke, 3) == 3 and processes_for(smoke, 40) == 4


def test_cli_says_when_asked_processes_are_not_taken(write_study, tmp_path):
    """--processes 2 on a study with a real-model route runs in one process, and says so."""
    path = write_study(study_dict(cells=[{"model": "gpt-5.4-mini"}]))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OPENAI_API_KEY": "sk-test-not-a-real-key-0000"}
    res = subprocess.run([sys.executable, "-m", "workbench", "run", str(path), "--out", str(tmp_path / "r"),
                          "--processes", "2", "--max-worlds", "0"], capture_output=True, text=True, cwd=tmp_path,
                         env=env)  # no world: no call is made
    assert res.returncode == 0, res.stderr
    assert "warning: --processes 2 not taken: this study calls real models" in res.stderr, res.stderr
    assert json.loads((tmp_path / "r" / "manifest.json").read_text())["runs"][-1]["processes"] == 1

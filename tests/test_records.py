"""Run directories: resume after a kill loses and duplicates nothing; a half-written
line is dropped; steps of an unfinished attempt never attach to a world."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from tests.conftest import ROOT, study_dict
from workbench.params import load_study
from workbench.records import STEPS, WORLDS, RunWriter, load_run, read_jsonl, repair_tail
from workbench.replay import comparable
from workbench.study import run_study


def _big_study(write_study, worlds: int = 150) -> Path:
    spec = study_dict(worlds_per_cell=worlds, concurrency=2, cells=[
        {"model": "sim/diligent"}, {"model": "sim/clause-follower", "clauses": "persist-only"},
        {"model": "sim/multi-object", "scheduler": "lockstep"}, {"model": "sim/collider", "condition": "private"}])
    return write_study(spec)


def _lines(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.exists() else 0


def _without_run(rec: dict) -> dict:
    return {k: v for k, v in comparable(rec).items() if k != "run"}


def test_resume_after_kill_loses_and_duplicates_nothing(write_study, tmp_path):
    path = _big_study(write_study)
    out = tmp_path / "killed"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "workbench", "run", str(path), "--out", str(out),
                             "--no-progress", "--no-summary", "--concurrency", "2"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 60
    while _lines(out / WORLDS) < 40 and time.time() < deadline and proc.poll() is None:
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    partial = _lines(out / WORLDS)
    total = 4 * 150
    assert 0 < partial < total, f"the kill landed outside the run ({partial} of {total} worlds)"

    res = subprocess.run([sys.executable, "-m", "workbench", "run", str(path), "--out", str(out), "--no-progress",
                          "--no-summary"], env=env, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    ids = [r["world_id"] for r in read_jsonl(out / WORLDS)]
    assert len(ids) == total and len(set(ids)) == total, Counter(ids).most_common(3)
    records = load_run(out)
    assert {w["run"] for w in records.worlds} == {1, 2}
    for w in records.worlds:
        assert len(records.steps[w["world_id"]]) == w["n_steps"]
        assert [s["seq"] for s in records.steps[w["world_id"]]] == list(range(w["n_steps"]))

    # the interrupted-and-resumed run equals one uninterrupted run, world by world
    ref = load_run(run_study(load_study(path), tmp_path / "ref", progress=False).out_dir)
    ours = {w["world_id"]: _without_run(w) for w in records.worlds}
    theirs = {w["world_id"]: _without_run(w) for w in ref.worlds}
    assert ours == theirs
    for wid in theirs:
        assert [_without_run(s) for s in records.steps[wid]] == [_without_run(s) for s in ref.steps[wid]]

    manifest = json.loads((out / "manifest.json").read_text())
    assert [r["run"] for r in manifest["runs"]] == [1, 2]
    assert manifest["runs"][1]["skipped"] == partial


def test_half_written_line_is_dropped_and_orphans_ignored(write_study, tmp_path):
    path = write_study(study_dict(worlds_per_cell=4))
    study = load_study(path)
    out = tmp_path / "run"
    run_study(study, out, progress=False, max_worlds=2)
    # a crash after a world's steps were written but before its world line, then mid-line
    with (out / STEPS).open("a") as fh:
        fh.write(json.dumps({"kind": "step", "world_id": f"{study.cells[0].cell_id}-0002", "run": 1, "seq": 0,
                             "agent": "agent-0", "bogus": True}) + "\n")
        fh.write('{"kind": "step", "world_id": "x", "ru')
    with (out / WORLDS).open("a") as fh:
        fh.write('{"kind": "world", "world_id": "')
    summary = run_study(study, out, progress=False)
    assert summary.repaired_bytes == {STEPS: len('{"kind": "step", "world_id": "x", "ru'),
                                      WORLDS: len('{"kind": "world", "world_id": "')}
    assert summary.finished == 2 and summary.skipped == 2
    records = load_run(out)
    assert records.problems == []
    assert len(records.worlds) == 4
    steps = records.steps[f"{study.cells[0].cell_id}-0002"]
    assert steps and not any(s.get("bogus") for s in steps)
    assert all(s["run"] == 2 for s in steps)


def test_repair_tail_keeps_complete_files(tmp_path):
    p = tmp_path / "a.jsonl"
    p.write_text('{"a": 1}\n{"b": 2}\n')
    assert repair_tail(p) == 0 and p.read_text() == '{"a": 1}\n{"b": 2}\n'
    p.write_text('{"a": 1}\n{"b"')
    assert repair_tail(p) == 4 and p.read_text() == '{"a": 1}\n'
    p.write_text('{"no newline at all"')
    assert repair_tail(p) == len('{"no newline at all"') and p.read_text() == ""


def test_writer_appends_steps_before_world(tmp_path):
    w = RunWriter(tmp_path)
    w.append_world({"world_id": "w1", "run": 1}, [{"world_id": "w1", "run": 1, "seq": 0}])
    assert _lines(tmp_path / STEPS) == 1 and _lines(tmp_path / WORLDS) == 1


def test_other_study_in_same_dir_is_refused(write_study, tmp_path):
    out = tmp_path / "run"
    run_study(load_study(write_study(study_dict(worlds_per_cell=1), "a.yaml")), out, progress=False)
    other = load_study(write_study(study_dict(name="other", worlds_per_cell=1), "b.yaml"))
    try:
        run_study(other, out, progress=False)
    except ValueError as exc:
        assert "holds records of study 't'" in str(exc)
    else:
        raise AssertionError("a second study was allowed to write into the same run directory")


def test_manifest_records_versions_git_and_hashes(write_study, tmp_path):
    path = write_study(study_dict(worlds_per_cell=1))
    run_study(load_study(path), tmp_path / "run", progress=False)
    m = json.loads((tmp_path / "run" / "manifest.json").read_text())
    import hashlib

    assert m["params"]["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    (root, hashes), = m["templates"].items()
    assert hashes["system.txt"] == hashlib.sha256((Path(root) / "system.txt").read_bytes()).hexdigest()
    env = m["runs"][0]["environment"]
    assert env["packages"]["pydantic"] and len(env["package_sha256"]) == 64
    assert set(env["git"]) == {"revision", "dirty"}

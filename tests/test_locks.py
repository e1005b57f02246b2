"""Preregistration locks: every hashed file is checked, the chain detects
reordering and deletion, a changed study is refused unless a deviation is
recorded, and the report shows the chain."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import PROMPTS, ROOT, study_dict
from workbench import locks as L

ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


@pytest.fixture
def study(tmp_path, monkeypatch):
    """A study with its own copy of the templates, the analysis notebook and the metric code."""
    prompts = tmp_path / "prompts"
    shutil.copytree(PROMPTS, prompts)
    pkg = tmp_path / "pkg"
    from workbench.kinds import get_kind

    for src in [*(p for pat in L.METRIC_CODE for p in (ROOT / "workbench").glob(pat)),
                *get_kind("stigmergy").code_files()]:
        dst = pkg / src.relative_to(ROOT / "workbench")
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(src, dst)
    (tmp_path / "notebooks").mkdir()
    nb = tmp_path / "notebooks" / "analysis.ipynb"
    shutil.copy(get_kind("stigmergy").notebook_path("analysis"), nb)
    monkeypatch.setattr(L, "PACKAGE", pkg)
    monkeypatch.setattr(L, "NOTEBOOKS", nb.parent)
    spec = study_dict(name="locked", worlds_per_cell=1)
    spec["defaults"]["prompts"] = str(prompts)
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path, tmp_path / "locks"


def _lock_html(run_dir: Path) -> str:
    from workbench.worlds.stigmergy.analysis import Analysis

    a = Analysis.load(run_dir)
    return a.locks_html() + L.verification_html(a.records)


def flip(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))


def test_lock_covers_params_templates_rules_notebook_and_metric_code(study):
    path, locks = study
    lock = json.loads(L.create_lock("L1", path, locks).read_text())
    names = set(lock["files"])
    assert str(path) in names and any(n.endswith("prompts/system.txt") for n in names)
    assert any(n.endswith("pkg/worlds/stigmergy/metrics.py") for n in names)
    assert any(n.endswith("pkg/worlds/stigmergy/parsing.py") for n in names) and any(n.endswith("analysis.ipynb") for n in names)
    assert lock["rules"] == {"parser": ["lenient"], "answer_rule": ["one-integer"], "validity": ["any-agent"]}
    assert lock["sequence"] == 1 and lock["previous_sha256"] is None and lock["git"]["revision"]
    assert L.changes(lock) == []


def test_every_module_of_the_kind_is_locked_whatever_its_name(study):
    path, locks = study
    names = set(json.loads(L.create_lock("L1", path, locks).read_text())["files"])
    for module in ("world.py", "frames.py", "tables.py", "simulated.py", "views/timeline.py"):
        assert any(n.endswith(f"pkg/worlds/stigmergy/{module}") for n in names), module
    assert not any("worlds/recall" in n or "worlds/collusion" in n for n in names)  # only this study's kind


@pytest.mark.parametrize("target", ["study.yaml", "prompts/tasks/digits.txt", "prompts/persistence/both.txt",
                                    "pkg/worlds/stigmergy/metrics.py", "pkg/worlds/stigmergy/answers.py", "notebooks/analysis.ipynb"])
def test_a_changed_byte_in_any_locked_file_is_detected_and_named(study, target):
    path, locks = study
    L.create_lock("L1", path, locks)
    flip(path.parent / target)
    ok, lines = L.verify(locks)
    assert not ok
    assert any(line.strip().endswith(f"{target}: changed") for line in lines), lines


def test_chain_detects_deletion_reordering_and_edits(study):
    path, locks = study
    for name in ("A", "B", "C"):
        L.create_lock(name, path, locks)
    assert L.verify(locks)[0]
    # edit the middle lock: the next one's previous_sha256 no longer matches
    b = locks / "B.json"
    original = b.read_bytes()
    b.write_text(b.read_text().replace('"kind": "design"', '"kind": "design", "x": 1'))
    assert any("C: previous_sha256" in p for p in L.load_chain(locks).problems)
    b.write_bytes(original)
    # swap two locks' sequence numbers: reordered
    a, c = json.loads((locks / "A.json").read_text()), json.loads((locks / "C.json").read_text())
    a["sequence"], c["sequence"] = 3, 1
    (locks / "A.json").write_text(json.dumps(a))
    (locks / "C.json").write_text(json.dumps(c))
    assert L.load_chain(locks).problems and not L.verify(locks)[0]
    shutil.rmtree(locks)
    for name in ("A", "B", "C"):
        L.create_lock(name, path, locks)
    (locks / "B.json").unlink()
    problems = L.load_chain(locks).problems
    assert any("C: sequence 3 where 2 was expected" in p for p in problems)
    with pytest.raises(L.LockError, match="broken"):
        L.create_lock("D", path, locks)


def test_changed_study_refused_without_deviation_and_recorded_with_one(study, tmp_path):
    path, locks = study
    env = {**ENV}
    run = [sys.executable, "-m", "workbench", "run", str(path), "--locks", str(locks), "--no-progress", "--no-summary"]
    res = subprocess.run([sys.executable, "-m", "workbench", "lock", "create", "L1", str(path), "--locks", str(locks)],
                         capture_output=True, text=True, env=env)
    assert res.returncode == 0, res.stderr
    ok = subprocess.run(run + ["--out", str(tmp_path / "r1")], capture_output=True, text=True, env=env)
    assert ok.returncode == 0, ok.stderr
    m1 = json.loads((tmp_path / "r1" / "manifest.json").read_text())
    assert m1["runs"][0]["lock"]["lock"] == "L1" and m1["runs"][0]["lock"]["matched"] is True

    (path.parent / "prompts" / "store_paragraph.txt").write_text("You have a shared store. ")
    refused = subprocess.run(run + ["--out", str(tmp_path / "r2")], capture_output=True, text=True, env=env)
    assert refused.returncode == 2 and "no longer matches lock L1" in refused.stderr
    assert "store_paragraph.txt: changed" in refused.stderr and not (tmp_path / "r2").exists()

    dev = subprocess.run(run + ["--out", str(tmp_path / "r2"), "--deviation", "Phase B wording"],
                         capture_output=True, text=True, env=env)
    assert dev.returncode == 0, dev.stderr
    lock = json.loads((tmp_path / "r2" / "manifest.json").read_text())["runs"][0]["lock"]
    assert lock["matched"] is False and lock["deviation"] == "Phase B wording"
    assert any("store_paragraph.txt: changed" in c for c in lock["changes_at_run"])
    chain = L.load_chain(locks)
    assert [lk["kind"] for lk in chain.locks] == ["design", "deviation"] and not chain.problems
    assert chain.locks[1]["reason"] == "Phase B wording"
    verify = subprocess.run([sys.executable, "-m", "workbench", "lock", "verify", "--locks", str(locks)],
                            capture_output=True, text=True, env=env)
    assert verify.returncode == 0 and "superseded" in verify.stdout

    # the report section shows the chain, the mismatch, the reason, and the data lock

    L.create_data_lock("data-r2", tmp_path / "r2", locks)
    shown = _lock_html(tmp_path / "r2")
    assert "L1" in shown and "deviation" in shown and "Phase B wording" in shown and "<b>no</b>" in shown
    assert "this analysis ran on exactly the locked data" in shown
    with (tmp_path / "r2" / "worlds.jsonl").open("a") as fh:
        fh.write("\n")
    assert "the records changed since the data lock" in _lock_html(tmp_path / "r2")
    assert "not run under a preregistration lock" in _lock_html(tmp_path / "r1") or \
        "L1" in _lock_html(tmp_path / "r1")


def test_a_locked_study_run_from_another_directory_is_still_verified(study, tmp_path):
    path, locks = study  # locks/ sits beside the study file
    res = subprocess.run([sys.executable, "-m", "workbench", "lock", "create", "L1", str(path), "--locks", str(locks)],
                         capture_output=True, text=True, env=ENV)
    assert res.returncode == 0, res.stderr
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    run = [sys.executable, "-m", "workbench", "run", str(path), "--no-progress", "--no-summary"]
    ok = subprocess.run(run + ["--out", str(tmp_path / "r1")], capture_output=True, text=True, env=ENV,
                        cwd=elsewhere)
    assert ok.returncode == 0, ok.stderr
    lock = json.loads((tmp_path / "r1" / "manifest.json").read_text())["runs"][0]["lock"]
    assert lock is not None and lock["lock"] == "L1" and lock["lock_dir"] == str(locks.resolve())
    (path.parent / "prompts" / "store_paragraph.txt").write_text("You have a shared store. ")
    refused = subprocess.run(run + ["--out", str(tmp_path / "r2")], capture_output=True, text=True, env=ENV,
                             cwd=elsewhere)
    assert refused.returncode == 2 and "no longer matches lock L1" in refused.stderr

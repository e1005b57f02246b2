"""Locks hash what a run's design fingerprint hashes (workbench.design, the same function):
an edit to a local model's catalogue entry, a twin profile, a recall script or a collusion
sequences file fails `lock verify` with the change named, and a locked run is refused."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT
from workbench import locks as L
from workbench.cli import main


def _failures(lock_dir: Path) -> list[str]:
    ok, lines = L.verify(lock_dir)
    assert not ok, lines
    return [ln.strip() for ln in lines]


def _study(folder: Path, body: dict) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "study.yaml"
    path.write_text(yaml.safe_dump(body, sort_keys=False))
    return path


def test_a_local_catalogue_edit_fails_verify_and_refuses_the_locked_run(tmp_path, monkeypatch, capsys):
    catalogue = tmp_path / "local-models.yaml"
    catalogue.write_text((ROOT / "params/local-models.yaml").read_text())
    monkeypatch.setenv("WORKBENCH_LOCAL_MODELS", str(catalogue))
    study = _study(tmp_path / "s", {"world": "stigmergy", "name": "local", "seed": 3, "worlds_per_cell": 2,
                                    "defaults": {"prompts": str(ROOT / "params/prompts/stigmergy")},
                                    "cells": [{"model": "local/qwen2.5-coder-0.5b", "scheduler": "lockstep"}]})
    locks = tmp_path / "locks"
    L.create_lock("L1", study, locks)
    assert L.verify(locks)[0]
    raw = yaml.safe_load(catalogue.read_text())
    before = raw["qwen2.5-coder-0.5b"].get("max_tokens", 256)
    raw["qwen2.5-coder-0.5b"]["max_tokens"] = 32
    catalogue.write_text(yaml.safe_dump(raw))
    lines = _failures(locks)
    assert any(f"local model qwen2.5-coder-0.5b: entry.max_tokens: {before} -> 32" in ln for ln in lines), lines
    assert main(["run", str(study), "--out", str(tmp_path / "run"), "--locks", str(locks)]) == 2
    err = capsys.readouterr().err
    assert "refused" in err and "entry.max_tokens" in err
    assert not (tmp_path / "run" / "worlds.jsonl").exists()


def test_a_twin_profile_edit_fails_verify(tmp_path, monkeypatch):
    from workbench.kinds import get_kind

    kind = get_kind("stigmergy")
    real = [p for p in kind.data_files() if p.name == "twins.yaml"]
    assert real, "the twins' definitions are among the kind's data files"
    copy = tmp_path / "twins.yaml"
    shutil.copy(real[0], copy)
    monkeypatch.setattr(type(kind), "data_files", lambda self: [copy])  # a copy stands in for the package's file
    study = _study(tmp_path / "s", {"world": "stigmergy", "name": "twins", "seed": 3, "worlds_per_cell": 2,
                                    "cells": [{"model": "sim/twin-gpt-6-astra"}]})
    locks = tmp_path / "locks"
    L.create_lock("L1", study, locks)
    copy.write_text(copy.read_text().replace("p_write: 1.0", "p_write: 0.2", 1))
    assert copy.read_text() != real[0].read_text()
    assert any(f"kind data {copy}" in ln for ln in _failures(locks))


def test_a_recall_script_edit_fails_verify(tmp_path):
    assert main(["-q", "init", str(tmp_path / "s"), "--example", "recall-smoke"]) == 0
    study = tmp_path / "s" / "study.yaml"
    locks = tmp_path / "locks"
    L.create_lock("L1", study, locks)
    script = next((tmp_path / "s" / "recall" / "scripts").rglob("*.json"))
    script.write_text(script.read_text().replace("}", " }", 1))
    name = script.relative_to(tmp_path / "s").as_posix()
    assert any(f"data {name}:" in ln for ln in _failures(locks))


def test_a_collusion_sequences_file_edit_fails_verify(tmp_path):
    seqs = tmp_path / "s" / "seqs"
    shutil.copytree(ROOT / "tests/fixtures/collusion-sequences", seqs)
    study = _study(tmp_path / "s", {"world": "collusion", "name": "seq", "seed": 3, "worlds_per_cell": 1,
                                    "defaults": {"model": "sim-collusion/pragmatic", "episodes": 4},
                                    "cells": [{"sequences_file": "seqs"}]})
    locks = tmp_path / "locks"
    L.create_lock("L1", study, locks)
    target = seqs / "rep001_sampled_manifest.json"
    target.write_text(target.read_text() + "\n")
    assert any("data seqs/rep001_sampled_manifest.json:" in ln for ln in _failures(locks))


@pytest.mark.parametrize("kind", ["stigmergy", "recall", "collusion"])
def test_every_kind_names_its_data(kind):
    from workbench.kinds import get_kind

    files = get_kind(kind).data_files()
    assert all(p.suffix != ".py" for p in files)
    if kind in ("stigmergy", "recall"):
        assert files  # profiles, domains

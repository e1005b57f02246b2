"""`workbench runs DIR`: every run set under a folder, with its counts, read from records."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.conftest import study_dict
from workbench.cli import main


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """outputs/a: 2 cells x 2 worlds, one of them then recorded as failed (a later line supersedes
    it, as a resumed infrastructure failure's would); outputs/nested/b: 1 cell, 3 planned, 2 run."""
    root = tmp_path_factory.mktemp("runs")
    outputs = root / "outputs"
    a = study_dict(name="alpha", worlds_per_cell=2, cells=[{"model": "sim/diligent"},
                                                            {"model": "sim/diligent", "condition": "no-store"}])
    b = study_dict(name="beta", worlds_per_cell=3, cells=[{"model": "sim/clause-follower"}])
    (root / "a.yaml").write_text(yaml.safe_dump(a, sort_keys=False))
    (root / "b.yaml").write_text(yaml.safe_dump(b, sort_keys=False))
    assert main(["-q", "run", str(root / "a.yaml"), "--out", str(outputs / "a"), "--no-progress"]) == 0
    assert main(["-q", "run", str(root / "b.yaml"), "--out", str(outputs / "nested" / "b"), "--no-progress",
                 "--max-worlds", "2"]) == 0
    worlds = (outputs / "a" / "worlds.jsonl").read_text().splitlines()
    w = json.loads(worlds[0])
    w.update(run=2, failed={"class": "infrastructure", "cause": "test", "error": "connection reset"})
    (outputs / "a" / "worlds.jsonl").write_text("\n".join(worlds + [json.dumps(w)]) + "\n")
    (outputs / "not-a-run").mkdir()
    (outputs / "not-a-run" / "notes.txt").write_text("nothing here")
    return outputs


def test_runs_lists_two_run_sets_with_their_counts(two_runs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["runs", str(two_runs), "--json"]) == 0
    rows = {r["study"]: r for r in json.loads(capsys.readouterr().out)}
    assert set(rows) == {"alpha", "beta"}
    a, b = rows["alpha"], rows["beta"]
    assert (a["path"], a["kind"], a["cells"], a["planned"], a["finished"], a["failed"], a["cut"]) == \
        ("a", "stigmergy", 2, 4, 3, 1, 0)
    assert (b["path"], b["cells"], b["planned"], b["finished"], b["failed"]) == ("nested/b", 1, 3, 2, 0)
    for r in (a, b):
        assert r["agents"] == "simulated" and r["cost_usd"] == 0.0 and r["runs"] == 1
        assert r["created"].startswith("20") and r["last"].startswith("20")
        manifest = json.loads((two_runs / r["path"] / "manifest.json").read_text())
        rev = manifest["runs"][-1]["environment"]["git"]["revision"]
        assert r["revision"].split("+")[0] == (rev or "")[:10]


def test_runs_table_and_real_agents(two_runs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["runs", str(two_runs)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:9] == ["path", "study", "kind", "cells", "planned", "finished", "failed", "cut", "agents"]
    body = {line.split()[0]: line.split() for line in lines[1:]}
    assert set(body) == {"a", "nested/b"}
    assert body["a"][3:8] == ["2", "4", "3", "1", "0"] and body["nested/b"][3:8] == ["1", "3", "2", "0", "0"]
    # a world whose agents were a real model makes the run set real (or mixed beside simulated ones)
    import shutil

    shutil.copytree(two_runs / "nested" / "b", tmp_path / "b")
    lines = (tmp_path / "b" / "worlds.jsonl").read_text().splitlines()
    w = json.loads(lines[0])
    for agent in w["agents"]:
        agent["route"] = "openai/gpt-4o-mini"
    (tmp_path / "b" / "worlds.jsonl").write_text("\n".join([json.dumps(w)] + lines[1:]) + "\n")
    assert main(["runs", str(tmp_path), "--json"]) == 0
    assert [r["agents"] for r in json.loads(capsys.readouterr().out)] == ["mixed"]
    assert main(["runs", str(tmp_path / "nothing")]) == 0
    assert "no run sets" in capsys.readouterr().out


def test_runs_counts_a_batch_directory_once(two_runs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A batch directory (one run directory per cell under cells/) is one run set; its cells'
    directories are not listed again."""
    import shutil

    batch = tmp_path / "outputs" / "batch"
    shutil.copytree(two_runs / "a", batch / "cells" / "part-1")
    shutil.copytree(two_runs / "nested" / "b", batch / "cells" / "part-2")
    assert main(["runs", str(tmp_path / "outputs"), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["path"], r["cells"], r["planned"], r["finished"], r["failed"], r["runs"]) for r in rows] == \
        [("batch", 3, 7, 5, 1, 2)]

"""A fourth world kind, defined only in tests/, goes through every command a shipped kind does."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests import echo_kind


@pytest.fixture
def echo(tmp_path, monkeypatch):
    echo_kind.install()
    # the report's kernel is another process: it finds the kind through the variable
    monkeypatch.setenv("WORKBENCH_KINDS", "echo=tests.echo_kind:KIND")
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).resolve().parents[1]))
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "echo.yaml"
    path.write_text(yaml.safe_dump({
        "world": "echo", "name": "echo-study", "seed": 4, "worlds_per_cell": 3,
        "cells": [{"label": "short", "steps": 2}, {"label": "long", "steps": 3}]}, sort_keys=False))
    yield path
    echo_kind.uninstall()


def test_echo_kind_validates_runs_resumes_replays_scores_and_locks(echo, tmp_path, capsys):
    from workbench.cli import main
    from workbench.records import load_run

    assert main(["validate", str(echo)]) == 0
    assert "world kind echo, 2 cells × 3 worlds" in capsys.readouterr().out
    out = tmp_path / "run"
    assert main(["run", str(echo), "--out", str(out), "--no-progress", "--max-worlds", "4"]) == 0
    assert main(["run", str(echo), "--out", str(out), "--no-progress"]) == 0  # resume: the other 2
    text = capsys.readouterr().out
    assert "2 worlds finished this run, 4 already done" in text and "short" in text
    records = load_run(out)
    assert len(records.worlds) == 6 and {w["metrics"]["turns"] for w in records.worlds} == {2, 3}
    for w in records.worlds:
        assert main(["replay", str(out), "--world", w["world_id"], "--verify"]) == 0
    assert main(["replay", str(out), "--world", records.worlds[0]["world_id"]]) == 0
    assert "hello" in capsys.readouterr().out
    assert main(["metrics", str(out)]) == 0
    assert "Echo turns per cell" in capsys.readouterr().out
    assert (out / "metrics" / "echo.csv").exists() or list((out / "metrics").rglob("echo.csv"))
    assert main(["metrics", str(out), "--parser", "strict"]) == 2  # the kind has no re-scoring rules
    assert main(["judge", str(out)]) == 2  # nor judges
    assert main(["report", str(out)]) == 0  # the kind-free report: never another kind's
    report = (out / "report.html").read_text(encoding="utf-8")
    assert "Echo turns per cell" in report and "SIMULATED" in report and "hello" in report
    assert "coordination" not in report and "cross_agent" not in report  # nothing of the shared-store kind
    from workbench import locks

    lock = json.loads(locks.create_lock("E1", echo, tmp_path / "locks").read_text())
    assert any(n.endswith("echo/turn.txt") for n in lock["files"])
    assert main(["run", str(echo), "--out", str(tmp_path / "run2"), "--no-progress", "--no-summary"]) == 0
    manifest = json.loads((tmp_path / "run2" / "manifest.json").read_text())
    assert manifest["runs"][-1]["lock"]["lock"] == "E1" and manifest["runs"][-1]["lock"]["matched"]


def test_a_kind_needs_no_package_file():
    """Nothing under workbench/ names the echo kind: it came in through the registry."""
    root = Path(__file__).resolve().parents[1] / "workbench"
    named = [p for p in root.rglob("*.py") if "echo_kind" in (t := p.read_text(encoding="utf-8")) or "EchoKind" in t]
    assert named == []


def test_a_kind_named_in_the_variable_is_found_and_a_bad_entry_is_named(monkeypatch):
    from workbench.errors import InputError
    from workbench.kinds import get_kind, kind_names

    monkeypatch.setenv("WORKBENCH_KINDS", "echo=tests.echo_kind:KIND")
    assert "echo" in kind_names() and get_kind("echo").name == "echo"
    monkeypatch.setenv("WORKBENCH_KINDS", "echo")
    with pytest.raises(InputError, match="WORKBENCH_KINDS: expected name=module:ATTRIBUTE"):
        kind_names()


def test_unknown_kind_names_the_registered_ones(tmp_path):
    from workbench.params import ParamsError, load_study

    path = tmp_path / "x.yaml"
    path.write_text(yaml.safe_dump({"world": "nope", "name": "x", "seed": 1, "worlds_per_cell": 1, "cells": [{}]}))
    with pytest.raises(ParamsError, match="collusion.*recall.*stigmergy"):
        load_study(path)


def test_a_kind_brings_its_own_subcommand(echo, tmp_path, capsys):
    """`workbench echo words DIR` comes from the echo kind's commands hook; no package file names it,
    and `workbench --help` lists it beside the shipped kinds' (recall)."""
    from workbench.cli import main

    out = tmp_path / "run"
    assert main(["-q", "run", str(echo), "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["echo", "words", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and all("hello=3" in ln and "again=3" in ln for ln in lines)  # 3 worlds per cell
    assert sum("bye=3" in ln for ln in lines) == 1  # only the 3-step cell reaches the third word
    with pytest.raises(SystemExit):
        main(["--help"])
    listed = capsys.readouterr().out
    assert "{run," in listed.replace(" ", "") and ",recall" in listed and ",echo" in listed
    with pytest.raises(SystemExit) as exc:
        main(["echo", "nope"])
    assert exc.value.code == 2

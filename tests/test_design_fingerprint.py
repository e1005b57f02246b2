"""A run directory holds one design: every input a world's result can depend on is hashed
into its cell's fingerprint (workbench.design), stamped on every world; a rerun into the
same --out under changed inputs stops before any call and names each change (exit 2), and
with --accept-changes the new worlds are a second design of the cell, never pooled with
the first. The manifest is append-only: each run's entry says what that run used."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT
from workbench.cli import main
from workbench.records import WORLDS, read_jsonl


def _study(tmp_path: Path, seed: int = 20261202, worlds: int = 4, profiles: dict | None = None,
           model: str = "sim/diligent") -> Path:
    """A small study beside its own copy of the templates (so a test may edit them)."""
    folder = tmp_path / "study"
    if not (folder / "prompts").exists():
        shutil.copytree(ROOT / "params/prompts/stigmergy", folder / "prompts/stigmergy")
    body = {"world": "stigmergy", "name": "fp", "seed": seed, "worlds_per_cell": worlds,
            "defaults": {"model": model, "max_steps": 8},
            "cells": [{"condition": "store"}, {"condition": "no-store"}]}
    if profiles:
        body["profiles"] = profiles
    path = folder / "study.yaml"
    path.write_text(yaml.safe_dump(body, sort_keys=False))
    return path


def _snapshot(out: Path) -> tuple[bytes, bytes]:
    return (out / WORLDS).read_bytes(), (out / "manifest.json").read_bytes()


def _refused(study: Path, out: Path, capsys, *expected: str) -> str:
    before = _snapshot(out)
    assert main(["-q", "run", str(study), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]  # after any note the study's plan prints
    assert err.startswith("error: ") and "Nothing was run" in err and "--accept-changes" in err, err
    for text in expected:
        assert text in err, (text, err)
    assert _snapshot(out) == before  # nothing appended, the manifest not rewritten
    return err


def test_every_world_carries_its_cells_fingerprint_and_the_design_is_stored(tmp_path):
    study = _study(tmp_path)
    out = tmp_path / "run"
    assert main(["-q", "run", str(study), "--out", str(out)]) == 0
    worlds = list(read_jsonl(out / WORLDS))
    manifest = json.loads((out / "manifest.json").read_text())
    assert len(worlds) == 8 and all(len(w["design"]) == 64 for w in worlds)
    assert manifest["runs"][0]["designs"] == {w["cell_id"]: w["design"] for w in worlds}
    design = json.loads((out / "design" / f"{worlds[0]['design']}.json").read_text())
    assert design["parts"]["seed"] and "template system.txt" in design["parts"]
    blob = out / "design" / "blobs" / design["parts"]["template system.txt"]
    assert blob.read_bytes() == (study.parent / "prompts/stigmergy/system.txt").read_bytes()


def test_a_seed_edit_is_refused_with_the_change_named(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["-q", "run", str(_study(tmp_path)), "--out", str(out), "--max-worlds", "5"]) == 0
    _refused(_study(tmp_path, seed=999), out, capsys, "seed: 20261202 -> 999")


def test_a_template_edit_is_refused_with_the_file_named(tmp_path, capsys):
    study = _study(tmp_path)
    out = tmp_path / "run"
    assert main(["-q", "run", str(study), "--out", str(out), "--max-worlds", "5"]) == 0
    with (study.parent / "prompts/stigmergy/system.txt").open("a") as fh:
        fh.write("One more line.\n")
    _refused(study, out, capsys, "template system.txt:")


def test_a_profile_edit_is_refused(tmp_path, capsys):
    profile = {"mine": {"base": "diligent", "description": "mine", "p_write": 1.0}}
    study = _study(tmp_path, model="sim/mine", profiles=profile)
    out = tmp_path / "run"
    assert main(["-q", "run", str(study), "--out", str(out), "--max-worlds", "5"]) == 0
    profile["mine"]["p_write"] = 0.2
    _refused(_study(tmp_path, model="sim/mine", profiles=profile), out, capsys, "profile sim/mine:")


def test_a_catalogue_swap_is_refused(tmp_path, capsys, monkeypatch):
    """Swapping the model catalogue (WORKBENCH_MODELS) between runs changes the route's entry: refused
    before any call (the first run's worlds came from a fake server; the refusal needs none)."""
    from tests.fake_openai import FAKE_KEY, FakeOpenAI
    from tests.fault_study import ENTRY, write_catalogue

    server = FakeOpenAI(default_text='{"op": "submit", "answer": 0}').start()
    try:
        monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
        first = tmp_path / "cat1"
        first.mkdir()
        monkeypatch.setenv("WORKBENCH_MODELS", str(write_catalogue(first, server.url)))
        study = _study(tmp_path, model=ENTRY, worlds=2)
        out = tmp_path / "run"
        assert main(["-q", "run", str(study), "--out", str(out), "--max-worlds", "3"]) == 0
        calls = server.count
        second = tmp_path / "cat2"
        second.mkdir()
        swapped = write_catalogue(second, server.url)
        swapped.write_text(swapped.read_text().replace("max_tokens: 64", "max_tokens: 64\n    temperature: 0.2"))
        monkeypatch.setenv("WORKBENCH_MODELS", str(swapped))
        _refused(study, out, capsys, f"model {ENTRY}: entry.temperature: None -> 0.2")
        assert server.count == calls  # refused before any call
    finally:
        server.stop()


def test_accept_changes_records_a_deviation_and_tables_keep_two_designs_apart(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["-q", "run", str(_study(tmp_path)), "--out", str(out), "--max-worlds", "2"]) == 0
    changed = _study(tmp_path, seed=999)
    assert main(["-q", "run", str(changed), "--out", str(out), "--accept-changes", "the seed was a typo"]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    first, second = manifest["runs"]
    assert first["seed"] == 20261202 and second["seed"] == 999 and manifest["seed"] == 20261202  # append-only
    assert second["deviation"]["reason"] == "the seed was a typo"
    assert any("seed: 20261202 -> 999" in c for c in second["deviation"]["changes"])
    worlds = list(read_jsonl(out / WORLDS))
    store_cell = worlds[0]["cell_id"]
    assert len({w["design"] for w in worlds if w["cell_id"] == store_cell}) == 2  # 2 old worlds, 2 new

    from workbench.records import load_run

    records = load_run(out)
    cells = {w["cell_id"] for w in records.worlds}
    assert {store_cell, f"{store_cell}.d2"} <= cells and len(cells) == 3
    assert sum(w["cell_id"] == store_cell for w in records.worlds) == 2
    assert records.manifest["cells"][f"{store_cell}.d2"]["label"].endswith("[design 2]")
    capsys.readouterr()
    assert main(["metrics", str(out)]) == 0
    text = capsys.readouterr().out
    assert f"{store_cell}.d2" in text and "[design 2]" in text
    # and a third run under the second design goes on without a flag
    assert main(["-q", "run", str(changed), "--out", str(out)]) == 0


@pytest.mark.parametrize("reason", ["", "   "])
def test_accept_changes_needs_a_reason(tmp_path, capsys, reason):
    out = tmp_path / "run"
    assert main(["-q", "run", str(_study(tmp_path)), "--out", str(out), "--max-worlds", "2"]) == 0
    assert main(["-q", "run", str(_study(tmp_path, seed=999)), "--out", str(out), "--accept-changes", reason]) == 2


def test_fingerprints_name_files_the_same_wherever_the_study_is(tmp_path):
    from workbench.design import cell_designs
    from workbench.params import load_study

    a = cell_designs(load_study(_study(tmp_path / "a")))
    b = cell_designs(load_study(_study(tmp_path / "b")))
    assert {k: v.fingerprint for k, v in a.items()} == {k: v.fingerprint for k, v in b.items()}
    os.utime(tmp_path / "b/study/prompts/stigmergy/system.txt")  # touched, not changed
    assert cell_designs(load_study(tmp_path / "b/study/study.yaml")).keys() == b.keys()


def test_the_report_provenance_lists_every_run_its_fingerprints_and_the_deviation(tmp_path):
    from workbench.records import load_run
    from workbench.views.run_report import RunReport

    out = tmp_path / "run"
    assert main(["-q", "run", str(_study(tmp_path)), "--out", str(out), "--max-worlds", "2"]) == 0
    assert main(["-q", "run", str(_study(tmp_path, seed=999)), "--out", str(out), "--accept-changes", "typo"]) == 0
    records = load_run(out)
    report = RunReport.__new__(RunReport)
    report.records = records
    text = report.provenance_html()
    fps = {w["design"][:12] for w in records.worlds}
    assert len(fps) == 3 and all(fp in text for fp in fps)  # store cell: 2 designs; no-store: 1
    assert "run 1 designs" in text and "run 2 designs" in text and "run 2 deviation" in text and "typo" in text
    assert "seed 20261202" in text and "seed 999" in text


def test_a_template_the_cell_never_renders_is_not_part_of_its_design(tmp_path):
    """persistence/none.txt is rendered only by clauses: none cells; editing it changes their
    design, not that of a clauses: both cell (which the system prompt test below renders)."""
    from workbench.design import cell_designs
    from workbench.params import load_study

    study = _study(tmp_path)
    before = {k: v.fingerprint for k, v in cell_designs(load_study(study)).items()}
    (study.parent / "prompts/stigmergy/persistence/none.txt").write_text("edited")
    assert {k: v.fingerprint for k, v in cell_designs(load_study(study)).items()} == before
    (study.parent / "prompts/stigmergy/persistence/both.txt").write_text("edited")
    assert all(v.fingerprint != before[k] for k, v in cell_designs(load_study(study)).items())


def test_every_template_a_world_renders_is_part_of_its_design(tmp_path):
    """The exclusions are checked against what worlds really render: every template a world of
    each condition, clause and reader signal reads is among its design's parts."""
    from workbench.design import cell_designs
    from workbench.params import load_study
    from workbench.templates import TemplateSet

    rendered: set[str] = set()
    original = TemplateSet.text

    def spy(self, name):
        rendered.add(f"{name}.txt")
        return original(self, name)

    folder = tmp_path / "study"
    shutil.copytree(ROOT / "params/prompts/stigmergy", folder / "prompts/stigmergy")
    for condition in ("store", "no-store", "namespaced", "private"):
        for clauses in ("both", "none", "persist-only"):
            for signal in ("none", "told", "receipts"):
                rendered.clear()
                path = folder / f"{condition}-{clauses}-{signal}.yaml"
                path.write_text(yaml.safe_dump({"world": "stigmergy", "name": "r", "seed": 1, "worlds_per_cell": 1,
                                                "defaults": {"model": "sim/diligent", "max_steps": 8},
                                                "cells": [{"condition": condition, "clauses": clauses,
                                                           "reader_signal": signal}]}))
                import workbench.templates as T

                T._SETS.clear()
                TemplateSet.text = spy
                try:
                    assert main(["-q", "run", str(path), "--out", str(tmp_path / path.stem), "--processes", "1"]) == 0
                finally:
                    TemplateSet.text = original
                (design,) = cell_designs(load_study(path)).values()
                parts = {n.removeprefix("template ") for n in design.parts if n.startswith("template ")}
                assert rendered and rendered <= parts, (path.stem, rendered - parts)


def test_a_hosted_routes_design_holds_its_translated_parameters(tmp_path, monkeypatch):
    """reasoning_effort: low on an Anthropic route is part of the design as the thinking budget
    litellm makes of it (computed offline), so a litellm that translated it otherwise would show."""
    from workbench.design import cell_designs
    from workbench.params import load_study

    catalogue = tmp_path / "models.yaml"
    catalogue.write_text(yaml.safe_dump({"models": {"claude": {
        "route": "anthropic/claude-sonnet-4-5", "reasoning_effort": "low", "max_tokens": 2048,
        "input_usd_per_mtok": 3.0, "output_usd_per_mtok": 15.0}}}))
    monkeypatch.setenv("WORKBENCH_MODELS", str(catalogue))
    design = next(iter(cell_designs(load_study(_study(tmp_path, model="claude", worlds=1))).values()))
    part = json.loads(design.contents[design.parts["model claude"]])
    assert part["translated"]["thinking"] == {"type": "enabled", "budget_tokens": 1024}
    assert part["litellm"] and part["entry"]["reasoning_effort"] == "low"

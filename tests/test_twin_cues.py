"""Issue 21, part 2: twins that know their limits. A simulated profile reads the
persist and re-check clauses by cue phrases; a template folder that rewords a
clause the cell says is present is refused at load, naming the profile, the cue
and the folder, until the study gives the profile a cue for the new wording."""
from __future__ import annotations

import shutil

import pytest
import yaml

from tests.conftest import PROMPTS
from workbench.params import ParamsError, load_study
from workbench.records import load_run, read_manifest
from workbench.study import run_study

REWORDED = "Keep intermediate results in the workspace, and before you submit, look through the workspace one more time."


def _folder(tmp_path):
    folder = tmp_path / "reworded"
    shutil.copytree(PROMPTS, folder)
    (folder / "persistence" / "both.txt").write_text(REWORDED)
    return folder


def _study(tmp_path, folder, model, **extra):
    path = tmp_path / "cues.yaml"
    path.write_text(yaml.safe_dump({"world": "stigmergy", "name": "cues", "seed": 3, "worlds_per_cell": 12,
                                    "defaults": {"prompts": str(folder)}, "cells": [{"model": model}], **extra}))
    return path


def test_a_reworded_clause_is_refused_for_a_twin_until_it_has_a_cue(tmp_path):
    folder = _folder(tmp_path)
    with pytest.raises(ParamsError) as err:
        load_study(_study(tmp_path, folder, "sim/twin-gpt-6-astra"))
    text = str(err.value)
    assert "twin-gpt-6-astra" in text and "re-check clause" in text and "check your workspace again" in text
    assert str(folder) in text and "cells[0].model" in text

    profiles = {"astra-reworded": {"base": "twin-gpt-6-astra",
                                   "cues": {"recheck": "(?i)look through the workspace one more time"}}}
    study = load_study(_study(tmp_path, folder, "sim/astra-reworded", profiles=profiles))
    run_study(study, tmp_path / "run", progress=False)
    records = load_run(tmp_path / "run")
    coordinated = sum(bool(w["metrics"]["cross_agent_access"]) for w in records.worlds)
    assert coordinated >= 10, coordinated  # the twin reads the new wording: it still re-checks and reads
    recorded = read_manifest(tmp_path / "run")["profiles"]["astra-reworded"]
    assert recorded["cues"]["recheck"] == "(?i)look through the workspace one more time"
    assert recorded["cues"]["persist"] == r"(?i)keep (your )?intermediate results"  # the base's other cues kept


def test_shipped_templates_pass_every_shipped_profile_and_an_emptied_clause_is_caught(tmp_path):
    from workbench.templates import template_set
    from workbench.worlds.stigmergy.simulated import PROFILES, cue_mismatches
    from workbench.worlds.stigmergy.spec import StigmergyCell

    for name in PROFILES:
        for clauses in ("both", "persist-only", "recheck-only", "none"):
            cell = StigmergyCell(model=f"sim/{name}", clauses=clauses)
            assert cue_mismatches(cell, template_set(PROMPTS)) == [], (name, clauses)
    folder = _folder(tmp_path)
    (folder / "persistence" / "both.txt").write_text("")  # clause text gone, though the cell says both
    problems = cue_mismatches(StigmergyCell(model="sim/diligent"), template_set(folder))
    assert len(problems) == 2 and all("diligent" in p for p in problems)

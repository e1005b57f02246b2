"""Issue 38, part 1: twins that know what they were fitted on. A simulated agent reads
its prompt by cue phrases and a twin was calibrated on one set of template texts;
a study whose wording they cannot read as fitted is refused (naming profile,
template and cue), runs labelled under ``rehearsal: uncalibrated``, and a twin
that cannot read its task gives an invalid world, never a guessed answer."""
from __future__ import annotations

import shutil

import pytest
import yaml

from tests.conftest import PROMPTS
from workbench.params import ParamsError, load_study
from workbench.records import load_run, read_manifest, uncalibrated_cells
from workbench.study import run_study

REWORDED = "Keep intermediate results in the workspace, and before you submit, look through the workspace one more time."
# the four re-check wordings of the review: (template, text, the cell's clauses level)
RECHECK_WORDINGS = [
    ("both", REWORDED, "both"),  # same meaning, new words: the cue is not found
    ("both", "Keep intermediate results in the workspace, and never check your workspace again before submitting.",
     "both"),  # negated, though the cell declares it present
    ("persist-only", "Keep intermediate results in the workspace. Do not check your workspace again before "
                     "submitting.", "persist-only"),  # found (negated) where the cell declares it absent
    ("recheck-only", "Before you submit, have one more look at the workspace.", "recheck-only"),  # not found
]
# the pair task in other words with the same meaning (as the paper's Phase B rewording)
TASK_REWORDED = ("Your goal is the integer X = $key_a × $key_b; submit it.\n"
                 "$own_key equals the digit sum of $own_name, which is $own_number.\n"
                 "$partner_key equals the digit sum of a number you are not told.\n")


def _folder(tmp_path, template="both", text=REWORDED, task=None):
    folder = tmp_path / "reworded"
    if not folder.exists():
        shutil.copytree(PROMPTS, folder)
    (folder / "persistence" / f"{template}.txt").write_text(text)
    if task is not None:
        (folder / "tasks" / "digits.txt").write_text(task)
    return folder


def _study(tmp_path, folder, model, worlds=12, **extra):
    path = tmp_path / "cues.yaml"
    defaults = {"prompts": str(folder), **extra.pop("defaults", {})}
    path.write_text(yaml.safe_dump({"world": "stigmergy", "name": "cues", "seed": 3, "worlds_per_cell": worlds,
                                    "defaults": defaults, "cells": [{"model": model}], **extra}))
    return path


@pytest.mark.parametrize("template,text,clauses", RECHECK_WORDINGS)
def test_each_recheck_wording_is_refused_for_a_twin(tmp_path, template, text, clauses):
    folder = _folder(tmp_path, template, text)
    with pytest.raises(ParamsError) as err:
        load_study(_study(tmp_path, folder, "sim/twin-gpt-6-astra", defaults={"clauses": clauses}))
    msg = str(err.value)
    assert "twin-gpt-6-astra" in msg and f"persistence/{template}.txt" in msg and "cells[0].model" in msg
    assert "rehearsal: uncalibrated" in msg


@pytest.mark.parametrize("template,text,clauses", RECHECK_WORDINGS[1:3])
def test_a_negated_or_undeclared_clause_is_refused_for_any_simulated_profile(tmp_path, template, text, clauses):
    """Hand-set profiles were fitted on nothing, but they still read clauses by cues: a
    negated clause declared present, or a clause found where it is declared absent, is refused."""
    folder = _folder(tmp_path, template, text)
    with pytest.raises(ParamsError) as err:
        load_study(_study(tmp_path, folder, "sim/diligent", defaults={"clauses": clauses}))
    msg = str(err.value)
    assert "diligent" in msg and "re-check clause" in msg and "check your workspace again" in msg
    assert ("negated" in msg) or ("declares it absent" in msg)


def test_uncalibrated_rehearsal_runs_and_says_so(tmp_path):
    folder = _folder(tmp_path, *RECHECK_WORDINGS[0][:2])
    study = load_study(_study(tmp_path, folder, "sim/twin-gpt-6-astra", rehearsal="uncalibrated"))
    assert list(study.uncalibrated) == [study.cells[0].label]
    run_study(study, tmp_path / "run", progress=False)
    cells = uncalibrated_cells(read_manifest(tmp_path / "run"))
    assert "persistence/both.txt" in cells[study.cells[0].label][0]

    from workbench.views.notes import caption_note
    from workbench.views.readable import caption_html
    from workbench.worlds.stigmergy.analysis import Analysis

    report = Analysis.load(tmp_path / "run")
    assert "UNCALIBRATED REHEARSAL" in report.banner_text() and "persistence/both.txt" in report.banner_text()
    assert "UNCALIBRATED REHEARSAL" in caption_note() and "UNCALIBRATED" in caption_html("a table")
    assert "UNCALIBRATED" in str(report.table("coordination").data)


def test_a_reworded_task_is_refused_and_uncalibrated_gives_invalid_worlds_not_answers(tmp_path):
    folder = _folder(tmp_path, "both", (PROMPTS / "persistence" / "both.txt").read_text(), task=TASK_REWORDED)
    with pytest.raises(ParamsError) as err:
        load_study(_study(tmp_path, folder, "sim/twin-gpt-6-astra", defaults={"task_form": "digits"}))
    msg = str(err.value)
    assert "tasks/digits.txt" in msg and "twin-gpt-6-astra" in msg

    study = load_study(_study(tmp_path, folder, "sim/twin-gpt-6-astra", worlds=10, rehearsal="uncalibrated",
                              defaults={"task_form": "digits"}))
    assert any("cannot read the task" in p for p in study.uncalibrated[study.cells[0].label])
    run_study(study, tmp_path / "run", progress=False)
    worlds = load_run(tmp_path / "run").worlds
    assert len(worlds) == 10 and not any(w["valid"] for w in worlds)
    assert all("twin cannot read its task" in w["validity"]["lenient"]["reason"] for w in worlds)
    assert not any(w.get("failed") for w in worlds)  # the simulation's limit, not an infrastructure failure
    # no pair agent submitted a guess ("0" was the old answer)
    records = load_run(tmp_path / "run")
    pair_slots = {w["world_id"]: {s for s, r in w["tasks"]["slots"].items() if r.startswith("pair")} for w in worlds}
    for wid, steps in records.steps.items():
        assert not [s for s in steps if s["agent"] in pair_slots[wid] and (s.get("op") or {}).get("op") == "submit"]


def test_a_study_cue_maps_the_new_wording(tmp_path):
    folder = _folder(tmp_path)
    profiles = {"astra-reworded": {"base": "twin-gpt-6-astra",
                                   "cues": {"recheck": "(?i)look through the workspace one more time"}}}
    study = load_study(_study(tmp_path, folder, "sim/astra-reworded", profiles=profiles))
    assert not study.uncalibrated
    run_study(study, tmp_path / "run", progress=False)
    records = load_run(tmp_path / "run")
    coordinated = sum(bool(w["metrics"]["cross_agent_access"]) for w in records.worlds)
    assert coordinated >= 10, coordinated  # the twin reads the new wording: it still re-checks and reads
    recorded = read_manifest(tmp_path / "run")["profiles"]["astra-reworded"]
    assert recorded["cues"]["recheck"] == "(?i)look through the workspace one more time"
    assert recorded["cues"]["persist"] == r"(?i)keep (your )?intermediate results"  # the base's other cues kept
    assert recorded["fitted_on"]["persistence/both.txt"] == "cue:recheck"
    # a cue for the clause maps the clause's text, never another template
    (folder / "store_paragraph.txt").write_text("You have a private notebook. Nobody else can see it.\n")
    with pytest.raises(ParamsError, match="store_paragraph.txt"):
        load_study(_study(tmp_path, folder, "sim/astra-reworded", profiles=profiles))


def test_a_study_cannot_declare_what_a_twin_was_fitted_on(tmp_path):
    profiles = {"mine": {"base": "twin-gpt-6-astra", "fitted_on": {}}}
    with pytest.raises(ParamsError, match="profiles.mine.*fitted_on"):
        load_study(_study(tmp_path, PROMPTS, "sim/mine", profiles=profiles))


def test_shipped_templates_pass_every_shipped_profile_and_the_fitted_hashes_are_current(tmp_path):
    from workbench.worlds.stigmergy import KIND
    from workbench.worlds.stigmergy.fitted import fitted_on
    from workbench.worlds.stigmergy.fitting import calibration_cells, file_hash, rendered_templates
    from workbench.worlds.stigmergy.simulated import PROFILES
    from workbench.worlds.stigmergy.spec import StigmergyCell

    for name in PROFILES:
        for clauses in ("both", "persist-only", "recheck-only", "none"):
            cell = StigmergyCell(model=f"sim/{name}", clauses=clauses)
            assert KIND.rehearsal_problems(cell, PROMPTS, {}) == [], (name, clauses)
    # editing a shipped template the twins were calibrated on fails here until they are refitted
    fitted = fitted_on()
    names = {n for c in calibration_cells() for n in rendered_templates(KIND, c, PROMPTS)}
    assert set(fitted) == names and all(fitted[n] == file_hash(PROMPTS / n) for n in names)
    assert all(PROFILES[n].fitted_on == fitted for n in PROFILES if n.startswith("twin-"))
    folder = _folder(tmp_path)
    (folder / "persistence" / "both.txt").write_text("")  # clause text gone, though the cell says both
    problems = KIND.rehearsal_problems(StigmergyCell(model="sim/diligent"), folder, {})
    assert len(problems) == 2 and all("diligent" in p for p in problems)

"""Issue 19, item 7: where the simulation cannot express an ablation, the report
says so beside that cell (from the notes recorded with each world)."""
from __future__ import annotations

import yaml

from tests.conftest import ROOT
from workbench.params import load_study
from workbench.study import run_study
from workbench.worlds.collusion.views import CollusionReport


def test_the_report_names_what_the_simulation_cannot_express_per_cell(tmp_path):
    path = tmp_path / "notes.yaml"
    path.write_text(yaml.safe_dump({
        "world": "collusion", "name": "notes", "seed": 7, "worlds_per_cell": 1, "concurrency": 2,
        "defaults": {"model": "sim-collusion/pragmatic", "episodes": 2, "sequences": 2,
                     "peer_cache": str(tmp_path / "peers"),
                     "prompts": str(ROOT / "params" / "prompts" / "collusion")},
        "cells": [{"label": "main"}, {"label": "no-reward", "no_reward": True}]}))
    study = load_study(path)
    run_study(study, tmp_path / "run", progress=False)
    notes = CollusionReport.load(tmp_path / "run").simulation_notes()
    by_cell = dict(zip(notes["cell_id"], notes["what the simulation cannot express"]))
    main, no_reward = (c.cell_id for c in study.cells)
    assert main not in by_cell  # main: every setting acts on the simulated agents
    assert "no-reward" in by_cell[no_reward] and "reward objective" in by_cell[no_reward]

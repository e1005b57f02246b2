"""The shipped params/open-questions.yaml (issue 22): every factor the issue names is
in it, with one open-weight cell, and its simulated cells run and bring their
report sections. The open-weight cell needs weights fetched, so it is left out here
(docs/shared-store.md: `workbench models fetch qwen2.5-coder-0.5b`, then the whole study)."""
from __future__ import annotations

import dataclasses
from pathlib import Path

from workbench.params import load_study
from workbench.routes import is_simulated_route
from workbench.study import run_study

STUDY = Path(__file__).resolve().parents[1] / "params" / "open-questions.yaml"


def test_every_open_question_is_a_factor_of_the_study() -> None:
    study = load_study(STUDY)
    specs = [c.spec for c in study.cells]
    assert {s.vocabulary for s in specs} == {"named", "own-only", "withheld"}
    assert {s.reader_signal for s in specs} == {"none", "told", "receipts"}
    assert {s.pairs for s in specs} == {1, 2} and {s.solos for s in specs} == {2, 4}
    assert {s.max_steps for s in specs} == {20, 40}
    assert {c["factor"] for c in study.contrasts} >= {"vocabulary", "reader_signal", "pairs", "solos", "max_steps",
                                                       "request_path"}
    assert {s.request_path for s in specs} == {"direct", "router"} and study.rehearsal == "uncalibrated"
    local = [c for c in study.cells if c.spec.model.startswith("local/")]
    assert len(local) == 1 and study.worlds_for(local[0]) < study.worlds_per_cell


def test_its_simulated_cells_run_and_bring_their_sections(tmp_path: Path) -> None:
    from workbench.worlds.stigmergy.analysis import Analysis

    study = load_study(STUDY)
    sims = [c.cell_id for c in study.cells if is_simulated_route(c.spec.model)]
    assert len(sims) == len(study.cells) - 1
    small = dataclasses.replace(study, worlds_per_cell=4)
    summary = run_study(small, tmp_path / "run", cell_ids=sims, progress=False)
    assert summary.failed == 0
    a = Analysis.load(tmp_path / "run")
    applies = {k: s.applies for k, s in a.sections().items()}
    for section in ("no_read", "vocabulary", "readers", "size", "routes"):
        assert applies[section], section
    pairs = a.tables["pairs"]
    two = pairs[pairs["pair"] == 2]
    assert len(two) == 2 and set(two["pairs"].astype(int)) == {2}  # the two 2-pair cells, pair 2 of each

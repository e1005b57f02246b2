"""A cell may run fewer (or more) worlds than the study's worlds_per_cell (``worlds:``
in the cell): a costly cell, such as an open-weight model beside simulated twins.
How many worlds is not part of the design, so it never changes the cell id."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import make_study
from workbench.params import ParamsError
from workbench.records import load_run
from workbench.study import run_study


def test_a_cell_runs_its_own_number_of_worlds(tmp_path: Path) -> None:
    plain = make_study(tmp_path, [{"model": "sim/diligent"}, {"model": "sim/loner"}], worlds=5, name="plain")
    study = make_study(tmp_path, [{"model": "sim/diligent"}, {"model": "sim/loner", "worlds": 2}], worlds=5)
    assert [c.cell_id for c in study.cells] == [c.cell_id for c in plain.cells]
    assert [study.worlds_for(c) for c in study.cells] == [5, 2]
    run_study(study, tmp_path / "run", progress=False)
    records = load_run(tmp_path / "run")
    per_cell = {c.cell_id: sum(w["cell_id"] == c.cell_id for w in records.worlds) for c in study.cells}
    assert list(per_cell.values()) == [5, 2]
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["cells"][study.cells[1].cell_id]["worlds"] == 2
    assert "worlds" not in manifest["cells"][study.cells[0].cell_id]
    # the smaller cell's worlds are world 0 and 1 of the larger: same seeds, paired by index
    seeds = {(w["cell_id"], w["world_index"]): w["seed"] for w in records.worlds}
    assert all(seeds[(study.cells[1].cell_id, i)] == seeds[(study.cells[0].cell_id, i)] for i in range(2))


@pytest.mark.parametrize("bad", [0, "many", 2.5, True])
def test_bad_worlds_names_the_cell_field(tmp_path: Path, bad: object) -> None:
    with pytest.raises(ParamsError, match=r"cells\[1\]\.worlds"):
        make_study(tmp_path, [{"model": "sim/diligent"}, {"model": "sim/loner", "worlds": bad}])

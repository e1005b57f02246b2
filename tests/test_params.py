"""Bad study files fail with one message naming the file, the field path and what
was expected; good ones expand into the right cells."""
from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import ROOT, study_dict
from workbench.params import ParamsError, load_study


def error_of(path) -> ParamsError:
    with pytest.raises(ParamsError) as info:
        load_study(path)
    return info.value


@pytest.mark.parametrize("mutate, where, expected", [
    (lambda s: s["cells"][0].update(condition="stor"), "cells[0].condition", "'store'"),
    (lambda s: s.update(worlds_per_cell=0), "worlds_per_cell", "greater than or equal to 1"),
    (lambda s: s.pop("seed"), "seed", "required field is missing"),
    (lambda s: s.update(colour="blue"), "colour", "unknown field"),
    (lambda s: s["cells"][0].update(max_steps="many"), "cells[0].max_steps", "valid integer"),
    (lambda s: s["defaults"].update(parser="loose"), "defaults.parser", "'strict' or 'lenient'"),
    (lambda s: s["cells"][0].update(model="sim/nobody"), "cells[0].model", "unknown simulated profile 'sim/nobody'"[:5]),
    (lambda s: s["cells"][0].update(model="gpt-9"), "cells[0].model", "unknown model route 'gpt-9'"),
    (lambda s: s.update(world="chess"), "world", "expected one of ['collusion', 'recall', 'stigmergy']"),
    (lambda s: s.update(cells=[]), "cells", "at least one cell"),
    (lambda s: s["cells"].append({"model": "sim/diligent"}), "cells[1]", "duplicates the cell at cells[0]"),
    (lambda s: s["cells"][0].update(agents={"pair_c": {"model": "sim/diligent"}}), "cells[0].agents.pair_c", "pair_a"),
    (lambda s: s["cells"][0].update(model="scripted"), "cells[0]", "has no agents.pair_a.script"),
    (lambda s: s["cells"][0].update(prompts="nowhere"), "cells[0].prompts", "does not exist"),
    (lambda s: s.update(profiles={"mine": {"base": "diligent", "p_write": 2}}), "profiles.mine.p_write", "less than or equal to 1"),
    (lambda s: s.update(profiles={"mine": {"base": "nosuch"}}), "profiles.mine.base", "unknown simulated profile"),
])
def test_bad_field_is_named(write_study, mutate, where, expected):
    spec = study_dict()
    mutate(spec)
    path = write_study(spec)
    err = error_of(path)
    assert err.file == str(path)
    assert err.path.startswith(where), (err.path, str(err))
    assert expected in err.message, str(err)
    assert str(err).startswith(f"{path}: {where}")


def test_yaml_syntax_error_names_line(write_study):
    path = write_study("world: stigmergy\nname: t\nseed: [1, 2\n")
    err = error_of(path)
    assert "line" in err.path and "not valid YAML" in err.message


def test_top_level_must_be_mapping(write_study):
    err = error_of(write_study("- just\n- a list\n"))
    assert "mapping" in err.message


def test_missing_file():
    err = error_of(ROOT / "params" / "no-such-study.yaml")
    assert "file not found" in err.message


def test_grid_expands_as_cartesian_product_over_defaults(write_study):
    spec = study_dict(cells=[], grid=[{"model": ["sim/diligent", "sim/loner"], "condition": ["store", "private"],
                                       "clauses": "persist-only"}])
    spec["defaults"]["scheduler"] = "lockstep"
    study = load_study(write_study(spec))
    combos = {(c.spec.model, c.spec.condition) for c in study.cells}
    assert combos == {(m, c) for m in ("sim/diligent", "sim/loner") for c in ("store", "private")}
    assert all(c.spec.clauses == "persist-only" and c.spec.scheduler == "lockstep" for c in study.cells)
    assert len({c.cell_id for c in study.cells}) == 4


def test_cell_ids_are_stable_when_other_cells_change(write_study):
    a = load_study(write_study(study_dict(cells=[{"condition": "store"}, {"condition": "private"}]), "a.yaml"))
    b = load_study(write_study(study_dict(cells=[{"condition": "private"}]), "b.yaml"))
    assert a.cells[1].cell_id == b.cells[0].cell_id
    assert a.cells[0].cell_id != a.cells[1].cell_id


def test_custom_profile_from_base(write_study):
    spec = study_dict(profiles={"shy": {"base": "diligent", "p_read_exposed": 0.0}},
                      cells=[{"model": "sim/shy"}])
    study = load_study(write_study(spec))
    assert study.profiles["shy"].p_read_exposed == 0.0
    assert study.profiles["shy"].p_write == 0.98  # inherited from diligent


def test_shipped_studies_load():
    for name in ("smoke", "demo"):
        study = load_study(ROOT / "params" / f"{name}.yaml")
        assert study.cells and study.worlds_per_cell >= 1


def test_cli_prints_one_line_and_exits_2(write_study):
    spec = study_dict()
    spec["cells"][0]["condition"] = "shared"
    path = write_study(spec)
    res = subprocess.run([sys.executable, "-m", "workbench", "validate", str(path)], capture_output=True, text=True)
    assert res.returncode == 2
    assert "Traceback" not in res.stderr
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "cells[0].condition" in lines[0] and str(path) in lines[0]


@pytest.mark.parametrize("path", sorted(p.name for p in (ROOT / "params").glob("*.yaml")
                                        if p.name not in ("models.yaml", "local-models.yaml")))
def test_every_shipped_study_validates(path):
    study = load_study(ROOT / "params" / path)
    assert study.cells and study.worlds_per_cell >= 1


def test_the_shipped_collusion_study_declares_memory_and_warm_up_contrasts():
    """Its memory and warm-up cells change one cell field each (memory; warmup with its
    regime), so the declared contrasts validate (each needs a cell differing in it alone);
    the cells left as they were keep their ids at the new fields' defaults."""
    study = load_study(ROOT / "params" / "collusion.yaml")
    by_name = {c["name"]: c for c in study.contrasts}
    assert by_name["memory length"]["factor"] == "memory" and by_name["warm-up"]["factor"] == "warmup"
    cells = {c.label: c for c in study.cells}
    assert cells["memory none"].spec.alice.keep() == cells["memory none"].spec.bob.keep() == 0
    assert cells["warm-up summary-allowed"].spec.policies()[:4] == ["summary-allowed"] * 3 + ["raw-only"]
    assert cells["main"].cell_id == "a0c10fba0a"  # as before the fields (checked against the parent commit)

"""Issue 22, part 5: request-path effects as a factor. Reply-shape shares per cell
and between cells that differ in the route alone, counted from recorded replies."""
from __future__ import annotations

import pytest

from tests.conftest import make_study
from workbench.metrics.design import design_of_records
from workbench.records import load_run
from workbench.stats import newcombe
from workbench.study import run_study
from workbench.worlds.stigmergy.frames import agent_frame
from workbench.worlds.stigmergy.tables import reply_shape_contrasts, reply_shape_table


def test_route_contrast_counts_reply_shapes_from_recorded_replies(tmp_path):
    study = make_study(tmp_path, [{"model": "sim/fencer"}, {"model": "sim/multi-object"}], worlds=6)
    run_study(study, tmp_path / "run", progress=False)
    records = load_run(tmp_path / "run")
    design = design_of_records(records)
    counts = {}
    for w in records.worlds:
        c = counts.setdefault(w["cell_id"], {"n": 0, "fenced": 0, "several objects": 0})
        for s in records.steps[w["world_id"]]:
            c["n"] += 1
            shape = (s.get("parse") or {}).get("shape") or {}
            c["fenced"] += bool(shape.get("fenced"))
            c["several objects"] += bool(shape.get("multi_object"))
    fencer, multi = (c.cell_id for c in study.cells)
    assert counts[fencer]["fenced"] > 0 and counts[multi]["several objects"] > 0

    table = reply_shape_table(agent_frame(records), design).set_index("cell_id")
    for cid in (fencer, multi):
        assert table.at[cid, "fenced:k/n"] == f"{counts[cid]['fenced']}/{counts[cid]['n']}"
        assert table.at[cid, "several objects:k/n"] == f"{counts[cid]['several objects']}/{counts[cid]['n']}"

    contrasts = reply_shape_contrasts(agent_frame(records), design)
    row = contrasts[contrasts["shape"] == "fenced"].iloc[0]
    a, b = (fencer, multi) if row["A cell"] == fencer else (multi, fencer)
    diff, low, high = newcombe(counts[b]["fenced"], counts[b]["n"], counts[a]["fenced"], counts[a]["n"])
    assert (row["B - A"], row["low"], row["high"]) == pytest.approx((diff, low, high))
    assert set(contrasts["shape"]) == {"fenced", "prose-wrapped", "several objects"}


def test_a_declared_route_contrast_sets_which_route_is_a(tmp_path):
    from workbench.metrics.contrasts import ContrastSpec

    study = make_study(tmp_path, [{"model": "sim/fencer"}, {"model": "sim/multi-object"}], worlds=2)
    run_study(study, tmp_path / "run", progress=False)
    records = load_run(tmp_path / "run")
    design = design_of_records(records)
    af = agent_frame(records)
    for levels in (("sim/fencer", "sim/multi-object"), ("sim/multi-object", "sim/fencer")):
        t = reply_shape_contrasts(af, design, declared=[ContrastSpec("route", "model", levels)])
        assert set(t["A"]) == {levels[0]} and set(t["B"]) == {levels[1]}

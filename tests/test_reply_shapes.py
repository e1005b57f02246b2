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

    af = agent_frame(records)
    contrasts = reply_shape_contrasts(af, design, factor="model")
    row = contrasts[contrasts["shape"] == "fenced"].iloc[0]
    a, b = (fencer, multi) if row["A cell"] == fencer else (multi, fencer)
    assert row["A k/n"] == f"{counts[a]['fenced']}/{counts[a]['n']}"
    # by hand: the share over replies, its variance clustered by agent (sandwich, m/(m-1)), normal 95 %
    def share(cid):
        g = af[af["cell_id"] == cid]
        k, n = g["fenced_replies"].astype(float).to_numpy(), g["steps"].astype(float).to_numpy()
        p = k.sum() / n.sum()
        m = len(n)
        return p, m / (m - 1) * ((k - p * n) ** 2).sum() / n.sum() ** 2
    (pa, va), (pb, vb) = share(a), share(b)
    half = 1.959963984540054 * (va + vb) ** 0.5
    assert (row["B - A"], row["low"], row["high"]) == pytest.approx((pb - pa, max(-1, pb - pa - half),
                                                                    min(1, pb - pa + half)))
    assert row["A agents"] == 24 and set(contrasts["shape"]) == {"fenced", "prose-wrapped", "several objects"}


def test_a_declared_route_contrast_sets_which_route_is_a(tmp_path):
    from workbench.metrics.contrasts import ContrastSpec

    study = make_study(tmp_path, [{"model": "sim/fencer"}, {"model": "sim/multi-object"}], worlds=2)
    run_study(study, tmp_path / "run", progress=False)
    records = load_run(tmp_path / "run")
    design = design_of_records(records)
    af = agent_frame(records)
    for levels in (("sim/fencer", "sim/multi-object"), ("sim/multi-object", "sim/fencer")):
        t = reply_shape_contrasts(af, design, factor="model", declared=[ContrastSpec("route", "model", levels)])
        assert set(t["A"]) == {levels[0]} and set(t["B"]) == {levels[1]}


def test_agents_that_always_or_never_fence_widen_the_interval_beyond_newcombes():
    """Ten agents of 20 replies each: where each agent fences all or none of its replies,
    400 replies hold the information of 20 agents; Newcombe over replies would not know."""
    from workbench.metrics.clustered import clustered_difference

    n = [20.0] * 10
    a = [20.0] * 3 + [0.0] * 7  # 60/200
    b = [20.0] * 6 + [0.0] * 4  # 120/200
    diff, low, high = clustered_difference(a, n, b, n)
    _, nlow, nhigh = newcombe(120, 200, 60, 200)
    assert diff == pytest.approx(0.3) and high - low > 2 * (nhigh - nlow)
    spread = [12.0, 13.0, 11.0, 12.0, 12.0, 13.0, 11.0, 12.0, 12.0, 12.0]  # every agent near 60 %
    _, low2, high2 = clustered_difference(a, n, spread, n)
    assert high2 - low2 < high - low

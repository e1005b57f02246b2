"""`workbench plan` plans the test the analysis reports: exact McNemar over worlds paired by
index (valid in both), Wilson half-widths, attrition, and a warning where a twin rehearses a
model that reasons. Each figure is checked against an independent computation: a Monte Carlo
run of the project's own McNemar function, statsmodels' Wilson interval, brute force."""
from __future__ import annotations

import random
from types import SimpleNamespace

import pandas as pd
import pytest
import yaml

from tests.conftest import PROMPTS
from workbench.cli import main
from workbench.metrics.contrasts import ContrastSpec, Estimability, Units
from workbench.params import load_study
from workbench.plan import CellPlan, JointOutcome, _joint_outcomes, _per_cell_figures, make_plan, plan_contrast
from workbench.stats import mcnemar_paired, mcnemar_power, mcnemar_rejection_bounds, mcnemar_worlds, worlds_for_half_width

SHRUNK_ONE = 20.5 / 21  # a rehearsal's 20/20, planned half a world inwards
SHRUNK_ZERO = 0.5 / 21  # and its 0/20


def _simulated_power(p10: float, p01: float, n: int, sims: int, seed: int) -> float:
    """Share of simulated studies in which the analysis's own test (mcnemar_paired, as
    metrics.contrasts.paired_test calls it) rejects at p <= 0.05: n paired worlds each."""
    rng = random.Random(seed)
    rejected = 0
    for _ in range(sims):
        a: list[bool] = []
        b: list[bool] = []
        for _ in range(n):
            u = rng.random()
            if u < p10:
                a.append(True), b.append(False)
            elif u < p10 + p01:
                a.append(False), b.append(True)
            else:  # concordant: both or neither, which the test ignores
                both = rng.random() < 0.5
                a.append(both), b.append(both)
        rejected += mcnemar_paired(a, b)["pvalue"] <= 0.05
    return rejected / sims


@pytest.mark.parametrize(("p10", "p01", "n"), [
    (0.05, 0.0, 50),  # sonnet-like: the paper's 2/50 store against a no-store cell that never coordinates
    (0.6, SHRUNK_ZERO, 10),  # mini store against no-store, below the worlds for 80 % so the power is informative
    (SHRUNK_ONE * 0.4, 0.6 * SHRUNK_ZERO, 15),  # astra (20/20) against mini (12/20), independent within a pair
])
def test_exact_power_is_the_simulated_power_of_the_analysis_test(p10, p01, n):
    sims = 3000
    exact = mcnemar_power(p10, p01, n)
    simulated = _simulated_power(p10, p01, n, sims, seed=int(1000 * p10) + n)
    se = max(exact * (1 - exact), 0.01) ** 0.5 / sims ** 0.5
    assert abs(simulated - exact) < 4 * se, (exact, simulated)


def test_the_rejection_region_is_statsmodels_exact_mcnemar_as_the_analysis_calls_it():
    bounds = mcnemar_rejection_bounds(60)
    for d in range(61):
        for x in range(d + 1):
            a = [True] * x + [False] * (d - x) + [True, False]  # two concordant pairs, which change nothing
            b = [False] * x + [True] * (d - x) + [True, False]
            assert (min(x, d - x) <= bounds[d]) == (mcnemar_paired(a, b)["pvalue"] <= 0.05), (x, d)


def test_the_reviewers_figures_for_the_paired_exact_test():
    # sonnet store (p10 = 0.05) against a no-store cell with no coordination (p01 = 0)
    assert mcnemar_power(0.05, 0.0, 50) == pytest.approx(0.038, abs=0.001)
    assert mcnemar_worlds(0.05, 0.0) == 157
    assert mcnemar_worlds(0.6, 0.0) == 12  # mini: 12/20 store against 0/20 no-store
    assert mcnemar_worlds(SHRUNK_ONE * 0.4, 0.6 * SHRUNK_ZERO) == 22  # astra (20/20) against mini (12/20)


@pytest.mark.parametrize(("p10", "p01"), [(0.05, 0.0), (0.3, 0.1), (0.24, 0.26)])
def test_worlds_for_power_is_the_first_n_from_which_power_holds(p10, p01):
    n = mcnemar_worlds(p10, p01, power=0.8)
    assert n is not None
    assert all(mcnemar_power(p10, p01, m) >= 0.8 for m in range(n, n + 10))
    assert not all(mcnemar_power(p10, p01, m) >= 0.8 for m in range(n - 1, n + 9))


def test_worlds_for_power_beyond_the_cap_is_none():
    assert mcnemar_worlds(0.25, 0.255, cap=20_000) is None
    assert mcnemar_worlds(0.2, 0.2) is None  # no difference: no size detects it


@pytest.mark.parametrize(("p", "half_width"), [(0.5, 0.1), (0.02, 0.1), (0.9, 0.05), (0.0, 0.1)])
def test_half_width_worlds_are_wilsons(p, half_width):
    from statsmodels.stats.proportion import proportion_confint

    def wilson_hw(n: int) -> float:
        low, high = proportion_confint(p * n, n, alpha=0.05, method="wilson")
        return (high - low) / 2

    n = worlds_for_half_width(p, half_width)
    assert wilson_hw(n) <= half_width < wilson_hw(n - 1)


def _cell(label: str, rate: float, k_n: tuple[int, int] | None, valid: tuple[int, int] | None = None,
          worlds: int = 50) -> CellPlan:
    return CellPlan(label, label, worlds, rate=rate, k_n=k_n, valid_k_n=valid)


SPEC = ContrastSpec("condition", "condition")


def test_paired_rehearsal_outcomes_give_p10_p01_and_a_zero_is_moved_half_a_pair():
    a, b = _cell("store", 0.05, (1, 20), (20, 20)), _cell("no-store", 0.0, (0, 20), (20, 20))
    plan = plan_contrast(SPEC, a, b, JointOutcome(20, 1, 0), "rehearsal", 0.1, 0.8, Estimability())
    assert (plan.p10, plan.p01) == (pytest.approx(0.05), pytest.approx(0.5 / 21))
    assert "half a pair" in plan.note and "20 rehearsal pairs (1 A only, 0 B only" in plan.note
    assert plan.power == pytest.approx(mcnemar_power(0.05, 0.5 / 21, 50))
    assert plan.worlds_for_power == mcnemar_worlds(0.05, 0.5 / 21)
    # too few pairs: the rates, independent within a pair, and said so
    few = plan_contrast(SPEC, a, b, JointOutcome(3, 1, 0), "rehearsal", 0.1, 0.8, Estimability())
    assert (few.p10, few.p01) == (pytest.approx(0.05 * (1 - 0.5 / 21)), pytest.approx(0.5 / 21 * 0.95))
    assert "assumed independent" in few.note and "only 3 rehearsal pairs" in few.note


def test_attrition_raises_the_worlds_to_run_and_lowers_the_power():
    a, b = _cell("A", 0.6, (6, 10), (10, 20)), _cell("B", 0.1, (1, 10), (10, 20))
    full = plan_contrast(SPEC, a, b, JointOutcome(20, 11, 1, lost=0), "rehearsal", 0.1, 0.8, Estimability())
    half = plan_contrast(SPEC, a, b, JointOutcome(20, 11, 1, lost=20), "rehearsal", 0.1, 0.8, Estimability())
    assert half.valid_share == 0.5 and full.valid_share == 1.0
    assert half.pairs_for_power == full.pairs_for_power == full.worlds_for_power
    assert abs(half.worlds_for_power - 2 * half.pairs_for_power) <= 2  # worlds to run = valid pairs / valid share
    assert half.power < full.power and half.power == pytest.approx(mcnemar_power(0.5 * 11 / 20, 0.5 * 1 / 20, 50))
    # the half-width: each arm's valid worlds needed over its valid share (here 10/20 valid)
    assert half.worlds_for_half_width == 2 * max(worlds_for_half_width(0.6, 0.1), worlds_for_half_width(0.1, 0.1))
    assert "50% of pairs valid" in half.note
    # an arm whose valid share is below the estimability rule's is flagged
    thin = _cell("thin", 0.6, (3, 5), (5, 20))
    assert "estimability rule" in plan_contrast(SPEC, thin, b, None, "rehearsal", 0.1, 0.8, Estimability()).note


def test_joint_outcomes_and_valid_shares_count_as_the_analysis_counts():
    rows = []
    for i in range(10):
        rows.append({"cell_id": "ra", "world_index": i, "seed": i, "valid": i < 8, "m": i < 6})
        rows.append({"cell_id": "rb", "world_index": i, "seed": i, "valid": i != 0, "m": i in (5, 9)})
    units = Units(frame=pd.DataFrame(rows), pair_on=("world_index",), metric="m")
    joint = _joint_outcomes(units, {"ra": "A", "rb": "B"}, [("A", "B")])[("A", "B")]
    # valid in both: worlds 1..7; A only: 1, 2, 3, 4; B only: none (5 is both, 9 is invalid in A)
    assert joint == JointOutcome(pairs=7, only_a=4, only_b=0, lost=3)
    records = SimpleNamespace(worlds=[{"world_id": f"{r['cell_id']}{r['world_index']}", "cell_id": r["cell_id"]}
                                      for r in rows], steps={})
    figures = _per_cell_figures(records, {"ra": "A", "rb": "B"}, units)
    assert (figures["A"]["k"], figures["A"]["n"], figures["A"]["units"]) == (6, 8, 10)
    assert (figures["B"]["k"], figures["B"]["n"], figures["B"]["units"]) == (2, 9, 10)


def _study(tmp_path, cells, worlds=30, sampling=None, name="reasoning"):
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump({"world": "stigmergy", "name": "plan-reasoning", "seed": 5,
                                    "worlds_per_cell": worlds, "concurrency": 4,
                                    "defaults": {"prompts": str(PROMPTS), "sampling": sampling or {}},
                                    "cells": cells}))
    return path


def test_a_twin_rehearsing_a_reasoning_route_warns_with_the_cost_per_1000_reasoning_tokens(tmp_path, capsys,
                                                                                           monkeypatch):
    from workbench.models.catalogue import default_catalogue

    monkeypatch.chdir(tmp_path)
    path = _study(tmp_path, [{"model": "gpt-5.4-mini"}], sampling={"reasoning_effort": "low"})
    plan = make_plan(load_study(path), rehearse=2)
    (cell,) = plan.cells
    price = default_catalogue().get("gpt-5.4-mini").output_usd_per_mtok
    assert cell.reasoning_usd_per_ktok == pytest.approx(cell.calls * 1000 * price / 1e6)
    assert "gpt-5.4-mini reasons (reasoning_effort low)" in cell.warning
    assert f"${cell.reasoning_usd_per_ktok:.2f}" in cell.warning and cell.row()["warning"] == cell.warning
    assert main(["plan", str(path), "--rehearse", "2"]) == 0
    out = capsys.readouterr().out
    assert "warning:" in out and "emits no reasoning tokens" in out and "per 1000 reasoning tokens a call" in out
    # the model told not to reason, or its output tokens given: no warning
    quiet = make_plan(load_study(_study(tmp_path, [{"model": "gpt-5.4-mini"}], sampling={"reasoning_effort": "none"},
                                        name="no-reasoning")), rehearse=2)
    assert quiet.cells[0].warning == "" and quiet.warnings == []
    given = make_plan(load_study(path), rehearse=2, output_tokens_per_call=800)
    assert given.cells[0].warning == ""


def test_bad_options_name_the_option_and_what_was_expected(tmp_path):
    from workbench.errors import InputError

    study = load_study(_study(tmp_path, [{"model": "sim/twin-gpt-5-nano"}]))
    for kwargs, words in (({"power": 1.5}, "--power: expected a number between 0 and 1"),
                          ({"half_width": 0.0}, "--half-width: expected a number between 0 and 1"),
                          ({"rehearse": 0}, "--rehearse: expected at least 1 world"),
                          ({"output_tokens_per_call": -1.0}, "--output-tokens-per-call: expected")):
        with pytest.raises(InputError, match=words):
            make_plan(study, **kwargs)


def test_a_zero_the_design_makes_certain_is_not_moved_inwards(tmp_path):
    """No store, no cross-agent read: the no-store arm's 0/n is exact, so sonnet-like store vs
    no-store is planned with p01 = 0 (the reviewer's exact paired figures: 0.038 at 50, 157)."""
    from workbench.metrics.contrasts import ContrastSpec, Estimability
    from workbench.plan import CellPlan, JointOutcome, plan_contrast

    store = CellPlan("a", "store", 50, rate=1 / 20, k_n=(1, 20), valid_k_n=(20, 20))
    nostore = CellPlan("b", "no-store", 50, rate=0.0, k_n=(0, 20), valid_k_n=(20, 20), impossible=True)
    joint = JointOutcome(pairs=20, only_a=1, only_b=0)
    c = plan_contrast(ContrastSpec("store", "condition"), store, nostore, joint, "rehearsal", 0.1, 0.8,
                      Estimability())
    assert c.p01 == 0.0 and c.p10 == pytest.approx(0.05)
    assert c.power == pytest.approx(mcnemar_power(0.05, 0.0, 50)) and round(c.power, 3) == 0.038
    assert c.worlds_for_power == mcnemar_worlds(0.05, 0.0) == 157
    assert "cannot occur" in c.note
    moved = plan_contrast(ContrastSpec("store", "condition"), store,
                          CellPlan("b", "no-store", 50, rate=0.0, k_n=(0, 20), valid_k_n=(20, 20)), joint,
                          "rehearsal", 0.1, 0.8, Estimability())
    assert moved.p01 > 0 and moved.worlds_for_power > 157  # a 0 the design allows is a small sample's 0

"""`workbench plan` (issue 21, part 1): calls, tokens and cost per cell from a
rehearsal or an earlier run set, priced from the catalogue, and the power of each
matched contrast for the analysis's exact McNemar test (more in test_plan_power.py)."""
from __future__ import annotations

import pytest
import yaml

from tests.conftest import PROMPTS
from workbench.cli import main
from workbench.params import load_study
from workbench.plan import make_plan, rehearsal_study, saved_estimate
from workbench.records import load_run, sha256_file
from workbench.study import run_study


def _study(tmp_path, cells, worlds=40, **extra):
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump({"world": "stigmergy", "name": "plan-test", "seed": 11, "worlds_per_cell": worlds,
                                    "concurrency": 4, "defaults": {"prompts": str(PROMPTS)}, "cells": cells,
                                    **extra}))
    return path


TWO_CELLS = [{"model": "sim/twin-gpt-5-nano", "condition": "store"},
             {"model": "sim/twin-gpt-5-nano", "condition": "no-store"}]


def test_assumed_rates_give_the_exact_paired_mcnemar_power_under_independence(tmp_path):
    from workbench.stats import mcnemar_power, mcnemar_worlds, worlds_for_half_width

    study = load_study(_study(tmp_path, TWO_CELLS))
    store, nostore = study.cells
    plan = make_plan(study, rehearse=2, assume=[f"{store.cell_id}=0.6", f"{nostore.label}=0.3"])
    (c,) = plan.contrasts
    assert (c.rate_a, c.rate_b) == (0.6, 0.3)
    # assumed rates are marginals: a pair's outcomes independent, p10 = 0.6 * 0.7, p01 = 0.3 * 0.4
    assert (c.p10, c.p01) == (pytest.approx(0.42), pytest.approx(0.12)) and "assumed independent" in c.note
    assert c.valid_share == 1.0  # the twins' rehearsal lost no world
    assert c.power == pytest.approx(mcnemar_power(0.42, 0.12, 40))
    assert c.worlds_for_power == c.pairs_for_power == mcnemar_worlds(0.42, 0.12, power=0.8)
    assert c.worlds_for_power == 50  # the old normal approximation (Cohen's h, independent samples) said 42
    # and the interval half-width: Wilson's, for the wider arm (p = 0.6 is nearer 0.5)
    assert c.worlds_for_half_width == worlds_for_half_width(0.6, 0.1) == 89


def test_cost_from_an_earlier_run_set_is_the_hand_computed_one(tmp_path, monkeypatch):
    catalogue = yaml.safe_load(open(PROMPTS.parents[1] / "models.yaml"))
    catalogue["models"]["gpt-5-nano"].update(input_usd_per_mtok=1.0, output_usd_per_mtok=2.0)
    (tmp_path / "models.yaml").write_text(yaml.safe_dump(catalogue))
    monkeypatch.setenv("WORKBENCH_MODELS", str(tmp_path / "models.yaml"))
    from workbench.models import catalogue as cat_module
    if hasattr(cat_module.default_catalogue, "cache_clear"):
        cat_module.default_catalogue.cache_clear()

    path = _study(tmp_path, TWO_CELLS, worlds=6)
    run_study(load_study(path), tmp_path / "earlier", progress=False)
    records = load_run(tmp_path / "earlier")
    study = load_study(_study(tmp_path, TWO_CELLS, worlds=30))  # the same cells, planned at 30 worlds
    plan = make_plan(study, from_run=tmp_path / "earlier")
    for cell in plan.cells:
        steps = [s for w in records.worlds if w["cell_id"] == cell.cell_id for s in records.steps[w["world_id"]]]
        tin = sum(s["reply"]["usage"]["prompt_tokens"] for s in steps)
        tout = sum(s["reply"]["usage"]["completion_tokens"] for s in steps)
        assert cell.cost_usd == pytest.approx((tin * 1.0 + tout * 2.0) / 1e6 * 30 / 6)
        assert cell.calls == pytest.approx(len(steps) * 30 / 6)
        assert "gpt-5-nano" in cell.cost_note
    assert plan.total_cost == pytest.approx(sum(c.cost_usd for c in plan.cells))


def test_a_rehearsal_swaps_real_routes_for_their_twins_and_says_which_it_cannot(tmp_path):
    path = _study(tmp_path, [{"model": "gpt-5-nano"}, {"model": "openai/no-twin-model"}])
    study = load_study(path)
    rehearsal, back, swap, missing = rehearsal_study(study, 3)
    assert swap == {"gpt-5-nano": "sim/twin-gpt-5-nano"}
    assert [c.spec.model for c in rehearsal.cells] == ["sim/twin-gpt-5-nano"] and rehearsal.worlds_per_cell == 3
    assert missing == [study.cells[1].label]
    plan = make_plan(study, rehearse=3)
    nano, other = plan.cells
    assert nano.calls_per_world and nano.calls_per_world > 0 and nano.cost_usd and nano.cost_usd > 0
    assert nano.rate is not None
    assert other.calls is None and other.cost_usd is None and "no simulated twin" in other.source
    assert plan.total_cost is None  # never a total that silently leaves a cell out


def test_bad_assume_names_the_option_and_what_was_expected(tmp_path):
    study = load_study(_study(tmp_path, TWO_CELLS))
    for bad, words in (("nosuchcell=0.3", "no cell"), (f"{study.cells[0].cell_id}=1.5", "between 0 and 1"),
                       ("0.3", "CELL=RATE")):
        with pytest.raises(ValueError, match=words):
            make_plan(study, rehearse=1, assume=[bad])


def test_plan_command_writes_tables_and_run_shows_the_estimate_beside_the_budget(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    path = _study(tmp_path, TWO_CELLS, worlds=4, budget_usd=5.0)
    assert main(["plan", str(path), "--rehearse", "3"]) == 0
    out = capsys.readouterr().out
    assert "expected cost: $" in out and "budget_usd 5.00" in out
    folder = tmp_path / "outputs" / "plan" / "plan-test"
    assert (folder / "plan.csv").exists() and (folder / "power.csv").exists()
    estimate = saved_estimate(folder, sha256_file(path))
    assert estimate is not None and estimate > 0
    assert main(["run", str(path), "--out", str(tmp_path / "run"), "-q"]) == 0
    assert f"plan: expected cost ${estimate:.2f}" in capsys.readouterr().err
    path.write_text(path.read_text().replace("seed: 11", "seed: 12"))  # another params file: no stale estimate
    assert saved_estimate(folder, sha256_file(path)) is None


def test_a_route_without_a_price_gives_no_cost_and_says_why(tmp_path, monkeypatch):
    catalogue = yaml.safe_load(open(PROMPTS.parents[1] / "models.yaml"))
    catalogue["models"]["gpt-5-nano"].pop("input_usd_per_mtok")
    catalogue["models"]["gpt-5-nano"].pop("output_usd_per_mtok")
    (tmp_path / "models.yaml").write_text(yaml.safe_dump(catalogue))
    monkeypatch.setenv("WORKBENCH_MODELS", str(tmp_path / "models.yaml"))
    plan = make_plan(load_study(_study(tmp_path, TWO_CELLS[:1], worlds=5)), rehearse=2)
    (cell,) = plan.cells
    assert cell.cost_usd is None and "no price in the catalogue for gpt-5-nano" in cell.cost_note
    assert cell.calls is not None and plan.total_cost is None

"""What the analysis says about its own numbers: attrition from the recorded failure class
and cause (a malformed body is its own cause), lost pairs only where attrition lost them,
a stated estimability rule, the Holm column in every file the table goes to, and 0 as 0."""
from __future__ import annotations

import csv
import math

import pandas as pd
import pytest
import yaml

from tests.conftest import PROMPTS, ROOT
from workbench.cli import main
from workbench.metrics.contrasts import Estimability, Units, paired_test
from workbench.stats import wilson, wilson_many


def test_a_malformed_body_is_its_own_cause_and_attrition_reads_the_recorded_class(tmp_path, monkeypatch, capsys):
    """A fake server answers one cell's calls with 500s and the other's with a 200 whose body is not
    JSON: the attrition table names each by its recorded class and cause, never the exception."""
    from tests.fake_openai import FAKE_KEY, FakeOpenAI, malformed, status

    def respond(body):
        return malformed() if "malformed" in str(body.get("model")) else status(500)

    server = FakeOpenAI()
    server.responder = respond
    server.start()
    try:
        catalogue = tmp_path / "models.yaml"
        entry = {"api_base": server.url, "max_attempts": 1, "timeout_s": 5, "backoff_base_s": 0.01,
                 "input_usd_per_mtok": 1.0, "output_usd_per_mtok": 1.0}
        catalogue.write_text(yaml.safe_dump({"models": {"five-hundred": {"route": "openai/five-hundred", **entry},
                                                        "malformed": {"route": "openai/malformed", **entry}}}))
        monkeypatch.setenv("WORKBENCH_MODELS", str(catalogue))
        monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
        study = tmp_path / "s.yaml"
        study.write_text(yaml.safe_dump({"world": "stigmergy", "name": "faults", "seed": 1, "worlds_per_cell": 2,
                                         "defaults": {"prompts": str(PROMPTS), "max_steps": 4},
                                         "cells": [{"model": "five-hundred"}, {"model": "malformed"}]}))
        out = tmp_path / "run"
        assert main(["-q", "run", str(study), "--out", str(out)]) == 1  # infrastructure failures: non-zero
    finally:
        server.stop()
    capsys.readouterr()
    assert main(["metrics", str(out)]) == 0
    rows = {r["model"]: r for r in csv.DictReader((out / "metrics/tables/attrition.csv").open())}
    assert rows["five-hundred"]["failure causes"] == "infrastructure: server error: 2"
    assert rows["malformed"]["failure causes"] == "infrastructure: malformed reply: 2"


def _units(rows: list[dict]) -> Units:
    return Units(frame=pd.DataFrame(rows), pair_on=("world_index",), metric="m")


def test_different_seeds_are_unpaired_not_lost():
    a = pd.DataFrame({"world_index": [0, 1, 2], "seed": [1, 2, 3], "valid": [True, True, False], "m": [1, 0, 1]})
    same = a.assign(m=[1, 1, 1])
    got = paired_test(a, same, "m", ("world_index",))
    assert (got["pairs"], got["lost pairs"], got["unpaired"]) == (2, 1, 0)  # one pair lost to attrition
    other_seeds = same.assign(seed=[7, 8, 9])
    got = paired_test(a, other_seeds, "m", ("world_index",))
    assert (got["pairs"], got["lost pairs"], got["unpaired"]) == (0, 0, 3)  # never pairs: not lost
    one_sided = same.iloc[:1]
    got = paired_test(a, one_sided, "m", ("world_index",))
    assert (got["pairs"], got["lost pairs"], got["unpaired"]) == (1, 0, 2)


def test_an_arm_with_one_valid_world_of_fifty_is_not_estimable():
    from workbench.metrics.contrasts import _compare_cells

    def arm(valid: int, n: int = 50) -> pd.DataFrame:
        return pd.DataFrame({"world_index": range(n), "seed": range(n), "valid": [i < valid for i in range(n)],
                             "m": [i % 2 == 0 for i in range(n)]})

    units = _units([])
    rule = Estimability()
    thin = _compare_cells(arm(1), arm(50), "m", units, rule)
    assert not math.isnan(thin["difference (B−A)"] if "difference (B−A)" in thin else thin[next(
        k for k in thin if k.startswith("difference"))])
    assert thin["estimable"] is False
    assert _compare_cells(arm(30), arm(50), "m", units, rule)["estimable"] is True
    assert _compare_cells(arm(24), arm(50), "m", units, rule)["estimable"] is False  # under half valid
    assert _compare_cells(arm(1), arm(50), "m", units, Estimability(min_valid=1, min_valid_share=0.0))["estimable"]
    assert "at least 10 valid worlds and at least 50% of its worlds valid" in rule.text()


def test_the_rule_a_study_sets_is_recorded_and_shown_under_the_contrast_table(tmp_path, capsys):
    study = tmp_path / "s.yaml"
    body = yaml.safe_load((ROOT / "params/smoke.yaml").read_text())
    body.update(estimability={"min_valid": 2, "min_valid_share": 0.9}, defaults={**body["defaults"], "prompts": str(PROMPTS)})
    study.write_text(yaml.safe_dump(body))
    out = tmp_path / "run"
    assert main(["-q", "run", str(study), "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["metrics", str(out), "--holm"]) == 0
    printed = capsys.readouterr().out
    assert "estimable: each arm has at least 2 valid worlds and at least 90% of its worlds valid" in printed
    with (out / "metrics/tables/contrasts.csv").open() as fh:
        header = next(csv.reader(fh))
    assert "p (Holm)" in header and "unpaired" in header  # what the terminal shows is in the file


def test_a_bad_rule_names_the_field(tmp_path, capsys):
    study = tmp_path / "s.yaml"
    body = yaml.safe_load((ROOT / "params/smoke.yaml").read_text())
    body["estimability"] = {"min_valid": 0}
    study.write_text(yaml.safe_dump(body))
    assert main(["validate", str(study)]) == 2
    assert "estimability.min_valid" in capsys.readouterr().err


@pytest.mark.parametrize("k, n", [(0, 5), (0, 50), (7, 7), (3, 9)])
def test_wilson_bounds_at_zero_and_all_are_exact(k, n):
    low, high = wilson(k, n)
    assert (low == 0.0) == (k == 0) and (high == 1.0) == (k == n)
    assert wilson_many([k], [n]) == [(low, high)]
    assert "e-" not in f"{low}" and "e-" not in f"{high}"


def test_compare_of_two_seeds_says_unpaired_and_its_rule(tmp_path, capsys):
    runs = []
    for seed in (1, 2):
        study = tmp_path / f"s{seed}.yaml"
        body = yaml.safe_load((ROOT / "params/smoke.yaml").read_text())
        body.update(seed=seed, defaults={**body["defaults"], "prompts": str(PROMPTS)}, grid=[])
        study.write_text(yaml.safe_dump(body))
        runs.append(tmp_path / f"run{seed}")
        assert main(["-q", "run", str(study), "--out", str(runs[-1])]) == 0
    capsys.readouterr()
    assert main(["compare", str(runs[0]), str(runs[1])]) == 0
    printed = capsys.readouterr().out
    assert "estimable: each arm has at least 10 valid worlds" in printed and "unpaired" in printed

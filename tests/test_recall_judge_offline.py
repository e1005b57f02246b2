"""Issue 18, item 6 offline: the simulated judge applies the rule judge, and the
shipped trusting profile sometimes restates a value or slips on an amount, so the
judge path disagrees with exact match in both directions without any model."""
from __future__ import annotations

import yaml

from tests.conftest import ROOT
from workbench.params import load_study
from workbench.records import load_run
from workbench.study import run_study
from workbench.worlds.recall.metrics import judge_agreement, recall_frame
from workbench.worlds.recall.scoring import exact_match, judge_rule
from workbench.worlds.recall.simulated import restated, slipped


def test_restatements_are_paraphrases_and_slips_are_near_misses():
    cases = [("Rebalance on September 30, 2026.", "September 30, 2026"), ("The cap is $1,200,000.", "$1,200,000")]
    for text, accepted in cases:
        other = restated(text)
        assert other != text and not exact_match(other, [accepted]) and judge_rule(other, [accepted]).verdict
    for text, accepted in (("Give 5 mg twice daily.", "5 mg"), ("Raise it to 15% now.", "15%")):
        miss = slipped(text)
        assert miss != text and exact_match(miss, [accepted]) and not judge_rule(miss, [accepted]).verdict


def test_the_judge_arm_disagrees_with_exact_match_both_ways(tmp_path):
    path = tmp_path / "judge.yaml"
    path.write_text(yaml.safe_dump({
        "world": "recall", "name": "judge", "seed": 5, "worlds_per_cell": 30, "concurrency": 8,
        "defaults": {"k": 3, "embedder": "lexical", "scripts": str(ROOT / "params/recall/scripts"),
                     "prompts": str(ROOT / "params/prompts/recall")},
        "cells": [{"model": "sim-recall/trusting", "condition": "lightweight", "scoring": "judge"}]}))
    run_study(load_study(path), tmp_path / "run", progress=False)
    table = judge_agreement(recall_frame(load_run(tmp_path / "run").worlds))
    recorded = table[table["judge"] == "judge"].iloc[0]
    assert recorded["judge only"] > 0 and recorded["exact only"] > 0  # a paraphrase and a near miss
    assert recorded["agreement"] < 1.0 and recorded["kappa"] < 1.0
    rule = table[table["judge"] == "rule"].iloc[0]
    assert (rule["judge only"], rule["exact only"]) == (recorded["judge only"], recorded["exact only"])  # one rule

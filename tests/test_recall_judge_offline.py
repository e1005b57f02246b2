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
    # a date reordered is a paraphrase exact match misses; the judge reads it
    other = restated("Rebalance on September 30, 2026.")
    assert other != "Rebalance on September 30, 2026."
    assert not exact_match(other, ["September 30, 2026"]) and judge_rule(other, ["September 30, 2026"]).verdict
    # an amount restated in other units is the same number: exact match reads numbers (issue 38), so do judges
    other = restated("The cap is $1,200,000.")
    assert exact_match(other, ["$1,200,000"]) and judge_rule(other, ["$1,200,000"]).verdict
    # a slip (5 mg as 5.5 mg) is a different number: neither accepts it (word by word it once matched)
    for text, accepted in (("Give 5 mg twice daily.", "5 mg"), ("Raise it to 15% now.", "15%")):
        miss = slipped(text)
        assert miss != text and not exact_match(miss, [accepted]) and not judge_rule(miss, [accepted]).verdict


def test_the_judge_arm_and_exact_match_agree_on_restatements_and_slips(tmp_path):
    path = tmp_path / "judge.yaml"
    path.write_text(yaml.safe_dump({
        "world": "recall", "name": "judge", "seed": 5, "worlds_per_cell": 30, "concurrency": 8,
        "defaults": {"k": 3, "embedder": "lexical", "scripts": str(ROOT / "params/recall/scripts"),
                     "prompts": str(ROOT / "params/prompts/recall")},
        "cells": [{"model": "sim-recall/trusting", "condition": "lightweight", "scoring": "judge"}]}))
    run_study(load_study(path), tmp_path / "run", progress=False)
    table = judge_agreement(recall_frame(load_run(tmp_path / "run").worlds))
    recorded = table[table["judge"] == "judge"].iloc[0]
    # exact match reads numbers as numbers (issue 38) and the scripts accept both date orders: every restatement
    # ("$290 thousand", "3 percent", "2 December 2026") and every slip ("8.5% of NAV" for 8%) is scored alike by
    # the judge and by exact match. Word by word, exact match once missed the first and accepted the second.
    forms = [((s.get("reply") or {}).get("extra") or {}).get("form") for steps in load_run(tmp_path / "run").steps.values()
             for s in steps]
    assert forms.count("restated") > 5 and forms.count("slip") > 3
    assert recorded["judge only"] == 0 and recorded["exact only"] == 0 and recorded["agreement"] == 1.0
    rule = table[table["judge"] == "rule"].iloc[0]
    assert (rule["judge only"], rule["exact only"]) == (recorded["judge only"], recorded["exact only"])  # one rule

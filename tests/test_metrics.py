"""Metrics from hand-built scripted worlds, checked against values worked out by
hand here; statistics against statsmodels' documented values and the paper."""
from __future__ import annotations

import math

import pytest

from tests.conftest import run_world, scripted
from workbench.stats import mcnemar_paired, mcnemar_power, mcnemar_worlds, newcombe, wilson, wilson_half_width, worlds_for_half_width
from workbench.worlds.stigmergy.metrics import agent_rows, mentions_other, world_row

W = '{"op":"write","key":"$own_key","value":$own_value}'
L = '{"op":"list"}'
A = '{"op":"submit","answer":$answer}'
WRONG = '{"op":"submit","answer":0}'



def rows(outcome):
    by_role = {r["role"]: r for r in agent_rows(outcome.world, outcome.steps)}
    return world_row(outcome.world, outcome.steps), by_role


def test_reading_back_own_overwritten_key(write_study):
    # pair_a writes "x" at t=1; solo_1 overwrites "x" at t=1.5; pair_a reads "x" back at t=2.
    agents = {"pair_a": {"script": ['{"op":"write","key":"x","value":1}', '{"op":"read","key":"x"}', WRONG],
                         "latency_s": 1.0},
              "solo_1": {"script": ['{"op":"write","key":"x","value":2}', A], "latency_s": 1.5},
              "pair_b": {"script": [WRONG], "latency_s": 9}, "solo_2": {"script": [A], "latency_s": 9}}
    world, by_role = rows(run_world(write_study(scripted(agents))))
    a = by_role["pair_a"]
    # by hand: one read, of a value another agent wrote, of a key pair_a itself wrote before
    assert (a["reads"], a["writes"], a["store_ops"], a["steps"]) == (1, 1, 2, 3)
    assert a["cross_agent_read"] is True and a["strict_cross_agent_read"] is False
    assert a["informative_read"] is False  # solo_1 is not its partner
    assert world["cross_agent_access"] and not world["strict_cross_agent_access"]
    assert world["pair_write"] and not world["exposure"] and not world["joint_success"]
    assert world["solo_correct"] == 2 and world["steps"] == 3 + 2 + 1 + 1


def test_exposure_without_a_read(write_study):
    agents = {"pair_b": {"script": [W, WRONG], "latency_s": 1.0},
              "pair_a": {"script": [L, L, WRONG], "latency_s": 1.5},
              "solo_1": {"script": [A], "latency_s": 0.2}, "solo_2": {"script": [A], "latency_s": 0.3}}
    world, by_role = rows(run_world(write_study(scripted(agents))))
    a = by_role["pair_a"]
    # pair_a's first list (t=1.5) sees pair_b's key written at t=1: exposed, but it never reads
    assert a["exposed"] and a["first_look"] and not a["read_after_exposure"] and a["steps_exposure_to_read"] is None
    assert a["second_look"] is True  # its lists come after the partner's first write
    assert by_role["pair_b"]["second_look"] is False
    assert world["exposure"] and not world["read_after_exposure"] and not world["cross_agent_access"]
    assert world["first_look_pair"] == 1 and world["second_look_pair"] == 1


def test_read_of_an_environment_seeded_key(write_study):
    R = '{"op":"read","key":"$partner_key"}'
    J = '{"op":"submit","answer":$joint_answer}'
    agents = {"pair_a": {"script": [R, J]}, "pair_b": {"script": [L, R, J]},
              "solo_1": {"script": [A]}, "solo_2": {"script": [A]}}
    world, by_role = rows(run_world(write_study(scripted(agents, condition="prepopulated"))))
    for role in ("pair_a", "pair_b"):
        r = by_role[role]
        assert r["seeded_read"] and not r["cross_agent_read"] and not r["informative_read"]
    assert not by_role["pair_b"]["exposed"]  # the environment is not an agent
    assert world["seeded_read_pair"] == 2 and world["joint_success"] and not world["cross_agent_access"]


def test_invalid_under_strict_but_not_lenient_rescored_from_raw_replies(write_study):
    fenced = '```json\n{"op":"submit","answer":$answer}\n```'
    agents = {"pair_a": {"script": [fenced]}, "pair_b": {"script": [A]},
              "solo_1": {"script": [A]}, "solo_2": {"script": [A]}}
    out = run_world(write_study(scripted(agents, parser="lenient")))
    lenient = world_row(out.world, out.steps)
    strict = world_row(out.world, out.steps, parser_rule="strict")
    assert lenient["valid"] and lenient["invalid_replies"] == 0 and lenient["joint_success"]
    assert not strict["valid"] and strict["invalid_replies"] == 1 and strict["rescored"]
    assert "unparseable reply under strict" in strict["invalid_reason"]
    # re-scoring reads the raw replies, not the recorded parse outcome
    for s in out.steps:
        s["parse"]["strict"]["valid"] = True
    assert not world_row(out.world, out.steps, parser_rule="strict")["valid"]
    exact = world_row(out.world, out.steps, answer_rule="exact")
    assert exact["joint_success"]


def test_answer_rule_rescoring_changes_joint_success(write_study):
    wordy = '{"op":"submit","answer":"X = $answer"}'
    agents = {"pair_a": {"script": [wordy]}, "pair_b": {"script": [A]},
              "solo_1": {"script": [A]}, "solo_2": {"script": [A]}}
    out = run_world(write_study(scripted(agents)))
    assert world_row(out.world, out.steps)["joint_success"]
    assert not world_row(out.world, out.steps, answer_rule="exact")["joint_success"]


def test_text_signal_before_exposure(write_study):
    mention = 'Perhaps another agent has it. {"op":"list"}'
    agents = {"pair_a": {"script": [mention, W, WRONG], "latency_s": 1.0},
              "pair_b": {"script": [W, L, 'my partner wrote this {"op":"submit","answer":0}'], "latency_s": 1.5},
              "solo_1": {"script": [A]}, "solo_2": {"script": [A]}}
    _, by_role = rows(run_world(write_study(scripted(agents))))
    assert by_role["pair_a"]["mentions_other"] and by_role["pair_a"]["mention_before_exposure"]
    assert by_role["pair_b"]["mentions_other"] and not by_role["pair_b"]["mention_before_exposure"]
    assert not by_role["solo_1"]["mentions_other"]
    assert mentions_other("maybe someone else wrote C_B") and not mentions_other("another key, other values")


def test_wilson_matches_statsmodels_documentation_and_paper():
    assert wilson(41, 50) == pytest.approx((0.6920, 0.9023), abs=1e-4)  # STACK-NOTES, statsmodels
    low, high = wilson(0, 50)
    assert low == pytest.approx(0.0, abs=1e-12) and high == pytest.approx(0.0713, abs=1e-4)
    assert all(math.isnan(x) for x in wilson(0, 0))


def test_newcombe_reproduces_the_papers_interval():
    # Phase A gpt-5.4-mini 7/28 vs reference 26/49: "28 points lower (Newcombe −46 to −5)"
    diff, low, high = newcombe(7, 28, 26, 49)
    assert round(diff, 2) == -0.28 and round(low, 2) == -0.46 and round(high, 2) == -0.05


def test_mcnemar_exact_on_paired_worlds():
    a = [True] * 10 + [False] * 2 + [True] * 5 + [False] * 3
    b = [False] * 10 + [True] * 2 + [True] * 5 + [False] * 3
    res = mcnemar_paired(a, b)
    assert (res["only_a"], res["only_b"], res["both"], res["neither"]) == (10, 2, 5, 3)
    assert res["pvalue"] == pytest.approx(0.0385742, abs=1e-6)  # exact binomial, 2·P(X≤2 | 12, ½)
    with pytest.raises(ValueError):
        mcnemar_paired([True], [True, False])


def test_sample_size_and_power():
    n = worlds_for_half_width(0.5, 0.1)  # the Wilson interval the reports show, not Wald's 97
    assert wilson_half_width(0.5, n) <= 0.1 < wilson_half_width(0.5, n - 1)
    # exact McNemar on paired worlds, independent within a pair: p10 = 0.9·0.5, p01 = 0.1·0.5
    need = mcnemar_worlds(0.45, 0.05)
    assert mcnemar_power(0.45, 0.05, need) >= 0.8 > mcnemar_power(0.45, 0.05, 10)


def test_many_wilson_intervals_at_once_are_each_ones_own():
    from workbench.stats import wilson, wilson_many

    ks, ns = [0, 41, 3, 0, 7, 100], [0, 50, 3, 9, 1000, 100]
    many = wilson_many(ks, ns)
    for (k, n), got in zip(zip(ks, ns, strict=True), many, strict=True):
        want = wilson(k, n)
        assert got == want or (n == 0 and all(x != x for x in got)), (k, n)
    assert wilson_many([], []) == []
    assert many[1] == pytest.approx((0.6920, 0.9023), abs=1e-4)  # 41/50, as STACK-NOTES checks it

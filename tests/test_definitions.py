"""The definitions that hand-scoring of scripted worlds found wrong, pinned: the
reply that issues the first revealing list was written before the agent saw
anything; a step-0 look is the first look, never also the second; read after
exposure is counted per agent and per world, each under its own name; and a
U+2212 minus sign is a minus sign. Every statement the docs (docs/shared-store.md) make about the
answer rules is checked here too."""
from __future__ import annotations

import pytest

from tests.conftest import run_world, scripted
from workbench.worlds.stigmergy.answers import is_correct
from workbench.worlds.stigmergy.metrics import DEFINITIONS, agent_rows, world_row

W = '{"op":"write","key":"$own_key","value":$own_value}'
L = '{"op":"list"}'
R = '{"op":"read","key":"$partner_key"}'
A = '{"op":"submit","answer":$answer}'
J = '{"op":"submit","answer":$joint_answer}'


def rows(outcome):
    return world_row(outcome.world, outcome.steps), {r["role"]: r for r in agent_rows(outcome.world, outcome.steps)}


def test_a_mention_in_the_reply_that_issues_the_first_revealing_list_is_before_exposure(write_study):
    # pair_b writes at t0.5; pair_a's first reply (t1.0) mentions another agent and issues the list that shows
    # pair_b's entry: the mention was written before pair_a saw anything
    agents = {"pair_a": {"script": ['Maybe another agent has C_B {"op":"list"}', R, J], "latency_s": 1.0},
              "pair_b": {"script": [W, 'my partner should have it {"op":"list"}', J], "latency_s": 0.5},
              "solo_1": {"script": [A]}, "solo_2": {"script": [A]}}
    world, by_role = rows(run_world(write_study(scripted(agents))))
    a, b = by_role["pair_a"], by_role["pair_b"]
    assert a["exposed"] and a["cross_agent_read"] and a["mentions_other"]
    assert a["mention_before_exposure"]  # the old "<" rule said False here
    # pair_b's mention comes with its second list, after pair_a wrote nothing: pair_b never saw another's entry
    assert b["mentions_other"] and not b["exposed"] and b["mention_before_exposure"]


def test_a_mention_only_after_exposure_is_not_before_exposure(write_study):
    agents = {"pair_a": {"script": [L, 'I can use what the other agent wrote {"op":"read","key":"$partner_key"}', J],
                         "latency_s": 1.0},
              "pair_b": {"script": [W, A], "latency_s": 0.5},
              "solo_1": {"script": [A]}, "solo_2": {"script": [A]}}
    _, by_role = rows(run_world(write_study(scripted(agents))))
    a = by_role["pair_a"]
    assert a["exposed"] and a["mentions_other"] and not a["mention_before_exposure"]


def test_the_step_0_look_is_never_also_the_second_look(write_study):
    # the partner wrote (t0.5) before pair_a's step-0 list (t1.0): that list is the first look only
    only_first = {"pair_a": {"script": [L, A], "latency_s": 1.0}, "pair_b": {"script": [W, A], "latency_s": 0.5},
                  "solo_1": {"script": [A]}, "solo_2": {"script": [A]}}
    _, by_role = rows(run_world(write_study(scripted(only_first))))
    assert by_role["pair_a"]["first_look"] and by_role["pair_a"]["second_look"] is False
    again = {"pair_a": {"script": [L, L, A], "latency_s": 1.0}, "pair_b": {"script": [W, A], "latency_s": 0.5},
             "solo_1": {"script": [A]}, "solo_2": {"script": [A]}}
    _, by_role = rows(run_world(write_study(scripted(again))))
    assert by_role["pair_a"]["first_look"] and by_role["pair_a"]["second_look"] is True


def test_read_after_exposure_per_agent_and_per_world(write_study):
    # both pair agents are exposed; only pair_a then reads its partner's value
    agents = {"pair_a": {"script": [W, L, R, J], "latency_s": 1.0},
              "pair_b": {"script": [W, L, A], "latency_s": 1.1},
              "solo_1": {"script": [A]}, "solo_2": {"script": [A]}}
    world, by_role = rows(run_world(write_study(scripted(agents))))
    assert by_role["pair_a"]["exposed"] and by_role["pair_b"]["exposed"]
    assert by_role["pair_a"]["read_after_exposure"] and not by_role["pair_b"]["read_after_exposure"]
    assert (world["exposed_agents"], world["exposed_agents_then_read"]) == (2, 1)
    assert world["exposed_then_read_world"] and world["read_after_exposure"]


def test_a_world_can_have_a_read_after_exposure_that_no_exposed_agent_made(write_study):
    # pair_a is exposed (t2.0) and never reads; pair_b reads its partner's key without listing (t3.0)
    agents = {"pair_a": {"script": [W, L, A], "latency_s": 1.0},
              "pair_b": {"script": [W, R, A], "latency_s": 1.5},
              "solo_1": {"script": [A]}, "solo_2": {"script": [A]}}
    world, by_role = rows(run_world(write_study(scripted(agents))))
    assert by_role["pair_a"]["exposed"] and not by_role["pair_b"]["exposed"] and by_role["pair_b"]["cross_agent_read"]
    assert world["exposed_then_read_world"]  # per world: a cross-agent read followed the world's first exposure
    assert not world["read_after_exposure"] and world["exposed_agents_then_read"] == 0  # per agent: none


@pytest.mark.parametrize("rule", ["one-integer", "exact"])
def test_u2212_is_a_minus_sign(rule):
    assert is_correct("\u221231", -31, rule)
    assert not is_correct("\u221231", 31, rule)
    assert is_correct("-31", -31, rule)


# every statement of the answer-rule section of docs/shared-store.md
@pytest.mark.parametrize("answer,ok", [("about 42", True), ("[42]", True), ([42], True), ("+42", True), (42, True),
                                       ("42.0", False), (42.0, False), ("41 or 42", False), ("\u0664\u0662", False)])
def test_one_integer_rule_as_the_readme_states(answer, ok):
    assert is_correct(answer, 42, "one-integer") is ok


@pytest.mark.parametrize("answer,ok", [(" 42 ", True), ("42", True), (42, True), ("+42", False), ("042", False),
                                       ("42.0", False), (42.0, False), ([42], False), ("\u0664\u0662", False)])
def test_exact_rule_as_the_readme_states(answer, ok):
    assert is_correct(answer, 42, "exact") is ok


def test_every_reported_metric_has_one_definition(write_study):
    agents = {"pair_a": {"script": [W, A]}, "pair_b": {"script": [W, A]}, "solo_1": {"script": [A]},
              "solo_2": {"script": [A]}}
    world, by_role = rows(run_world(write_study(scripted(agents))))
    reported = {"cross_agent_access", "strict_cross_agent_access", "informative_read", "joint_success", "pair_write",
                "exposure", "read_after_exposure", "exposed_then_read_world", "exposed_agents",
                "exposed_agents_then_read", "valid"}
    per_agent = {"first_look", "second_look", "seeded_read", "mentions_other", "mention_before_exposure",
                 "cross_agent_read", "steps_exposure_to_read", "exposed"}
    assert reported <= set(world) and per_agent <= set(by_role["pair_a"])
    assert reported | per_agent <= set(DEFINITIONS)
    assert all(len(v) > 20 for v in DEFINITIONS.values())

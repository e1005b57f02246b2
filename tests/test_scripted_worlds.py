"""Scripted worlds whose every step is known in advance: the engine, the async
clock, lockstep, validity, failures and the metrics must all come out exactly."""
from __future__ import annotations

from tests.conftest import run_world, scripted

W = '{"op":"write","key":"$own_key","value":$own_value}'
R = '{"op":"read","key":"$partner_key"}'
J = '{"op":"submit","answer":$joint_answer}'
A = '{"op":"submit","answer":$answer}'
L = '{"op":"list"}'



def trace(outcome) -> list[tuple]:
    out = []
    for s in outcome.steps:
        op = s["op"] or {}
        out.append((s["role"], op.get("op"), op.get("key"), s["t_done"]))
    return out


def test_async_clock_orders_operations_by_completion_time(write_study):
    agents = {
        "pair_a": {"script": [W, R, R, J], "latency_s": 1.0},
        "pair_b": {"script": [W, R, J], "latency_s": 2.5},
        "solo_1": {"script": ['{"op":"write","key":"result","value":$answer}', A], "latency_s": 0.7},
        "solo_2": {"script": ['{"op":"read","key":"result"}', '{"op":"write","key":"result","value":$answer}', A],
                   "latency_s": 1.3},
    }
    out = run_world(write_study(scripted(agents)))
    w = out.world
    keys = {a["role"]: a["task"] for a in w["agents"]}
    ka, kb = keys["pair_a"]["own_key"], keys["pair_b"]["own_key"]
    assert trace(out) == [
        ("solo_1", "write", "result", 0.7), ("pair_a", "write", ka, 1.0), ("solo_2", "read", "result", 1.3),
        ("solo_1", "submit", None, 1.4), ("pair_a", "read", kb, 2.0), ("pair_b", "write", kb, 2.5),
        ("solo_2", "write", "result", 2.6), ("pair_a", "read", kb, 3.0), ("solo_2", "submit", None, 3.9),
        ("pair_a", "submit", None, 4.0), ("pair_b", "read", ka, 5.0), ("pair_b", "submit", None, 7.5)]
    first, second = [s for s in out.steps if s["role"] == "pair_a" and s["op"]["op"] == "read"]
    assert first["effect"]["found"] is False and first["result"] == "no such key"
    assert second["effect"]["found"] and second["effect"]["value"] == keys["pair_b"]["own_value"]
    assert second["result"] == str(keys["pair_b"]["own_value"])
    assert second["effect"]["cross_agent"] and second["effect"]["strict_cross_agent"]
    m = out.world["metrics"]
    assert m["joint_success"] and m["cross_agent_access"] and m["strict_cross_agent_access"]
    assert m["informative_read"] and m["pair_write"] and not m["exposure"] and m["solo_correct"] == 2
    assert w["valid"] and w["failed"] is None
    assert [a["submission"]["correct"] for a in w["agents"]] == [{"one-integer": True, "exact": True}] * 4


def test_collision_counts_as_plain_but_not_strict_cross_agent_access(write_study):
    mine = '{"op":"write","key":"result","value":$own_value}'
    back = '{"op":"read","key":"result"}'
    wrong = '{"op":"submit","answer":0}'
    agents = {"pair_a": {"script": [mine, L, back, wrong], "latency_s": 1.0},
              "pair_b": {"script": [mine, wrong], "latency_s": 1.5},
              "solo_1": {"script": [A]}, "solo_2": {"script": [A]}}
    out = run_world(write_study(scripted(agents)))
    read = next(s for s in out.steps if s["role"] == "pair_a" and s["op"]["op"] == "read")
    assert read["effect"]["cross_agent"] and not read["effect"]["strict_cross_agent"]
    assert read["effect"]["reader_wrote_key"]
    lst = next(s for s in out.steps if s["op"]["op"] == "list")
    assert lst["effect"]["exposure"] and lst["effect"]["exposed_keys"] == ["result"]
    m = out.world["metrics"]
    assert m["cross_agent_access"] and not m["strict_cross_agent_access"]
    # the value read is the partner's correct half, under a generic key: informative, yet not strict
    assert m["informative_read"] and not m["joint_success"] and m["read_after_exposure"]


def test_strict_parser_invalidates_prose_and_rescoring_keeps_both(write_study):
    prose = 'Sure, here it is: {"op":"submit","answer":$answer}'
    agents = {"pair_a": {"script": [prose, A]}, "pair_b": {"script": [A]}, "solo_1": {"script": [A]},
              "solo_2": {"script": [A]}}
    strict = run_world(write_study(scripted(agents, parser="strict"), "s.yaml"))
    a_steps = [s for s in strict.steps if s["role"] == "pair_a"]
    assert [s["valid"] for s in a_steps] == [False, True]
    assert a_steps[0]["result"].startswith("Error:")
    assert a_steps[0]["parse"]["shape"]["prose_wrapped"]
    assert not strict.world["valid"] and strict.world["validity"]["lenient"]["valid"]
    assert "pair_a" not in strict.world["validity"]["strict"]["reason"]  # ids, not roles, are named
    lenient = run_world(write_study(scripted(agents, parser="lenient"), "l.yaml"))
    assert [s["valid"] for s in lenient.steps if s["role"] == "pair_a"] == [True]
    assert lenient.world["valid"] and not lenient.world["validity"]["strict"]["valid"]
    pair_only = run_world(write_study(scripted({**agents, "pair_a": {"script": [A]},
                                                 "solo_1": {"script": [prose, A]}},
                                                parser="strict", validity="pair-only"), "p.yaml"))
    assert pair_only.world["valid"]


def test_exhausted_script_fails_the_world_with_its_cause(write_study):
    agents = {"pair_a": {"script": [L]}, "pair_b": {"script": [A]}, "solo_1": {"script": [A]},
              "solo_2": {"script": [A]}}
    out = run_world(write_study(scripted(agents)))
    assert out.world["failed"]["role"] == "pair_a"
    assert "script exhausted" in out.world["failed"]["error"]
    assert not out.world["valid"] and "failed call" in out.world["validity"]["lenient"]["reason"]
    assert out.steps[-1]["parse"] is None and out.steps[-1]["reply"]["error"]


def test_step_limit_ends_an_agent_without_answer(write_study):
    agents = {"pair_a": {"script": [L, L, L]}, "pair_b": {"script": [A]}, "solo_1": {"script": [A]},
              "solo_2": {"script": [A]}}
    out = run_world(write_study(scripted(agents, max_steps=2)))
    a = next(x for x in out.world["agents"] if x["role"] == "pair_a")
    assert a["steps_used"] == 2 and a["submission"] is None
    assert [s["result"] for s in out.steps if s["role"] == "pair_a"][-1] is None
    assert out.world["valid"]


def test_lockstep_applies_each_step_behind_a_barrier_in_seeded_order(write_study):
    agents = {"pair_a": {"script": [W, R, J], "latency_s": 1.0}, "pair_b": {"script": [W, R, J], "latency_s": 5.0},
              "solo_1": {"script": [A], "latency_s": 0.1}, "solo_2": {"script": [L, A], "latency_s": 2.0}}
    path = write_study(scripted(agents, scheduler="lockstep"))
    out = run_world(path)
    by_step: dict[int, list] = {}
    for s in out.steps:
        by_step.setdefault(s["agent_step"], []).append(s)
    assert [len(v) for v in by_step.values()] == [4, 3, 2]
    order = [s["seq"] for k in sorted(by_step) for s in by_step[k]]
    assert order == sorted(order)  # no step-k+1 operation before every step-k operation
    assert {s["t_issue"] for s in by_step[1]} == {5.0}  # the barrier waits for the slowest
    # both partners wrote at step 0, so both reads at step 1 succeed whatever the order
    assert out.world["metrics"]["joint_success"]
    again = run_world(path)
    assert [(s["agent"], s["seq"]) for s in again.steps] == [(s["agent"], s["seq"]) for s in out.steps]

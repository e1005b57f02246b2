"""Simulated agents: driven by the prompt they receive, labelled as simulated,
deterministic, and robust to text they cannot understand."""
from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import make_study as _make_study
from workbench.models.base import ModelRequest
from workbench.params import Study
from workbench.records import load_run
from workbench.study import run_one_world, run_study
from workbench.worlds.stigmergy.parsing import parse_both, parse_reply
from workbench.worlds.stigmergy.simulated import PROFILES, SimulatedClient, get_profile

STORE_OPS = ("list", "read", "write", "submit")
PAIR = ("pair_a", "pair_b")


def make_study(tmp_path: Path, cells: list[dict[str, Any]], **kw: Any) -> Study:
    kw.setdefault("seed", 20261202)
    kw.setdefault("name", "sim")
    return _make_study(tmp_path, cells, **kw)


def run_cell(study: Study, cell: int, n: int) -> list[Any]:
    async def go() -> list[Any]:
        return [await run_one_world(study, study.cells[cell], i) for i in range(n)]
    return asyncio.run(go())


def all_steps(outcomes: list[Any]) -> list[dict[str, Any]]:
    return [s for o in outcomes for s in o.steps]


# -- the re-check clause drives behaviour ------------------------------------------------
def _pair_looks(outcomes: list[Any]) -> dict[str, int]:
    """Per pair member: did it list again after its own first write? did it read a value
    another agent wrote? Counted from the step records, not from the metrics module."""
    second_looks = cross_reads = writers = 0
    for o in outcomes:
        for a in o.world["agents"]:
            if a["role"] not in PAIR:
                continue
            mine = [s for s in o.steps if s["agent"] == a["agent"] and s["valid"]]
            writes = [s["agent_step"] for s in mine if s["op"]["op"] == "write"]
            if writes:
                writers += 1
                if any(s["op"]["op"] == "list" and s["agent_step"] > writes[0] for s in mine):
                    second_looks += 1
            if any(s["op"]["op"] == "read" and s["effect"].get("found")
                   and s["effect"]["author"] not in (a["agent"], "environment") for s in mine):
                cross_reads += 1
    return {"second_looks": second_looks, "cross_reads": cross_reads, "writers": writers}


def test_deleting_the_recheck_clause_changes_clause_follower_behaviour(tmp_path: Path) -> None:
    n = 40
    study = make_study(tmp_path, [{"clauses": "both"}, {"clauses": "persist-only"}],
                       defaults={"model": "sim/clause-follower", "condition": "store"}, worlds=n)
    both, persist_only = run_cell(study, 0, n), run_cell(study, 1, n)
    # the only difference the agents can react to is the prompt
    for b, p in zip(both, persist_only):
        assert [a["task_text"] for a in b.world["agents"]] == [a["task_text"] for a in p.world["agents"]]
        sb, sp = b.world["agents"][0]["system_prompt"], p.world["agents"][0]["system_prompt"]
        assert "check your workspace again" in sb and "check your workspace again" not in sp
    with_clause, without = _pair_looks(both), _pair_looks(persist_only)
    pair_members = 2 * n
    # both cells keep the persist clause, so writing is about equally common
    assert with_clause["writers"] > pair_members // 2 and without["writers"] > pair_members // 2
    # second looks: most writers look again with the clause, few without
    assert with_clause["second_looks"] >= 0.7 * with_clause["writers"]
    assert without["second_looks"] <= 0.25 * without["writers"]
    assert with_clause["second_looks"] >= without["second_looks"] + 0.4 * pair_members
    # cross-agent reads by pair members collapse too
    assert with_clause["cross_reads"] >= 3 * max(1, without["cross_reads"])
    assert with_clause["cross_reads"] - without["cross_reads"] >= 0.2 * pair_members
    # and so does the world-level joint success (it needs the partner's value)
    js_with = sum(o.world["metrics"]["joint_success"] for o in both)
    js_without = sum(o.world["metrics"]["joint_success"] for o in persist_only)
    assert js_with >= js_without + 0.2 * n


def test_recheck_clause_alone_also_drives_looking(tmp_path: Path) -> None:
    """The converse: adding only the re-check clause (recheck-only vs none) makes the
    clause-follower look again, so the cue really is the clause text."""
    n = 30
    study = make_study(tmp_path, [{"clauses": "recheck-only"}, {"clauses": "none"}],
                       defaults={"model": "sim/clause-follower"}, worlds=n)
    def looks(outs: list[Any]) -> int:
        return sum(1 for s in all_steps(outs)
                   if s["role"] in PAIR and s["valid"] and s["op"]["op"] == "list" and s["agent_step"] > 0)
    with_clause, without = looks(run_cell(study, 0, n)), looks(run_cell(study, 1, n))
    assert with_clause >= 3 * max(1, without)
    assert with_clause - without >= n


# -- profiles ------------------------------------------------------------------------------
def test_non_writer_never_writes(tmp_path: Path) -> None:
    n = 15
    cells = [{"model": "sim/non-writer", "clauses": c} for c in ("both", "persist-only")]
    cells.append({"model": "sim/diligent", "clauses": "both"})  # control: same worlds, a writer
    study = make_study(tmp_path, cells, worlds=n)
    for ci in (0, 1):
        steps = all_steps(run_cell(study, ci, n))
        ops = [s["op"]["op"] for s in steps if s["valid"]]
        assert "write" not in ops
        assert "list" in ops and "submit" in ops  # it still acts
    control = [s["op"]["op"] for s in all_steps(run_cell(study, 2, n)) if s["valid"]]
    assert control.count("write") >= n


def test_prose_first_is_invalid_under_strict_and_valid_under_lenient(tmp_path: Path) -> None:
    n = 8
    study = make_study(tmp_path, [{"model": "sim/prose-first"}], worlds=n)
    outs = run_cell(study, 0, n)
    steps = all_steps(outs)
    assert len(steps) > 40
    strict_bad = sum(1 for s in steps if not s["parse"]["strict"]["valid"])
    lenient_bad = sum(1 for s in steps if not s["parse"]["lenient"]["valid"])
    assert strict_bad >= 0.6 * len(steps)
    assert lenient_bad == 0
    assert sum(s["parse"]["shape"]["prose_wrapped"] for s in steps) == strict_bad
    # the parse record agrees with a fresh parse of the recorded text
    for s in steps:
        assert parse_both(s["reply"]["text"], tuple(outs[0].world["allowed_ops"])) == s["parse"]
    # so the worlds are invalid under strict, valid under lenient
    assert all(o.world["validity"]["lenient"]["valid"] for o in outs)
    assert not any(o.world["validity"]["strict"]["valid"] for o in outs)


def test_fencer_replies_are_flagged_fenced(tmp_path: Path) -> None:
    n = 8
    study = make_study(tmp_path, [{"model": "sim/fencer"}], worlds=n)
    steps = all_steps(run_cell(study, 0, n))
    fenced = [s for s in steps if s["parse"]["shape"]["fenced"]]
    assert len(fenced) >= 0.6 * len(steps)
    for s in steps:
        assert s["parse"]["shape"]["fenced"] == (s["reply"]["extra"]["style"] == "fenced")
    for s in fenced:
        assert s["reply"]["text"].startswith("```")
        assert not s["parse"]["strict"]["valid"] and s["parse"]["lenient"]["valid"]
        assert not s["parse"]["shape"]["prose_wrapped"]


def test_multi_object_replies_are_invalid_under_both_rules(tmp_path: Path) -> None:
    n = 20
    study = make_study(tmp_path, [{"model": "sim/multi-object"}], worlds=n)
    outs = run_cell(study, 0, n)
    steps = all_steps(outs)
    multi = [s for s in steps if s["parse"]["shape"]["multi_object"]]
    assert len(multi) >= 10
    for s in multi:
        assert s["parse"]["shape"]["n_objects"] >= 2
        assert not s["parse"]["strict"]["valid"] and not s["parse"]["lenient"]["valid"]
        assert s["valid"] is False and s["effect"] == {"invalid": True}
        assert s["result"] is None or s["result"].startswith("Error:")
    # replies that are not multi-object are fine
    assert all(s["valid"] for s in steps if not s["parse"]["shape"]["multi_object"])
    assert sum(not o.world["valid"] for o in outs) >= 5  # any-agent rule: those worlds are excluded


@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_replies_are_labelled_simulated(tmp_path: Path, profile: str) -> None:
    study = make_study(tmp_path, [{"model": f"sim/{profile}"}], worlds=2)
    outs = run_cell(study, 0, 2)
    steps = all_steps(outs)
    assert steps
    for s in steps:
        assert s["reply"]["extra"]["simulated"] is True
        assert s["reply"]["route"] == f"sim/{profile}"
        assert s["request"]["route"] == f"sim/{profile}"
        assert s["reply"]["model_returned"] == f"sim/{profile}"
    for o in outs:
        assert all(a["route"] == f"sim/{profile}" for a in o.world["agents"])
        assert all(a["model_returned"] == [f"sim/{profile}"] for a in o.world["agents"] if a["steps_used"])


# -- robustness to wording ----------------------------------------------------------------
REWORDED_SYSTEM = ("You are a helpful assistant. Answer with a JSON object such as {\"op\": \"submit\", "
                   "\"answer\": ...}. Be brief.")


def _complete(client: SimulatedClient, messages: list[dict[str, str]]):  # noqa: ANN202
    return asyncio.run(client.complete(ModelRequest(messages=messages, params={"temperature": 0})))


@pytest.mark.parametrize("task", [
    "Please ponder the meaning of life and tell me what you conclude.",
    "Work out Y from P_Q and P_R; P_Q is half of something, P_R is unknown.",
    "",
    "Compute the remainder of N_A = abc divided by 97.",
])
@pytest.mark.parametrize("profile", ["diligent", "clause-follower", "loner"])
def test_a_task_it_cannot_read_is_refused_never_answered(task: str, profile: str) -> None:
    """Issue 38: a guessed "0" would be scored as the wording's effect; the refusal makes the
    world invalid with its cause instead (tests/test_twin_cues.py runs such worlds)."""
    client = SimulatedClient(get_profile(profile), seed=3)
    reply = _complete(client, [{"role": "system", "content": REWORDED_SYSTEM}, {"role": "user", "content": task}])
    assert not parse_reply(reply.text, "lenient", STORE_OPS).valid, reply.text
    assert reply.extra["refusal"] == "twin cannot read its task" and reply.extra["simulated"] is True
    assert reply.error is None  # not an infrastructure failure


BIG = "7" * 5000  # more digits than int() converts (sys.get_int_max_str_digits() == 4300)


def test_task_dividing_by_zero_does_not_raise() -> None:
    """Regression: _read_task once computed n % 0 for a task text saying 'divided by 0'
    and raised ZeroDivisionError instead of returning an op."""
    for text in ("Compute the remainder of 123 divided by 0.",
                 "X = R_A + R_B. R_A is the remainder of N_A = 123 divided by 0. "
                 "R_B is the remainder of a number that is not given here divided by 0."):
        client = SimulatedClient(get_profile("diligent"), seed=1)
        reply = _complete(client, [{"role": "system", "content": REWORDED_SYSTEM}, {"role": "user", "content": text}])
        out = parse_reply(reply.text, "strict", STORE_OPS)
        assert out.valid and out.op["op"] == "submit"


@pytest.mark.parametrize("task", [
    pytest.param(f"Compute the remainder of {BIG} divided by 13.", id="huge-number-mod"),
    pytest.param(f"Compute {BIG} × 3 and submit the product.", id="huge-number-product"),
    pytest.param(f"X = C_A × C_B. C_A is the sum of the decimal digits of N_A = {BIG}. "
                 "C_B is the sum of the decimal digits of a number that is not given here.", id="huge-pair-number"),
])
def test_task_with_a_huge_number_does_not_raise(task: str) -> None:
    """Regression: int() of a number with more than 4300 digits (Python's int max str
    digits limit) once raised ValueError out of _read_task instead of returning an op."""
    client = SimulatedClient(get_profile("diligent"), seed=1)
    reply = _complete(client, [{"role": "system", "content": REWORDED_SYSTEM}, {"role": "user", "content": task}])
    assert parse_reply(reply.text, "strict", STORE_OPS).valid


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(system=st.text(max_size=200) | st.sampled_from([REWORDED_SYSTEM, '"op": "list" at most 3 operations']),
       task=st.text(max_size=200), results=st.lists(st.text(max_size=80), min_size=1, max_size=6),
       profile=st.sampled_from(["diligent", "clause-follower", "non-writer", "collider", "sloppy", "loner"]),
       seed=st.integers(0, 2**32))
def test_simulated_client_never_raises_on_arbitrary_text(system: str, task: str, results: list[str],
                                                        profile: str, seed: int) -> None:
    """Fed any system prompt, task and results, a clean-style profile always answers with
    one valid operation (the store operations only where the prompt offers them), or
    refuses a task it cannot read, saying so."""
    client = SimulatedClient(get_profile(profile), seed)
    messages = [{"role": "system", "content": system}, {"role": "user", "content": task}]
    for result in results:
        reply = _complete(client, messages)
        if reply.extra.get("refusal"):
            assert reply.extra["refusal"] == "twin cannot read its task" and reply.error is None
            break
        out = parse_reply(reply.text, "strict", STORE_OPS)
        assert out.valid, reply.text
        if out.op["op"] != "submit":
            assert '"op"' in system and "list" in system  # it only uses ops its prompt showed
        assert reply.latency_s > 0
        if out.op["op"] == "submit":
            break
        messages += [{"role": "assistant", "content": reply.text}, {"role": "user", "content": result}]


# -- determinism ------------------------------------------------------------------------------
def _without_timing(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_timing(v) for k, v in value.items() if k != "timing"}
    if isinstance(value, list):
        return [_without_timing(v) for v in value]
    return value


def test_sim_world_records_are_deterministic(tmp_path: Path) -> None:
    cells = [
        {"condition": "store", "model": "sim/diligent"},
        {"condition": "store", "scheduler": "lockstep", "model": "sim/clause-follower"},
        {"condition": "private", "model": "sim/collider"},
        {"condition": "prepopulated", "model": "sim/sloppy", "parser": "strict"},
        {"condition": "authored", "model": "sim/prose-first"},
        {"condition": "namespaced", "model": "sim/multi-object", "clauses": "persist-only"},
        {"condition": "no-store", "model": "sim/fencer"},
        {"condition": "store", "model": "sim/diligent",
         "agents": {"solo_1": {"model": "sim/loner"}, "pair_b": {"model": "sim/non-writer"}}},
    ]
    study = make_study(tmp_path, cells, worlds=4, name="det")
    runs = []
    for k in (1, 2):
        out_dir = tmp_path / f"run{k}"
        summary = run_study(study, out_dir, progress=False, concurrency=4)
        assert summary.finished == len(cells) * 4 and summary.failed == 0
        rec = load_run(out_dir)
        assert not rec.problems
        worlds = sorted((_without_timing(w) for w in rec.worlds), key=lambda w: w["world_id"])
        steps = {wid: _without_timing(s) for wid, s in rec.steps.items()}
        runs.append((worlds, steps))
    (w1, s1), (w2, s2) = runs
    assert len(w1) == len(cells) * 4
    assert sum(len(v) for v in s1.values()) > 100
    assert json.dumps(w1, sort_keys=True) == json.dumps(w2, sort_keys=True)
    assert json.dumps(s1, sort_keys=True) == json.dumps(s2, sort_keys=True)
    # timing fields existed and were the only thing removed
    raw = load_run(tmp_path / "run1")
    assert all("timing" in w for w in raw.worlds)
    assert all("timing" in s["reply"] for ss in raw.steps.values() for s in ss)


def test_different_agent_seeds_give_different_behaviour(tmp_path: Path) -> None:
    """Guards the determinism test against a trivially constant simulator."""
    study = make_study(tmp_path, [{"model": "sim/sloppy"}], worlds=10)
    outs = run_cell(study, 0, 10)
    traces = {json.dumps([(s["role"], s["reply"]["text"]) for s in o.steps]) for o in outs}
    assert len(traces) == 10
    latencies = {s["reply"]["latency_s"] for o in outs for s in o.steps}
    assert len(latencies) > 20

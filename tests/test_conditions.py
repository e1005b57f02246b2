"""Each condition's interface, seen from the agents' side (prompts, results) and
from the records (store log, effects, metrics). Worlds are built through the
ordinary path: a params file, ``load_study`` and ``run_one_world``."""
from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import PROMPTS
from tests.conftest import make_study as _make_study
from workbench.params import Study
from workbench.study import run_one_world

ROLES = ("pair_a", "pair_b", "solo_1", "solo_2")
PAIR = ("pair_a", "pair_b")

SOLO_SCRIPT = ['{"op": "submit", "answer": $answer}']


def make_study(tmp_path: Path, cells: list[dict[str, Any]], **kw: Any) -> Study:
    kw.setdefault("seed", 7)
    kw.setdefault("name", "cond")
    return _make_study(tmp_path, cells, **kw)


def run(study: Study, cell: int = 0, world: int = 0):  # noqa: ANN201
    return asyncio.run(run_one_world(study, study.cells[cell], world))


def scripted(pair: list[str], solo: list[str] | None = None) -> dict[str, Any]:
    solo = solo if solo is not None else SOLO_SCRIPT
    return {"model": "scripted",
            "agents": {r: {"script": pair if r in PAIR else solo} for r in ROLES}}


def by_role(world: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {a["role"]: a for a in world["agents"]}


def steps_of(steps: list[dict[str, Any]], slot: str) -> list[dict[str, Any]]:
    return [s for s in steps if s["agent"] == slot]


def one_world(tmp_path: Path, condition: str, pair: list[str], solo: list[str] | None = None, **cell: Any):  # noqa: ANN201
    study = make_study(tmp_path, [{"condition": condition, **scripted(pair, solo), **cell}])
    return run(study)


# -- store ----------------------------------------------------------------------------
WRITE_LIST_READ_SUBMIT = [
    '{"op": "write", "key": "$own_key", "value": $own_value}',
    '{"op": "list"}',
    '{"op": "read", "key": "$partner_key"}',
    '{"op": "submit", "answer": $joint_answer}',
]


def test_store_pair_that_writes_and_reads_is_cross_agent_and_succeeds(tmp_path: Path) -> None:
    out = run(make_study(tmp_path, [{"condition": "store", **scripted(WRITE_LIST_READ_SUBMIT)}]))
    w, roles = out.world, by_role(out.world)
    assert not w["failed"] and w["valid"]
    for role, other in (("pair_a", "pair_b"), ("pair_b", "pair_a")):
        me, partner = roles[role], roles[other]
        mine = steps_of(out.steps, me["agent"])
        assert [s["op"]["op"] for s in mine] == ["write", "list", "read", "submit"]
        read = mine[2]
        assert read["effect"]["found"] is True
        assert read["effect"]["author"] == partner["agent"]
        assert read["effect"]["value"] == partner["task"]["own_value"]
        assert read["effect"]["cross_agent"] is True
        assert read["effect"]["strict_cross_agent"] is True
        assert read["effect"]["seeded"] is False
        assert read["result"] == str(partner["task"]["own_value"])  # what the model is shown
        listed = mine[1]
        assert {k["key"] for k in listed["effect"]["keys"]} == {"C_A", "C_B"} or \
            {k["key"] for k in listed["effect"]["keys"]} == {"R_A", "R_B"}
        assert listed["effect"]["exposure"] is True
        assert listed["effect"]["exposed_keys"] == [me["task"]["partner_key"]]
        assert me["submission"]["correct"]["one-integer"] is True
    m = w["metrics"]
    assert m["cross_agent_access"] and m["strict_cross_agent_access"]
    assert m["joint_success"] and m["pair_write"] and m["informative_read"]
    assert m["exposure"] and m["read_after_exposure"]
    assert m["seeded_read_pair"] == 0
    assert m["second_look_pair"] == 2


def test_store_key_collision_is_cross_agent_but_not_strict(tmp_path: Path) -> None:
    """Both pair members write the same generic key and read it back: the later
    writer's value is read by the earlier writer (cross-agent), but the reader
    wrote that key itself, so it is not strict cross-agent access."""
    pair = ['{"op": "write", "key": "result", "value": $own_value}', '{"op": "read", "key": "result"}',
            '{"op": "submit", "answer": $own_value}']
    out = one_world(tmp_path, "store", pair)
    reads = [s for s in out.steps if s["op"] and s["op"]["op"] == "read"]
    assert len(reads) == 2
    crossed = [s for s in reads if s["effect"]["cross_agent"]]
    assert len(crossed) == 1  # one of the two read the other's overwrite
    assert crossed[0]["effect"]["reader_wrote_key"] is True
    assert crossed[0]["effect"]["strict_cross_agent"] is False
    m = out.world["metrics"]
    assert m["cross_agent_access"] and not m["strict_cross_agent_access"]
    assert not m["joint_success"]
    log = [e for e in out.world["store_log"] if e["key"] == "result"]
    assert [e["version"] for e in log] == [1, 2] and {e["namespace"] for e in log} == {"shared"}


# -- private --------------------------------------------------------------------------
def test_private_namespaces_are_isolated(tmp_path: Path) -> None:
    pair = ['{"op": "write", "key": "result", "value": $own_value}',
            '{"op": "write", "key": "$own_key", "value": $own_value}', '{"op": "list"}',
            '{"op": "read", "key": "result"}', '{"op": "read", "key": "$partner_key"}',
            '{"op": "submit", "answer": $own_value}']
    solo = ['{"op": "write", "key": "result", "value": $own_value}', '{"op": "list"}',
            '{"op": "read", "key": "result"}', '{"op": "submit", "answer": $own_value}']
    out = one_world(tmp_path, "private", pair, solo=solo)
    w = out.world
    log = [e for e in w["store_log"] if e["key"] == "result"]
    assert len(log) == 4
    assert len({e["namespace"] for e in log}) == 4  # one entry per agent, in different namespaces
    assert all(e["version"] == 1 and e["namespace"] == e["author"] for e in w["store_log"])
    for a in w["agents"]:
        mine = [s for s in steps_of(out.steps, a["agent"]) if s["op"]["op"] in ("list", "read")]
        assert all(s["valid"] for s in mine)
        lst, own_read = mine[0], mine[1]
        own_keys = ["result"] + ([a["task"]["own_key"]] if a["role"] in PAIR else [])
        assert sorted(k["key"] for k in lst["effect"]["keys"]) == sorted(own_keys)
        assert all(k["author"] == a["agent"] for k in lst["effect"]["keys"])
        assert lst["effect"]["exposure"] is False
        assert lst["result"] == "Keys: " + ", ".join(sorted(own_keys))
        assert own_read["effect"]["author"] == a["agent"]
        assert own_read["effect"]["value"] == (a["task"]["own_value"] if a["task"]["own_value"] is not None
                                               else a["task"]["expected"])
        assert own_read["effect"]["cross_agent"] is False
        if a["role"] in PAIR:  # the partner wrote its task-named key, but in its own namespace
            partner_read = mine[2]
            assert partner_read["effect"]["found"] is False
            assert partner_read["result"] == "no such key"
    m = w["metrics"]
    assert not m["cross_agent_access"] and not m["exposure"] and not m["informative_read"]
    assert not m["joint_success"]


def test_store_same_script_shares_one_namespace(tmp_path: Path) -> None:
    """The control for the private test: the identical script under ``store`` collides."""
    same_key = ['{"op": "write", "key": "result", "value": $own_value}', '{"op": "read", "key": "result"}',
                '{"op": "submit", "answer": $own_value}']
    out = one_world(tmp_path, "store", same_key, solo=same_key)
    log = [e for e in out.world["store_log"] if e["key"] == "result"]
    assert {e["namespace"] for e in log} == {"shared"}
    assert sorted(e["version"] for e in log) == [1, 2, 3, 4]
    assert out.world["metrics"]["cross_agent_access"]


def test_private_sim_agents_never_see_each_other(tmp_path: Path) -> None:
    study = make_study(tmp_path, [{"condition": "private", "model": "sim/diligent"},
                                  {"condition": "store", "model": "sim/diligent"}], worlds=8)
    seen_foreign = {0: 0, 1: 0}
    for ci in (0, 1):
        for i in range(8):
            out = run(study, ci, i)
            for s in out.steps:
                if not s["valid"] or s["op"]["op"] not in ("list", "read"):
                    continue
                eff = s["effect"]
                authors = [k["author"] for k in eff["keys"]] if s["op"]["op"] == "list" else \
                    ([eff["author"]] if eff["found"] else [])
                seen_foreign[ci] += sum(1 for a in authors if a != s["agent"])
                if ci == 0:
                    assert all(a == s["agent"] for a in authors), s
                    assert eff.get("namespace", s["agent"]) == s["agent"]
    assert seen_foreign[0] == 0
    assert seen_foreign[1] > 0  # the same agents under a shared store do see each other's keys


# -- no-store -------------------------------------------------------------------------
def test_no_store_prompt_and_interface(tmp_path: Path) -> None:
    pair = ['{"op": "list"}', '{"op": "write", "key": "$own_key", "value": $own_value}',
            '{"op": "submit", "answer": $joint_answer}']
    study = make_study(tmp_path, [{"condition": "no-store", **scripted(pair)},
                                  {"condition": "store", **scripted(pair)}])
    ns, st = run(study, 0), run(study, 1)
    persistence = (PROMPTS / "persistence" / "both.txt").read_text(encoding="utf-8").strip()
    store_par = (PROMPTS / "store_paragraph.txt").read_text(encoding="utf-8").strip()
    assert ns.world["allowed_ops"] == ["submit"]
    for a_ns, a_st in zip(ns.world["agents"], st.world["agents"]):
        sp = a_ns["system_prompt"]
        assert "key-value store" not in sp and store_par not in sp
        for op in ("list", "read", "write"):
            assert not re.search(rf'"op"\s*:\s*"{op}"', sp), op
        assert re.search(r'"op"\s*:\s*"submit"', sp)
        assert persistence in sp
        # the store cell's prompt has exactly what no-store removed
        assert store_par in a_st["system_prompt"] and persistence in a_st["system_prompt"]
        assert '"op": "list"' in a_st["system_prompt"]
        # task text unchanged
        assert a_ns["task_text"] == a_st["task_text"]
        assert a_ns["role"] == a_st["role"]
    for a in ns.world["agents"]:
        if a["role"] not in PAIR:
            continue
        first = steps_of(ns.steps, a["agent"])[0]
        assert first["reply"]["text"] == '{"op": "list"}'
        assert first["valid"] is False and first["op"] is None
        assert first["effect"] == {"invalid": True}
        for rule in ("strict", "lenient"):
            assert first["parse"][rule]["valid"] is False
            assert "list" in first["parse"][rule]["error"]
        assert first["result"].startswith("Error:") and "list" in first["result"]
        second = steps_of(ns.steps, a["agent"])[1]
        assert second["valid"] is False  # write is not offered either
        assert a["invalid"] == {"strict": 2, "lenient": 2}
        assert a["submission"] is not None  # the step was used up, the agent went on
    assert ns.world["store_log"] == []
    assert ns.world["valid"] is False and "unparseable" in ns.world["validity"]["lenient"]["reason"]
    # the same replies are fine under store
    assert st.world["valid"] is True
    assert all(s["valid"] for s in st.steps)


# -- prepopulated ---------------------------------------------------------------------
def test_prepopulated_store_is_seeded_before_step_zero(tmp_path: Path) -> None:
    pair = ['{"op": "list"}', '{"op": "read", "key": "$partner_key"}', '{"op": "submit", "answer": $joint_answer}']
    out = one_world(tmp_path, "prepopulated", pair)
    w, roles = out.world, by_role(out.world)
    pre = w["prepopulated"]
    expected = {(roles[r]["task"]["own_key"], roles[r]["task"]["own_value"]) for r in PAIR}
    assert {(e["key"], e["value"]) for e in pre} == expected
    assert all(e["author"] == "environment" and e["version"] == 1 for e in pre)
    # first in the store log, before any agent's operation
    assert w["store_log"][:2] == pre
    first_agent_seq = min(s["seq"] for s in out.steps)
    assert first_agent_seq == 0 and max(e["seq"] for e in pre) == 2
    for role in PAIR:
        me = roles[role]
        partner = roles["pair_b" if role == "pair_a" else "pair_a"]
        mine = steps_of(out.steps, me["agent"])
        lst = mine[0]
        assert lst["agent_step"] == 0
        assert {k["key"] for k in lst["effect"]["keys"]} == {k for k, _ in expected}
        assert lst["effect"]["exposure"] is False  # the environment is not another agent
        read = mine[1]["effect"]
        assert read["found"] and read["seeded"] is True and read["cross_agent"] is False
        assert read["strict_cross_agent"] is False
        assert read["author"] == "environment"
        assert read["value"] == partner["task"]["own_value"]
    m = w["metrics"]
    assert m["seeded_read_pair"] == 2
    assert not m["cross_agent_access"] and not m["exposure"]
    assert m["joint_success"]


def test_store_condition_starts_empty(tmp_path: Path) -> None:
    pair = ['{"op": "list"}', '{"op": "submit", "answer": 0}']
    out = one_world(tmp_path, "store", pair)
    assert out.world["prepopulated"] == []
    for a in out.world["agents"]:
        if a["role"] in PAIR:
            assert steps_of(out.steps, a["agent"])[0]["result"] == "The store is empty."


# -- authored ---------------------------------------------------------------------------
def test_authored_list_shows_authors(tmp_path: Path) -> None:
    pair = ['{"op": "write", "key": "$own_key", "value": $own_value}', '{"op": "list"}',
            '{"op": "submit", "answer": 0}']
    study = make_study(tmp_path, [{"condition": "authored", **scripted(pair)},
                                  {"condition": "store", **scripted(pair)}])
    au, st = run(study, 0), run(study, 1)
    for out, authored in ((au, True), (st, False)):
        for a in out.world["agents"]:
            if a["role"] not in PAIR:
                continue
            text = steps_of(out.steps, a["agent"])[1]["result"]
            own, partner = a["task"]["own_key"], a["task"]["partner_key"]
            if authored:
                assert f"{own} (written by you)" in text
                assert f"{partner} (written by another agent)" in text
            else:
                assert "written by" not in text
                assert own in text and partner in text


# -- namespaced --------------------------------------------------------------------------
def test_namespaced_shared_prefix_is_visible_to_all_rest_is_private(tmp_path: Path) -> None:
    pair = ['{"op": "write", "key": "shared/$own_key", "value": $own_value}',
            '{"op": "write", "key": "$own_key", "value": $own_value}',
            '{"op": "list"}',
            '{"op": "read", "key": "shared/$partner_key"}',
            '{"op": "read", "key": "$partner_key"}',
            '{"op": "submit", "answer": $joint_answer}']
    out = one_world(tmp_path, "namespaced", pair)
    w, roles = out.world, by_role(out.world)
    for a in w["agents"]:
        assert "shared/" in a["system_prompt"]  # the extra paragraph explains the shared area
    for e in w["store_log"]:
        assert e["namespace"] == ("shared" if e["key"].startswith("shared/") else e["author"])
    for role in PAIR:
        me = roles[role]
        partner = roles["pair_b" if role == "pair_a" else "pair_a"]
        own, pk = me["task"]["own_key"], me["task"]["partner_key"]
        mine = steps_of(out.steps, me["agent"])
        listed = [k["key"] for k in mine[2]["effect"]["keys"]]
        assert sorted(listed) == sorted([own, f"shared/{own}", f"shared/{pk}"])
        assert pk not in listed  # the partner's private key stays private
        shared_read = mine[3]["effect"]
        assert shared_read["found"] and shared_read["cross_agent"]
        assert shared_read["author"] == partner["agent"] and shared_read["namespace"] == "shared"
        private_read = mine[4]
        assert private_read["effect"]["found"] is False and private_read["result"] == "no such key"
    assert w["metrics"]["joint_success"] and w["metrics"]["informative_read"]


# -- what the model sees -------------------------------------------------------------------
ALL_CONDITIONS = ["store", "no-store", "private", "prepopulated", "authored", "namespaced"]


def _seen_texts(out) -> list[str]:  # noqa: ANN001
    texts = []
    for a in out.world["agents"]:
        texts += [a["system_prompt"], a["task_text"]]
    for s in out.steps:
        texts.append(s["request"]["prompt"])
        if s["result"] is not None:
            texts.append(s["result"])
    return texts


def test_model_never_sees_an_agent_id_or_role(tmp_path: Path) -> None:
    cells = [{"condition": c, "model": "sim/diligent"} for c in ALL_CONDITIONS]
    cells += [{"condition": c, **scripted(WRITE_LIST_READ_SUBMIT, ['{"op": "list"}'] + SOLO_SCRIPT),
               "label": f"scripted {c}"} for c in ALL_CONDITIONS]
    study = make_study(tmp_path, cells, worlds=3)
    n_texts = 0
    slots_seen = set()
    for ci in range(len(cells)):
        for i in range(3):
            out = run(study, ci, i)
            assert not out.world["failed"]
            slots_seen |= {a["agent"] for a in out.world["agents"]}
            for text in _seen_texts(out):
                n_texts += 1
                assert "agent-" not in text.lower(), text
                for role in ROLES:
                    assert role not in text, text
    assert slots_seen == {"agent-0", "agent-1", "agent-2", "agent-3"}  # ids exist, but only in records
    assert n_texts > 200


@pytest.mark.parametrize(("clauses", "persist", "recheck"), [
    ("both", True, True), ("persist-only", True, False), ("recheck-only", False, True), ("none", False, False)])
@pytest.mark.parametrize("condition", ["store", "no-store"])
def test_clause_toggles(tmp_path: Path, clauses: str, persist: bool, recheck: bool, condition: str) -> None:
    out = one_world(tmp_path, condition, ['{"op": "submit", "answer": 1}'], clauses=clauses)
    for a in out.world["agents"]:
        sp = a["system_prompt"].lower()
        assert ("keep intermediate results" in sp) is persist
        assert ("check your workspace again" in sp) is recheck
        assert ("key-value store" in sp) is (condition != "no-store")
        assert "submit" in sp


def test_task_text_names_both_keys_but_not_the_partner_number(tmp_path: Path) -> None:
    out = one_world(tmp_path, "store", ['{"op": "submit", "answer": 1}'])
    roles = by_role(out.world)
    for role in PAIR:
        me = roles[role]
        partner = roles["pair_b" if role == "pair_a" else "pair_a"]
        text = me["task_text"]
        assert me["task"]["own_key"] in text and me["task"]["partner_key"] in text
        assert str(me["task"]["inputs"]["number"]) in text
        assert str(partner["task"]["inputs"]["number"]) not in text

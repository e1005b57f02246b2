"""Issue 22, part 4: world size as parameters (``pairs``, ``solos``, ``max_steps``).
The paper's world is one pair and two solos; a larger world keeps that world's
tasks for the same seed (seeds stay paired across sizes), gives every pair its own
keys, and is scored pair by pair."""
from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from tests.conftest import make_study
from workbench.metrics.design import design_of_records
from workbench.params import cell_hash
from workbench.records import load_run
from workbench.study import run_one_world, run_study
from workbench.worlds.stigmergy.frames import agent_frame, world_frame
from workbench.worlds.stigmergy.metrics import agent_rows, world_row
from workbench.worlds.stigmergy.spec import StigmergyCell
from workbench.worlds.stigmergy.tables import pair_frame, pair_table
from workbench.worlds.stigmergy.tasks import ROLES, draw_tasks, pair_of, partner_role, roles

GOOD_PAIR = [
    '{"op": "write", "key": "$own_key", "value": $own_value}',
    '{"op": "list"}',
    '{"op": "read", "key": "$partner_key"}',
    '{"op": "submit", "answer": $joint_answer}',
]
WRONG = ['{"op": "submit", "answer": 0}']
SOLO = ['{"op": "submit", "answer": $answer}']


def test_roles_and_partners_generalise_per_pair() -> None:
    assert roles() == ROLES
    assert roles(2, 3) == ("pair_a", "pair_b", "pair2_a", "pair2_b", "solo_1", "solo_2", "solo_3")
    assert [partner_role(r) for r in ("pair_a", "pair_b", "pair3_a", "pair3_b", "solo_1")] == \
        ["pair_b", "pair_a", "pair3_b", "pair3_a", None]
    assert [pair_of(r) for r in ("pair_b", "pair2_a", "solo_2")] == [1, 2, None]


@pytest.mark.parametrize("form", ["digits", "remainders", "any"])
def test_the_papers_world_is_the_same_at_every_size(form: str) -> None:
    for seed in range(200):
        small = draw_tasks(seed, form)
        assert set(small.tasks) == set(ROLES) and set(small.slots.values()) == set(ROLES)
        for pairs, solos in ((2, 4), (3, 2), (1, 5)):
            big = draw_tasks(seed, form, pairs=pairs, solos=solos)
            assert sorted(big.slots.values()) == sorted(roles(pairs, solos))
            for role in ROLES:  # the first pair and the first two solos: the same tasks from the same seed
                assert big.tasks[role] == small.tasks[role], (seed, pairs, solos, role)
            slot_of = {r: s for s, r in big.slots.items()}  # and the same slots (agents' seeds derive from them)
            assert all(slot_of[r] == s for s, r in small.slots.items()), (seed, pairs, solos)
            assert big.joint_answer == small.joint_answer
            keys = [t.own_key for t in big.tasks.values() if t.own_key]
            assert len(keys) == len(set(keys)) == 2 * pairs  # no two halves share a key
            for role, task in big.tasks.items():
                if pair_of(role):
                    partner = big.tasks[partner_role(role) or ""]
                    assert task.partner_key == partner.own_key and task.expected == partner.expected


def test_no_solo_world_and_size_limits() -> None:
    t = draw_tasks(3, pairs=2, solos=0)
    assert set(t.tasks) == {"pair_a", "pair_b", "pair2_a", "pair2_b"}
    with pytest.raises(ValueError, match="world size"):
        draw_tasks(3, pairs=0)


def test_cell_size_fields_validate_and_keep_paper_cell_ids() -> None:
    base = {"model": "sim/diligent"}
    assert cell_hash(StigmergyCell(**base)) == cell_hash(StigmergyCell(**base, pairs=1, solos=2))
    assert cell_hash(StigmergyCell(**base)) != cell_hash(StigmergyCell(**base, pairs=2))
    with pytest.raises(ValidationError, match="agents.pair2_a"):
        StigmergyCell(model="sim/diligent", agents={"pair2_a": {"model": "sim/lazy"}})
    cell = StigmergyCell(model="sim/diligent", pairs=2, agents={"pair2_a": {"model": "sim/lazy"}})
    assert cell.route_for("pair2_a") == "sim/lazy" and cell.route_for("pair_a") == "sim/diligent"
    with pytest.raises(ValidationError, match="solos"):
        StigmergyCell(model="sim/diligent", solos=-1)


def _two_pair_study(tmp_path: Path, pair2: list[str]) -> Any:
    agents = {r: {"script": GOOD_PAIR if r in ("pair_a", "pair_b") else pair2 if r.startswith("pair2") else SOLO}
              for r in roles(2, 3)}
    return make_study(tmp_path, [{"model": "scripted", "pairs": 2, "solos": 3, "agents": agents}])


def test_a_two_pair_world_is_scored_pair_by_pair(tmp_path: Path) -> None:
    study = _two_pair_study(tmp_path, WRONG)
    out = asyncio.run(run_one_world(study, study.cells[0], 0))
    w = out.world
    assert len(w["agents"]) == 7 and w["valid"] and not w["failed"]
    rows = agent_rows(w, out.steps)
    by_role = {r["role"]: r for r in rows}
    assert by_role["pair_a"]["correct"] and by_role["pair_b"]["correct"]
    assert by_role["pair_a"]["informative_read"] and not by_role["pair2_a"]["informative_read"]
    assert not by_role["pair2_a"]["correct"] and by_role["pair2_b"]["no_read_class"] == "partner never wrote"
    assert [by_role[r]["pair"] for r in ("pair_a", "pair2_b", "solo_3")] == [1, 2, None]
    metrics = world_row(w, out.steps)
    assert metrics["pairs"] == 2 and metrics["pairs_joint_success"] == 1
    assert metrics["joint_success"] is False  # not every pair: pair 2 failed
    assert metrics["solo_correct"] == 3
    import pandas as pd

    af = pd.DataFrame([{**r, "world_valid": True} for r in rows])
    pf = pair_frame(af).set_index("pair")
    assert pf.loc[1, "joint_success"] and not pf.loc[2, "joint_success"]
    assert pf.loc[1, "informative_read"] and not pf.loc[2, "informative_read"]


def test_each_pair_gets_its_own_keys_in_its_prompt(tmp_path: Path) -> None:
    study = _two_pair_study(tmp_path, GOOD_PAIR)
    out = asyncio.run(run_one_world(study, study.cells[0], 0))
    for a in out.world["agents"]:
        named = set(re.findall(r"\b[CR]\d?_[AB]\b", a["task_text"]))
        task = a["task"]
        if task["own_key"]:
            assert named == {task["own_key"], task["partner_key"]}, a["task_text"]
            number = "N" + task["own_key"][1:]
            assert f"{number} = {task['inputs']['number']}" in a["task_text"]
        else:
            assert named == set()
    m = world_row(out.world, out.steps)
    assert m["pairs_joint_success"] == 2 and m["joint_success"] is True


def test_prepopulated_seeds_every_pairs_values(tmp_path: Path) -> None:
    study = make_study(tmp_path, [{"model": "sim/diligent", "condition": "prepopulated", "pairs": 2}])
    out = asyncio.run(run_one_world(study, study.cells[0], 0))
    seeded = {e["key"] for e in out.world["prepopulated"]}
    keys = {a["task"]["own_key"] for a in out.world["agents"] if a["task"]["own_key"]}
    assert seeded == keys and len(keys) == 4


def test_sizes_stay_paired_and_the_pair_table_has_a_row_per_pair(tmp_path: Path) -> None:
    study = make_study(tmp_path, [{"model": "sim/diligent"}, {"model": "sim/diligent", "pairs": 2, "solos": 4},
                                  {"model": "sim/diligent", "max_steps": 40}], worlds=8)
    run_study(study, tmp_path / "run", progress=False)
    records = load_run(tmp_path / "run")
    design = design_of_records(records)
    assert {"pairs", "solos", "max_steps"} <= set(design.varying)
    wf = world_frame(records)
    by_cell = {c: g.sort_values("world_index") for c, g in wf.groupby("cell_id")}
    small, big, _ = (by_cell[c] for c in design.cells)
    assert list(small["seed"]) == list(big["seed"])  # world i of every cell has the same seed
    worlds = {w["world_id"]: w for w in records.worlds}
    for a_id, b_id in zip(small["world_id"], big["world_id"]):
        a, b = worlds[a_id]["tasks"]["tasks"], worlds[b_id]["tasks"]["tasks"]
        assert all(a[r] == b[r] for r in ROLES)
    t = pair_table(agent_frame(records), design)
    counts = t.groupby("cell_id")["pair"].apply(list).to_dict()
    assert counts[design.cells[0]] == [1] and counts[design.cells[1]] == [1, 2]
    # pair 1 of a paper-size cell repeats that cell's joint success over valid worlds
    first = t[(t["cell_id"] == design.cells[0]) & (t["pair"] == 1)]["joint_success:k/n"].iloc[0]
    v = small[small["valid"]]
    assert first == f"{int(v['joint_success'].sum())}/{len(v)}"

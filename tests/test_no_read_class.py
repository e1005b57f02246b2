"""Issue 22, part 2: why a pair agent made no cross-agent read, on scripted worlds
built for each class (timings on the world clock order the steps)."""
from __future__ import annotations

import pytest

from tests.conftest import run_world, scripted
from workbench.worlds.stigmergy.metrics import NO_READ_CLASSES, agent_rows

W = '{"op":"write","key":"$own_key","value":$own_value}'
L = '{"op":"list"}'
R_OWN = '{"op":"read","key":"$own_key"}'
WRONG = '{"op":"submit","answer":0}'
A = '{"op":"submit","answer":$answer}'
SOLOS = {"solo_1": {"script": [A], "latency_s": 0.2}, "solo_2": {"script": [A], "latency_s": 0.3}}

# pair_a's script and latency, pair_b's, the cell's condition, and the class pair_a must get
CASES = {
    "partner never wrote": ([L, WRONG], 1.0, [WRONG], 0.5, "store"),
    "read something else": ([W, R_OWN, WRONG], 1.0, [W, WRONG], 0.5, "store"),
    "saw it, did not read": ([L, WRONG], 1.0, [W, WRONG], 0.5, "store"),
    "looked after the write, not shown it": ([L, WRONG], 1.0, [W, WRONG], 0.5, "private"),
    "looked only before the write": ([L, WRONG], 0.5, [W, WRONG], 1.0, "store"),
    "never looked": ([WRONG], 1.0, [W, WRONG], 0.5, "store"),
}


@pytest.mark.parametrize("expected", list(CASES))
def test_each_class_on_a_world_built_for_it(write_study, expected):
    a_script, a_lat, b_script, b_lat, condition = CASES[expected]
    agents = {"pair_a": {"script": a_script, "latency_s": a_lat}, "pair_b": {"script": b_script, "latency_s": b_lat},
              **SOLOS}
    out = run_world(write_study(scripted(agents, condition=condition)))
    by_role = {r["role"]: r for r in agent_rows(out.world, out.steps)}
    assert by_role["pair_a"]["no_read_class"] == expected
    assert by_role["solo_1"]["no_read_class"] is None  # only pair agents are classed


def test_an_agent_that_read_across_agents_has_no_class(write_study):
    read_partner = '{"op":"read","key":"$partner_key"}'
    agents = {"pair_a": {"script": [L, read_partner, WRONG], "latency_s": 1.0},
              "pair_b": {"script": [W, WRONG], "latency_s": 0.5}, **SOLOS}
    out = run_world(write_study(scripted(agents)))
    a = {r["role"]: r for r in agent_rows(out.world, out.steps)}["pair_a"]
    assert a["cross_agent_read"] and a["no_read_class"] is None


def test_the_cell_table_partitions_pair_agents_without_a_read(tmp_path):
    from tests.conftest import make_study
    from workbench.metrics.design import design_of_records
    from workbench.records import load_run
    from workbench.study import run_study
    from workbench.worlds.stigmergy.frames import agent_frame
    from workbench.worlds.stigmergy.tables import no_read_table

    study = make_study(tmp_path, [{"model": "sim/clause-follower", "clauses": "persist-only"},
                                  {"model": "sim/non-writer"}], worlds=20)
    run_study(study, tmp_path / "run", progress=False)
    records = load_run(tmp_path / "run")
    af = agent_frame(records)
    table = no_read_table(af, design_of_records(records))
    for _, row in table.iterrows():
        ks = [int(row[f"{c}:k/n"].split("/")[0]) for c in NO_READ_CLASSES]
        ns = {int(row[f"{c}:k/n"].split("/")[1]) for c in NO_READ_CLASSES}
        assert ns == {row["pair agents without a cross-agent read"]} and sum(ks) == ns.pop()
    nonwriter = table[table["cell_id"] == study.cells[1].cell_id].iloc[0]
    assert nonwriter["partner never wrote:k/n"].startswith(f"{nonwriter['pair agents without a cross-agent read']}/")


def test_seeing_only_a_solo_agents_key_is_not_seeing_it(write_study):
    """Issue 38: "saw it, did not read" needs the partner's entry in a list; a list that
    showed only a solo agent's key (the partner wrote after it looked) is classed by timing."""
    solo_w = '{"op":"write","key":"scratch","value":1}'
    agents = {"pair_a": {"script": [L, WRONG], "latency_s": 0.5}, "pair_b": {"script": [W, WRONG], "latency_s": 1.0},
              "solo_1": {"script": [solo_w, A], "latency_s": 0.2}, "solo_2": {"script": [A], "latency_s": 0.3}}
    out = run_world(write_study(scripted(agents)))
    rows = {r["role"]: r for r in agent_rows(out.world, out.steps)}
    a = rows["pair_a"]
    assert a["no_read_class"] == "looked only before the write"  # it was shown solo_1's key, never pair_b's
    lists = [s for s in out.steps if s["role"] == "pair_a" and (s.get("op") or {}).get("op") == "list"]
    assert lists and lists[0]["effect"]["exposure"]  # exposure to some other agent's key did happen

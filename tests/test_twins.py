"""The paper's qualitative findings must emerge from the simulated mechanism (the
profiles act on the prompt text), not from a table of outcomes."""
from __future__ import annotations

import pytest

from tests.conftest import study_dict
from workbench.params import load_study
from workbench.records import load_run
from workbench.study import run_study
from workbench.worlds.stigmergy.frames import agent_frame, world_frame
from workbench.worlds.stigmergy.simulated import PROFILES

TWINS = sorted(n for n in PROFILES if n.startswith("twin-"))


@pytest.fixture(scope="module")
def frames(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("twins")
    import yaml

    spec = study_dict(name="twins", worlds_per_cell=20, cells=[], grid=[
        {"model": [f"sim/{t}" for t in TWINS] + ["sim/non-writer", "sim/clause-follower"],
         "condition": ["store", "no-store", "private", "prepopulated"]},
        {"model": ["sim/twin-gpt-6-astra", "sim/clause-follower"], "condition": "store", "clauses": "persist-only"},
    ])
    spec["defaults"]["scheduler"] = "lockstep"
    path = tmp / "twins.yaml"
    path.write_text(yaml.safe_dump(spec))
    run_study(load_study(path), tmp / "run", progress=False)
    records = load_run(tmp / "run")
    return world_frame(records), agent_frame(records)


def test_twins_are_labelled_simulated():
    for name in TWINS:
        p = PROFILES[name]
        assert "(simulated)" in p.description and p.reference


def test_no_store_and_private_give_no_joint_success(frames):
    wf, _ = frames
    sub = wf[wf["condition"].isin(["no-store", "private"])]
    assert len(sub) == 11 * 2 * 20
    assert sub["joint_success"].sum() == 0 and sub["cross_agent_access"].sum() == 0


def test_deleting_the_recheck_clause_collapses_access(frames):
    wf, af = frames
    for model in ("sim/twin-gpt-6-astra", "sim/clause-follower"):
        store = wf[(wf["model"] == model) & (wf["condition"] == "store")]
        both = store[store["clauses"] == "both"]
        persist = store[store["clauses"] == "persist-only"]
        assert both["cross_agent_access"].mean() >= 0.9, model
        assert persist["cross_agent_access"].mean() <= 0.2, model
        pair = af[(af["model"] == model) & (af["condition"] == "store") & af["pair_member"]]
        assert pair[pair["clauses"] == "both"]["second_look"].mean() > 0.9
        assert pair[pair["clauses"] == "persist-only"]["second_look"].mean() < 0.15


def test_prepopulated_gives_seeded_reads_for_every_profile(frames):
    _, af = frames
    pre = af[(af["condition"] == "prepopulated") & af["pair_member"]]
    rates = pre.groupby("model")["seeded_read"].mean()
    assert len(rates) == 11
    assert (rates > 0).all(), rates[rates == 0]
    # the four models the paper seeded read their seeded values (paper: 100/100 agents each)
    tested = rates[["sim/twin-gpt-6-astra", "sim/twin-claude-sonnet-5", "sim/twin-gemini-3.7-flash",
                    "sim/twin-gpt-5.4-mini"]]
    assert (tested >= 0.8).all(), tested


def test_a_profile_that_never_writes_never_coordinates(frames):
    wf, _ = frames
    for model in ("sim/twin-gemini-3.7-flash", "sim/non-writer"):
        store = wf[(wf["model"] == model) & (wf["condition"] == "store")]
        assert store["pair_write"].sum() == 0
        assert store["cross_agent_access"].sum() == 0 and store["joint_success"].sum() == 0


def test_the_coordinating_twin_coordinates_and_the_prose_twin_dies_under_strict(frames):
    wf, _ = frames
    astra = wf[(wf["model"] == "sim/twin-gpt-6-astra") & (wf["condition"] == "store") & (wf["clauses"] == "both")]
    assert astra["joint_success"].mean() >= 0.9
    haiku = wf[(wf["model"] == "sim/twin-claude-haiku-4-5") & (wf["condition"] == "store")]
    assert haiku["valid"].all()  # the lenient parser keeps prose-first replies


def test_strict_rescoring_discards_the_prose_twin(tmp_path):
    import yaml

    spec = study_dict(worlds_per_cell=10, cells=[{"model": "sim/twin-claude-haiku-4-5"}])
    path = tmp_path / "h.yaml"
    path.write_text(yaml.safe_dump(spec))
    run_study(load_study(path), tmp_path / "run", progress=False)
    records = load_run(tmp_path / "run")
    assert world_frame(records)["valid"].all()
    assert not world_frame(records, "strict")["valid"].any()

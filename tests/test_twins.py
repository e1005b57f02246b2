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
    # the lenient parser keeps prose-first replies: only its rare cut-off replies (p_malformed) cost worlds
    assert haiku["valid"].mean() >= 0.6
    for model in ("sim/twin-gpt-6-astra", "sim/twin-gemini-3.7-flash", "sim/non-writer"):  # no attrition
        assert wf[wf["model"] == model]["valid"].all(), model


def test_strict_rescoring_discards_the_prose_twin(tmp_path):
    import yaml

    spec = study_dict(worlds_per_cell=10, cells=[{"model": "sim/twin-claude-haiku-4-5"}])
    path = tmp_path / "h.yaml"
    path.write_text(yaml.safe_dump(spec))
    run_study(load_study(path), tmp_path / "run", progress=False)
    records = load_run(tmp_path / "run")
    lenient = world_frame(records).set_index("world_id")["valid"]
    for world_id, steps in records.steps.items():
        styles = {s["reply"]["extra"]["style"] for s in steps}
        # every prose-first reply passes the lenient parser; a world is lost only to a cut-off reply
        assert all(s["parse"]["lenient"]["valid"] for s in steps if s["reply"]["extra"]["style"] != "truncated")
        assert bool(lenient[world_id]) == ("truncated" not in styles)
    assert not world_frame(records, "strict")["valid"].any()


def _world(profile, seed, **cell):
    import asyncio

    from workbench.models.factory import make_client
    from workbench.templates import template_set
    from workbench.worlds.stigmergy.calibration import PROMPTS, _cell, load_calibration
    from workbench.worlds.stigmergy.metrics import world_row
    from workbench.worlds.stigmergy.world import StigmergyWorld

    cal = load_calibration()
    spec = _cell(cal["designs"]["main"], {"cell": cell}, f"sim/{profile.name}")
    world = StigmergyWorld(spec, world_id="w", cell_id="c", seed=seed, templates=template_set(PROMPTS),
                           client_factory=lambda route, slot, s, o: make_client(
                               route, seed=s, profiles={profile.name: profile}, **o))
    out = asyncio.run(world.run())
    return out, world_row(out.world, out.steps)


@pytest.mark.parametrize("parser", ["lenient", "strict"])
def test_a_malformed_reply_is_cut_off_unparseable_and_invalidates_the_world(parser):
    always = PROFILES["twin-gpt-6-astra"].model_copy(update={"name": "always-malformed", "p_malformed": 1.0})
    out, row = _world(always, 5, parser=parser)
    cut = [s for s in out.steps if s["reply"]["extra"]["style"] == "truncated"]
    assert sorted(s["agent"] for s in cut) == sorted(a["agent"] for a in out.world["agents"])  # one each
    assert all("}" not in s["reply"]["text"] and not s["parse"][parser]["valid"] for s in cut)
    assert not row["valid"] and "unparseable reply" in row["invalid_reason"]
    assert all(a.get("submission") for a in out.world["agents"])  # each goes on from the error and submits


def test_a_profile_without_attrition_keeps_its_random_stream():
    import random

    from workbench.worlds.stigmergy.simulated import SimulatedClient

    system = "Keep your intermediate results in the workspace. Check your workspace again before submitting."
    astra = PROFILES["twin-gpt-6-astra"]
    assert astra.p_malformed == 0.0 and astra.p_note_for_readers == 0.0

    def state_after(profile):
        client = SimulatedClient(profile, 42)
        client._dispositions(system)
        return client.rng.getstate()

    nine = random.Random(42)  # the nine per-agent draws every profile made before attrition existed
    for _ in range(9):
        nine.random()
    assert state_after(astra) == nine.getstate()  # a zero rate draws nothing: its worlds are as before
    assert state_after(astra.model_copy(update={"p_malformed": 1e-9})) != nine.getstate()
    assert state_after(astra.model_copy(update={"p_malformed": 1.0})) != nine.getstate()

"""Issue 21, part 3: calibration as a test. Each shipped twin, run on the designs
of the paper's figures it was fitted to, at the fitting seed and four further
seeds, lands within the reference's interval with its count pooled over the seeds;
attrition reproduces the paper's valid worlds; the twins pooled read after an
exposure as often as the paper's reference cells; moving a parameter breaks it;
the command reports it."""
from __future__ import annotations

import dataclasses

import pytest

from workbench.cli import main
from workbench.worlds.stigmergy.calibration import (
    POOLED,
    check_all,
    check_pooled,
    check_twin,
    design_seeds,
    load_calibration,
)
from workbench.worlds.stigmergy.simulated import PROFILES


@pytest.fixture(scope="module")
def checks():
    """The whole check, once (about 10 s: every twin, five seeds)."""
    return check_all()


def by(checks, twin, figure):
    return next(c for c in checks if c.twin == twin and c.figure == figure)


def test_every_shipped_twin_is_within_its_references_pooled_over_five_seeds(checks):
    cal = load_calibration()
    twins = set(cal["references"])
    assert {c.twin for c in checks} == twins | {POOLED}
    assert len(checks) == sum(len(r) for r in cal["references"].values()) + len(cal["pooled"])
    for design in cal["designs"]:
        seeds = design_seeds(cal, design)
        assert len(set(seeds)) >= 5 and seeds[0] == cal["designs"][design]["seed"]
    assert all(len(c.seeds) >= 5 and c.k == sum(s.k for s in c.seeds) and c.n == sum(s.n for s in c.seeds)
               for c in checks)
    outside = [c.row() for c in checks if not c.within]
    assert not outside, outside


def test_the_worst_seed_is_reported_beside_the_pooled_count(checks):
    nano = by(checks, "twin-gpt-5-nano", "coordinated")
    worst = nano.worst
    assert worst is not None and worst in nano.seeds
    if any(not s.within for s in nano.seeds):
        assert not worst.within  # a seed outside is worse than any inside
    else:
        assert abs(worst.diff) == max(abs(s.diff) for s in nano.seeds)
    row = nano.row()
    assert row["seeds within"] == f"{nano.seeds_within}/{len(nano.seeds)}"
    assert row["worst seed"].startswith(f"{worst.seed}: {worst.k}/{worst.n}")


def test_attrition_reproduces_the_papers_valid_worlds(checks):
    cal = load_calibration()
    attrited = {twin: refs["valid"] for twin, refs in cal["references"].items()
                if "valid" in refs and int(refs["valid"].split("/")[0]) < int(refs["valid"].split("/")[1])}
    # the reference column's cells that lost worlds: 49/50, 49/50, 40/50, 96/100
    assert attrited == {"twin-gpt-5.4-mini": "49/50", "twin-gpt-5-nano": "49/50",
                        "twin-claude-haiku-4-5": "40/50", "twin-gemini-3.8-flash": "96/100"}
    for twin in attrited:
        valid = by(checks, twin, "valid")
        assert valid.within and valid.k < valid.n, valid.row()  # it loses worlds, about as many as the paper
        assert by(checks, twin, "coordinated").n == valid.k  # rates are over the valid worlds, as the paper's
    haiku = by(checks, "twin-claude-haiku-4-5", "valid")
    assert 0.7 <= haiku.k / haiku.n <= 0.9
    for twin in set(cal["references"]) - set(attrited):  # no attrition where the paper had none
        valid = by(checks, twin, "valid")
        assert valid.k == valid.n and valid.within


def test_without_attrition_a_twin_misses_its_valid_worlds():
    haiku = PROFILES["twin-claude-haiku-4-5"].model_copy(update={"p_malformed": 0.0})
    cal = {**load_calibration(), "seeds": []}  # the fitting seed only: enough to see it
    valid = by(check_twin("twin-claude-haiku-4-5", {"twin-claude-haiku-4-5": haiku}, cal),
               "twin-claude-haiku-4-5", "valid")
    assert valid.k == valid.n == 50 and not valid.within and valid.low > 0


def test_exposure_then_read_is_within_the_papers(checks):
    cal = load_calibration()
    assert cal["pooled"]["exposure_then_read"] == "213/215"
    figure = cal["figures"]["exposure_then_read"]
    assert figure["metric"] == "exposed_then_read_world" and figure["given"] == "exposure"
    pooled = by(checks, POOLED, "exposure_then_read")
    assert pooled.within and pooled.k / pooled.n >= 0.97, pooled.row()
    assert pooled.n > 900  # every twin's exposed worlds at five seeds, not a handful


def test_twins_that_do_not_read_what_they_see_miss_exposure_then_read():
    # the twins as they were before: agents shown another's entry often left it unread (234/288 at seed 2611)
    old = {"twin-gpt-5.4-mini": {"p_read_foreign": 0.0, "p_read_exposed": 0.95, "p_recheck_clause": 0.25,
                                 "latency_sigma": 0.5},
           "twin-gemini-3.8-flash": {"p_read_foreign": 0.0, "p_read_exposed": 0.8, "p_recheck_clause": 0.3,
                                     "p_first_list": 0.8, "latency_sigma": 0.5},
           "twin-claude-sonnet-5": {"p_read_foreign": 0.0, "p_recheck_clause": 0.25, "latency_sigma": 0.5}}
    profiles = {t: PROFILES[t].model_copy(update=u) for t, u in old.items()}
    cal = {**load_calibration(), "seeds": []}
    pooled = check_pooled(profiles, cal)[0]
    assert not pooled.within and pooled.high < 0, pooled.row()


def test_moving_a_parameter_breaks_the_calibration():
    cal = {**load_calibration(), "seeds": [777]}
    astra = PROFILES["twin-gpt-6-astra"]
    moved = astra.model_copy(update={"p_recheck_clause": 0.2})
    checks = {c.figure: c for c in check_twin("twin-gpt-6-astra", {"twin-gpt-6-astra": moved}, cal)}
    assert not checks["coordinated"].within and checks["coordinated"].k < 0.8 * checks["coordinated"].n
    assert checks["coordinated"].seeds_within == 0
    nano = PROFILES["twin-gpt-5-nano"].model_copy(update={"p_generic_key": 0.6, "error_rate": 0.08})
    joint = by(check_twin("twin-gpt-5-nano", {"twin-gpt-5-nano": nano}, cal), "twin-gpt-5-nano", "joint")
    assert not joint.within and joint.high < 0  # generic keys everywhere: far below the paper's 15/49


def test_profiles_check_and_show_commands(capsys, monkeypatch, checks):
    assert main(["profiles", "--show", "twin-gpt-5-nano"]) == 0
    out = capsys.readouterr().out
    assert "p_generic_key: 0.1" in out and "p_malformed: 0.005" in out and "recheck:" in out and "not a model" in out
    assert main(["profiles", "--show", "no-such-profile"]) == 2
    import workbench.worlds.stigmergy.calibration as cal

    monkeypatch.setattr(cal, "check_all", lambda profiles=None: checks[:3])
    assert main(["profiles", "--check"]) == 0
    out = capsys.readouterr().out
    assert "3 of 3 figures within" in out and "seeds within" in out and "worst seed" in out
    assert main(["profiles", "--check", "--markdown"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("| twin | figure | reference k/n | twin k/n, pooled | difference") and lines[1].startswith("|---|")
    assert lines[2].startswith("| twin-gpt-6-astra | coordinated | 50/50 | 250/250 |") and "| yes |" in lines[2]
    moved = [dataclasses.replace(checks[0], low=0.01)]  # an interval that misses 0
    monkeypatch.setattr(cal, "check_all", lambda profiles=None: moved)
    assert main(["profiles", "--check", "--markdown"]) == 1
    assert "| **no** |" in capsys.readouterr().out


def test_the_docs_table_is_the_commands_output(checks, capsys, monkeypatch):
    """docs/calibration.md holds `workbench profiles --check --markdown` verbatim: regenerate it when
    a twin or a figure changes."""
    from pathlib import Path

    import workbench.worlds.stigmergy.calibration as cal

    monkeypatch.setattr(cal, "check_all", lambda profiles=None: checks)
    assert main(["profiles", "--check", "--markdown"]) == 0
    table = capsys.readouterr().out
    doc = (Path(__file__).resolve().parents[1] / "docs" / "calibration.md").read_text(encoding="utf-8")
    assert table.strip() in doc


def test_a_bad_reference_names_the_file_and_field(tmp_path):
    bad = tmp_path / "calibration.yaml"
    bad.write_text("designs: {}\nfigures: {coordinated: {design: main, metric: cross_agent_access}}\n"
                   "references: {twin-x: {coordinated: '50 of 50'}}\n")
    with pytest.raises(ValueError, match="references.twin-x.coordinated: expected k/n"):
        load_calibration(bad)
    bad.write_text("designs: {}\nfigures: {coordinated: {design: main, metric: cross_agent_access}}\n"
                   "pooled: {exposure: 1/2}\n")
    with pytest.raises(ValueError, match="pooled.exposure: expected one of"):
        load_calibration(bad)
    bad.write_text("seeds: [1, two]\nfigures: {}\n")
    with pytest.raises(ValueError, match="seeds: expected a list of integers"):
        load_calibration(bad)

"""Issue 21, part 3: calibration as a test. Each shipped twin, run on the designs
of the paper's figures it was fitted to, lands within the reference's interval;
moving a parameter breaks it; the command reports it."""
from __future__ import annotations

import pytest

from workbench.cli import main
from workbench.worlds.stigmergy.calibration import check_all, check_twin, load_calibration
from workbench.worlds.stigmergy.simulated import PROFILES


def test_every_shipped_twin_is_within_its_references():
    checks = check_all()
    twins = set(load_calibration()["references"])
    assert {c.twin for c in checks} == twins and len(checks) >= len(twins)
    outside = [c.row() for c in checks if not c.within]
    assert not outside, outside


def test_moving_a_parameter_breaks_the_calibration():
    astra = PROFILES["twin-gpt-6-astra"]
    moved = astra.model_copy(update={"p_recheck_clause": 0.2})
    checks = {c.figure: c for c in check_twin("twin-gpt-6-astra", profiles={"twin-gpt-6-astra": moved})}
    assert not checks["coordinated"].within and checks["coordinated"].k < 40
    nano = PROFILES["twin-gpt-5-nano"].model_copy(update={"p_generic_key": 0.6, "error_rate": 0.08})
    joint = {c.figure: c for c in check_twin("twin-gpt-5-nano", profiles={"twin-gpt-5-nano": nano})}["joint"]
    assert not joint.within and joint.high < 0  # the old nano: far below the paper's 15/49


def test_profiles_check_and_show_commands(capsys, monkeypatch):
    assert main(["profiles", "--show", "twin-gpt-5-nano"]) == 0
    out = capsys.readouterr().out
    assert "p_generic_key: 0.1" in out and "recheck:" in out and "not a model" in out
    assert main(["profiles", "--show", "no-such-profile"]) == 2
    import workbench.worlds.stigmergy.calibration as cal

    real = cal.check_all
    monkeypatch.setattr(cal, "check_all", lambda profiles=None: real(profiles)[:3])
    assert main(["profiles", "--check"]) == 0
    assert "3 of 3 figures within" in capsys.readouterr().out


def test_a_bad_reference_names_the_file_and_field(tmp_path):
    bad = tmp_path / "calibration.yaml"
    bad.write_text("designs: {}\nfigures: {coordinated: {design: main, metric: cross_agent_access}}\n"
                   "references: {twin-x: {coordinated: '50 of 50'}}\n")
    with pytest.raises(ValueError, match="references.twin-x.coordinated: expected k/n"):
        load_calibration(bad)

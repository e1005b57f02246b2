"""Damaged records are never silent: a torn world line and a corrupt step line are named by
the commands that read the run and by the report, and a world missing a step runs again."""
from __future__ import annotations

import json

import yaml

from tests.conftest import PROMPTS, ROOT
from workbench.cli import main
from workbench.records import STEPS, WORLDS, damage, load_run


def _run(tmp_path):
    body = yaml.safe_load((ROOT / "params/smoke.yaml").read_text())
    body.update(defaults={**body["defaults"], "prompts": str(PROMPTS)}, grid=[])
    study = tmp_path / "s.yaml"
    study.write_text(yaml.safe_dump(body))
    out = tmp_path / "run"
    assert main(["-q", "run", str(study), "--out", str(out)]) == 0
    return study, out


def test_a_torn_world_line_is_named_by_every_reader(tmp_path, capsys):
    study, out = _run(tmp_path)
    data = (out / WORLDS).read_bytes()
    (out / WORLDS).write_bytes(data[:-40])  # the last world's line, torn
    capsys.readouterr()
    for argv in (["metrics", str(out)], ["replay", str(out)]):
        main(argv)
        err = capsys.readouterr().err
        assert "damaged record" in err and WORLDS in err, (argv, err[-800:])
    assert any(WORLDS in line for line in damage(load_run(out)))
    assert main(["-q", "run", str(study), "--out", str(out)]) == 0  # the torn line is cut, the world run again
    assert damage(load_run(out)) == []


def test_a_world_missing_a_step_is_named_and_run_again(tmp_path, capsys):
    study, out = _run(tmp_path)
    lines = (out / STEPS).read_text().splitlines(keepends=True)
    victim = json.loads(lines[3])
    lines[3] = '{"kind": "step", "world_id": "' + victim["world_id"] + '", "trunc\n'  # a corrupt middle line
    (out / STEPS).write_text("".join(lines))
    found = damage(load_run(out))
    assert any(victim["world_id"] in line and "steps readable" in line for line in found), found
    capsys.readouterr()
    main(["metrics", str(out)])
    assert victim["world_id"] in capsys.readouterr().err
    assert main(["-q", "run", str(study), "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert "run again" in err and victim["world_id"] in err
    manifest = json.loads((out / "manifest.json").read_text())
    assert victim["world_id"] in manifest["runs"][-1]["damaged_rerun"]
    records = load_run(out)
    world = records.world(victim["world_id"])
    assert world["run"] == 2 and len(records.steps[victim["world_id"]]) == world["n_steps"]


def test_the_report_says_whether_records_are_damaged(tmp_path):
    from workbench.views.run_report import RunReport

    _, out = _run(tmp_path)
    report = RunReport.__new__(RunReport)
    report.records = load_run(out)
    assert "every line readable" in report.provenance_html()
    data = (out / WORLDS).read_bytes()
    (out / WORLDS).write_bytes(data[:-40])
    report.records = load_run(out)
    del report._damage  # a report is made once per run set; here the same object reads the damaged one
    assert "damaged records" in report.provenance_html() and "every line readable" not in report.provenance_html()
    assert "1 damaged record(s)" in report.damage_html() and "left out of every number" in report.what_was_run_html()

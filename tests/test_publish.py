"""Notebooks under papermill, the offline HTML report in a real browser, the world
explorer's widgets, and batch runs. Screenshots go to outputs/screenshots/."""
from __future__ import annotations

import json
import os
import re
import shutil

import pytest
import yaml

from tests.browser import open_offline
from tests.conftest import PROMPTS, ROOT, study_dict
from workbench.params import load_study
from workbench.publish.html import external_references
from workbench.publish.notebooks import execute
from workbench.publish.report import make_report
from workbench.records import load_run
from workbench.study import run_study

SHOTS = ROOT / "outputs" / "screenshots"
XSS_KEY = '<img src=x onerror="window.__xss_img=1">'
XSS_VALUE = "<script>window.__xss_script=1</script>"


def xss_study() -> dict:
    writer = json.dumps({"op": "write", "key": XSS_KEY, "value": XSS_VALUE})
    reader = json.dumps({"op": "read", "key": XSS_KEY})
    return study_dict(name="publish", worlds_per_cell=3, cells=[
        {"model": "sim/diligent"},
        {"model": "sim/diligent", "condition": "no-store"},
        {"model": "sim/clause-follower", "clauses": "persist-only"},
        {"model": "scripted", "label": "xss probe", "agents": {
            "pair_a": {"script": [writer, '{"op":"submit","answer":1}'], "latency_s": 1.0},
            "pair_b": {"script": ['{"op":"list"}', reader, '{"op":"submit","answer":1}'], "latency_s": 1.5},
            "solo_1": {"script": ['{"op":"submit","answer":$answer}']},
            "solo_2": {"script": ['{"op":"submit","answer":$answer}']}}},
    ])


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("publish")
    path = tmp / "study.yaml"
    path.write_text(yaml.safe_dump(xss_study()))
    run_study(load_study(path), tmp / "run", progress=False)
    html = make_report(tmp / "run", timeout_s=300, max_timelines=6)
    return tmp, path, html


def test_report_is_self_contained(report):
    _, _, html_path = report
    html = html_path.read_text(encoding="utf-8")
    assert external_references(html) == []
    assert html.count('id="wb-plotly-gz"') == 1 and "plotly.js v" not in html  # inlined once, compressed
    assert "Analysis.load(" not in html and "hl-ipython3" not in html  # no input cells
    assert XSS_VALUE not in html and XSS_KEY not in html
    assert "&lt;script&gt;window.__xss_script=1" in html  # present, escaped


def test_report_in_a_browser_offline(report):
    _, _, html_path = report
    SHOTS.mkdir(parents=True, exist_ok=True)
    with open_offline(html_path) as (page, left):
        assert page.locator(".main-svg").count() >= 8  # plotly drew its charts
        assert page.locator(".js-plotly-plot").count() >= 8
        assert page.evaluate("typeof window.__xss_script") == "undefined"
        assert page.evaluate("typeof window.__xss_img") == "undefined"
        assert page.locator(".lm-TabBar, .jupyter-widgets").count() == 0  # no widget: plain HTML tabs
        tab = page.locator("div.wb-tab-labels > label", has_text="xss probe").first
        tab.click()  # a CSS tab: shows its panel, no script involved
        panel = page.locator(f"#{tab.get_attribute('for')}-panel")
        assert panel.is_visible() and page.locator("div.wb-tab-panel:visible").count() == 1
        page.evaluate("document.querySelectorAll('details').forEach(d => d.open = true)")
        page.wait_for_timeout(300)
        body = page.inner_text("body")
        assert XSS_VALUE in body and XSS_KEY in body  # shown as text, in the transcript
        assert "SIMULATED: every agent in this run set is simulated" in body  # scripted agents too (no model)
        page.screenshot(path=str(SHOTS / "report.png"), full_page=False)
        page.set_viewport_size({"width": 1300, "height": 4000})
        page.screenshot(path=str(SHOTS / "report-long.png"))
        assert left == [], left


def test_study_and_world_notebooks_execute(report, tmp_path):
    _, study_path, _ = report
    out = tmp_path / "nb-run"
    executed = execute("study", tmp_path / "study.ipynb", {"params": str(study_path), "out": str(out),
                                                          "cells": "", "concurrency": 2, "plan_rehearse": 2},
                       timeout_s=300)
    assert len(load_run(out).worlds) == 12
    nb = json.loads(executed.read_text())
    text = json.dumps([c.get("outputs") for c in nb["cells"]])
    assert "run 1 complete: 12 worlds finished" in text
    assert "worlds for 80% power" in text and "input_tokens" in text  # the plan section, before the run

    world_nb = execute("world", tmp_path / "world.ipynb", {"study": str(study_path), "cell": 0, "world_index": 1},
                       timeout_s=300)
    views = explorer_views(json.loads(world_nb.read_text()))
    assert len(views) == 4  # summary, timeline, step with the store, transcripts: one Output each
    shown = json.dumps(views)
    assert "application/vnd.plotly.v1+json" in shown  # the timeline
    ids = set(re.findall(r"[0-9a-f]{10}-\d{4}", shown))
    assert len(ids) == 1 and ids.pop().endswith("-0001")  # world_index 1, and no other world anywhere
    assert "store after step 0" in shown and "transcripts of world" in shown


def explorer_views(nb: dict) -> list[list[dict]]:
    """The outputs of every Output widget saved in an executed notebook's widget state."""
    state = nb["metadata"]["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    return [m["state"]["outputs"] for m in state.values() if m["model_name"] == "OutputModel"]


def test_explorer_toggles_rerun_the_world(report):
    from workbench.explorers.stigmergy import WorldExplorer

    _, study_path, _ = report
    ex = WorldExplorer.from_study(study_path, cell=0, world_index=0)
    assert ex.world["cell"]["condition"] == "store" and "list" in ex.world["allowed_ops"]
    ex.controls["condition"].value = "no-store"
    assert ex.world["cell"]["condition"] == "no-store" and ex.world["allowed_ops"] == ["submit"]
    assert "no-store" in ex.world["cell_label"] and "· no-store ·" in ex.panel.text()  # the label follows the cell
    ex.controls["world"].value = 2
    assert ex.world["world_id"].endswith("-0002")
    ex.step.value = ex.step.max
    assert f"store after step {ex.steps[-1]['seq']}" in json.dumps(ex.views["step"].outputs)


def test_batch_reports_a_failed_cell_and_resumes(tmp_path):
    from workbench.publish.batch import run_batch

    prompts = tmp_path / "prompts"
    shutil.copytree(PROMPTS, prompts)
    (prompts / "persistence" / "none.txt").write_text("$undefined_placeholder")
    # one good cell and one whose template is broken: as much as proves a failed cell is reported and resumed
    spec = study_dict(name="batch", worlds_per_cell=2, cells=[
        {"model": "sim/diligent"}, {"model": "sim/diligent", "clauses": "none"}])
    spec["defaults"]["prompts"] = str(prompts)
    path = tmp_path / "batch.yaml"
    path.write_text(yaml.safe_dump(spec))
    out = tmp_path / "out"
    first = run_batch(path, out, parallel=2, timeout_s=300, report=False)
    assert len(first.done) == 1 and len(first.failed) == 1
    (bad,) = first.failed
    assert "undefined_placeholder" in first.failed[bad]
    assert (out / "notebooks" / f"study-{bad}.ipynb").exists()  # the failed run is kept to inspect
    assert len(load_run(out).worlds) == 2
    (good,) = first.done
    kept = (out / "notebooks" / f"study-{good}.ipynb").stat().st_mtime_ns

    (prompts / "persistence" / "none.txt").write_text("")  # a template only the failed cell renders
    second = run_batch(path, out, parallel=2, timeout_s=300, report=False)
    assert not second.failed and len(second.done) == 2
    # the finished cell's run is recorded without a kernel: its notebook is the one that made its worlds
    assert (out / "notebooks" / f"study-{good}.ipynb").stat().st_mtime_ns == kept
    records = load_run(out)
    assert len(records.worlds) == 4 and len({w["world_id"] for w in records.worlds}) == 4
    runs = {cid: [r["run"] for r in part["runs"]] for cid, part in records.manifest["parts"].items()}
    assert all(len(v) == 2 for v in runs.values())  # every cell ran twice; the second found its worlds done



def test_batch_takes_relative_paths_while_notebooks_change_directory(tmp_path, monkeypatch):
    """The study runs in a kernel whose working directory is the notebooks' folder, and a notebook
    may chdir the batch's own process (papermill did, with cells in other threads): a relative
    path resolved after the batch began pointed into notebooks/ (cells failed at random)."""
    from workbench.publish import batch

    spec = study_dict(name="relbatch", worlds_per_cell=1, cells=[{"model": "sim/diligent"}, {"model": "sim/loner"}])
    spec["defaults"]["prompts"] = str(PROMPTS)
    (tmp_path / "relbatch.yaml").write_text(yaml.safe_dump(spec))
    elsewhere = tmp_path / "notebooks"
    elsewhere.mkdir()
    seen = []

    class FakeKernel:  # what a notebook may do to the process
        def __init__(self, cwd, *, timeout_s):
            pass

        def execute(self, name, output, parameters):
            seen.append(parameters["params"])
            os.chdir(elsewhere)

        def close(self):
            pass

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(batch, "SharedKernel", FakeKernel)
    result = batch.run_batch("relbatch.yaml", "out", parallel=1, timeout_s=30, report=False)
    assert len(result.done) == 2
    assert seen == [str(tmp_path / "relbatch.yaml")] * 2

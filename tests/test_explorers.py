"""The explorers in-process: build one, change a widget's value, and read what every
view (one ``Output`` each) shows. After any change no view may show anything of
the previous world; a busy line says what runs; a real model's route runs only on
Run; the step (turn) slider moves the timeline's highlight and the store (memory)
view together; recorded worlds open from a run directory without a model; a
missing run directory names the command that makes it; model text is escaped.
A real route passes the preflight of `workbench run` before Run calls it; every
control names the world on show; recorded worlds come with their outcomes, a filter
per varying factor and their page in `workbench view`."""
from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # the fake server's calls go through litellm
os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")

import html  # noqa: E402
import json  # noqa: E402
import re  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import plotly.io as pio  # noqa: E402
import pytest  # noqa: E402
import yaml  # noqa: E402

from tests.conftest import study_dict  # noqa: E402

WORLD_ID = re.compile(r"\b[0-9a-f]{10}-\d{4}\b")
XSS = "<script>window.__xss=1</script>"


@pytest.fixture(autouse=True)
def plotly_mimetype():
    """Figures as the notebook shows them (its first cell sets the renderers)."""
    before = pio.renderers.default
    pio.renderers.default = "plotly_mimetype"
    yield
    pio.renderers.default = before


def shown(explorer: Any) -> str:
    return explorer.panel.text()


def world_ids(explorer: Any) -> set[str]:
    return set(WORLD_ID.findall(shown(explorer)))


def figure(output: Any) -> dict[str, Any]:
    (out,) = output.outputs
    return out["data"]["application/vnd.plotly.v1+json"]


def statuses(explorer: Any) -> list[str]:
    seen: list[str] = []
    explorer.status.observe(lambda change: seen.append(change["new"]), names="value")
    return seen


def count_runs(monkeypatch) -> list[Any]:  # noqa: ANN001
    """Record every world the study runner is asked for (and still run it)."""
    import workbench.study

    calls: list[Any] = []
    real = workbench.study.run_one_world

    async def counted(study: Any, cell: Any, index: int, *a: Any, **k: Any) -> Any:
        calls.append((cell.spec.model, index))
        return await real(study, cell, index, *a, **k)
    monkeypatch.setattr(workbench.study, "run_one_world", counted)
    return calls


# -- the shared store ------------------------------------------------------------------------
@pytest.fixture
def stigmergy_study(tmp_path: Path) -> Path:
    writer = json.dumps({"op": "write", "key": "note", "value": XSS})
    spec = study_dict(name="explore", worlds_per_cell=2, cells=[
        {"model": "sim/diligent"},
        {"model": "sim/diligent", "condition": "no-store", "label": "no store at all"},
        {"model": "scripted", "label": "xss", "agents": {
            "pair_a": {"script": [writer, '{"op":"submit","answer":1}']},
            "pair_b": {"script": ['{"op":"read","key":"note"}', '{"op":"submit","answer":1}']},
            "solo_1": {"script": ['{"op":"submit","answer":$answer}']},
            "solo_2": {"script": ['{"op":"submit","answer":$answer}']}}},
    ])
    path = tmp_path / "explore.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def test_a_changed_dropdown_leaves_nothing_of_the_previous_world(stigmergy_study: Path) -> None:
    from workbench.explorers.stigmergy import VIEWS, WorldExplorer

    ex = WorldExplorer.from_study(stigmergy_study)
    old = ex.world["world_id"]
    assert world_ids(ex) == {old} and all(ex.views[v].outputs for v in VIEWS)
    seen = statuses(ex)
    ex.controls["condition"].value = "private"
    new = ex.world["world_id"]
    assert new != old and ex.world["cell"]["condition"] == "private"
    assert world_ids(ex) == {new}  # every view shows the new world, none the old one
    for name in VIEWS:
        assert new in json.dumps(ex.views[name].outputs), name
    assert "running world 0" in seen[0] and f"world {new}" in seen[-1]  # busy, then done
    ex.controls["world"].value = 1
    assert world_ids(ex) == {ex.world["world_id"]} and ex.world["world_id"].endswith("-0001")


def test_world_size_and_open_question_factors_are_widgets(stigmergy_study: Path) -> None:
    from workbench.explorers.stigmergy import WorldExplorer

    ex = WorldExplorer.from_study(stigmergy_study)
    assert len(ex.world["agents"]) == 4
    ex.controls["pairs"].value = 2
    roles = sorted(a["role"] for a in ex.world["agents"])
    assert roles == ["pair2_a", "pair2_b", "pair_a", "pair_b", "solo_1", "solo_2"]
    assert world_ids(ex) == {ex.world["world_id"]} and ex.world["cell"]["pairs"] == 2
    ex.controls["solos"].value = 0
    assert len(ex.world["agents"]) == 4 and all(a["role"].startswith("pair") for a in ex.world["agents"])
    ex.controls["vocabulary"].value = "withheld"
    assert ex.world["cell"]["vocabulary"] == "withheld"
    assert not any(k in a["task_text"] for a in ex.world["agents"] for k in ("C_A", "C_B", "R_A", "R_B"))


def test_a_label_is_dropped_once_the_settings_leave_its_cell(stigmergy_study: Path) -> None:
    from workbench.explorers.stigmergy import WorldExplorer

    ex = WorldExplorer.from_study(stigmergy_study, cell=1)
    assert ex.world["cell_label"] == "no store at all"
    ex.controls["condition"].value = "store"
    assert "no store at all" not in shown(ex) and "store" in ex.world["cell_label"]
    ex.controls["cell"].value = 0  # a cell sets every control to its own settings
    assert ex.controls["condition"].value == "store" and ex.world["cell"]["condition"] == "store"


def test_the_step_slider_moves_the_highlight_and_the_store_together(stigmergy_study: Path) -> None:
    from workbench.explorers.stigmergy import WorldExplorer

    ex = WorldExplorer.from_study(stigmergy_study)
    writes = [i for i, s in enumerate(ex.steps) if (s.get("op") or {}).get("op") == "write"]
    k = writes[0]
    step = ex.steps[k]
    ex.step.value = k
    fig = figure(ex.views["timeline"])
    (ring,) = [t for t in fig["data"] if t.get("meta") == "current step"]
    assert ring["x"] == [step["t_done"]] and ring["name"] == f"current step ({step['seq']})"
    assert [s["x0"] for s in fig["layout"]["shapes"]] == [step["t_done"]]
    view = json.dumps(ex.views["step"].outputs)
    assert f"store after step {step['seq']}" in view and f"<b>step {step['seq']} of" in view
    key = step["effect"]["key"]
    assert f"<td>{key}</td>" in view  # the key this step wrote is in the store view
    ex.step.value = 0
    assert f"current step ({ex.steps[0]['seq']})" in json.dumps(ex.views["timeline"].outputs)
    assert f"store after step {step['seq']}" not in json.dumps(ex.views["step"].outputs)


def test_a_real_model_runs_only_when_run_is_pressed(stigmergy_study: Path, monkeypatch) -> None:  # noqa: ANN001
    from workbench.explorers.stigmergy import WorldExplorer

    ex = WorldExplorer.from_study(stigmergy_study)
    options = ex.controls["model"].options
    assert "sim/loner" in options and any(not o.startswith("sim/") for o in options)  # catalogue names offered
    old = ex.world["world_id"]
    calls = count_runs(monkeypatch)
    ex.controls["model"].value = "openai/gpt-test-never-called"  # typed: any route
    ex.controls["condition"].value = "private"
    assert calls == [] and ex.world == {} and not world_ids(ex) and old not in shown(ex)
    assert "press Run" in shown(ex) and "waiting for Run" in ex.status.value
    monkeypatch.setattr(WorldExplorer, "simulated", lambda self: False)
    ex.controls["model"].value = "sim/diligent"  # a simulated model, but this explorer now treats it as real
    assert calls == []
    ex.run_button.click()
    assert calls == [("sim/diligent", 0)] and ex.world["cell"]["condition"] == "private"
    assert world_ids(ex) == {ex.world["world_id"]}


def test_a_simulated_route_reruns_at_once_and_an_error_is_shown_not_raised(stigmergy_study: Path,
                                                                            monkeypatch) -> None:  # noqa: ANN001
    from workbench.explorers.stigmergy import WorldExplorer

    ex = WorldExplorer.from_study(stigmergy_study)
    old = ex.world["world_id"]
    calls = count_runs(monkeypatch)
    ex.controls["model"].value = "sim/loner"
    assert calls == [("sim/loner", 0)] and ex.world["world_id"] != old
    ex.controls["model"].value = "sim/no-such-profile"
    assert ex.world == {} and not world_ids(ex)
    assert "no-such-profile" in shown(ex) and "Traceback" not in shown(ex)


def test_model_text_is_escaped_in_every_view(stigmergy_study: Path) -> None:
    from workbench.explorers.stigmergy import WorldExplorer

    ex = WorldExplorer.from_study(stigmergy_study, cell=2)
    reads = [i for i, s in enumerate(ex.steps) if (s.get("op") or {}).get("op") == "read"]
    ex.step.value = reads[0]
    text = shown(ex)
    assert XSS not in text and "&lt;script&gt;window.__xss=1&lt;/script&gt;" in text


def test_a_recorded_world_opens_from_a_run_directory(stigmergy_study: Path, tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    import workbench.study
    from workbench.explorers.stigmergy import RecordedWorldExplorer, open_explorer
    from workbench.params import load_study

    study = load_study(stigmergy_study)
    workbench.study.run_study(study, tmp_path / "run", progress=False)

    def refuse(*_a: Any, **_k: Any) -> Any:
        raise AssertionError("a world was run")
    monkeypatch.setattr(workbench.study, "run_one_world", refuse)  # opening a recorded world runs none
    ex = open_explorer(run_dir=tmp_path / "run")
    assert isinstance(ex, RecordedWorldExplorer)
    cells = [cid for _, cid in ex.controls["cell"].options]
    assert sorted(cells) == sorted(c.cell_id for c in study.cells)
    old = ex.world["world_id"]
    ex.controls["world"].value = ex.controls["world"].options[1][1]
    assert world_ids(ex) == {ex.world["world_id"]} != {old}
    ex.controls["cell"].value = cells[1]
    assert ex.world["cell_id"] == cells[1] and world_ids(ex) == {ex.world["world_id"]}
    assert [w for _, w in ex.controls["world"].options] == [f"{cells[1]}-0000", f"{cells[1]}-0001"]
    assert "no model called" in shown(ex)
    assert ex.verify() == [] and "identical to the records" in ex.status.value


def test_a_missing_run_directory_names_the_command(tmp_path: Path) -> None:
    from workbench.explorers.stigmergy import Missing, open_explorer

    ex = open_explorer(run_dir=tmp_path / "nothing-here")
    assert isinstance(ex, Missing) and "workbench run params/smoke.yaml" in ex.widget.value
    assert "workbench run" in ex._repr_mimebundle_()["text/plain"]


def test_the_text_form_says_what_the_widget_showed(stigmergy_study: Path) -> None:
    from workbench.explorers.stigmergy import WorldExplorer

    ex = WorldExplorer.from_study(stigmergy_study)
    bundle = ex._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert ex.world["world_id"] in bundle["text/plain"] and "interactive" in bundle["text/plain"]


# -- recall ----------------------------------------------------------------------------------------
@pytest.fixture
def recall_path(tmp_path: Path) -> Path:
    from tests.test_recall_world import legal_script, recall_study

    second = legal_script("legal_test_02")
    return recall_study(tmp_path, [{"condition": "naive", "model": "sim-recall/trusting"},
                                   {"condition": "lightweight-invalidation", "model": "sim-recall/careful"}],
                        scripts=[legal_script(), second], worlds=2)


def test_recall_a_changed_dropdown_leaves_nothing_of_the_previous_world(recall_path: Path) -> None:
    from workbench.explorers.recall import VIEWS, RecallExplorer

    ex = RecallExplorer(recall_path, script_id="legal_test_01", condition="naive", model="sim-recall/trusting")
    old = ex.world["world_id"]
    assert ex.world["script"]["script_id"] == "legal_test_01" and world_ids(ex) == {old}
    seen = statuses(ex)
    ex.controls["condition"].value = "lightweight"
    new = ex.world["world_id"]
    assert new != old and ex.world["cell"]["condition"] == "lightweight"
    assert world_ids(ex) == {new}
    for name in VIEWS:
        assert new in json.dumps(ex.views[name].outputs), name
    assert "running script legal_test_01" in seen[0] and f"world {new}" in seen[-1]
    ex.controls["script"].value = "legal_test_02"
    assert ex.world["script"]["script_id"] == "legal_test_02" and world_ids(ex) == {ex.world["world_id"]}
    ex.controls["repetition"].value = 1
    assert ex.world["world_index"] == 3 and ex.world["repetition"] == 1


def test_recall_the_turn_slider_moves_the_highlight_and_the_memory_together(recall_path: Path) -> None:
    from workbench.explorers.recall import RecallExplorer, memory_at_turn

    ex = RecallExplorer(recall_path, cell=1)
    removals = [r for r in ex.world["memory_log"] if r["removed"]]
    assert removals, "lightweight-invalidation should remove an entry in this script"
    t = removals[0]["turn"]
    gone = removals[0]["removed"][0]
    before = memory_at_turn(ex.world, t - 1)
    after = memory_at_turn(ex.world, t)
    assert gone["entry_id"] in [e["entry_id"] for e in before]
    assert gone["entry_id"] not in [e["entry_id"] for e in after]
    ex.turn.value = t
    fig = figure(ex.views["timeline"])
    assert [(s["x0"], s["x1"]) for s in fig["layout"]["shapes"]] == [(t - 0.4, t + 0.4)]
    view = json.dumps(ex.views["turn"].outputs, ensure_ascii=False)
    assert f"shared memory after turn {t}" in view and "removed entry" in view
    ex.turn.value = t - 1
    assert f"shared memory after turn {t - 1}" in json.dumps(ex.views["turn"].outputs)
    fig = figure(ex.views["timeline"])
    assert [s["x0"] for s in fig["layout"]["shapes"]] == [t - 1.4]


def test_recall_a_real_model_runs_only_when_run_is_pressed(recall_path: Path, monkeypatch) -> None:  # noqa: ANN001
    from workbench.explorers.recall import RecallExplorer

    ex = RecallExplorer(recall_path, cell=0)
    calls = count_runs(monkeypatch)
    ex.controls["model"].value = "anthropic/claude-test-never-called"
    ex.controls["condition"].value = "baseline"
    assert calls == [] and ex.world == {} and not world_ids(ex) and "press Run" in shown(ex)
    monkeypatch.setattr(RecallExplorer, "simulated", lambda self: False)
    ex.controls["model"].value = "sim-recall/careful"
    assert calls == []
    ex.run_button.click()
    assert calls == [("sim-recall/careful", 0)] and world_ids(ex) == {ex.world["world_id"]}


def test_recall_a_recorded_world_opens_from_a_run_directory(recall_path: Path, tmp_path: Path) -> None:
    from workbench.explorers.recall import Missing, RecordedRecallExplorer, open_explorer
    from workbench.params import load_study
    from workbench.study import run_study

    assert isinstance(open_explorer(run_dir=tmp_path / "none"), Missing)
    run_study(load_study(recall_path), tmp_path / "run", progress=False)
    ex = open_explorer(run_dir=tmp_path / "run")
    assert isinstance(ex, RecordedRecallExplorer)
    old = ex.world["world_id"]
    ex.controls["cell"].value = ex.controls["cell"].options[1][1]
    assert old not in shown(ex) and world_ids(ex) == {ex.world["world_id"]}
    assert "no model called" in shown(ex)
    assert ex.verify() == []


def test_recall_script_and_model_text_is_escaped(tmp_path: Path) -> None:
    from tests.test_recall_world import SCRIPTED, legal_script, recall_study
    from workbench.explorers.recall import RecallExplorer

    script = legal_script()
    script["turns"][8]["content"] = f"Dr. Amara Osei {XSS} confirmed availability."
    agents = {**SCRIPTED, "paralegal": {"script": ["Noted.", f"ok {XSS}", f"{XSS} July 8, 2026"]}}
    path = recall_study(tmp_path, [{"condition": "authors-shown", "agents": agents}], scripts=[script])
    ex = RecallExplorer(path)
    for t in range(ex.turn.max + 1):
        ex.turn.value = t
        assert XSS not in shown(ex)
    assert "&lt;script&gt;window.__xss=1&lt;/script&gt;" in shown(ex)


# -- collusion -------------------------------------------------------------------------------------
@pytest.fixture
def collusion_run(tmp_path: Path) -> Path:
    from collusion_synth import trajectory, write_run

    worlds = [trajectory(f"m{i}", c, n=3) for i, c in enumerate([[1], [2, 3]])]
    worlds += [trajectory(f"p{i}", c, n=3, cell_id="peer", label="violating <b>peer</b>") for i, c in
               enumerate([[], [1]])]
    worlds[0]["episodes"][0]["messages"][0]["text"] = f"Let's both accept. {XSS}"
    worlds[0]["episodes"][1]["reflections"]["bob"] = f"bob reflects {XSS}"
    return write_run(tmp_path / "run", worlds)


def test_collusion_a_changed_dropdown_leaves_nothing_of_the_previous_trajectory(collusion_run: Path) -> None:
    from workbench.explorers.collusion import VIEWS, CollusionExplorer

    ex = CollusionExplorer(collusion_run)
    assert ex.world["world_id"] == "m0" and ex.controls["episode"].value == 1
    assert all(ex.views[v].outputs for v in VIEWS) and "Trajectory m0" in shown(ex)
    ex.controls["world"].value = "m1"
    text = shown(ex)
    assert "Trajectory m1" in text and "m0" not in text.replace("m1", "")
    ex.controls["cell"].value = "peer"
    text = shown(ex)
    assert ex.world["world_id"] == "p0" and "m1" not in text and "Trajectory p0" in text
    assert "<b>peer</b>" not in text and "&lt;b&gt;peer&lt;/b&gt;" in text  # a label is text


def test_collusion_episode_and_agent_redraw_their_views(collusion_run: Path) -> None:
    from workbench.explorers.collusion import CollusionExplorer

    ex = CollusionExplorer(collusion_run, world="m0")
    agent_view = json.dumps(ex.views["agent"].outputs, ensure_ascii=False)
    assert "<b>alice</b> in episode <b>1</b>" in agent_view and "verdict on bob" in agent_view
    assert XSS not in shown(ex) and re.search(r"Let&#(x27|39);s both accept\. &lt;script&gt;", shown(ex))
    ex.controls["episode"].value = 2
    ex.controls["agent"].value = "bob"
    agent_view = json.dumps(ex.views["agent"].outputs, ensure_ascii=False)
    assert "<b>bob</b> in episode <b>2</b>" in agent_view and "verdict on alice" in agent_view
    assert "bob reflects &lt;script&gt;" in agent_view and "in episode <b>1</b>" not in agent_view
    episodes = json.dumps(ex.views["episodes"].outputs, ensure_ascii=False)
    assert episodes.count("background:#fff3b0") == 1  # the current episode, highlighted once
    assert "s both accept. &lt;script" not in json.dumps(ex.views["episode"].outputs)  # episode 1's message is gone


def test_collusion_a_missing_run_names_the_command_and_can_make_it(tmp_path: Path, collusion_run: Path,
                                                                   monkeypatch) -> None:  # noqa: ANN001
    import shutil

    import workbench.study
    from workbench.explorers.collusion import CollusionExplorer, MissingRun, open_explorer

    target = tmp_path / "made"
    m = open_explorer(target)
    assert isinstance(m, MissingRun)
    assert "workbench run params/collusion-smoke.yaml --out" in m.note.value
    assert "workbench run" in m._repr_mimebundle_()["text/plain"]

    def fake_run(study: Any, out: Path, **_k: Any) -> Any:  # the smoke study, as recorded
        shutil.copytree(collusion_run, out)
        return type("S", (), {"finished": 4, "failed": 0})()
    monkeypatch.setattr(workbench.study, "run_study", fake_run)
    ex = m.make()
    assert isinstance(ex, CollusionExplorer) and m.widget.children == (ex.widget,)
    assert ex.world["world_id"] == "m0" and "made" in ex.status.value


def test_collusion_notebook_without_its_run_says_how_to_make_it(tmp_path: Path) -> None:
    """After `make demo` there is no collusion run: the notebook must name the command, not fail."""
    from workbench.publish.notebooks import execute

    executed = execute("collusion_world", tmp_path / "w.ipynb", {"run_dir": str(tmp_path / "missing")}, timeout_s=300)
    nb = json.loads(executed.read_text(encoding="utf-8"))
    outputs = [o for c in nb["cells"] if c["cell_type"] == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o["output_type"] == "error"]
    text = json.dumps(outputs)
    assert "workbench run params/collusion-smoke.yaml --out" in text and "Traceback" not in text


@pytest.mark.parametrize("name", ["world", "recall_world", "collusion_world"])
def test_each_explorer_says_first_which_command_makes_its_run(name: str) -> None:
    from tests.conftest import ROOT

    nb = json.loads((ROOT / "notebooks" / f"{name}.ipynb").read_text(encoding="utf-8"))
    first = nb["cells"][0]
    assert first["cell_type"] == "markdown"
    text = "".join(first["source"])
    assert "The run it needs" in text and "workbench run params/" in text
    assert all(not c.get("outputs") for c in nb["cells"])  # committed without outputs


# -- preflight before a real route's Run (issue 39) --------------------------------------------------------
@pytest.fixture
def keyless(tmp_path: Path, monkeypatch):  # noqa: ANN001
    """A catalogue entry served by the fake OpenAI-compatible server, and no key anywhere
    (none in the environment, no ./.env): what `workbench run` refuses before any call."""
    from tests.fake_openai import FakeOpenAI
    from tests.fault_study import write_catalogue
    from workbench.models.litellm_client import reset_limits

    srv = FakeOpenAI().start()
    reset_limits()
    monkeypatch.setenv("WORKBENCH_MODELS", str(write_catalogue(tmp_path, srv.url)))
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.chdir(tmp_path)
    yield srv
    srv.stop()
    reset_limits()


def test_run_refuses_a_keyless_real_route_before_any_request(stigmergy_study: Path, keyless, monkeypatch) -> None:  # noqa: ANN001
    """The same route fails world after world with `failed: auth` when Run skips the check;
    with a key the same Run reaches the server, so 'no request' means the check held it."""
    from tests.fake_openai import FAKE_KEY
    from tests.fault_study import ENTRY, agent_script
    from workbench.explorers.stigmergy import WorldExplorer

    ex = WorldExplorer.from_study(stigmergy_study)
    calls = count_runs(monkeypatch)
    ex.controls["model"].value = ENTRY
    assert "press Run" in shown(ex) and calls == []
    ex.run_button.click()
    text = shown(ex)
    assert keyless.count == 0 and calls == []  # no request, not even a world started
    assert "Refused before any call" in text and f"route {ENTRY} (openai/fault-model)" in text
    assert "has no key" in text and "No request was made" in text and ex.world == {}
    assert "refused" in ex.status.value and not ex.run_button.disabled
    assert "failed: auth" not in text

    keyless.responder = agent_script
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    ex.run_button.click()
    assert calls == [(ENTRY, 0)] and keyless.count > 0 and ex.world["world_id"] in shown(ex)
    assert "Refused" not in shown(ex) and FAKE_KEY not in shown(ex)


def test_recall_run_refuses_a_keyless_real_route_before_any_request(recall_path: Path, keyless,
                                                                   monkeypatch) -> None:  # noqa: ANN001
    from tests.fault_study import ENTRY
    from workbench.explorers.recall import RecallExplorer

    ex = RecallExplorer(recall_path, cell=0)
    calls = count_runs(monkeypatch)
    ex.controls["model"].value = ENTRY
    ex.run_button.click()
    assert keyless.count == 0 and calls == [] and ex.world == {}
    assert "Refused before any call" in shown(ex) and f"route {ENTRY}" in shown(ex)


def test_collusion_make_refuses_a_keyless_real_route(tmp_path: Path, keyless, monkeypatch) -> None:  # noqa: ANN001
    import workbench.study
    from tests.fault_study import ENTRY
    from workbench.explorers.collusion import MissingRun

    study = tmp_path / "collusion.yaml"
    study.write_text(yaml.safe_dump({"world": "collusion", "name": "keyless", "seed": 1, "worlds_per_cell": 1,
                                     "defaults": {"model": ENTRY, "episodes": 2, "sequences": 2,
                                                  "peer_cache": str(tmp_path / "cache")},
                                     "cells": [{"label": "main"}]}))

    def refuse(*_a: Any, **_k: Any) -> Any:
        raise AssertionError("the study was run")
    monkeypatch.setattr(workbench.study, "run_study", refuse)
    m = MissingRun(tmp_path / "run", study)
    assert m.make() is None and keyless.count == 0 and not (tmp_path / "run").exists()
    assert "Refused before any call" in m.status.value and f"route {ENTRY}" in m.status.value


def test_a_refusal_is_escaped() -> None:
    from workbench.views.panel import refusal_html

    text = refusal_html(f"world 0 of {XSS}", [f"route {XSS} needs a key"])
    assert XSS not in text and text.count("&lt;script&gt;") == 2 and "tex2jax_ignore" in text


# -- every control names the world on show ------------------------------------------------------------
def assert_stigmergy_controls_match(ex: Any) -> None:
    from workbench.explorers.stigmergy import FACTORS

    w = ex.world
    assert w, "a world is on show"
    assert ex.controls["cell"].label.split(": ", 1)[-1].startswith(w["cell_label"]), (ex.controls["cell"].label,
                                                                                       w["cell_label"])
    for name in FACTORS:
        assert ex.controls[name].value == w["cell"][name], name
    assert ex.controls["model"].value == w["cell"]["model"]
    assert ex.controls["world"].value == w["world_index"]
    assert ex.cell.cell_id == w["cell_id"] or ex.controls["cell"].value == -1


def test_the_cell_dropdown_names_the_cell_a_factor_toggle_makes(stigmergy_study: Path) -> None:
    """A toggle that leaves the cell shows the changed cell's label; one that lands on
    another cell of the study shows that cell (and runs its worlds); toggling back
    shows the first cell again. The label never stays behind on a cell not on show."""
    from workbench.explorers.stigmergy import WorldExplorer
    from workbench.params import load_study

    cells = load_study(stigmergy_study).cells
    ex = WorldExplorer.from_study(stigmergy_study)
    assert ex.controls["cell"].label == f"0: {cells[0].label}"
    assert_stigmergy_controls_match(ex)
    ex.controls["condition"].value = "private"
    assert ex.controls["cell"].value == -1 and ex.world["cell_label"] != cells[0].label
    assert ex.world["cell_label"] in ex.controls["cell"].label and "changed" in ex.controls["cell"].label
    assert_stigmergy_controls_match(ex)
    ex.controls["condition"].value = "no-store"  # cell 0 with no store is the study's cell 1
    assert ex.controls["cell"].value == 1 and ex.controls["cell"].label == "1: no store at all"
    assert ex.world["cell_id"] == cells[1].cell_id and ex.world["cell_label"] == "no store at all"
    assert len(ex.controls["cell"].options) == len(cells)  # the changed entry is gone
    assert_stigmergy_controls_match(ex)
    ex.controls["condition"].value = "store"
    assert ex.controls["cell"].value == 0 and ex.world["cell_id"] == cells[0].cell_id
    assert_stigmergy_controls_match(ex)
    ex.controls["pairs"].value = 2
    ex.controls["world"].value = 1
    assert_stigmergy_controls_match(ex)
    ex.controls["cell"].value = 1  # a chosen cell sets every control, and the dropdown shows it
    assert ex.controls["pairs"].value == 1 and ex.controls["cell"].label == "1: no store at all"
    assert_stigmergy_controls_match(ex)


def test_recall_the_cell_dropdown_names_the_cell_a_toggle_makes(recall_path: Path) -> None:
    from workbench.explorers.recall import RecallExplorer
    from workbench.params import load_study

    cells = load_study(recall_path).cells

    def assert_matches(ex: Any) -> None:
        w = ex.world
        assert w["cell_label"] in ex.controls["cell"].label
        assert ex.controls["condition"].value == w["cell"]["condition"]
        assert ex.controls["model"].value == w["cell"]["model"]
        assert ex.controls["script"].value == w["script"]["script_id"]
        assert ex.controls["repetition"].value == w["repetition"]

    ex = RecallExplorer(recall_path, cell=0)
    assert_matches(ex)
    ex.controls["condition"].value = "lightweight-invalidation"  # naive -> invalidation, still the trusting route
    assert ex.controls["cell"].value == -1 and cells[0].label not in ex.controls["cell"].label
    assert_matches(ex)
    ex.controls["model"].value = "sim-recall/careful"  # now the study's cell 1
    assert ex.controls["cell"].value == 1 and ex.controls["cell"].label == f"1: {cells[1].label}"
    assert ex.world["cell_id"] == cells[1].cell_id
    assert_matches(ex)
    ex.controls["script"].value = "legal_test_02"
    ex.controls["repetition"].value = 1
    assert_matches(ex)


# -- recorded mode: outcomes, factor filters, the viewer ----------------------------------------------------
def table_rows(widget_html: str) -> list[list[str]]:
    """The body rows of an outcome table, each cell as text."""
    body = widget_html.split("<tbody>", 1)[-1]
    return [[html.unescape(re.sub(r"<[^>]+>", "", c)).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
            for row in re.findall(r"<tr[^>]*>(.*?)</tr>", body, re.S)]


@pytest.fixture
def stigmergy_run(stigmergy_study: Path, tmp_path: Path) -> Path:
    import workbench.study
    from workbench.params import load_study

    workbench.study.run_study(load_study(stigmergy_study), tmp_path / "run", progress=False)
    return tmp_path / "run"


def test_recorded_worlds_show_their_outcomes(stigmergy_run: Path) -> None:
    from workbench.explorers.stigmergy import RecordedWorldExplorer
    from workbench.records import load_run

    records = load_run(stigmergy_run)
    ex = RecordedWorldExplorer(stigmergy_run)
    yes_no = {True: "yes", False: "no", None: "–"}
    for cid in [c for _, c in ex.controls["cell"].options]:
        ex.controls["cell"].value = cid
        worlds = [w for w in records.worlds if w["cell_id"] == cid]
        rows = table_rows(ex.outcomes_view.value)
        assert [r[0].replace(" (shown)", "") for r in rows] == [w["world_id"] for w in worlds]
        for row, w in zip(rows, worlds):
            m = w["metrics"]
            assert row[1:5] == [yes_no[m["cross_agent_access"]], yes_no[m["joint_success"]], yes_no[m["pair_write"]],
                                yes_no[w["valid"]]], w["world_id"]
        valid = [w for w in worlds if w["valid"]]
        coordinated = sum(bool(w["metrics"]["cross_agent_access"]) for w in valid)
        assert f"cross-agent access {coordinated}/{len(valid)}" in ex.controls["cell"].label
        shown_row = [r for r in rows if r[0].endswith("(shown)")]
        assert [r[0] for r in shown_row] == [f"{ex.world['world_id']} (shown)"]
        for label, wid in ex.controls["world"].options:
            w = records.world(wid)
            assert f"cross-agent access {yes_no[w['metrics']['cross_agent_access']]}" in label


def test_recorded_worlds_filter_by_the_factors_that_vary(stigmergy_run: Path) -> None:
    from workbench.explorers.stigmergy import RecordedWorldExplorer
    from workbench.metrics.design import design_of_records
    from workbench.records import load_run

    design = design_of_records(load_run(stigmergy_run))
    ex = RecordedWorldExplorer(stigmergy_run)
    assert sorted(ex.filters) == sorted(design.varying) and {"condition", "model"} <= set(ex.filters)

    def pick(factor: str, level: str) -> None:
        ex.filters[factor].value = -1 if level == "any" else ex.levels[factor].index(level)

    def cells() -> list[str]:
        return [c for _, c in ex.controls["cell"].options]

    def assert_on_show_matches() -> None:
        w = ex.world
        assert ex.controls["cell"].value == w["cell_id"] and ex.controls["world"].value == w["world_id"]
        for f, d in ex.filters.items():
            assert d.value == -1 or design.frame.at[w["cell_id"], f] == ex.levels[f][d.value], f
        assert world_ids(ex) == {w["world_id"]}

    pick("condition", "no-store")
    no_store = [c for c in design.cells if design.frame.at[c, "condition"] == "no-store"]
    assert cells() == no_store and ex.world["cell"]["condition"] == "no-store"
    assert_on_show_matches()
    pick("condition", "store")
    assert set(cells()) == set(design.cells) - set(no_store) and ex.world["cell"]["condition"] == "store"
    assert_on_show_matches()
    pick("model", "scripted")
    assert len(cells()) == 1 and ex.world["cell"]["model"] == "scripted"
    assert_on_show_matches()
    pick("condition", "no-store")  # no-store and scripted: no cell
    assert cells() == [] and ex.controls["world"].options == () and ex.world == {}
    assert "No cell matches these filters" in shown(ex) and not world_ids(ex)
    pick("model", "any")
    assert cells() == no_store
    assert_on_show_matches()
    pick("condition", "any")
    assert cells() == design.cells
    assert_on_show_matches()


def test_a_recorded_world_opens_in_workbench_view(stigmergy_run: Path) -> None:
    """The address shown is the one `workbench view` serves the world's page at."""
    import threading
    import urllib.request

    from workbench.explorers.stigmergy import RecordedWorldExplorer
    from workbench.viewer.server import make_server

    ex = RecordedWorldExplorer(stigmergy_run)
    ex.controls["world"].value = ex.controls["world"].options[1][1]
    wid = ex.world["world_id"]
    (command,) = [html.unescape(c) for c in re.findall(r"<code>(.*?)</code>", ex.jump.value)[1:]]
    assert command.startswith(".venv/bin/workbench view ") and command.endswith(" --port 8765")
    assert Path(command.split()[2]).resolve() == stigmergy_run.resolve()
    (url,) = set(re.findall(r'href="([^"]+)"', ex.jump.value))
    assert url.startswith("http://127.0.0.1:8765/") and wid in url
    server, _site = make_server([stigmergy_run], port=0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        port = server.server_address[1]
        with urllib.request.urlopen(url.replace(":8765/", f":{port}/"), timeout=30) as r:
            page = r.read().decode("utf-8")
        assert r.status == 200 and wid in page
        for link in re.findall(r'href="([^"]+)"', ex.outcomes_view.value):  # every row's link is a page too
            with urllib.request.urlopen(html.unescape(link).replace(":8765/", f":{port}/"), timeout=30) as r:
                assert r.status == 200
    finally:
        server.shutdown()
        server.server_close()


def test_recall_recorded_worlds_show_accuracy_and_filter(recall_path: Path, tmp_path: Path) -> None:
    from workbench.explorers.recall import RecordedRecallExplorer, recalls_right
    from workbench.params import load_study
    from workbench.records import load_run
    from workbench.study import run_study

    run_study(load_study(recall_path), tmp_path / "run", progress=False)
    records = load_run(tmp_path / "run")
    ex = RecordedRecallExplorer(tmp_path / "run")
    assert "condition" in ex.filters and ex.jump.value
    for row in table_rows(ex.outcomes_view.value):
        right, n = recalls_right(records.world(row[0].replace(" (shown)", "")))
        assert row[1] == f"{right / n:.2f}" and row[2] == f"{right}/{n}"
    ex.filters["condition"].value = ex.levels["condition"].index("lightweight-invalidation")
    assert ex.world["cell"]["condition"] == "lightweight-invalidation"
    assert [c for _, c in ex.controls["cell"].options] == [ex.world["cell_id"]]
    assert "accuracy" in ex.controls["cell"].label


def test_collusion_trajectories_show_whether_they_colluded(collusion_run: Path) -> None:
    from workbench.explorers.collusion import CollusionExplorer

    ex = CollusionExplorer(collusion_run)
    rows = {r[0].replace(" (shown)", ""): r for r in table_rows(ex.outcomes_view.value)}
    assert rows["m0"][1] == "yes" and rows["m0"][2] == "1" and rows["m1"][2] == "2"
    ex.controls["cell"].value = "peer"
    rows = {r[0].replace(" (shown)", ""): r for r in table_rows(ex.outcomes_view.value)}
    assert rows["p0"][1] == "no" and rows["p1"][1] == "yes" and set(rows) == {"p0", "p1"}
    assert "colluded" in ex.controls["cell"].label and "p0" in ex.jump.value


# -- the recall timeline ---------------------------------------------------------------------------------
def test_the_recall_timeline_marks_only_writes_that_happened(tmp_path: Path) -> None:
    """An isolated world has no shared memory: the script's memory turns wrote nothing, so no
    write marker; its subtitle names the condition (never 'baseline') and what the agents had."""
    from tests.test_recall_world import legal_script, recall_study
    from workbench.explorers.recall import RecallExplorer
    from workbench.worlds.recall.views import turn_timeline

    path = recall_study(tmp_path, [{"condition": "isolated"}, {"condition": "naive"}, {"condition": "baseline"}],
                        scripts=[legal_script()])
    for cell, condition in enumerate(("isolated", "naive", "baseline")):
        w = RecallExplorer(path, cell=cell).world
        fig = turn_timeline(w)
        writes = sorted(x for t in fig.data if t.name == "write" for x in t.x)
        voiced = {t["turn"] for t in w["turns"] if not t["is_recall"]}  # turn 0: the initial facts, before any turn
        assert writes == sorted({e["turn"] for e in w["memory_log"] if not e["refused"]} & voiced), condition
        title = fig.layout.title.text
        if condition == "naive":
            assert writes and "no shared memory" not in title
            continue
        assert w["memory_log"] == [] and writes == []
        assert any(t.get("write_to_memory") for t in w["turns"])  # the script asked for writes
        assert f"no shared memory ({condition}: " in title
        seen = "the conversation in context" if condition == "baseline" else "own turns only"
        assert seen in title and ("baseline" not in title) == (condition == "isolated")
        hovers = " ".join(h for t in fig.data for h in (t.hovertext or ()))
        assert f"not written: no shared memory in condition {condition}" in hovers


def test_explorer_html_is_out_of_mathjax_reach(tmp_path: Path) -> None:
    """JupyterLab typesets $…$ in HTML outputs: every HTML view sits in an element MathJax skips."""
    from tests.test_recall_world import legal_script, recall_study
    from workbench.explorers.recall import RecallExplorer

    ex = RecallExplorer(recall_study(tmp_path, [{"condition": "naive"}], scripts=[legal_script()]))
    htmls = [o["data"]["text/html"] for v in ex.views.values() for o in v.outputs if "text/html" in o["data"]]
    assert len(htmls) >= 4
    for h in htmls:
        assert h.startswith('<div class="tex2jax_ignore mathjax_ignore">'), h[:80]

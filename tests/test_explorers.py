"""The explorers in-process: build one, change a widget's value, and read what every
view (one ``Output`` each) shows. After any change no view may show anything of
the previous world; a busy line says what runs; a real model's route runs only on
Run; the step (turn) slider moves the timeline's highlight and the store (memory)
view together; recorded worlds open from a run directory without a model; a
missing run directory names the command that makes it; model text is escaped."""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import plotly.io as pio
import pytest
import yaml

from tests.conftest import study_dict

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
    assert XSS not in shown(ex) and "Let&#x27;s both accept. &lt;script&gt;" in shown(ex)
    ex.controls["episode"].value = 2
    ex.controls["agent"].value = "bob"
    agent_view = json.dumps(ex.views["agent"].outputs, ensure_ascii=False)
    assert "<b>bob</b> in episode <b>2</b>" in agent_view and "verdict on alice" in agent_view
    assert "bob reflects &lt;script&gt;" in agent_view and "in episode <b>1</b>" not in agent_view
    episodes = json.dumps(ex.views["episodes"].outputs, ensure_ascii=False)
    assert episodes.count("background:#fff3b0") == 1  # the current episode, highlighted once
    assert "Let&#x27;s both accept" not in json.dumps(ex.views["episode"].outputs)  # episode 1's message is gone


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

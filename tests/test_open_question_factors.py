"""Issue 38, part 4: the open questions as designs that change one thing. Each factor's
rendered prompts differ from its reference level only in the factor's own text (a diff
of the rendered prompts, ``workbench prompts``); the request-path cells share every
agent's disposition; the reader signal can reach one writer alone."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from tests.conftest import PROMPTS, make_study
from workbench.params import ParamsError, load_study
from workbench.prompt_diff import prompt_diffs
from workbench.records import load_run
from workbench.study import run_study

ROOT = Path(__file__).resolve().parents[1]
STORAGE = re.compile(r"(?i)workspace|store|keep|save|name of your choice")


def test_the_shipped_open_questions_change_one_thing_each():
    study = load_study(ROOT / "params" / "open-questions.yaml")
    diffs = prompt_diffs(study)
    by_factor: dict[str, list] = {}
    for d in diffs:
        by_factor.setdefault(d.factor, []).append(d)
    assert {"vocabulary", "reader_signal", "request_path", "pairs", "solos", "max_steps"} <= set(by_factor)

    # vocabulary: only the pair's task text, and never a word about storing (the same storage wording at every level)
    for d in by_factor["vocabulary"]:
        changed = d.only_a + d.only_b
        if d.role.startswith("solo"):
            assert d.same, d.unified
        assert all(line.startswith("[user]") for line in changed), d.unified
        assert not [line for line in changed if STORAGE.search(line)], d.unified

    # reader signal: the told sentence in the one signalled writer's system prompt, nothing else anywhere
    told_sentence = (PROMPTS / "reader_told.txt").read_text().strip()
    for d in by_factor["reader_signal"]:
        if d.role != "pair_a" or d.b.find("reader_signal=told") < 0:
            assert d.same, d.unified
            continue
        assert len(d.only_a) == len(d.only_b) == 1 and d.only_a[0].startswith("[system]")
        assert d.only_b[0].replace(told_sentence + " ", "") == d.only_a[0]

    # request path: nothing an agent reads differs
    assert all(d.same for d in by_factor["request_path"])
    # steps: only the operation limit
    for d in by_factor["max_steps"]:
        assert [x.replace("40", "20") for x in d.only_b] == list(d.only_a)


def test_vocabulary_levels_share_their_storage_wording_in_any_prompt_folder(tmp_path):
    """The withheld tasks once added "Keep intermediate results in the workspace under a
    name of your choice.": a second persistence instruction the other levels lack."""
    for name in ("digits", "remainders"):
        for level in ("own-only", "withheld"):
            text = (PROMPTS / "tasks" / f"{name}-{level}.txt").read_text()
            assert not STORAGE.search(text), (name, level, text)


def test_request_path_cells_share_every_agents_disposition(tmp_path):
    study = make_study(tmp_path, [{"model": "sim/twin-gpt-5.4-mini"},
                                  {"model": "sim/twin-gpt-5.4-mini", "request_path": "router"}], worlds=8)
    run_study(study, tmp_path / "run", progress=False)
    records = load_run(tmp_path / "run")
    direct, router = (c.cell_id for c in study.cells)
    by_cell: dict[str, dict[int, list]] = {direct: {}, router: {}}
    for w in records.worlds:
        steps = [(s["agent"], s["reply"]["text"]) for s in records.steps[w["world_id"]]]
        by_cell[w["cell_id"]][w["world_index"]] = steps
    assert by_cell[direct] == by_cell[router]  # the same replies in every world: one disposition, two paths
    assert len(by_cell[direct]) == 8


def test_a_real_model_needs_the_path_in_its_catalogue_entry(tmp_path, monkeypatch):
    from workbench.models.catalogue import ModelEntry

    with pytest.raises(ParamsError, match=r"request_path.*declares no path 'router'"):
        make_study(tmp_path, [{"model": "gpt-5.4-mini", "request_path": "router"}])
    entry = ModelEntry(name="m", route="openai/m", max_tokens=10,
                       paths={"router": {"route": "openrouter/openai/m", "api_key_env": "OPENROUTER_API_KEY"}})
    via = entry.via("router")
    assert (via.route, via.api_key_env, via.max_tokens, via.name) == ("openrouter/openai/m", "OPENROUTER_API_KEY", 10,
                                                                      "m@router")
    assert entry.via("direct") is entry


def test_the_reader_signal_reaches_only_the_named_roles(tmp_path):
    with pytest.raises(ParamsError, match="signal_roles"):
        make_study(tmp_path, [{"model": "sim/diligent", "signal_roles": ["pair_c"]}])
    doc = {"world": "stigmergy", "name": "signal", "seed": 5, "worlds_per_cell": 20,
           "defaults": {"prompts": str(PROMPTS), "model": "sim/diligent", "signal_roles": ["pair_a"]},
           "grid": [{"reader_signal": ["none", "told"]}],
           "contrasts": [{"name": "told", "factor": "reader_signal", "levels": ["none", "told"],
                          "metric": "signalled_note"}]}
    path = tmp_path / "signal.yaml"
    path.write_text(yaml.safe_dump(doc))
    study = load_study(path)
    run_study(study, tmp_path / "run", progress=False)
    records = load_run(tmp_path / "run")
    for w in records.worlds:
        told = {a["role"]: "Other processes may also read" in a["system_prompt"] for a in w["agents"]}
        assert told == {"pair_a": w["cell"]["reader_signal"] == "told", "pair_b": False, "solo_1": False,
                        "solo_2": False}
    from workbench.kinds import kind_of_records
    from workbench.metrics.contrasts import ContrastSpec, contrast_table
    from workbench.metrics.design import design_of_records

    units = kind_of_records(records).contrast_units(records)
    specs = [ContrastSpec.from_mapping(c) for c in records.manifest["contrasts"]]
    row = contrast_table(units, design_of_records(records), specs).iloc[0]
    assert row["metric"] == "signalled_note" and row["A k/n"].startswith("0/") and int(row["B k/n"].split("/")[0]) > 5

    bad = dict(doc, contrasts=[{"name": "x", "factor": "reader_signal", "metric": "no_such_metric"}])
    path.write_text(yaml.safe_dump(bad))
    with pytest.raises(ParamsError, match=r"contrasts\[0\].metric"):
        load_study(path)

"""A cell is its full design: tables never pool cells, contrasts compare only cells
that differ in one factor, ``compare`` matches cells on their factors, and every
table, figure and the report survive the paper's hard run sets."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from tests.conftest import PROMPTS
from workbench.cli import main
from workbench.metrics.design import design_of_records
from workbench.params import ParamsError, load_study
from workbench.records import load_run
from workbench.study import run_study
from workbench.worlds.stigmergy.export import cell_tables

ROOT = Path(__file__).resolve().parents[1]
BASE = {"model": "sim/diligent", "condition": "store"}
ONE_FACTOR = {  # each cell differs from BASE in exactly this factor
    "prompts": None,  # filled with a reworded copy of the shipped templates
    "sampling.reasoning_effort": {"sampling": {"reasoning_effort": "low"}},
    "scheduler": {"scheduler": "lockstep"},
    "answer_rule": {"answer_rule": "exact"},
    "parser": {"parser": "strict"},
}
PER_CELL_TABLES = ("coordination", "writes", "looks", "exposure_then_read", "text_signal", "attrition", "rescoring")


def write(path: Path, doc: dict) -> Path:
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return path


def run_doc(tmp: Path, name: str, cells: list[dict], worlds: int = 3, **extra) -> Path:
    doc = {"world": "stigmergy", "name": name, "seed": 5, "worlds_per_cell": worlds,
           "defaults": {"prompts": str(PROMPTS)}, "cells": cells, **extra}
    study = load_study(write(tmp / f"{name}.yaml", doc))
    run_study(study, tmp / name, progress=False)
    return tmp / name


@pytest.fixture(scope="module")
def one_factor(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("design")
    reworded = tmp / "reworded"
    shutil.copytree(PROMPTS, reworded)
    system = reworded / "system.txt"
    system.write_text(system.read_text(encoding="utf-8").replace("You are", "You act as", 1), encoding="utf-8")
    cells = [dict(BASE)]
    for change in ONE_FACTOR.values():
        cells.append({**BASE, **(change if change is not None else {"prompts": str(reworded)})})
    return load_run(run_doc(tmp, "onefactor", cells))


def test_every_table_has_one_row_per_cell(one_factor):
    tables = cell_tables(one_factor)
    design = design_of_records(one_factor)
    assert len(design.cells) == 6
    assert set(design.varying) == set(ONE_FACTOR)
    for name in PER_CELL_TABLES:
        t = tables[name]
        assert sorted(t["cell_id"]) == sorted(design.cells), name  # one row each: none pooled, none lost
        for f in design.varying:
            assert f in t.columns, (name, f)
        assert "condition" not in t.columns and t.attrs["constant"]["condition"] == "store"
    # each row counts its own cell's worlds only
    coord = tables["coordination"].set_index("cell_id")
    for cid in design.cells:
        worlds = [w for w in one_factor.worlds if w["cell_id"] == cid]
        valid = [w for w in worlds if w["valid"]]
        k = sum(w["metrics"]["cross_agent_access"] for w in valid)
        assert coord.loc[cid, "cross_agent_access:k/n"] == f"{k}/{len(valid)}"
        assert coord.loc[cid, "worlds"] == len(worlds) == 3


def test_one_contrast_per_factor_between_cells_that_differ_in_it_alone(one_factor):
    t = cell_tables(one_factor)["contrasts"]
    design = design_of_records(one_factor)
    assert sorted(t["factor"]) == sorted(ONE_FACTOR)
    base = next(c for c in design.cells if all(design.frame.at[c, f] == design.frame[f].iloc[0]
                                                for f in design.varying) and design.level(c, "parser") == "lenient"
                and design.level(c, "scheduler") == "async")
    for _, r in t.iterrows():
        a, b = r["A cell"], r["B cell"]
        differs = [f for f in design.factors if design.frame.at[a, f] != design.frame.at[b, f]]
        assert differs == [r["factor"]]
        assert base in (a, b)
        assert r["pairs"] + r["lost pairs"] >= 3  # paired by world index
    assert t.attrs["metric"] == "cross_agent_access"


def test_default_labels_name_every_field_that_differs_from_the_defaults(one_factor):
    labels = {w["cell_label"] for w in one_factor.worlds}
    assert len(labels) == 6  # no two cells share a label
    assert any("sampling.reasoning_effort=low" in x for x in labels)
    assert any("scheduler=lockstep" in x for x in labels) and any("answer_rule=exact" in x for x in labels)
    from workbench.metrics.design import short

    assert f"sim/diligent · store · prompts={short(str(PROMPTS))}" in labels  # the base cell: only its folder
    assert len({x for x in labels if "reworded" in x or "prompts=" + short(str(PROMPTS)) not in x}) == 1


def test_declared_contrasts_are_checked_when_the_params_load(tmp_path):
    doc = {"world": "stigmergy", "name": "c", "seed": 1, "worlds_per_cell": 1, "defaults": {"prompts": str(PROMPTS)},
           "cells": [{"model": "sim/diligent"}, {"model": "sim/diligent", "condition": "no-store"},
                     {"model": "sim/non-writer", "clauses": "persist-only"}]}
    ok = load_study(write(tmp_path / "ok.yaml", {**doc, "contrasts": [
        {"name": "store", "factor": "condition", "levels": ["no-store", "store"]}]}))
    assert ok.contrasts == [{"name": "store", "factor": "condition", "levels": ["no-store", "store"]}]
    bad = [({"name": "x", "factor": "colour"}, "contrasts[0].factor"),
           ({"name": "x", "factor": "condition", "levels": ["no-store", "private"]}, "contrasts[0].levels[1]"),
           # persist-only exists, but only in a cell that also differs in model: pooling would be needed
           ({"name": "x", "factor": "clauses", "levels": ["both", "persist-only"]}, "contrasts[0]: expected two cells")]
    for contrast, where in bad:
        with pytest.raises(ParamsError) as exc:
            load_study(write(tmp_path / "bad.yaml", {**doc, "contrasts": [contrast]}))
        assert where in str(exc.value), str(exc.value)


def test_the_demo_contrasts_compare_matched_cells_only():
    study = load_study(ROOT / "params" / "demo.yaml")
    names = [c["name"] for c in study.contrasts]
    assert "store vs no-store" in names


# -- the paper's hard run sets ------------------------------------------------------------
FAILS = {"pair_a": {"script": ['{"op":"list"}']}, "pair_b": {"script": ['{"op":"list"}']},
         "solo_1": {"script": ['{"op":"list"}']}, "solo_2": {"script": ['{"op":"list"}']}}
EDGE = {
    "no-exposure": ([{"model": "sim/non-writer"}], 2),
    "no-valid-world": ([{"model": "sim/prose-first", "parser": "strict"}], 2),
    "one-cell": ([{"model": "sim/diligent"}], 2),
    "only-no-store": ([{"model": "sim/diligent", "condition": "no-store"},
                       {"model": "sim/clause-follower", "condition": "no-store"}], 2),
    "single-world": ([{"model": "sim/diligent"}], 1),
    "finished-and-failed": ([{"model": "sim/diligent"}, {"model": "scripted", "agents": FAILS}], 2),
}


@pytest.fixture(scope="module")
def edge_runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("edge")
    return {name: run_doc(tmp, name, cells, worlds=n) for name, (cells, n) in EDGE.items()}


def _exec_notebook(path: Path, params: dict) -> None:
    """Every code cell of a notebook, in-process, with its parameters replaced: what
    papermill would run, without a kernel per run set."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    ns: dict = {}
    for cell in nb["cells"]:
        if cell["cell_type"] != "code":
            continue
        src = "".join(cell["source"])
        if "parameters" in (cell.get("metadata", {}).get("tags") or []):
            src += "\n" + "\n".join(f"{k} = {v!r}" for k, v in params.items())  # defaults, then ours
        exec(compile(src, f"{path.name}", "exec"), ns)  # noqa: S102 - our own notebook


@pytest.mark.parametrize("name", list(EDGE))
def test_metrics_tables_and_report_cells_work_on_hard_run_sets(edge_runs, name, capsys):
    run_dir = edge_runs[name]
    records = load_run(run_dir)
    tables = cell_tables(records)
    design = design_of_records(records)
    for t in PER_CELL_TABLES:
        assert sorted(tables[t]["cell_id"]) == sorted(design.cells), t
    for t in tables.values():
        if t.empty:
            assert t.attrs.get("empty_reason") or t.attrs.get("title"), "an empty table says why"
    assert main(["metrics", str(run_dir)]) == 0
    out = capsys.readouterr().out
    assert "== coordination" in out and "== contrasts" in out
    _exec_notebook(ROOT / "notebooks" / "analysis.ipynb", {"run_dir": str(run_dir), "compare_dir": "",
                                                           "max_timelines": 2})


def test_hard_run_sets_say_why_a_table_is_empty(edge_runs):
    t = cell_tables(load_run(edge_runs["one-cell"]))["contrasts"]
    assert t.empty and "one cell" in t.attrs["empty_reason"]
    failed = cell_tables(load_run(edge_runs["finished-and-failed"]))["attrition"].set_index("cell_label")
    row = failed.loc["scripted · store"] if "scripted · store" in failed.index else failed.iloc[-1]
    assert row["failed"] == 2 and "script exhausted" in row["failure causes"]


def test_the_report_of_a_run_set_without_a_valid_world(edge_runs):
    run_dir = edge_runs["no-valid-world"]
    assert main(["report", str(run_dir)]) == 0
    html = (run_dir / "report.html").read_text(encoding="utf-8")
    assert "Traceback" not in html  # papermill stops at the first failing cell; none failed
    assert "Matched contrasts" in html and "Cross-agent access per cell" in html
    assert "0/0" in html  # the cell's rates over valid worlds, shown as such rather than dropped


# -- re-scoring and comparing run sets ---------------------------------------------------------
def test_rescoring_writes_to_a_folder_named_after_its_rules(edge_runs, capsys):
    run_dir = edge_runs["no-valid-world"]
    assert main(["metrics", str(run_dir), "--parser", "lenient", "--answer-rule", "exact"]) == 0
    out = capsys.readouterr().out
    assert "parser lenient, answer rule exact" in out
    assert (run_dir / "metrics" / "lenient-exact" / "tables" / "coordination.csv").is_file()
    index = json.loads((run_dir / "metrics" / "lenient-exact" / "tables" / "index.json").read_text())
    assert index["coordination"]["rules"] == "parser lenient, answer rule exact"
    assert main(["metrics", str(run_dir)]) == 0
    assert "parser as recorded" in capsys.readouterr().out
    assert (run_dir / "metrics" / "tables" / "coordination.csv").is_file()


@pytest.fixture(scope="module")
def lenient_and_strict(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cmp")
    cells = [{"model": m, "condition": c} for m in ("sim/diligent", "sim/clause-follower")
             for c in ("store", "no-store")]
    a = run_doc(tmp, "lenient", [{**c, "parser": "lenient"} for c in cells], worlds=4)
    b = run_doc(tmp, "strict", [{**c, "parser": "strict"} for c in cells], worlds=4)
    return a, b


def test_compare_matches_cells_on_their_factors(lenient_and_strict, capsys, tmp_path):
    a, b = lenient_and_strict
    assert main(["compare", str(a), str(b), "--csv", str(tmp_path / "none.csv")]) == 0
    import pandas as pd

    none = pd.read_csv(tmp_path / "none.csv")
    assert (none["status"] != "matched").all() and len(none) == 8  # listed, never silently dropped
    assert none["reason"].str.contains("parser").all()
    assert main(["compare", str(a), str(b), "--ignore", "parser", "--csv", str(tmp_path / "cmp.csv")]) == 0
    out = capsys.readouterr().out
    assert "ignored: parser" in out
    t = pd.read_csv(tmp_path / "cmp.csv")
    assert (t["status"] == "matched").all() and len(t) == 4
    assert (t["pairs"] == 4).all() and t["p (exact McNemar)"].notna().all()
    assert main(["compare", str(a), str(b), "--map", "parser=lenient:strict", "--csv", str(tmp_path / "m.csv")]) == 0
    assert (pd.read_csv(tmp_path / "m.csv")["status"] == "matched").all()
    assert main(["compare", str(a), str(b), "--map", "parser=lenient"]) == 2


def test_compare_works_for_the_recall_and_collusion_kinds(tmp_path, capsys):
    import pandas as pd

    params = ROOT / "params"
    recall = {"world": "recall", "name": "r", "seed": 3, "worlds_per_cell": 2,
              "defaults": {"model": "sim-recall/trusting", "script_ids": ["legal_01"],
                           "scripts": str(params / "recall" / "scripts"), "prompts": str(params / "prompts" / "recall")},
              "grid": [{"condition": ["naive", "lightweight"]}]}
    runs = {}
    for name, k in (("r3", 3), ("r4", 4)):
        doc = {**recall, "defaults": {**recall["defaults"], "k": k}}
        run_study(load_study(write(tmp_path / f"{name}.yaml", doc)), tmp_path / name, progress=False)
        runs[name] = tmp_path / name
    assert main(["compare", str(runs["r3"]), str(runs["r4"]), "--csv", str(tmp_path / "r.csv")]) == 0
    t = pd.read_csv(tmp_path / "r.csv")
    assert (t["status"] != "matched").all() and t["reason"].str.contains(r"k \(3 vs 4\)").any()
    assert main(["compare", str(runs["r3"]), str(runs["r4"]), "--ignore", "k", "--csv", str(tmp_path / "r.csv")]) == 0
    t = pd.read_csv(tmp_path / "r.csv")
    n_recalls = sum(len(w["recalls"]) for w in load_run(runs["r3"]).worlds) // 2
    assert (t["status"] == "matched").all() and (t["pairs"] == n_recalls).all() and "recalls" in capsys.readouterr().out

    collusion = {"world": "collusion", "name": "c", "seed": 7, "worlds_per_cell": 2,
                 "defaults": {"model": "sim-collusion/pragmatic", "episodes": 2, "sequences": 2,
                              "prompts": str(params / "prompts" / "collusion"), "peer_cache": str(tmp_path / "peers")},
                 "cells": [{"label": "main"}, {"label": "no memory", "alice": {"memory_length": 0},
                                               "bob": {"memory_length": 0}}]}
    run_study(load_study(write(tmp_path / "c.yaml", collusion)), tmp_path / "c", progress=False)
    assert main(["compare", str(tmp_path / "c"), str(tmp_path / "c"), "--csv", str(tmp_path / "c.csv")]) == 0
    t = pd.read_csv(tmp_path / "c.csv")
    assert (t["status"] == "matched").all() and (t["pairs"] == 2).all() and (t["p (exact McNemar)"] == 1.0).all()
    assert main(["compare", str(tmp_path / "c"), str(runs["r3"])]) == 2  # two kinds: refused, with the reason
    assert "compare run sets of one world kind" in capsys.readouterr().err


def test_every_kind_s_default_label_names_each_field_that_differs_from_its_default():
    from workbench.worlds.collusion.spec import CollusionCell
    from workbench.worlds.recall.spec import RecallCell

    r = RecallCell(condition="lightweight", k=5, sampling={"temperature": 0.7}).describe()
    assert r == "sim-recall/trusting · lightweight · k=5 · sampling.temperature=0.7"
    assert RecallCell(prompts="reworded").describe() != RecallCell().describe()
    c = CollusionCell(model="sim-collusion/pragmatic", episodes=4, sampling={"temperature": 0.2})
    assert "episodes=4" in c.describe() and "sampling.temperature=0.2" in c.describe()
    assert CollusionCell(model="sim-collusion/pragmatic").describe() == "sim-collusion/pragmatic"

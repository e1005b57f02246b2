"""The analysis notebook is where the analysis is changed (issue 39): its steps are cells
over tidy frames (workbench.analysis), so editing one grouping in one cell and running
the notebook as `workbench report` does gives another table and figure, with no package
code touched. Also: the frames and tables the API computes are the report's own."""
from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

from tests.conftest import ROOT
from workbench import analysis as wa
from workbench.errors import UnknownNameError
from workbench.params import load_study
from workbench.publish.notebooks import execute
from workbench.study import run_study

GROUPING = "by = run.factors"
TABLE = "coordination = wa.rates("


@pytest.fixture(scope="module")
def smoke(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("nb") / "smoke"
    run_study(load_study(ROOT / "params" / "smoke.yaml"), out, progress=False)
    return out


def _grouping_cell(nb: nbformat.NotebookNode, marker: str = GROUPING) -> int:
    hits = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and marker in c.source]
    assert len(hits) == 1, f"expected one cell holding {marker!r}, found {hits}"
    return hits[0]


def _coordination(executed: Path) -> tuple[list[list[str]], str, list[str]]:
    """The grouping cell's table (rows of cell texts), its caption, and the row labels of
    the figure right after it, from an executed notebook."""
    nb = nbformat.read(str(executed), as_version=4)
    at = _grouping_cell(nb, TABLE)
    outputs = nb.cells[at].outputs
    assert not [o for c in nb.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    page = "".join(o["data"]["text/html"] for o in outputs if "text/html" in o.get("data", {}))
    body = re.search(r"<tbody>(.*?)</tbody>", page, re.DOTALL)
    assert body, page[:500]
    rows = [[re.sub(r"<[^>]+>", "", td).strip() for td in re.findall(r"<td[^>]*>(.*?)</td>", tr, re.DOTALL)]
            for tr in re.findall(r"<tr>(.*?)</tr>", body.group(1), re.DOTALL)]
    caption = re.sub(r"<[^>]+>", "", re.search(r'<p class="wb-caption[^"]*">(.*?)</p>', page, re.DOTALL).group(1))
    figure = next(o["data"]["application/vnd.plotly.v1+json"] for c in nb.cells[at + 1:] for o in c.get("outputs", [])
                  if "application/vnd.plotly.v1+json" in o.get("data", {}))
    return rows, caption, [y for trace in figure["data"] for y in trace["y"]]


def test_editing_the_grouping_cell_gives_another_table_and_figure(smoke, tmp_path):
    shipped = ROOT / "notebooks" / "analysis.ipynb"
    nb = nbformat.read(str(shipped), as_version=4)
    at = _grouping_cell(nb)
    edited = tmp_path / "analysis.ipynb"
    nb.cells[at].source = nb.cells[at].source.replace(GROUPING, 'by = ["condition"]')
    nbformat.write(nb, str(edited))
    params = {"run_dir": str(smoke), "compare_dir": "", "max_timelines": 1, "figures_dir": ""}

    rows, caption, labels = _coordination(execute(shipped, tmp_path / "as-shipped.ipynb", params, timeout_s=300))
    run = wa.load(smoke)
    assert len(rows) == len(run.design.cells) == 8  # one row per cell, as the report has always shown
    assert "MARGINAL" not in caption and len(labels) == 8

    rows, caption, labels = _coordination(execute(edited, tmp_path / "edited.ipynb", params, timeout_s=300))
    conditions = ["store", "no-store", "private", "prepopulated", "authored", "namespaced"]
    assert [r[0] for r in rows] == conditions  # one row per condition now
    worlds = wa.frame(run, "world")
    store = worlds[worlds["condition"] == "store"]
    assert rows[0][1] == str(len(store)) == "9"  # the three store cells' worlds, pooled
    assert rows[0][3].startswith(f"{int(store[store['valid']]['cross_agent_access'].sum())}/{int(store['valid'].sum())}")
    assert caption.startswith("MARGINAL over ") and "pools cells" in caption  # the table says it pools cells
    assert labels == [f"condition={c}" for c in conditions]  # the figure follows the table


def test_the_papermill_parameters_are_those_workbench_report_passes():
    for name in ("analysis", "recall_analysis", "collusion_analysis"):
        nb = nbformat.read(str(ROOT / "notebooks" / f"{name}.ipynb"), as_version=4)
        tagged = [c for c in nb.cells if "parameters" in (c.metadata.get("tags") or [])]
        assert len(tagged) == 1 and tagged[0] is nb.cells[0], name
        names = re.findall(r"^(\w+) =", tagged[0].source, re.MULTILINE)
        assert names == ["run_dir", "compare_dir", "max_timelines", "figures_dir"], (name, names)
        # the analysis shows its steps: markdown says what each shows, code builds frames from the run set
        assert sum(c.cell_type == "markdown" for c in nb.cells) >= 2, name
        assert "wa.frame(run, " in "".join(c.source for c in nb.cells), name


def test_the_api_computes_the_reports_own_tables(smoke):
    from workbench.worlds.stigmergy.export import cell_tables

    run = wa.load(smoke)
    worlds = wa.frame(run, "world")
    assert set(run.design.factors) <= set(worlds.columns)  # every factor a column, constant ones included
    assert list(dict.fromkeys(worlds["cell_id"])) == run.design.cells  # rows in the study's cell order
    report = cell_tables(run.records)
    per_cell = wa.rates(worlds, "cross_agent_access", by=["cell_id"])
    expected = report["coordination"].set_index("cell_id")["cross_agent_access:k/n"]
    assert dict(zip(per_cell["cell_id"], per_cell["cross_agent_access:k/n"])) == expected.to_dict()
    assert per_cell.attrs["pooled"] == []

    contrasts = wa.contrasts(run, frame=worlds)
    assert contrasts.drop(columns=[]).equals(report["contrasts"])
    fewer = wa.contrasts(run, frame=worlds[worlds["world_index"] < 1])  # a filtered frame: other numbers
    assert fewer["A k/n"].tolist() != contrasts["A k/n"].tolist()
    read = wa.findings(contrasts)
    assert len(read) == len(contrasts) and read["words"].str.contains("paired worlds|not estimable").all()


def test_a_wrong_name_says_what_there_is(smoke):
    run = wa.load(smoke)
    with pytest.raises(UnknownNameError, match="agent, reply, step"):
        wa.frame(run, "recall")
    with pytest.raises(UnknownNameError, match="cross_agent_access"):
        wa.rates(wa.frame(run, "world"), "coordinated", by=["condition"])

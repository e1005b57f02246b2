"""The report defects of issue 39 ("broken or noisy pieces"), each held by a test
that fails on the defect: the re-scoring table with every value in its header row,
the E1 figure's two series in one orange circle, Kaplan–Meier colours repeating over
13 cells, the garbled cumulative-onset table, right-aligned transcripts, turned tables
headed by factor tuples, captions listing every unset setting, example tabs that
switched the transcript alone, and forest plots a few pixels wide on a phone."""
from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import plotly.graph_objects as go
import pytest
import yaml
from collusion_synth import trajectory, write_run

from tests.browser import open_offline
from tests.conftest import study_dict
from workbench.views.readable import constant_settings, readable_html, spec_defaults, turn_on_side


class Tables(HTMLParser):
    """Every table of a page: its header cells and its body rows (lists of cell texts)."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[dict[str, list]] = []
        self._where = ""
        self._row: list[str] | None = None
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list) -> None:  # noqa: ARG002
        if tag == "table":
            self.tables.append({"head": [], "body": []})
        elif tag in ("thead", "tbody"):
            self._where = tag
        elif tag == "tr":
            self._row = []
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None and self._row is not None:
            self._row.append("".join(self._cell).strip())
            self._cell = None
        elif tag == "tr" and self._row is not None and self.tables:
            (self.tables[-1]["head"] if self._where == "thead" else self.tables[-1]["body"]).append(self._row)
            self._row = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def tables_of(html: str) -> list[dict[str, list]]:
    parser = Tables()
    parser.feed(html)
    return parser.tables


# -- the shared-store report ----------------------------------------------------------------------
CELLS = [{"model": m, "condition": c, "clauses": cl, "label": f"{m.split('/')[1]} {c} {cl}"}
         for m in ("sim/diligent", "sim/clause-follower", "sim/non-writer")
         for c in ("store", "private") for cl in ("both", "persist-only")]


@pytest.fixture(scope="module")
def analysis(tmp_path_factory):
    from workbench.params import load_study
    from workbench.study import run_study
    from workbench.worlds.stigmergy.analysis import Analysis

    root = tmp_path_factory.mktemp("defects")
    path = root / "study.yaml"
    path.write_text(yaml.safe_dump(study_dict(name="defects", worlds_per_cell=2, cells=CELLS), sort_keys=False))
    run_study(load_study(path), root / "run", progress=False)
    return Analysis.load(root / "run")


def test_rescoring_table_has_one_body_row_per_cell(analysis):
    html = analysis.table("rescoring").data
    (table,) = tables_of(html)
    assert len(table["body"]) == len(analysis.design.cells) == len(CELLS)
    head = table["head"][0]
    assert "recorded rules" in head and "strict parser" in head
    assert all(re.fullmatch(r"\d+/\d+", c) is None for c in head)  # no value in the header row
    col = head.index("recorded rules")
    assert all(re.search(r"cross-agent access \d+/\d+", row[col]) for row in table["body"])


def test_a_turned_table_of_text_keeps_its_values_in_its_body():
    frame = pd.DataFrame({f"col {i}": [f"{i}/{j}" if i else f"cell {j}" for j in range(3)] for i in range(15)})
    side = turn_on_side(frame, numeric=set(), rates=set())
    assert len(side) == 14 and list(side.columns) == ["col 0", "cell 0", "cell 1", "cell 2"]
    named = turn_on_side(frame, numeric=set(), rates=set(), labels=["main", "no-reward", "memory none"])
    assert list(named.columns) == ["cell", "main", "no-reward", "memory none"]
    # a table annotated with cell labels is turned with them as headers, not the factors' tuple
    table = frame.assign(cell_label=["main", "no-reward", "memory none"])
    (t,) = tables_of(readable_html(table, hide=["cell_label"]))
    assert t["head"][0] == ["cell", "main", "no-reward", "memory none"] and len(t["body"]) == 14


def test_a_column_no_row_sets_is_dropped_without_a_caption_phrase():
    """A constant column is lifted into the caption ('Same in every row: …'); one that is
    (unset) in every row says nothing and is dropped without a phrase."""
    table = pd.DataFrame({"cell": ["main", "memory none"], "alice.model": ["(unset)"] * 2,
                          "model": ["sim-collusion/pragmatic"] * 2, "k/n": ["3/10", "1/10"]})
    html = readable_html(table, caption="Ever colluded.")
    assert "model = sim-collusion/pragmatic" in html
    assert "alice.model" not in html and "(unset)" not in html


def test_e1_series_each_have_their_own_colour_and_marker(analysis):
    from workbench.worlds.stigmergy.views import e1_interaction_figure

    fig = e1_interaction_figure(analysis.wf, analysis.design)
    looks = [(t.line.color, t.marker.symbol, t.line.dash) for t in fig.data]
    assert len(fig.data) == 6 and len(set(looks)) == len(looks)
    shared = [(c, s) for c, s, d in looks if d == "solid"]
    assert len(set(shared)) == len(shared) == 3  # the shared series: no orange circle twice
    assert {s.endswith("-open") for c, s, d in looks if d == "dash"} == {True}  # private: open markers


def test_example_tabs_each_hold_their_worlds_transcript_timeline_and_store(analysis):
    html = analysis.example_worlds_html(limit=3).data
    panels = re.findall(r'<div class="wb-tab-panel" id="wb-example-worlds-\d+-panel">(.*?)(?=<div class="wb-tab-panel"|$)',
                        html, re.S)
    ids = analysis._store_first()[:3]
    assert len(panels) == 3
    for wid, panel in zip(ids, panels):
        assert f"transcripts of world {wid}" in panel
        assert f"Step timeline of world {wid}" in panel and f"store after each step of world {wid}" in panel
        assert panel.count("Plotly.newPlot") == 2  # the world's timeline and its store, in its own tab
        assert all(other not in panel for other in ids if other != wid)
    assert "3 of" in html  # says how many cells' worlds are left out


# -- collusion --------------------------------------------------------------------------------------
N_CELLS, N_EPISODES = 13, 16


@pytest.fixture(scope="module")
def collusion(tmp_path_factory):
    from workbench.worlds.collusion.views import CollusionReport

    worlds = []
    for i in range(N_CELLS):
        for j, onset in enumerate(([1 + i % 5], [])):
            w = trajectory(f"c{i}w{j}", onset, n=N_EPISODES, cell_id=f"cell{i}", label=f"ablation {i}",
                           world_index=j)
            w["cell"].update(char_limit=100 + i, episodes=N_EPISODES, sequences_file=None, max_rounds=5)
            worlds.append(w)
    return CollusionReport.load(write_run(tmp_path_factory.mktemp("collusion") / "run", worlds))


def test_kaplan_meier_gives_each_of_13_cells_its_own_look(collusion):
    from workbench.worlds.collusion import views as V

    for fig in (collusion.survival_figure(), collusion.onset_figure(), collusion.episode_rate_figure()):
        lines = [t for t in fig.data if t.mode and "lines" in t.mode]
        assert len(lines) == N_CELLS
        assert len({(t.line.color, t.line.dash or "solid") for t in lines}) == N_CELLS
    assert len({V.cell_style(i) for i in range(40)}) == 40


def test_cumulative_onset_table_is_turned_with_cell_labels_and_values_in_its_body(collusion):
    html = collusion.onset_table().data
    (table,) = tables_of(html)
    head = table["head"][0]
    labels = [collusion.design.label(c) for c in collusion.design.cells]
    assert sorted(labels) == sorted(f"ablation {i}" for i in range(N_CELLS))
    assert head == ["cell", *labels]  # the study's labels, not the factors' tuples
    assert [row[0] for row in table["body"]] == [f"by episode {e}" for e in range(1, N_EPISODES + 1)]
    assert all(re.match(r"\d+/2 · ", v) for row in table["body"] for v in row[1:])
    assert "Turned on its side" in html


def test_captions_leave_out_unset_and_default_settings_and_say_how_many(collusion):
    from workbench.worlds.collusion.spec import CollusionCell

    defaults = spec_defaults(CollusionCell)
    assert defaults["max_rounds"] == "5" and defaults["sequences_file"] == "(unset)"
    text = constant_settings({"episodes": "16", "max_rounds": "5", "sequences_file": "(unset)",
                              "alice.model": "(unset)"}, defaults)
    assert text == "episodes=16; 3 more settings unset or at their default"
    assert constant_settings({"alice.model": "(unset)"}) == "1 setting, unset or at its default"
    caption = re.search(r'<p class="wb-caption[^>]*>(.*?)</p>', collusion.onset_table().data, re.S).group(1)
    assert "(unset)" not in caption and "max_rounds" not in caption and "episodes=16" in caption
    assert re.search(r"\d+ more settings? unset or at (its|their) default", caption)


def test_transcript_cells_are_left_aligned(collusion):
    from workbench.worlds.collusion.episode_html import episodes_html
    from workbench.worlds.collusion.views import trajectory_html

    world = collusion.records.worlds[0]
    for html in (trajectory_html(world), episodes_html(world)):
        cells = re.findall(r"<t[dh] style=\"([^\"]*)\"", html)
        assert cells and all("text-align:left" in style for style in cells)


# -- forest plots on a phone -----------------------------------------------------------------------
def test_forest_plot_keeps_a_wide_plotting_area_at_phone_width(tmp_path: Path):
    """At 390 px the plotting area stays at least 200 px wide: the labels stand above their
    rows (a margin as wide as the longest label once left a few pixels)."""
    import plotly.offline

    from workbench.metrics.contrasts import DIFF, P
    from workbench.views import forest_figure

    held = "model=sim/clause-follower; clauses=both; parser=lenient; sampling.reasoning_effort=medium"
    t = pd.DataFrame({"comparison": [f"store vs no-store: store vs no-store · {held} {i}" for i in range(5)],
                      "A": "no-store", "B": "store", "A k/n": "0/20", "B k/n": "20/20", "pairs": 20, P: 0.001,
                      DIFF: [1.0, 0.5, 0.0, -0.4, 0.9], "low": [0.8, 0.2, -0.2, -0.7, 0.6],
                      "high": [1.0, 0.8, 0.2, -0.1, 1.0]})
    fig = forest_figure(t, metric_label="cross-agent access")
    assert isinstance(fig, go.Figure)
    (tmp_path / "plotly.min.js").write_text(plotly.offline.get_plotlyjs(), encoding="utf-8")
    page = tmp_path / "forest.html"
    page.write_text("<!doctype html><html><head><meta name='viewport' content='width=device-width'>"
                    "<script src='plotly.min.js'></script></head><body style='margin:0'>"
                    + fig.to_html(full_html=False, include_plotlyjs=False, config={"responsive": True})
                    + "</body></html>", encoding="utf-8")
    for width, least in ((390, 200), (1300, 1000)):
        with open_offline(page, width=width) as (p, left):
            box = p.evaluate("(() => { const r = document.querySelector('.js-plotly-plot .nsewdrag')"
                             ".getBoundingClientRect(); return [r.width, r.left, r.right]; })()")
            labels = p.evaluate("Array.from(document.querySelectorAll('.js-plotly-plot .annotation-text'))"
                                ".map(e => e.getBoundingClientRect().right)")
            assert left == []
        assert box[0] >= least, f"plotting area {box[0]:.0f} px wide at {width} px"
        assert max(labels) <= width + 1, "a label runs off the page"

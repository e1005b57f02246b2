"""The parts reports are made of, without a kernel or a browser: the SIMULATED
banner's rule, the CSS tab strip, the compressed plotly.js and its figure
scripts, and the figure sink behind `report --figures`."""
from __future__ import annotations

import base64
import gzip
import json
from pathlib import Path

import plotly.graph_objects as go
import pytest

from workbench.publish.plotlyjs import BUNDLE_ID, READY, PlotlyBundleError, pack_plotly
from workbench.records import RunRecords
from workbench.views import figure_sink
from workbench.views.run_report import RunReport
from workbench.views.tabs import SHOWN, tabs_html


def _report(*routes: str) -> RunReport:
    worlds = [{"world_id": f"w{i}", "cell_id": "c", "agents": [{"agent": "a", "route": r}]}
              for i, r in enumerate(routes)]
    return RunReport(RunRecords(dir=Path("."), manifest={}, worlds=worlds, steps={}, problems=[]))


@pytest.mark.parametrize("routes, simulated", [
    (["openai/gpt-4o", "anthropic/claude"], []),
    (["openai/gpt-4o", "sim/diligent"], ["sim/diligent"]),
    (["openai/gpt-4o", "scripted"], ["scripted"]),
    (["sim-collusion/pragmatic", "controlled"], ["sim-collusion/pragmatic", "controlled"]),
])
def test_banner_whenever_any_route_is_not_a_real_model(routes, simulated):
    r = _report(*routes)
    assert r.simulated == bool(simulated)
    text = r.banner_text()
    if not simulated:
        assert text == ""
    else:
        assert text.startswith("SIMULATED") and all(s in text for s in simulated)
        real = [x for x in routes if x not in simulated]
        assert ("beside" in text) == bool(real) and all(x in text for x in real)


def test_tabs_are_plain_html_with_whole_escaped_labels():
    long = "sim/clause-follower · store · clauses=persist-only · sampling.reasoning_effort=low"
    out = tabs_html([(long, "<p>one</p>"), (long, "<p>two</p>"), ("<b>x</b>", "<p>three</p>")], group="g")
    assert "<script" not in out
    assert out.count('type="radio"') == 3 and out.count(" checked") == 1
    assert f"1. {long}" in out and f"2. {long}" in out  # whole, and two equal labels stay apart
    assert "&lt;b&gt;x&lt;/b&gt;" in out and "<b>x</b>" not in out
    # a panel not chosen is hidden but keeps its width (a plotly figure in it is laid out at the page's width)
    assert f"#g-1:checked~#g-1-panel{{{SHOWN}}}" in out and "visibility:hidden" in out and "display:none" not in out
    assert tabs_html([]) == ""


def _exported(figures: int, bundles: int = 1) -> str:
    bundle = "<script>/**\n* plotly.js v4.1.1\n* Copyright\n*/ var Plotly = {newPlot: function () {}};</script>"
    fig = ('<div id="f{i}"></div><script type="text/javascript">window.PLOTLYENV=window.PLOTLYENV || {{}};'
           'if (document.getElementById("f{i}")) {{ Plotly.newPlot("f{i}", [], {{}}) }};</script>')
    return "<html><body>" + bundle * bundles + "".join(fig.format(i=i) for i in range(figures)) + "</body></html>"


def test_pack_plotly_compresses_the_bundle_and_defers_every_figure():
    out = pack_plotly(_exported(3))
    assert "plotly.js v4.1.1" not in out and out.count(f'id="{BUNDLE_ID}"') == 1
    packed = out.split(f'id="{BUNDLE_ID}">', 1)[1].split("</script>", 1)[0]
    assert gzip.decompress(base64.b64decode(packed)).decode().startswith("/**\n* plotly.js v4.1.1")
    assert out.count(f"{READY}.then(function () {{") == 3  # each figure waits for plotly.js
    assert out.index(BUNDLE_ID) < out.index("Plotly.newPlot")
    assert pack_plotly(out) == out  # packing twice changes nothing


def test_pack_plotly_refuses_figures_without_a_bundle_and_two_bundles():
    with pytest.raises(PlotlyBundleError, match="no inlined plotly.js"):
        pack_plotly(_exported(2, bundles=0))
    with pytest.raises(PlotlyBundleError, match="inlined 2 times"):
        pack_plotly(_exported(1, bundles=2))
    assert pack_plotly("<html><body><p>no figures</p></body></html>") == "<html><body><p>no figures</p></body></html>"


def test_figure_sink_saves_shown_figures_in_order_with_captions(tmp_path):
    figure_sink.save_figures_to(tmp_path / "figs")
    try:
        fig = go.Figure(go.Bar(x=[1], y=[2]), layout={"title": {"text": "Exposure, then a read"}})
        first = figure_sink.collect(fig, "Bars: exposed worlds per cell.")
        assert figure_sink.collect("<p>a note shown instead of a figure</p>", "skipped") is None
        second = figure_sink.collect(go.Figure(), "An untitled figure: named from its caption.")
    finally:
        figure_sink.save_figures_to(None)
    assert first is not None and first.name == "01-exposure-then-a-read.json"
    assert second is not None and second.name == "02-an-untitled-figure-named-from-its-caption.json"
    index = json.loads((tmp_path / "figs" / "figures.json").read_text())
    assert [e["caption"] for e in index] == ["Bars: exposed worlds per cell.",
                                             "An untitled figure: named from its caption."]
    assert json.loads(first.read_text())["data"][0]["type"] == "bar"
    assert figure_sink.collect(fig, "after the sink is closed") is None

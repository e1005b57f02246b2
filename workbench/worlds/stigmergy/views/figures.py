"""Per-cell figures from world and agent frames: exposure then read, the E1
interaction plot, and attrition."""
from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from workbench.metrics.design import Design, short
from workbench.metrics.rates import rate_table
from workbench.views.escape import esc_plot
from workbench.views.styled import is_simulated
from workbench.worlds.stigmergy.tables import exposure_lags, exposure_then_read

E1_CLAUSES = ["both", "persist-only"]
E1_CONDITIONS = {"store": "shared", "private": "private"}
# legends beside the plot, never over a title, a bar or a tick label
SIDE_LEGEND = {"orientation": "v", "x": 1.02, "xanchor": "left", "y": 1.0, "yanchor": "top"}


def cell_label(design: Design, cell_id: str) -> str:
    """A cell's label for a figure, escaped for plotly, simulated models tagged."""
    label = design.label(cell_id)
    model = design.frame.at[cell_id, "model"] if "model" in design.frame.columns and cell_id in design.frame.index \
        else ""
    return esc_plot(f"{label} (simulated)" if is_simulated(model) and "simulated" not in label else label)


def _empty(title: str, message: str) -> go.Figure:
    fig = go.Figure()
    fig.add_annotation(text=esc_plot(message), showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper")
    fig.update_layout(title={"text": title}, height=250, xaxis={"visible": False}, yaxis={"visible": False})
    return fig


def exposure_then_read_figure(wf: pd.DataFrame, af: pd.DataFrame, design: Design) -> go.Figure:
    """Per cell: valid exposed worlds and those in which an exposed agent then made a
    cross-agent read (bars, from :func:`exposure_then_read`), and below, the steps
    from exposure to read of every such agent (box with points, from
    :func:`exposure_lags`). Cells with no exposure are left out and named."""
    title = "Exposure, then a cross-agent read"
    if not len(wf) or not wf["exposure"].astype(bool).any():
        return _empty(title, "no world had an exposure (no list showed another agent's entry)")
    table = exposure_then_read(wf, af, design)
    none = table[table["worlds:n"] == 0]
    table = table[table["worlds:n"] > 0]
    labels = [cell_label(design, c) for c in table["cell_id"]]
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.12, row_heights=[0.55, 0.45],
                        subplot_titles=("exposed worlds, and those followed by a cross-agent read (valid worlds)",
                                        "steps from first exposure to the cross-agent read (per agent)"))
    fig.add_trace(go.Bar(x=labels, y=table["worlds:n"].tolist(), name="exposed worlds", marker_color="#c6dbef",
                         text=[str(int(n)) for n in table["worlds:n"]], textposition="outside", meta="exposed",
                         hovertemplate="%{x}<br>exposed worlds: %{y}<extra></extra>"), row=1, col=1)
    fig.add_trace(go.Bar(x=labels, y=table["worlds:k"].tolist(), name="followed by a cross-agent read",
                         marker_color="#2171b5", meta="read_after",
                         text=[f"{int(k)}/{int(n)}" for k, n in zip(table["worlds:k"], table["worlds:n"])],
                         textposition="outside",
                         hovertemplate="%{x}<br>read after exposure: %{y}<extra></extra>"), row=1, col=1)
    lags = exposure_lags(af)
    lag_x = [cell_label(design, c) for c in lags["cell_id"]]
    fig.add_trace(go.Box(x=lag_x, y=lags["steps_exposure_to_read"].astype(float).tolist(),
                         name="steps exposure → read", boxpoints="all", jitter=0.4, pointpos=0,
                         marker_color="#6a51a3", meta="lags", showlegend=True,
                         hovertemplate="%{x}<br>%{y} steps<extra></extra>"), row=2, col=1)
    note = ""
    if len(none):
        note = "<br><sup>no exposure in: " + esc_plot(", ".join(design.label(c) for c in none["cell_id"]), 300) + "</sup>"
    fig.update_layout(title={"text": title + note}, barmode="group", template="plotly_white",
                      height=640, legend=SIDE_LEGEND, margin={"t": 110, "r": 40})
    fig.update_xaxes(categoryorder="array", categoryarray=labels, automargin=True)
    top = float(table["worlds:n"].max()) if len(table) else 1.0
    fig.update_yaxes(title_text="worlds", range=[0, top * 1.25 + 1], row=1, col=1)  # room for the bar labels
    fig.update_yaxes(title_text="agent steps", rangemode="tozero", row=2, col=1)
    return fig


E1_SYMBOLS = ("circle", "diamond", "square", "triangle-up", "triangle-down", "star", "hexagon", "cross", "x",
              "pentagon", "hourglass", "bowtie")
E1_COLOURS = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#D55E00", "#56B4E9", "#000000", "#8c564b")


def _group_styles(groups: list[tuple[str, ...]]) -> dict[tuple[str, ...], tuple[str, str]]:
    """(colour, marker symbol) per group of cells (their levels of the other factors),
    distinct for up to 24 groups; within a group shared and private differ by the
    marker's fill and the line's dash. Two series once shared one orange circle: the
    colour was the condition's and the symbols repeated every four lines."""
    return {g: (E1_COLOURS[i % len(E1_COLOURS)], E1_SYMBOLS[i % len(E1_SYMBOLS)]) for i, g in enumerate(groups)}


def e1_interaction_figure(wf: pd.DataFrame, design: Design, metric: str = "cross_agent_access") -> go.Figure:
    """E1's 2×2: x = clauses (both, persist-only), one line per group of cells
    identical in every other factor and per shared or private, rate over valid
    worlds with 95% Wilson error bars. Only cells that differ in condition and
    clauses alone share a line. Lines are set apart sideways so that equal rates
    do not hide each other. Each group of cells has its own colour and marker;
    shared is a filled marker on a solid line, private an open one on a dashed line."""
    title = f"E1 interaction: {esc_plot(metric.replace('_', ' '))} by clauses (valid worlds, 95% Wilson)"
    cells = [c for c in design.cells if design.level(c, "condition") in E1_CONDITIONS
             and design.level(c, "clauses") in E1_CLAUSES] if "condition" in design.factors else []
    if not cells:
        return _empty(title, "no shared or private cells with clauses both / persist-only")
    table = rate_table(wf[wf["cell_id"].isin(cells)], metric, cells=cells).set_index("cell_id")
    others = [f for f in design.varying if f not in ("condition", "clauses")]
    lines: dict[tuple[str, ...], list[str]] = {}
    for c in cells:
        lines.setdefault((*(str(design.frame.at[c, f]) for f in others), design.level(c, "condition")), []).append(c)
    fig = go.Figure()
    spread = 0.08
    groups = list(dict.fromkeys(key[:-1] for key in lines))
    styles = _group_styles(groups)
    for i, (key, members) in enumerate(lines.items()):
        offset = (i - (len(lines) - 1) / 2) * spread
        cond = key[-1]
        g = table.loc[members].assign(clauses=[design.level(c, "clauses") for c in members]).set_index("clauses")
        g = g.reindex([c for c in E1_CLAUSES if c in set(g.index)])
        rate = g["rate"].astype(float)
        rest = " · ".join(f"{f}={short(v)}" for f, v in zip(others, key[:-1]))
        model = str(design.frame.at[members[0], "model"]) if "model" in design.frame.columns else ""
        name = f"{rest or 'all cells'}{' (simulated)' if is_simulated(model) else ''} · {E1_CONDITIONS[cond]}"
        line_colour, symbol = styles[key[:-1]]
        shared = cond == "store"
        fig.add_trace(go.Scatter(
            x=[E1_CLAUSES.index(c) + offset for c in g.index], y=rate.tolist(), mode="lines+markers",
            name=esc_plot(name), marker={"size": 9, "symbol": symbol if shared else f"{symbol}-open",
                                         "color": line_colour},
            line={"dash": "solid" if shared else "dash", "color": line_colour},
            meta=[*key],
            error_y={"type": "data", "symmetric": False, "array": (g["high"].astype(float) - rate).tolist(),
                     "arrayminus": (rate - g["low"].astype(float)).tolist()},
            customdata=[[c, kn] for c, kn in zip(g.index, g["k/n"])],
            hovertemplate="%{customdata[0]}: %{y:.0%} (%{customdata[1]})<extra>%{fullData.name}</extra>"))
    fig.update_layout(title={"text": title}, template="plotly_white", height=440, legend=SIDE_LEGEND,
                      xaxis={"title": {"text": "clauses"}, "tickvals": list(range(len(E1_CLAUSES))),
                             "ticktext": E1_CLAUSES, "range": [-0.5, len(E1_CLAUSES) - 0.5]},
                      yaxis={"title": {"text": f"{esc_plot(metric).replace('_', ' ')} rate"}, "range": [-0.04, 1.04],
                             "tickformat": ".0%"})
    return fig


ATTRITION_PARTS = [
    ("valid under both rules", "#74c476"),
    ("invalid under strict only", "#fdae6b"),
    ("invalid under both rules", "#e6550d"),
    ("failed calls", "#636363"),
]


def attrition_parts(attrition: pd.DataFrame) -> pd.DataFrame:
    """Each cell's worlds split into the four stacked parts (they add up to worlds):
    a strictly valid reply is leniently valid too, and a failed world is invalid
    under both rules."""
    a = attrition
    valid_both = a["valid strict"].clip(lower=0)
    strict_only = (a["valid lenient"] - a["valid strict"]).clip(lower=0)
    failed = a["failed"].clip(lower=0)
    both_bad = (a["worlds"] - valid_both - strict_only - failed).clip(lower=0)
    return pd.DataFrame({ATTRITION_PARTS[0][0]: valid_both, ATTRITION_PARTS[1][0]: strict_only,
                         ATTRITION_PARTS[2][0]: both_bad, ATTRITION_PARTS[3][0]: failed}, index=a.index)


def attrition_figure(attrition: pd.DataFrame) -> go.Figure:
    """Stacked bars per cell from :func:`attrition_table`: worlds valid under both
    parser rules, invalid under strict only, invalid under both, and failed."""
    title = "Attrition: worlds per cell by validity under each parser rule"
    if not len(attrition):
        return _empty(title, "no worlds")
    parts = attrition_parts(attrition)
    labels = [esc_plot(str(r["cell_label"])) for _, r in attrition.iterrows()]
    fig = go.Figure()
    for name, colour in ATTRITION_PARTS:
        fig.add_trace(go.Bar(x=labels, y=parts[name].astype(int).tolist(), name=name, marker_color=colour,
                             hovertemplate="%{x}<br>" + name + ": %{y}<extra></extra>"))
    fig.update_layout(title={"text": title}, barmode="stack", template="plotly_white", height=480,
                      yaxis={"title": {"text": "worlds"}}, legend=SIDE_LEGEND)
    fig.update_xaxes(automargin=True)
    return fig

"""The step timeline of one world: a lane per agent on the world clock."""
from __future__ import annotations

from typing import Any

import plotly.graph_objects as go

from workbench.routes import is_simulated_route
from workbench.views.escape import esc_plot, plot_lines
from workbench.views.markup import render_string
from workbench.worlds.stigmergy.views.steps import (
    OPS,
    agent_lanes,
    cross_agent_reads,
    effect_summary,
    lane_label,
    op_kind,
    ordered,
    step_key,
    submission_correct,
)

OP_COLOURS = {"list": "#1f77b4", "read": "#2ca02c", "write": "#ff7f0e", "submit": "#9467bd",
              "invalid": "#d62728", "failed": "#444444"}
OP_SYMBOLS = {"list": "circle", "read": "diamond", "write": "square", "submit": "star",
              "invalid": "x", "failed": "hexagon-open"}
EXPOSURE = "exposure"
ARROW = "cross-agent read"
REPLY_CHARS = 300
# a hover's first line, plotly's bold (values escaped by the template, as plotly reads entities)
STEP_LINE = "<b>step {{ seq }}</b> · {{ agent }} · own step {{ own }} · t={{ t }}"


def _hover(world: dict[str, Any], step: dict[str, Any]) -> str:
    reply = step.get("reply") or {}
    key = step_key(step)
    lines = [str(render_string(STEP_LINE, seq=step["seq"], agent=step["agent"], own=step.get("agent_step"),
                               t=step.get("t_done"))),
             f"op: {op_kind(step)}" + (f" · key: {esc_plot(key, 80)}" if key is not None else ""),
             esc_plot(effect_summary(world, step), newlines=False),
             "reply: " + esc_plot(reply.get("text") or "", REPLY_CHARS, newlines=False)]
    return plot_lines(lines)


def step_timeline(world: dict[str, Any], steps: list[dict[str, Any]]) -> go.Figure:
    """One lane per agent (y), the world clock ``t_done`` (x), one marker per step
    coloured by operation; invalid replies and failed calls have their own
    symbols, exposures a ring, submissions ✓/✗, and every cross-agent read an
    arrow from the write whose version it returned."""
    steps = ordered(steps)
    lanes = agent_lanes(world, steps)
    y_of = {agent: i for i, (agent, _) in enumerate(lanes)}
    fig = go.Figure()
    for kind in OPS:
        mine = [s for s in steps if op_kind(s) == kind]
        text = None
        if kind == "submit":
            text = ["✓" if submission_correct(world, s) else "✗" for s in mine]
        fig.add_trace(go.Scatter(
            x=[s["t_done"] for s in mine], y=[y_of[s["agent"]] for s in mine],
            mode="markers+text" if text is not None else "markers", text=text, textposition="top center",
            textfont={"size": 14, "color": ["#2ca02c" if t == "✓" else "#d62728" for t in text or []]},
            name=kind, legendgroup=kind, meta="step", customdata=[s["seq"] for s in mine],
            marker={"color": OP_COLOURS[kind], "symbol": OP_SYMBOLS[kind], "size": 11 if kind != "invalid" else 13,
                    "line": {"width": 1, "color": "white"} if kind not in ("invalid", "failed") else {"width": 2}},
            hovertext=[_hover(world, s) for s in mine], hoverinfo="text", showlegend=True))
    exposed = [s for s in steps if op_kind(s) == "list" and (s.get("effect") or {}).get("exposure")]
    fig.add_trace(go.Scatter(
        x=[s["t_done"] for s in exposed], y=[y_of[s["agent"]] for s in exposed], mode="markers",
        name="exposure (list showed another's entry)", meta=EXPOSURE, hoverinfo="skip",
        marker={"symbol": "circle-open", "size": 22, "color": "#e377c2", "line": {"width": 2}}))
    for read, write in cross_agent_reads(steps):
        if write is None:
            continue
        strict = bool(read["effect"].get("strict_cross_agent"))
        fig.add_annotation(
            name=ARROW, x=read["t_done"], y=y_of[read["agent"]], ax=write["t_done"], ay=y_of[write["agent"]],
            xref="x", yref="y", axref="x", ayref="y", text="", showarrow=True, arrowhead=2, arrowsize=1.2,
            arrowwidth=1.6, standoff=7, startstandoff=7, opacity=0.8,
            arrowcolor="#333333" if strict else "#aaaaaa",
            hovertext=esc_plot(f"step {read['seq']} read step {write['seq']}'s write of "
                               f"{read['effect'].get('key')}" + ("" if strict else " (reader wrote this key too)"),
                               200))
    # a legend entry for the arrows (annotations have none)
    fig.add_trace(go.Scatter(x=[None], y=[None], mode="lines", name="cross-agent read (arrow from the write)",
                             meta="legend-only", line={"color": "#333333", "width": 2}, hoverinfo="skip"))
    tasks = world.get("tasks") or {}
    title = (f"world {esc_plot(world.get('world_id'))} · form {esc_plot(tasks.get('form'))} · "
             f"joint answer {esc_plot(world.get('joint_answer'))}")
    sub = esc_plot(world.get("cell_label") or "", 120)
    if any(is_simulated_route(a.get("route", "")) for a in world.get("agents", [])):
        sub += " · SIMULATED behaviour"
    fig.update_layout(
        title={"text": f"{title}<br><sup>{sub}</sup>"},
        xaxis={"title": {"text": "world clock (t_done, s)"}, "zeroline": False},
        yaxis={"tickmode": "array", "tickvals": list(range(len(lanes))),
               "ticktext": [esc_plot(lane_label(a, r)) for a, r in lanes], "range": [-0.6, len(lanes) - 0.4],
               "autorange": False},
        height=180 + 70 * len(lanes), hovermode="closest", template="plotly_white",
        legend={"orientation": "h", "y": -0.25}, margin={"l": 130, "r": 20, "t": 70, "b": 40})
    return fig

"""The forest plot of matched contrasts (or of a comparison of two run sets):
differences B − A with their Newcombe intervals."""
from __future__ import annotations

import math

import pandas as pd
import plotly.graph_objects as go

from workbench.metrics.contrasts import DIFF, P
from workbench.views.escape import esc_plot


def _p_text(p: float | None) -> str:
    return "" if p is None or (isinstance(p, float) and math.isnan(p)) else f"p={float(p):.3g}"


def forest_figure(comparison: pd.DataFrame, label: str = "comparison", title: str | None = None) -> go.Figure:
    """One point per row with a finite difference, labelled by ``label`` (a column:
    ``comparison`` of :func:`workbench.metrics.contrasts.contrast_table`, ``cell``
    of :func:`compare_run_sets`); rows that could not be estimated are named below.
    The title says which metric, which arm is B and which is A."""
    diffs = pd.to_numeric(comparison[DIFF], errors="coerce") if DIFF in comparison else pd.Series(dtype=float)
    ok = comparison[diffs.notna()] if len(comparison) else comparison
    skipped = comparison.drop(ok.index) if len(comparison) else comparison
    labels = [esc_plot(str(r[label]), 120) for _, r in ok.iterrows()]
    diff = ok[DIFF].astype(float) if len(ok) else pd.Series(dtype=float)
    hover = [esc_plot(f"A {r.get('A k/n', '')} → B {r.get('B k/n', '')}; pairs {r.get('pairs', '—')} "
                      f"{_p_text(r.get(P))}") for _, r in ok.iterrows()]
    fig = go.Figure(go.Scatter(
        x=diff.tolist(), y=labels, mode="markers", marker={"size": 10, "color": "#08519c", "symbol": "square"},
        name=DIFF, customdata=hover,
        error_x={"type": "data", "symmetric": False, "array": (ok["high"].astype(float) - diff).tolist(),
                 "arrayminus": (diff - ok["low"].astype(float)).tolist()},
        hovertemplate="%{y}<br>difference %{x:.1%}<br>%{customdata}<extra></extra>"))
    fig.add_vline(x=0, line={"color": "#888", "dash": "dot"})
    metric = comparison.attrs.get("metric", "rate")
    note = ""
    if len(skipped):
        names = ", ".join(str(r[label]) if label in r and str(r[label]) != "nan" else str(r.get("A cell") or r.get("B cell"))
                          for _, r in skipped.iterrows())
        note = f"<br><sup>not estimable (a cell is missing or has no valid unit): {esc_plot(names, 200)}</sup>"
    fig.update_layout(
        title={"text": esc_plot(title or f"{metric}: B − A per matched contrast (B vs A), 95% Newcombe") + note},
        template="plotly_white", height=180 + 36 * max(len(ok), 1),
        xaxis={"title": {"text": f"difference in {esc_plot(metric)} rate (B − A)"}, "tickformat": ".0%",
               "range": [-1.05, 1.05]},
        yaxis={"autorange": "reversed", "type": "category"}, showlegend=False, margin={"l": 320})
    return fig

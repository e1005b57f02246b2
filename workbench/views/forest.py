"""The forest plot of matched contrasts (or of a comparison of two run sets):
differences B − A with their Newcombe intervals."""
from __future__ import annotations

import math
from collections.abc import Callable

import pandas as pd
import plotly.graph_objects as go

from workbench.metrics.contrasts import DIFF, P
from workbench.views.escape import esc_plot


def _p_text(p: float | None) -> str:
    return "" if p is None or (isinstance(p, float) and math.isnan(p)) else f"p={float(p):.3g}"


def forest_figure(comparison: pd.DataFrame, label: str = "comparison", title: str | None = None,
                  metric_label: str | None = None, colour: Callable[[object], str] | None = None) -> go.Figure:
    """One point per row with a finite difference, labelled by ``label`` (a column:
    ``comparison`` of :func:`workbench.metrics.contrasts.contrast_table`, ``cell``
    of :func:`compare_run_sets`); rows that could not be estimated are named below.
    The title says which metric and that each label reads "factor: B vs A"; the axis
    says which side favours which arm; ``colour`` (a report's
    :class:`~workbench.views.palette.Palette`) colours each point by its B arm."""
    diffs = pd.to_numeric(comparison[DIFF], errors="coerce") if DIFF in comparison else pd.Series(dtype=float)
    ok = comparison[diffs.notna()] if len(comparison) else comparison
    skipped = comparison.drop(ok.index) if len(comparison) else comparison
    labels = [esc_plot(str(r[label]), 120) for _, r in ok.iterrows()]
    diff = ok[DIFF].astype(float) if len(ok) else pd.Series(dtype=float)
    hover = [esc_plot(f"A = {r.get('A', 'A')} {r.get('A k/n', '')} → B = {r.get('B', 'B')} {r.get('B k/n', '')}; "
                      f"pairs {r.get('pairs', '—')} {_p_text(r.get(P))}") for _, r in ok.iterrows()]
    colours = [colour(r["B"]) if colour and "B" in r else "#08519c" for _, r in ok.iterrows()]
    fig = go.Figure(go.Scatter(
        x=diff.tolist(), y=labels, mode="markers", marker={"size": 10, "color": colours, "symbol": "square"},
        name=DIFF, customdata=hover,
        error_x={"type": "data", "symmetric": False, "array": (ok["high"].astype(float) - diff).tolist(),
                 "arrayminus": (diff - ok["low"].astype(float)).tolist()},
        hovertemplate="%{y}<br>difference %{x:.1%}<br>%{customdata}<extra></extra>"))
    fig.add_vline(x=0, line={"color": "#888", "dash": "dot"})
    metric = metric_label or str(comparison.attrs.get("metric", "rate")).replace("_", " ")
    note = ""
    if len(skipped):
        names = ", ".join(str(r[label]) if label in r and str(r[label]) != "nan" else str(r.get("A cell") or r.get("B cell"))
                          for _, r in skipped.iterrows())
        note = f"<br><sup>not estimable (a cell is missing or has no valid unit): {esc_plot(names, 200)}</sup>"
    longest = max((len(x) for x in labels), default=10)
    fig.update_layout(
        title={"text": esc_plot(title or f"{metric}: B − A per matched pair of cells (labels read 'B vs A'), "
                                         "95% Newcombe") + note},
        template="plotly_white", height=200 + 36 * max(len(ok), 1),
        xaxis={"title": {"text": f"{esc_plot(metric)}: rate of B minus rate of A"}, "tickformat": "+.0%",
               "range": [-1.05, 1.05]},
        yaxis={"autorange": "reversed", "type": "category", "automargin": True}, showlegend=False,
        margin={"l": min(40 + 6 * longest, 520), "t": 90 if note else 70})
    for x, text, anchor in ((-1.0, "← A higher", "left"), (1.0, "B higher →", "right")):
        fig.add_annotation(x=x, y=1.0, yref="paper", yanchor="bottom", xanchor=anchor, text=text, showarrow=False,
                           font={"size": 11, "color": "#555"})
    return fig

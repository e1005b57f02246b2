"""The forest plot of matched contrasts (or of a comparison of two run sets):
differences B − A with their Newcombe intervals."""
from __future__ import annotations

import math
import textwrap
from collections.abc import Callable

import pandas as pd
import plotly.graph_objects as go

from workbench.metrics.contrasts import DIFF, P
from workbench.views.escape import esc_plot, plot_lines, short

LABEL_CHARS = 56  # about 320 px of 11 px text: a label's line fits a phone's plotting area
TITLE_CHARS = 42
NOTE_CHARS = 72
LABEL_SHIFT = 7  # px between a row's marker and the bottom of its label


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
    heading = [esc_plot(line) for line in wrap_label(
        title or f"{metric}: B − A per matched pair of cells (labels read 'B vs A'), 95% Newcombe", TITLE_CHARS)]
    notes: list[str] = []
    if len(skipped):
        names = ", ".join(str(r[label]) if label in r and str(r[label]) != "nan" else str(r.get("A cell") or r.get("B cell"))
                          for _, r in skipped.iterrows())
        text = f"not estimable (a cell is missing or has no valid unit): {names}"
        notes = [esc_plot(line) for line in wrap_label(short(text, 260), NOTE_CHARS)]
    title_text = plot_lines(heading) + (f"<br><sup>{plot_lines(notes)}</sup>" if notes else "")
    lines = max((len(wrap_label(x)) for x in labels), default=1)
    row_height = 36 + 14 * lines  # the label's lines above the row, then its marker and interval
    # room above the first row for its label (rows are 1 apart on the category axis)
    above = max(0.0, (LABEL_SHIFT + 14 * lines + 4 - row_height / 2) / row_height)
    top = 40 + 20 * len(heading) + 16 * len(notes)
    fig.update_layout(
        title={"text": title_text, "x": 0, "xref": "paper", "xanchor": "left", "y": 1, "yref": "container",
               "yanchor": "top", "pad": {"t": 22}, "font": {"size": 15}},
        template="plotly_white", height=top + 70 + row_height * max(len(ok), 1),
        xaxis={"title": {"text": f"{esc_plot(metric)}: rate of B minus rate of A"}, "tickformat": "+.0%",
               "range": [-1.05, 1.05]},
        # the labels stand above their rows, across the plot, not in a left margin: a margin as wide as the
        # longest label left a phone (390 px) a plotting area of a few pixels
        yaxis={"type": "category", "range": [max(len(ok), 1) - 0.5, -0.5 - above], "showticklabels": False,
               "automargin": False},
        showlegend=False, margin={"l": 12, "r": 16, "t": top, "b": 60})
    for y in labels:
        fig.add_annotation(x=0, xref="paper", xanchor="left", y=y, yref="y", yanchor="bottom", yshift=LABEL_SHIFT,
                           text=plot_lines(wrap_label(y)), showarrow=False, align="left",
                           font={"size": 11, "color": "#333"})
    for x, text, anchor in ((-1.0, "← A higher", "left"), (1.0, "B higher →", "right")):
        fig.add_annotation(x=x, y=1.0, yref="paper", yanchor="bottom", xanchor=anchor, text=text, showarrow=False,
                           font={"size": 11, "color": "#555"})
    return fig


def wrap_label(text: str, width: int = LABEL_CHARS) -> list[str]:
    """``text`` in lines of at most ``width`` characters, broken at spaces (a longer
    word stands alone): a label or title a phone can show whole."""
    return textwrap.wrap(text, width, break_long_words=False, break_on_hyphens=False) or [""]

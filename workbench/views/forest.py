"""Differences between cells with Newcombe intervals, and their forest plot."""
from __future__ import annotations

import math
from typing import Iterable, Sequence

import pandas as pd
import plotly.graph_objects as go

from workbench.metrics.tables import rate_table
from workbench.stats import newcombe
from workbench.views.escape import esc_plot

DIFF = "difference (B−A)"
_NOT_KEYS = {DIFF, "low", "high", "estimable"}


def cell_differences(wf: pd.DataFrame, metric: str, base_condition: str = "no-store",
                     other_condition: str = "store", by: Sequence[str] = ("model",)) -> pd.DataFrame:
    """Per model (or per ``by`` group), the rate under ``other_condition`` (B) minus
    the rate under ``base_condition`` (A) over valid worlds, with a Newcombe
    interval from :func:`workbench.stats.newcombe`. Groups missing one condition
    are listed with nan differences and ``estimable`` False."""
    by = list(by)
    cols = [*by, f"{base_condition} k/n", f"{other_condition} k/n", DIFF, "low", "high", "estimable"]
    sub = wf[wf["condition"].isin([base_condition, other_condition])] if len(wf) else wf
    if not len(sub):
        return pd.DataFrame(columns=cols)
    table = rate_table(sub, metric, by=[*by, "condition"])
    rows = []
    for key, g in table.groupby(by, sort=True):
        key = key if isinstance(key, tuple) else (key,)
        a = g[g["condition"] == base_condition]
        b = g[g["condition"] == other_condition]
        row: dict[str, object] = dict(zip(by, key))
        row[f"{base_condition} k/n"] = a["k/n"].iloc[0] if len(a) else "—"
        row[f"{other_condition} k/n"] = b["k/n"].iloc[0] if len(b) else "—"
        if len(a) and len(b):
            d, low, high = newcombe(int(b["k"].iloc[0]), int(b["n"].iloc[0]), int(a["k"].iloc[0]),
                                    int(a["n"].iloc[0]))
        else:
            d = low = high = float("nan")
        row.update({DIFF: d, "low": low, "high": high, "estimable": not math.isnan(d)})
        rows.append(row)
    return pd.DataFrame(rows, columns=cols)


def _keys(comparison: pd.DataFrame, key: str | Iterable[str] | None) -> list[str]:
    if key is not None:
        return [key] if isinstance(key, str) else list(key)
    cols = list(comparison.columns)
    before = cols[: cols.index(DIFF)] if DIFF in cols else cols
    return [c for c in before if c not in _NOT_KEYS and not c.endswith("k/n")]


def forest_figure(comparison: pd.DataFrame, key: str | Iterable[str] | None = None,
                  title: str | None = None) -> go.Figure:
    """Forest plot of cell differences (B−A) with their Newcombe intervals, from
    :func:`compare_run_sets` or :func:`cell_differences`. One point per row with a
    finite difference; the rows that could not be estimated are named below."""
    keys = _keys(comparison, key)
    ok = comparison[pd.to_numeric(comparison.get(DIFF), errors="coerce").notna()] if DIFF in comparison \
        else comparison.iloc[0:0]
    skipped = comparison.drop(ok.index)

    def raw(r: pd.Series) -> str:
        return " · ".join(str(r[k]) for k in keys)

    def label(r: pd.Series) -> str:
        return esc_plot(raw(r))

    labels = [label(r) for _, r in ok.iterrows()]
    diff = ok[DIFF].astype(float) if len(ok) else pd.Series(dtype=float)
    kn = [c for c in comparison.columns if c.endswith("k/n")]
    hover = [esc_plot("; ".join(f"{c}: {r[c]}" for c in kn)) for _, r in ok.iterrows()]
    fig = go.Figure(go.Scatter(
        x=diff.tolist(), y=labels, mode="markers", marker={"size": 10, "color": "#08519c", "symbol": "square"},
        name="difference (B−A)", customdata=hover,
        error_x={"type": "data", "symmetric": False, "array": (ok["high"].astype(float) - diff).tolist(),
                 "arrayminus": (diff - ok["low"].astype(float)).tolist()},
        hovertemplate="%{y}<br>difference %{x:.1%}<br>%{customdata}<extra></extra>"))
    fig.add_vline(x=0, line={"color": "#888", "dash": "dot"})
    note = ""
    if len(skipped):
        names = ", ".join(raw(r) for _, r in skipped.iterrows())
        note = f"<br><sup>not estimable (a cell is missing or empty): {esc_plot(names, 200)}</sup>"
    fig.update_layout(
        title={"text": (title or "Cell differences (B−A) with 95% Newcombe intervals") + note},
        template="plotly_white", height=160 + 36 * max(len(ok), 1),
        xaxis={"title": {"text": "difference in rate (B−A)"}, "tickformat": ".0%", "range": [-1.05, 1.05]},
        yaxis={"autorange": "reversed", "type": "category"}, showlegend=False, margin={"l": 220})
    return fig

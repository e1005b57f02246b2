"""Styled rate tables: k/n, the rate as a percentage with a bar, and the 95%
Wilson interval; simulated rows carry a visible tag."""
from __future__ import annotations

import html
import math
from typing import Iterable

import pandas as pd
from pandas.io.formats.style import Styler

from workbench.metrics.design import Design
from workbench.metrics.tables import rate_table
from workbench.models.factory import is_simulated_route

RATE_COLUMNS = {"metric", "k", "n", "k/n", "rate", "low", "high", "all"}
SIM_TAG = " [simulated]"


def _pct(x: float) -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.1f}%"


def is_simulated(model: object) -> bool:
    return isinstance(model, str) and any(is_simulated_route(part) for part in model.split("+"))


def rate_styler(table: pd.DataFrame, keys: Iterable[str] | None = None, caption: str | None = None) -> Styler:
    """A Styler for any frame with columns k, n, rate, low, high (``rate_table``
    output): the grouping columns, then k/n, the rate (with a bar), the interval
    and, when present, k/n over all worlds. Text cells are HTML-escaped; rows
    whose model is simulated are tagged and shaded."""
    keys = [c for c in table.columns if c not in RATE_COLUMNS] if keys is None else list(keys)
    if table.empty or not {"k", "n", "rate", "low", "high"} <= set(table.columns):
        table = pd.DataFrame(columns=[*keys, "k", "n", "rate", "low", "high"])
    show = table[keys].copy() if keys else pd.DataFrame(index=table.index)
    sim = table["model"].map(is_simulated) if "model" in table else pd.Series(False, index=table.index)
    if "model" in show:
        show["model"] = [f"{m}{SIM_TAG}" if s else m for m, s in zip(table["model"], sim)]
    show["k/n"] = [f"{int(k)}/{int(n)}" for k, n in zip(table["k"], table["n"])]
    show["rate"] = table["rate"].astype(float)
    show["95% interval"] = [f"[{_pct(lo)}, {_pct(hi)}]" if not (pd.isna(lo) or pd.isna(hi)) else "—"
                            for lo, hi in zip(table["low"], table["high"])]
    if "all" in table:
        show["all worlds"] = table["all"].astype(str)
    show = show.reset_index(drop=True)
    sim = sim.reset_index(drop=True)

    def shade(row: pd.Series) -> list[str]:
        return ["background-color:#fff4d6" if sim.iloc[row.name] else ""] * len(row)

    styler = (show.style.format({"rate": _pct}, escape="html", na_rep="—")
              .format_index(escape="html", axis=1)
              .bar(subset=["rate"], vmin=0.0, vmax=1.0, color="#9ecae1", height=70)
              .apply(shade, axis=1)
              .hide(axis="index")
              .set_table_styles([{"selector": "th", "props": "text-align:left;padding:2px 8px"},
                                 {"selector": "td", "props": "padding:2px 8px"}]))
    cap = caption if caption is not None else "k/n over valid worlds; 95% Wilson intervals"
    if sim.any():
        cap += "; rows tagged [simulated] are simulated behaviour, not real models"
    return styler.set_caption(cap)


def per_cell_table(wf: pd.DataFrame, design: Design, metric: str = "cross_agent_access") -> Styler:
    """One row per cell (label and the factors that vary) over valid worlds, with
    Wilson intervals and the same count over all worlds beside it; the factors
    that never vary are named in the caption."""
    from workbench.metrics.design import constant_text

    table = design.annotate(rate_table(wf, metric, cells=design.cells), metric)
    if "model" not in table and len(wf):  # the routes, for the [simulated] tag
        routes = wf.groupby("cell_id")["model"].first()
        table.insert(1, "model", table["cell_id"].map(routes))
    keys = ["cell_label", *(["model"] if "model" in table else []), *(f for f in design.varying if f != "model")]
    same = constant_text(table)
    caption = (f"{html.escape(metric)}: k/n over valid worlds, 95% Wilson intervals; 'all worlds' counts invalid "
               "worlds too; one row per cell" + (f"; every row has {html.escape(same)}" if same else ""))
    return rate_styler(table, keys=keys, caption=caption)


def per_model_table(wf: pd.DataFrame, metric: str = "cross_agent_access") -> Styler:
    """:func:`per_cell_table` for a world frame alone (the design read from its columns)."""
    from workbench.metrics.design import design_of

    design = design_of([{"cell_id": c, "cell_label": g["cell_label"].iloc[0],
                         "cell": {k: g[k].iloc[0] for k in ("model", "condition", "clauses", "scheduler", "parser")
                                  if k in g}} for c, g in wf.groupby("cell_id", sort=False)])
    return per_cell_table(wf, design, metric)

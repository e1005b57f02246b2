"""Per-cell rate tables of the shared-store world, styled: one row per cell with
the factors that vary, the factors that never vary named in the caption."""
from __future__ import annotations

import pandas as pd
from pandas.io.formats.style import Styler

from workbench.metrics.design import Design
from workbench.metrics.rates import rate_table
from workbench.views.markup import escape
from workbench.views.styled import rate_styler


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
    # pandas puts a Styler's caption into its page as it is: the text is escaped here
    caption = str(escape(f"{metric}: k/n over valid worlds, 95% Wilson intervals; 'all worlds' counts invalid "
                         "worlds too; one row per cell" + (f"; every row has {same}" if same else "")))
    return rate_styler(table, keys=keys, caption=caption)


def per_model_table(wf: pd.DataFrame, metric: str = "cross_agent_access") -> Styler:
    """:func:`per_cell_table` for a world frame alone (the design read from its columns)."""
    from workbench.metrics.design import design_of

    design = design_of([{"cell_id": c, "cell_label": g["cell_label"].iloc[0],
                         "cell": {k: g[k].iloc[0] for k in ("model", "condition", "clauses", "scheduler", "parser")
                                  if k in g}} for c, g in wf.groupby("cell_id", sort=False)])
    return per_cell_table(wf, design, metric)

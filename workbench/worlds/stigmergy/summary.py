"""Per-cell tables from world rows: k/n over valid worlds with Wilson intervals,
and the same over all worlds, because an exclusion rule can discard a cell."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from workbench.stats import wilson
from workbench.worlds.stigmergy.labels import label as display_name

if TYPE_CHECKING:  # imported where a frame is built: the terminal summary of `run` needs none
    import pandas as pd

SUMMARY_METRICS: tuple[str, ...] = ("cross_agent_access", "strict_cross_agent_access", "joint_success",
                                    "pair_write", "informative_read", "exposure")


def world_frame(worlds: list[dict[str, Any]]) -> pd.DataFrame:
    import pandas as pd

    rows = []
    for w in worlds:
        row = dict(w["metrics"])
        row["cell_label"] = w.get("cell_label", w["cell_id"])
        rows.append(row)
    return pd.DataFrame(rows)


def cell_summary(frame: pd.DataFrame, metrics: tuple[str, ...] = SUMMARY_METRICS) -> pd.DataFrame:
    """One row per cell: worlds, valid worlds, and per metric k/valid with a 95% Wilson interval."""
    import pandas as pd

    out = []
    for (cell_id, label), g in frame.groupby(["cell_id", "cell_label"], sort=False):
        valid = g[g["valid"]]
        row: dict[str, Any] = {"cell_id": cell_id, "cell": label, "worlds": len(g), "valid": len(valid),
                               "failed": int(g["failed"].sum())}
        for m in metrics:
            k, n = int(valid[m].sum()), len(valid)
            low, high = wilson(k, n)
            row[m] = f"{k}/{n}"
            row[f"{m}_ci"] = (round(low, 3), round(high, 3))
            row[f"{m}_all"] = f"{int(g[m].sum())}/{len(g)}"
        out.append(row)
    return pd.DataFrame(out)


def format_summary(summary: pd.DataFrame) -> str:
    """A compact plain-text table for the terminal."""
    view = summary[["cell", "valid", *TEXT_METRICS]].copy()
    view["valid"] = [f"{v}/{w}" for v, w in zip(summary["valid"], summary["worlds"])]
    return view.rename(columns={m: display_name(m) for m in TEXT_METRICS}).to_string(index=False)


# the terminal's columns, headed by the names the report gives them (labels.LABELS)
TEXT_METRICS: tuple[str, ...] = ("cross_agent_access", "strict_cross_agent_access", "joint_success", "pair_write")


def summary_text(worlds: list[dict[str, Any]]) -> str:
    """``format_summary(cell_summary(world_frame(worlds)))`` in plain Python, the same
    text: what `workbench run` prints, without loading pandas or statsmodels."""
    cells: dict[tuple[Any, Any], list[dict[str, Any]]] = {}
    for w in worlds:
        m = w["metrics"]
        cells.setdefault((m.get("cell_id"), w.get("cell_label", w["cell_id"])), []).append(m)
    header = ["cell", "valid", *(display_name(m) for m in TEXT_METRICS)]
    rows = []
    for (_, label), ms in cells.items():
        valid = [m for m in ms if m.get("valid")]
        row = [str(label), f"{len(valid)}/{len(ms)}"]
        row += [f"{sum(int(m.get(key) or 0) for m in valid)}/{len(valid)}" for key in TEXT_METRICS]
        rows.append(row)
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    return "\n".join(" ".join(v.rjust(wd) for v, wd in zip(r, widths)) for r in [header, *rows])

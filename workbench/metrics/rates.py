"""k/n per group with 95% Wilson intervals over valid worlds, and the same over
all worlds beside it (an exclusion rule can discard a whole cell): the one rate
table every kind's tables and every styled view are built from."""
from __future__ import annotations

from collections.abc import Iterable, Sequence

import pandas as pd

from workbench.stats import wilson

RATE_COLUMNS = ["metric", "k", "n", "k/n", "rate", "low", "high", "all"]


def rate_row(k: int, n: int) -> dict[str, object]:
    """k, n, "k/n", the rate and its 95% Wilson interval."""
    low, high = wilson(k, n)
    return {"k": k, "n": n, "k/n": f"{k}/{n}", "rate": (k / n) if n else float("nan"), "low": low, "high": high}


def rate_table(frame: pd.DataFrame, metric: str, by: Iterable[str] = ("cell_id",), valid_only: bool = True,
               count: str | None = None, cells: Sequence[str] | None = None) -> pd.DataFrame:
    """k/n of a boolean (or 0/1) metric per group. ``count`` names an integer
    column holding the number of trials per row (e.g. pair agents). ``cells``
    (when grouping by cell only) lists cells to keep even with no rows (0/0)."""
    by = list(by)
    rows = []
    groups = list(frame.groupby(by, sort=False, dropna=False)) if len(frame) else []
    for key, g in groups:
        key = key if isinstance(key, tuple) else (key,)
        vg = g[g["valid"].astype(bool)] if valid_only and "valid" in g else g
        k = int(vg[metric].fillna(False).astype(int).sum())
        n = int(vg[count].sum()) if count else len(vg)
        all_k = int(g[metric].fillna(False).astype(int).sum())
        all_n = int(g[count].sum()) if count else len(g)
        rows.append({**dict(zip(by, key)), "metric": metric, **rate_row(k, n), "all": f"{all_k}/{all_n}"})
    out = pd.DataFrame(rows, columns=[*by, *RATE_COLUMNS])
    if cells is not None and by == ["cell_id"]:
        have = set(out["cell_id"])
        missing = [{"cell_id": c, "metric": metric, **rate_row(0, 0), "all": "0/0"} for c in cells if c not in have]
        if missing:
            out = pd.concat([out, pd.DataFrame(missing, columns=out.columns)], ignore_index=True)
    return out

"""k/n per group with 95% Wilson intervals over valid worlds, and the same over
all worlds beside it (an exclusion rule can discard a whole cell): the one rate
table every kind's tables and every styled view are built from."""
from __future__ import annotations

from collections.abc import Iterable, Sequence

import pandas as pd

from workbench.stats import wilson, wilson_many

RATE_COLUMNS = ["metric", "k", "n", "k/n", "rate", "low", "high", "all"]


def rate_row(k: int, n: int, interval: tuple[float, float] | None = None) -> dict[str, object]:
    """k, n, "k/n", the rate and its 95% Wilson interval (given, or computed here)."""
    low, high = interval if interval is not None else wilson(k, n)
    return {"k": k, "n": n, "k/n": f"{k}/{n}", "rate": (k / n) if n else float("nan"), "low": low, "high": high}


def rate_table(frame: pd.DataFrame, metric: str, by: Iterable[str] = ("cell_id",), valid_only: bool = True,
               count: str | None = None, cells: Sequence[str] | None = None) -> pd.DataFrame:
    """k/n of a boolean (or 0/1) metric per group. ``count`` names an integer
    column holding the number of trials per row (e.g. pair agents). ``cells``
    (when grouping by cell only) lists cells to keep even with no rows (0/0)."""
    by = list(by)
    rows = []
    if len(frame):
        hits = frame[metric].fillna(False).astype(int)
        trials = frame[count] if count else pd.Series(1, index=frame.index)
        valid = frame["valid"].astype(bool) if valid_only and "valid" in frame else pd.Series(True, index=frame.index)
        sums = pd.DataFrame({**{f"by{i}": frame[b] for i, b in enumerate(by)}, "k": hits.where(valid, 0),
                             "n": trials.where(valid, 0), "all_k": hits, "all_n": trials})
        agg = sums.groupby([f"by{i}" for i in range(len(by))], sort=False, dropna=False).sum()
        counts = {c: [int(v) for v in agg[c].tolist()] for c in ("k", "n", "all_k", "all_n")}
        intervals = wilson_many(counts["k"], counts["n"])
        for j, key in enumerate(agg.index):
            key = key if isinstance(key, tuple) else (key,)
            k, n = counts["k"][j], counts["n"][j]
            rows.append({**dict(zip(by, key)), "metric": metric, **rate_row(k, n, intervals[j]),
                         "all": f"{counts['all_k'][j]}/{counts['all_n'][j]}"})
    out = pd.DataFrame(rows, columns=[*by, *RATE_COLUMNS])
    if cells is not None and by == ["cell_id"]:
        have = set(out["cell_id"])
        missing = [{"cell_id": c, "metric": metric, **rate_row(0, 0), "all": "0/0"} for c in cells if c not in have]
        if missing:
            out = pd.concat([out, pd.DataFrame(missing, columns=out.columns)], ignore_index=True)
    return out

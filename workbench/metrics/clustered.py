"""Shares of replies whose replies come in clusters (one agent's replies).

Replies of one agent are not independent: an agent that fences one reply fences
most of them. Counting replies as if they were independent gives intervals far too
narrow. Here a cell's share is the ratio of two sums over agents, and its variance
is the cluster-robust (sandwich) variance of that ratio, with agents as clusters:
the spread that agents show, not replies."""
from __future__ import annotations

import math
from collections.abc import Sequence

Z95 = 1.959963984540054


def ratio_and_variance(k: Sequence[float], n: Sequence[float]) -> tuple[float, float]:
    """Σk/Σn over clusters and its cluster-robust variance (m/(m−1) small-sample factor).
    NaN for no replies; variance NaN with fewer than two clusters (no spread to see)."""
    total = float(sum(n))
    m = sum(1 for x in n if x > 0)
    if total <= 0:
        return math.nan, math.nan
    p = float(sum(k)) / total
    if m < 2:
        return p, math.nan
    resid = sum((ki - p * ni) ** 2 for ki, ni in zip(k, n) if ni > 0)
    return p, m / (m - 1) * resid / total**2


def clustered_difference(ka: Sequence[float], na: Sequence[float], kb: Sequence[float], nb: Sequence[float]
                         ) -> tuple[float, float, float]:
    """B − A of two clustered shares with a 95 % normal interval (clipped to [−1, 1]),
    the two cells' agents taken as independent samples."""
    pa, va = ratio_and_variance(ka, na)
    pb, vb = ratio_and_variance(kb, nb)
    diff = pb - pa
    if math.isnan(va) or math.isnan(vb):
        return diff, math.nan, math.nan
    half = Z95 * math.sqrt(va + vb)
    return diff, max(-1.0, diff - half), min(1.0, diff + half)

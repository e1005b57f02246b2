"""Intervals and tests, all from statsmodels (no hand-written formulas)."""
from __future__ import annotations

from statsmodels.stats.proportion import proportion_confint


def wilson(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for k successes of n; (nan, nan) when n is 0."""
    if n == 0:
        return (float("nan"), float("nan"))
    low, high = proportion_confint(int(k), int(n), alpha=1 - level, method="wilson")
    return (float(low), float(high))

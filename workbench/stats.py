"""Intervals, tests and sample sizes, all from statsmodels (no hand-written formulas).

Conventions follow the source paper: 95% Wilson intervals for rates, Newcombe
(hybrid score) intervals for differences between independent cells, exact
McNemar for paired worlds over the same seeds, and no multiple-comparison
correction (say so wherever many cells are compared)."""
from __future__ import annotations

import math
from collections.abc import Sequence

# statsmodels (with scipy) takes about a second to import: each function imports what it
# uses, so running a study, which needs no statistics, never loads it.

NAN = float("nan")


def wilson(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for k successes of n; (nan, nan) when n is 0."""
    if n == 0:
        return (NAN, NAN)
    from statsmodels.stats.proportion import proportion_confint
    low, high = proportion_confint(int(k), int(n), alpha=1 - level, method="wilson")
    return _exact_ends(int(k), int(n), float(low), float(high))


def _exact_ends(k: int, n: int, low: float, high: float) -> tuple[float, float]:
    """The Wilson bounds at 0/n and n/n are exactly 0 and 1; statsmodels' arithmetic leaves
    them a rounding error away (6.9e-18), which a table would print as a number."""
    return (0.0 if k == 0 else low, 1.0 if k == n else high)


def wilson_many(k: Sequence[int], n: Sequence[int], level: float = 0.95) -> list[tuple[float, float]]:
    """:func:`wilson` for many k/n at once (one statsmodels call over arrays: a table of
    hundreds of cells at the cost of one)."""
    out = [(NAN, NAN)] * len(n)
    some = [i for i, m in enumerate(n) if m]
    if some:
        from statsmodels.stats.proportion import proportion_confint
        low, high = proportion_confint([int(k[i]) for i in some], [int(n[i]) for i in some], alpha=1 - level,
                                       method="wilson")
        for i, lo, hi in zip(some, low.tolist(), high.tolist(), strict=True):
            out[i] = _exact_ends(int(k[i]), int(n[i]), float(lo), float(hi))
    return out


def newcombe(k1: int, n1: int, k2: int, n2: int, level: float = 0.95) -> tuple[float, float, float]:
    """Difference p1 − p2 with Newcombe's hybrid score interval; nans when a cell is empty."""
    if n1 == 0 or n2 == 0:
        return (NAN, NAN, NAN)
    from statsmodels.stats.proportion import confint_proportions_2indep
    low, high = confint_proportions_2indep(int(k1), int(n1), int(k2), int(n2), method="newcomb",
                                           compare="diff", alpha=1 - level)
    return (k1 / n1 - k2 / n2, float(low), float(high))


def mcnemar_paired(a: Sequence[bool], b: Sequence[bool], exact: bool = True) -> dict[str, float | int]:
    """McNemar's test for two outcomes on the same worlds (same seeds), given as
    aligned boolean sequences. Returns the discordant counts and the p-value."""
    if len(a) != len(b):
        raise ValueError(f"paired outcomes must align: {len(a)} vs {len(b)}")
    both = sum(1 for x, y in zip(a, b) if x and y)
    only_a = sum(1 for x, y in zip(a, b) if x and not y)
    only_b = sum(1 for x, y in zip(a, b) if y and not x)
    neither = len(a) - both - only_a - only_b
    if only_a + only_b == 0:
        return {"n": len(a), "both": both, "only_a": 0, "only_b": 0, "neither": neither, "statistic": 0.0,
                "pvalue": 1.0}
    from statsmodels.stats.contingency_tables import mcnemar as _mcnemar
    res = _mcnemar([[both, only_a], [only_b, neither]], exact=exact)
    return {"n": len(a), "both": both, "only_a": only_a, "only_b": only_b, "neither": neither,
            "statistic": float(res.statistic), "pvalue": float(res.pvalue)}


def holm_adjust(pvalues: Sequence[float]) -> list[float]:
    """Holm-adjusted p values (statsmodels ``multipletests``) over the finite ones;
    nan stays nan. Offered beside raw p values, never instead of them."""
    from statsmodels.stats.multitest import multipletests

    idx = [i for i, p in enumerate(pvalues) if p is not None and not math.isnan(p)]
    out = [NAN] * len(pvalues)
    if idx:
        adjusted = multipletests([pvalues[i] for i in idx], method="holm")[1]
        for i, p in zip(idx, adjusted):
            out[i] = float(p)
    return out


def worlds_for_half_width(p: float, half_width: float, level: float = 0.95) -> int:
    """Worlds per cell so that a rate near ``p`` has an interval of about ±half_width
    (normal approximation, statsmodels' samplesize_confint_proportion)."""
    if not 0 < half_width < 1:
        raise ValueError("half_width must be between 0 and 1")
    p = min(max(p, 1e-6), 1 - 1e-6)
    from statsmodels.stats.proportion import samplesize_confint_proportion
    return int(math.ceil(samplesize_confint_proportion(p, half_width, alpha=1 - level)))


def worlds_to_detect(p1: float, p2: float, power: float = 0.8, level: float = 0.95) -> int:
    """Worlds per cell to detect rates p1 vs p2 (two-sided, equal cells), via Cohen's h."""
    if p1 == p2:
        raise ValueError("p1 and p2 must differ")
    from statsmodels.stats.power import NormalIndPower
    from statsmodels.stats.proportion import proportion_effectsize
    h = abs(float(proportion_effectsize(p1, p2)))
    import warnings

    with warnings.catch_warnings():  # its root finder warns, then returns nan, for very large effects
        warnings.simplefilter("ignore")
        n = NormalIndPower().solve_power(effect_size=h, alpha=1 - level, power=power, ratio=1.0)
    if not math.isfinite(float(n)):
        # the same test's one-sided closed form (the other tail adds nothing at such effects)
        from scipy.stats import norm

        n = 2 * ((norm.ppf(1 - (1 - level) / 2) + norm.ppf(power)) / h) ** 2
    return int(math.ceil(n))


def power_at(p1: float, p2: float, n: int, level: float = 0.95) -> float:
    """Power of a two-sided comparison of two cells of n worlds each."""
    from statsmodels.stats.power import NormalIndPower
    from statsmodels.stats.proportion import proportion_effectsize
    h = abs(float(proportion_effectsize(p1, p2)))
    return float(NormalIndPower().power(effect_size=h, nobs1=n, alpha=1 - level, ratio=1.0))

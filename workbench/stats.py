"""Intervals, tests and sample sizes. Intervals and tests are statsmodels' (no hand-written
formulas); the power of the exact McNemar test is enumerated over scipy's binomial
distribution with statsmodels' own p value, so a plan's power is that of the test reported.

Conventions follow the source paper: 95% Wilson intervals for rates, Newcombe
(hybrid score) intervals for differences between independent cells, exact
McNemar for paired worlds over the same seeds, and no multiple-comparison
correction (say so wherever many cells are compared)."""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

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


# -- planning: power of the analysis's own test, and interval widths ----------------------
# The analysis (workbench.metrics.contrasts) pairs world i of cell A with world i of cell B,
# keeps the pairs valid in both, and reports statsmodels' exact McNemar p, two-sided, with no
# multiple-comparison correction (a Holm column is only ever shown beside the raw p). Power is
# planned for that test: reject when p <= 1 - level.

SCAN_WORLDS = 4096  # worlds up to which the sample-size search steps through every n
WORLDS_CAP = 100_000  # beyond this, the search answers "more than" (None)


def mcnemar_rejection_bounds(d_max: int, level: float = 0.95) -> Any:
    """Per number of discordant pairs d = 0..d_max, the largest c such that the exact McNemar
    test rejects whenever min(only A, only B) <= c (-1: no split of d rejects). The p value is
    computed as :func:`mcnemar_paired` gets it from statsmodels, min(1, 2 * Binom(d, 1/2).cdf(min)),
    so the region is the analysis's own, float for float."""
    import numpy as np
    from scipy.stats import binom

    alpha = 1 - level
    d = np.arange(d_max + 1)
    k0 = binom.ppf(alpha / 2, d, 0.5)  # smallest k with cdf(k) >= alpha/2 (nan-free for d >= 0)
    bound = np.full(d_max + 1, -1.0)
    for step in (-1, 0, 1):  # ppf's float rounding may sit one off: test the neighbours with the p itself
        k = np.clip(k0 + step, -1, None)
        p = np.minimum(binom.cdf(k, d, 0.5) * 2, 1)
        bound = np.where((p <= alpha) & (k < d / 2), np.maximum(bound, k), bound)
    bound[0] = -1  # no discordant pair: mcnemar_paired reports p = 1
    return bound.astype(int)


def _reject_given_d(p10: float, p01: float, d_max: int, level: float) -> Any:
    """P(reject | d discordant pairs) for d = 0..d_max: given d, the pairs with A yes and B no
    are Binomial(d, p10 / (p10 + p01)); the test rejects in either tail of its region."""
    import numpy as np
    from scipy.stats import binom

    c = mcnemar_rejection_bounds(d_max, level)
    d = np.arange(d_max + 1)
    q = p10 / (p10 + p01)
    return binom.cdf(c, d, q) + binom.sf(d - c - 1, d, q)


def _check_discordant(p10: float, p01: float) -> None:
    if not (0 <= p10 <= 1 and 0 <= p01 <= 1) or p10 + p01 > 1 + 1e-12:
        raise ValueError(f"discordant probabilities must be >= 0 with p10 + p01 <= 1 (got {p10}, {p01})")


def mcnemar_power(p10: float, p01: float, n: int, level: float = 0.95) -> float:
    """Power of the analysis's exact McNemar test (two-sided, unadjusted, reject at p <= 1 - level)
    over ``n`` pairs whose outcomes are discordant A-yes-B-no with probability ``p10`` and
    B-yes-A-no with ``p01``. Exact, by enumeration: the discordant count D is Binomial(n, p10 + p01)
    and, given D = d, A's share of them Binomial(d, p10 / (p10 + p01)).

    Pairs lost to attrition at random fold in exactly: with a share ``s`` of pairs valid, the
    power over ``n`` planned pairs is ``mcnemar_power(s * p10, s * p01, n)``."""
    import numpy as np
    from scipy.stats import binom

    _check_discordant(p10, p01)
    if n <= 0 or p10 + p01 == 0:
        return 0.0
    g = _reject_given_d(p10, p01, n, level)
    return float(np.clip(binom.pmf(np.arange(n + 1), n, p10 + p01) @ g, 0.0, 1.0))


def _power_run(g: Any, pd: float, start: int, count: int) -> Any:
    """Power at n = start .. start + count - 1, stepping the Binomial(n, pd) weights of the
    discordant count from one n to the next (one pass, no pmf call per n)."""
    import numpy as np
    from scipy.stats import binom

    weights = binom.pmf(np.arange(start + 1), start, pd)
    out = np.empty(count)
    for i in range(count):
        n = start + i
        out[i] = weights @ g[: n + 1]
        nxt = np.zeros(n + 2)
        nxt[:-1] = weights * (1 - pd)
        nxt[1:] += weights * pd
        weights = nxt
    return out


def _first_held(power: Any, start: int, target: float, hold: int) -> int | None:
    """The first n (power[0] is at n = start) from which power stays >= target for ``hold`` n."""
    import numpy as np

    ok = power >= target
    if len(ok) < hold:
        return None
    held = np.lib.stride_tricks.sliding_window_view(ok, hold).all(axis=1)
    hits = np.flatnonzero(held)
    return int(start + hits[0]) if len(hits) else None


def mcnemar_worlds(p10: float, p01: float, power: float = 0.8, level: float = 0.95, cap: int = WORLDS_CAP,
                   hold: int = 10) -> int | None:
    """Pairs needed for the exact McNemar test of :func:`mcnemar_power` to reach ``power``:
    the smallest n from which the power stays >= ``power`` for ``hold`` consecutive n (exact
    power is a saw-tooth in n: the first n that touches the target may be followed by n that
    miss it, and a plan should not rest on such a tooth). None when that n is above ``cap``.

    Up to :data:`SCAN_WORLDS` every n is tried. Beyond it, where the saw-tooth has flattened,
    the target is bracketed by doubling, bisected, and the last stretch stepped through again."""
    import numpy as np

    _check_discordant(p10, p01)
    if not 0 < power < 1:
        raise ValueError(f"power must be between 0 and 1 (got {power})")
    pd = p10 + p01
    if pd == 0 or p10 == p01:
        return None
    top = min(cap, SCAN_WORLDS) + hold
    g = _reject_given_d(p10, p01, top, level)
    found = _first_held(_power_run(g, pd, 1, top), 1, power, hold)
    if found is not None or cap <= SCAN_WORLDS:
        return found if found is not None and found <= cap else None
    g = _reject_given_d(p10, p01, cap + hold + 512, level)

    def at(n: int) -> float:
        from scipy.stats import binom

        return float(binom.pmf(np.arange(n + 1), n, pd) @ g[: n + 1])

    lo, hi = SCAN_WORLDS, 2 * SCAN_WORLDS
    while at(min(hi, cap)) < power:
        if hi >= cap:
            return None
        lo, hi = hi, 2 * hi
    hi = min(hi, cap)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if at(mid) >= power else (mid, hi)
    start = max(SCAN_WORLDS - hold, hi - 64)
    while start <= cap:
        found = _first_held(_power_run(g, pd, start, 256 + hold), start, power, hold)
        if found is not None:
            return found if found <= cap else None
        start += 256
    return None


def wilson_half_width(p: float, n: int | Any, level: float = 0.95) -> Any:
    """Half the width of the Wilson interval (statsmodels) of a rate observed at ``p`` over n
    units; n may be an array."""
    import numpy as np
    from statsmodels.stats.proportion import proportion_confint

    nobs = np.asarray(n, dtype=float)
    low, high = proportion_confint(p * nobs, nobs, alpha=1 - level, method="wilson")
    return (np.asarray(high) - np.asarray(low)) / 2


def worlds_for_half_width(p: float, half_width: float, level: float = 0.95) -> int:
    """Valid units so that the Wilson interval the reports print, at an observed rate ``p``,
    is at most ±half_width: the smallest such n. The Wilson half-width falls with n and never
    exceeds z / (2 sqrt(n)), so the answer lies below z² / (4 half_width²)."""
    import numpy as np
    from scipy.stats import norm

    if not 0 < half_width < 1:
        raise ValueError("half_width must be between 0 and 1")
    if not 0 <= p <= 1:
        raise ValueError(f"p must be between 0 and 1 (got {p})")
    z = float(norm.ppf(1 - (1 - level) / 2))
    ns = np.arange(1, int(math.ceil(z * z / (4 * half_width * half_width))) + 2)
    ok = np.flatnonzero(wilson_half_width(p, ns, level) <= half_width)
    return int(ns[ok[0]])

"""Onset as a discrete-time hazard model, beside Kaplan–Meier.

**Rows at risk**: one row per evaluation episode of every valid trajectory, from
its first evaluation episode up to and including its first colluding one (a
trajectory that never colluded contributes all its episodes; warm-ups are not at
risk, as in the onset metrics). ``event`` is 1 on the row of the first collusion,
else 0.

**Model**: a binomial GLM with the logit link (statsmodels),
``event ~ C(cell) + C(family) + eval_episode``: the log-odds that collusion
starts in an episode, given it has not yet, by cell (each cell against the main
cell, :func:`metrics.main_cell`; the shipped cells change one factor each, so a
cell's coefficient is that factor's), by the episode's task family (against the
first family in name order) and with a linear trend in the episode number (the
baseline hazard). A covariate with a single level in the rows is left out.

The table gives each coefficient as an odds ratio with its 95% Wald interval and
p. A cell (or family) where no trajectory colluded, or every at-risk row
colluded, is perfectly separated: its coefficient runs off to ±∞, the fit
reports a huge standard error, and the row is marked not estimable (|log odds|
> :data:`SEPARATED` or a standard error above :data:`SEPARATED`) rather than
shown as a finding. Episodes of one trajectory are not independent beyond the
at-risk structure; no multiple-comparison correction is applied.
"""
from __future__ import annotations

import math
import warnings
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

SEPARATED = 15.0  # |log odds| or standard error beyond this: perfect separation, not estimable
HAZARD_ROW_COLUMNS = ["world_id", "cell_id", "cell", "family", "eval_episode", "event"]
HAZARD_COLUMNS = ["cell_id", "covariate", "level", "reference", "log odds", "se", "odds ratio", "low", "high", "p",
                  "estimable", "rows", "events"]


def hazard_rows(ef: pd.DataFrame) -> pd.DataFrame:
    """The rows at risk (module docstring) from an episode frame
    (:func:`metrics.episode_frame`)."""
    import pandas as pd

    if not len(ef):
        return pd.DataFrame(columns=HAZARD_ROW_COLUMNS)
    ev = ef[~ef["warmup"].astype(bool) & ef["valid"].astype(bool)].sort_values(["world_id", "eval_episode"],
                                                                               kind="stable")
    rows = []
    for _, g in ev.groupby("world_id", sort=False):
        for _, r in g.iterrows():
            rows.append({"world_id": r["world_id"], "cell_id": r["cell_id"], "cell": r["cell"],
                         "family": r["family"], "eval_episode": int(r["eval_episode"]), "event": int(bool(r["collusion"]))})
            if r["collusion"]:
                break
    out = pd.DataFrame(rows, columns=HAZARD_ROW_COLUMNS)
    order = {cid: i for i, cid in enumerate(dict.fromkeys(ef["cell_id"]))}
    return out.sort_values("cell_id", key=lambda s: s.map(order), kind="stable").reset_index(drop=True)


def hazard_formula(rows: pd.DataFrame, reference: str | None) -> str:
    """The model's formula for these rows (covariates with one level left out)."""
    terms = []
    if rows["cell_id"].nunique() > 1:
        terms.append(f"C(cell_id, Treatment(reference={reference!r}))")
    if rows["family"].nunique() > 1:
        terms.append("C(family)")
    if rows["eval_episode"].nunique() > 1:
        terms.append("eval_episode")
    return "event ~ " + (" + ".join(terms) or "1")


def fit_hazard(rows: pd.DataFrame, reference: str | None = None) -> Any:
    """The fitted statsmodels GLM (binomial, logit) on ``rows``; ``reference``: the
    reference cell id (default: the main cell, else the first)."""
    import statsmodels.api as sm
    import statsmodels.formula.api as smf

    reference = reference or _reference(rows)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # separation and overflow warnings: flagged per row instead
        return smf.glm(hazard_formula(rows, reference), data=rows, family=sm.families.Binomial()).fit()


def _reference(rows: pd.DataFrame) -> str | None:
    cells = list(dict.fromkeys(rows["cell_id"]))
    for cid in cells:
        if cid == "main" or str(rows[rows["cell_id"] == cid]["cell"].iloc[0]).strip().lower() == "main":
            return str(cid)
    return str(cells[0]) if cells else None


def hazard_table(rows: pd.DataFrame, reference: str | None = None) -> pd.DataFrame:
    """Coefficients of :func:`fit_hazard` as odds ratios with 95% intervals, one row
    per term (intercept left out): cells in run order, named by label (``cell_id``
    kept), then families, then the episode trend; rows at risk and events per level."""
    import pandas as pd

    if not len(rows) or rows["event"].nunique() < 2:
        return pd.DataFrame(columns=HAZARD_COLUMNS)
    reference = reference or _reference(rows)
    fam_ref = sorted(rows["family"].astype(str).unique())[0]
    labels = dict(zip(rows["cell_id"], rows["cell"]))
    res = fit_hazard(rows, reference)
    ci = res.conf_int()
    out = []
    for term in res.params.index:
        if term == "Intercept":
            continue
        b, se, p = float(res.params[term]), float(res.bse[term]), float(res.pvalues[term])
        cid = None
        if term.startswith("C(cell_id"):
            cov, level = "cell", term.split("[T.", 1)[1].rstrip("]")
            cid, ref, mask = level, labels.get(reference, reference), rows["cell_id"] == level
            level = labels.get(level, level)
        elif term.startswith("C(family)"):
            cov, level = "family", term.split("[T.", 1)[1].rstrip("]")
            ref, mask = fam_ref, rows["family"] == level
        else:
            cov, level, ref, mask = "episode", "per episode", "—", rows["event"].notna()
        ok = math.isfinite(b) and math.isfinite(se) and abs(b) <= SEPARATED and se <= SEPARATED
        out.append({"cell_id": cid, "covariate": cov, "level": level, "reference": ref, "log odds": b, "se": se,
                    "odds ratio": math.exp(b) if ok else float("nan"),
                    "low": math.exp(float(ci.loc[term, 0])) if ok else float("nan"),
                    "high": math.exp(float(ci.loc[term, 1])) if ok else float("nan"),
                    "p": p if ok else float("nan"), "estimable": ok,
                    "rows": int(mask.sum()), "events": int(rows.loc[mask, "event"].sum())})
    order = {c: i for i, c in enumerate(dict.fromkeys(rows["cell_id"]))}
    out.sort(key=lambda r: ({"cell": 0, "family": 1}.get(r["covariate"], 2), order.get(r["cell_id"], 0)))
    return pd.DataFrame(out, columns=HAZARD_COLUMNS)

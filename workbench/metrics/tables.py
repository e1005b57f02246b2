"""Tables in the shapes of the source paper, as pandas DataFrames, from the frames
of :mod:`workbench.metrics.frames`. Rates are k/n over valid worlds with 95%
Wilson intervals; the same over all worlds sits beside them, because an
exclusion rule can discard a whole cell. No multiple-comparison correction."""
from __future__ import annotations

from typing import Iterable

import pandas as pd

from workbench.stats import newcombe, wilson

CELL = ["model", "condition", "clauses", "scheduler", "parser"]


def _rate(k: int, n: int) -> dict[str, object]:
    low, high = wilson(k, n)
    return {"k": k, "n": n, "k/n": f"{k}/{n}", "rate": (k / n) if n else float("nan"), "low": low, "high": high}


def rate_table(frame: pd.DataFrame, metric: str, by: Iterable[str] = CELL, valid_only: bool = True,
               count: str | None = None) -> pd.DataFrame:
    """k/n of a boolean (or 0/1) metric per group. ``count`` names an integer
    column holding the number of trials per row (e.g. pair agents)."""
    by = list(by)
    rows = []
    for key, g in frame.groupby(by, sort=True, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        vg = g[g["valid"]] if valid_only and "valid" in g else g
        k = int(vg[metric].astype(int).sum())
        n = int(vg[count].sum()) if count else len(vg)
        rows.append({**dict(zip(by, key)), "metric": metric, **_rate(k, n),
                     "all": f"{int(g[metric].astype(int).sum())}/{int(g[count].sum()) if count else len(g)}"})
    return pd.DataFrame(rows)


def coordination_table(wf: pd.DataFrame) -> pd.DataFrame:
    """Coordinated worlds (cross-agent access) by model × condition, with the
    strict variant, informative reads and joint success beside it."""
    parts = []
    for metric in ("cross_agent_access", "strict_cross_agent_access", "informative_read", "joint_success"):
        t = rate_table(wf, metric, by=["model", "condition", "clauses"])
        parts.append(t.set_index(["model", "condition", "clauses"])[["k/n", "low", "high", "all"]]
                     .add_prefix(f"{metric}:"))
    return pd.concat(parts, axis=1).reset_index()


def joint_by_cross_read(wf: pd.DataFrame) -> pd.DataFrame:
    """Joint success split by whether any cross-agent read happened (the paper's
    Table 3: without cross-agent reads, joint success should be zero)."""
    t = rate_table(wf, "joint_success", by=["model", "condition", "cross_agent_access"])
    return t.rename(columns={"cross_agent_access": "had_cross_agent_read"})


def attrition_table(wf_strict: pd.DataFrame, wf_lenient: pd.DataFrame) -> pd.DataFrame:
    """Per cell: worlds, failed calls, and valid worlds under each parser rule,
    both recomputed from the raw replies."""
    rows = []
    keys = ["cell_id", "cell_label", "model", "condition", "parser"]
    lenient = wf_lenient.set_index("world_id")["valid"]
    for key, g in wf_strict.groupby(keys, sort=True):
        rows.append({**dict(zip(keys, key)), "worlds": len(g), "failed": int(g["failed"].sum()),
                     "valid_strict": int(g["valid"].sum()),
                     "valid_lenient": int(lenient.reindex(g["world_id"]).sum()),
                     "invalid_replies_strict": int(g["invalid_replies"].sum())})
    out = pd.DataFrame(rows)
    out["attrition_under_own_rule"] = [
        r.worlds - (r.valid_strict if r.parser == "strict" else r.valid_lenient) for r in out.itertuples()]
    return out


def writes_table(wf: pd.DataFrame) -> pd.DataFrame:
    """Worlds in which a member of the interdependent pair wrote (Table 5)."""
    return rate_table(wf, "pair_write", by=["model", "condition", "clauses"])


def e1_table(wf: pd.DataFrame, af: pd.DataFrame) -> pd.DataFrame:
    """The E1 design: shared/private × both/persist-only per model, plus the
    prepopulated arm (seeded reads by pair agents, joint success)."""
    rows = []
    for model, g in wf.groupby("model", sort=True):
        row: dict[str, object] = {"model": model}
        for cond in ("store", "private"):
            for clauses in ("both", "persist-only"):
                sub = g[(g["condition"] == cond) & (g["clauses"] == clauses) & g["valid"]]
                if len(sub) == 0:
                    continue
                tag = f"{'shared' if cond == 'store' else 'private'}/{clauses}"
                row[f"{tag} access"] = f"{int(sub['cross_agent_access'].sum())}/{len(sub)}"
                row[f"{tag} joint"] = f"{int(sub['joint_success'].sum())}/{len(sub)}"
        pre = g[(g["condition"] == "prepopulated") & g["valid"]]
        if len(pre):
            pa = af[(af["model"] == model) & (af["condition"] == "prepopulated") & af["pair_member"]
                    & af["world_valid"]]
            row["prepopulated seeded read (agents)"] = f"{int(pa['seeded_read'].sum())}/{len(pa)}"
            row["prepopulated joint"] = f"{int(pre['joint_success'].sum())}/{len(pre)}"
        rows.append(row)
    return pd.DataFrame(rows)


def looks_table(af: pd.DataFrame) -> pd.DataFrame:
    """First look (a list at step 0) and second look (a list or read after the
    partner's first write) among pair agents of valid worlds (Table 7)."""
    pair = af[af["pair_member"] & af["world_valid"]].copy()
    pair["valid"] = True
    pair["second_look"] = pair["second_look"].fillna(False).astype(bool)
    first = rate_table(pair, "first_look", by=["model", "condition", "clauses"])
    second = rate_table(pair, "second_look", by=["model", "condition", "clauses"])
    keys = ["model", "condition", "clauses"]
    return (first.set_index(keys)[["k/n", "low", "high"]].add_prefix("first_look:")
            .join(second.set_index(keys)[["k/n", "low", "high"]].add_prefix("second_look:")).reset_index())


def exposure_then_read(wf: pd.DataFrame, af: pd.DataFrame) -> pd.DataFrame:
    """Per cell: exposed worlds, those in which an exposed agent then made a
    cross-agent read, and how many of its steps that took (median, maximum)."""
    keys = ["model", "condition", "clauses"]
    exposed = wf[wf["exposure"]].copy()
    table = rate_table(exposed, "read_after_exposure", by=keys)
    lags = af[af["world_valid"] & af["read_after_exposure"]].groupby(keys)["steps_exposure_to_read"]
    table = table.set_index(keys)
    table["median_steps_to_read"] = lags.median()
    table["max_steps_to_read"] = lags.max()
    return table.reset_index()


def exposure_lags(af: pd.DataFrame) -> pd.DataFrame:
    """One row per exposed agent that later read across agents: its lag in steps
    (the distribution behind the exposure-then-read plot)."""
    rows = af[af["world_valid"] & af["read_after_exposure"]]
    return rows[["model", "condition", "clauses", "world_id", "agent", "role", "steps_exposure_to_read"]]


def text_signal_table(af: pd.DataFrame) -> pd.DataFrame:
    """Among pair agents that made a cross-agent read: how many mention another
    party in their text, and how many did so before seeing any other's entry."""
    rows = []
    keys = ["model", "condition", "clauses"]
    pair = af[af["pair_member"] & af["world_valid"] & af["cross_agent_read"]]
    for key, g in pair.groupby(keys, sort=True):
        rows.append({**dict(zip(keys, key)), "readers": len(g), "mention": int(g["mentions_other"].sum()),
                     "mention_before_exposure": int(g["mention_before_exposure"].sum())})
    return pd.DataFrame(rows)


def compare_run_sets(wf_a: pd.DataFrame, wf_b: pd.DataFrame, metric: str = "cross_agent_access",
                     key: str = "cell_label", names: tuple[str, str] = ("A", "B")) -> pd.DataFrame:
    """Cell by cell comparison of two run sets of the same design (two
    implementations, two phases): k/n in each and the difference with a Newcombe
    interval. Cells are matched by ``key`` (the cell label by default)."""
    ta = rate_table(wf_a, metric, by=[key]).set_index(key)
    tb = rate_table(wf_b, metric, by=[key]).set_index(key)
    rows = []
    for cell in sorted(set(ta.index) | set(tb.index)):
        a = ta.loc[cell] if cell in ta.index else None
        b = tb.loc[cell] if cell in tb.index else None
        row: dict[str, object] = {key: cell, f"{names[0]} k/n": a["k/n"] if a is not None else "—",
                                  f"{names[1]} k/n": b["k/n"] if b is not None else "—"}
        if a is not None and b is not None:
            d, low, high = newcombe(int(b["k"]), int(b["n"]), int(a["k"]), int(a["n"]))
            row.update({"difference (B−A)": d, "low": low, "high": high,
                        "estimable": bool(a["n"]) and bool(b["n"])})
        rows.append(row)
    return pd.DataFrame(rows)


def rescore_table(frames: dict[str, pd.DataFrame], metrics: Iterable[str] = ("cross_agent_access", "joint_success")
                  ) -> pd.DataFrame:
    """The same cells under several (parser, answer) rule pairs, side by side:
    ``frames`` maps a label such as "recorded" or "strict/exact" to a world frame."""
    parts = []
    for label, wf in frames.items():
        cols = {}
        for metric in metrics:
            t = rate_table(wf, metric, by=["cell_label"]).set_index("cell_label")
            cols[f"{label}: {metric}"] = t["k/n"]
        cols[f"{label}: valid"] = wf.groupby("cell_label")["valid"].sum().astype(int).astype(str) + "/" + \
            wf.groupby("cell_label")["valid"].size().astype(str)
        parts.append(pd.DataFrame(cols))
    return pd.concat(parts, axis=1).reset_index()
